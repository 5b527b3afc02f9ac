package frame

import (
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

type Position struct {
	X, Y float64
}

type Tag struct {
	Label  string
	Active bool
	Level  int32 `worldfs:"lvl"`
	Score  float32
	Count  int
	hidden int //nolint:unused // unexported fields are not columns
}

func testTable(t *testing.T) *Table {
	t.Helper()
	pos, err := ComponentOf[Position]("position")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := ComponentOf[Tag]("tag")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTable("particle", tag, pos)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestSchemaIsIdentity(t *testing.T) {
	a := testTable(t)
	b := testTable(t)
	if a.ID != b.ID {
		t.Fatal("one schema, two ids")
	}
	pos3, _ := NewComponent("position", Field{"x", Float64}, Field{"y", Float64}, Field{"z", Float64})
	tag, _ := ComponentOf[Tag]("tag")
	c, err := NewTable("particle", tag, pos3)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == a.ID {
		t.Fatal("a changed schema kept its table id")
	}
	retyped, _ := NewComponent("position", Field{"x", Float32}, Field{"y", Float64})
	d, _ := NewTable("particle", tag, retyped)
	if d.ID == a.ID || d.ID == c.ID {
		t.Fatal("a retyped column kept the table id")
	}
	// The readable name is not identity; the schema is.
	e, _ := NewTable("renamed", tag, mustComponent(t, "position"))
	if e.ID != a.ID {
		t.Fatal("renaming an archetype changed its table id")
	}
	for _, col := range []string{ColEntity, ColTick, ColCommitToken, ColWriterEpoch, "position_x", "tag_lvl", "tag_count"} {
		if a.Column(col) < 0 {
			t.Errorf("no column %s in %v", col, a.Columns)
		}
	}
	if a.Column("tag_hidden") >= 0 {
		t.Error("an unexported field became a column")
	}
}

func mustComponent(t *testing.T, name string) Component {
	c, err := ComponentOf[Position](name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBadSchemas(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"upper-case component", func() error { _, err := NewComponent("Position", Field{"x", Float64}); return err }},
		{"no fields", func() error { _, err := NewComponent("p"); return err }},
		{"duplicate field", func() error { _, err := NewComponent("p", Field{"x", Float64}, Field{"x", Int64}); return err }},
		{"unknown type", func() error { _, err := NewComponent("p", Field{"x", "decimal"}); return err }},
		{"non-struct", func() error { _, err := ComponentOf[int]("p"); return err }},
		{"unsupported field type", func() error {
			_, err := ComponentOf[struct{ M map[string]int }]("p")
			return err
		}},
		{"column clash", func() error {
			a, _ := NewComponent("a", Field{"b_c", Float64})
			ab, _ := NewComponent("a_b", Field{"c", Float64})
			_, err := NewTable("t", a, ab)
			return err
		}},
	} {
		if err := tc.err(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func sampleFrame(t *testing.T, tb *Table, n int) *Frame {
	t.Helper()
	f := NewFrame(tb)
	for i := range n {
		if err := f.Append(int64(i*3), Values{"position_x": float64(i), "position_y": -float64(i) / 2,
			"tag_label": fmt.Sprintf("p%d", i), "tag_active": i%2 == 0, "tag_lvl": int32(i % 7), "tag_score": float32(i) / 4,
			"tag_count": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestFrameEdits(t *testing.T) {
	tb := testTable(t)
	f := sampleFrame(t, tb, 5) // entities 0 3 6 9 12
	if err := f.Insert(4, Values{"position_x": 44.0}); err != nil {
		t.Fatal(err)
	}
	if f.Entities[2] != 4 || f.Float64("position_x")[2] != 44 || f.String("tag_label")[2] != "" {
		t.Fatalf("insert out of order: %v", f.Entities)
	}
	if !f.Remove(3) || f.Remove(3) || f.Len() != 5 {
		t.Fatal("remove")
	}
	if err := f.Insert(6, nil); err == nil {
		t.Fatal("a duplicate entity was accepted")
	}
	if err := f.Append(100, Values{"tag_lvl": 1.5}); err == nil || !strings.Contains(err.Error(), "tag_lvl") {
		t.Fatalf("a fractional int32 = %v", err)
	}
	if err := f.Append(100, Values{"nope": 1}); err == nil {
		t.Fatal("an unknown column was accepted")
	}
	if f.Len() != 5 || len(f.Float64("position_x")) != 5 || len(f.String("tag_label")) != 5 || len(f.Int32("tag_lvl")) != 5 ||
		len(f.Float32("tag_score")) != 5 || len(f.Int64("tag_count")) != 5 || len(f.Bool("tag_active")) != 5 {
		t.Fatal("a refused append left partial columns behind")
	}
	c := f.Clone()
	c.Float64("position_x")[0] = 99
	if f.Float64("position_x")[0] == 99 {
		t.Fatal("Clone shares columns")
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	tb := testTable(t)
	f := sampleFrame(t, tb, 3000)
	data, err := EncodeFragment(f, Stamp{Tick: 7, CommitToken: "tok", WriterEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	var stamps int
	got, err := DecodeFragment(tb, data, func(s StampedRow) bool {
		if s.Tick == 7 && s.CommitToken == "tok" && s.WriterEpoch == 2 {
			stamps++
		}
		return s.Entity%2 == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if stamps != 3000 || got.Len() != 1500 {
		t.Fatalf("%d stamped rows, %d kept", stamps, got.Len())
	}
	for i, e := range got.Entities {
		want := f.Row(e)
		if r := got.Row(e); fmt.Sprint(r) != fmt.Sprint(want) {
			t.Fatalf("row %d (entity %d): %v, want %v", i, e, r, want)
		}
	}
}

// Each row of a fragment carries its own stamp when the stamps differ (a
// batch of facts), across batches of values and row groups alike.
func TestFragmentStampsPerRow(t *testing.T) {
	tb := testTable(t)
	n := RowGroupRows + 2500
	f := sampleFrame(t, tb, n)
	stamp := func(i int) Stamp {
		return Stamp{Tick: int64(i), CommitToken: fmt.Sprint("claim-", i), WriterEpoch: int64(i % 3)}
	}
	data, err := EncodeStamped(f, stamp)
	if err != nil {
		t.Fatal(err)
	}
	row := map[int64]int{} // entity → row
	for i, e := range f.Entities {
		row[e] = i
	}
	var bad []StampedRow
	got, err := DecodeFragment(tb, data, func(s StampedRow) bool {
		if s.Stamp != stamp(row[s.Entity]) && len(bad) < 5 {
			bad = append(bad, s)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != n || len(bad) > 0 {
		t.Fatalf("%d of %d rows decoded; rows under the wrong stamp: %+v", got.Len(), n, bad)
	}
}

// DuckDB reads every fragment worldfs writes: columns, types, values.
func TestDuckDBReadsFragments(t *testing.T) {
	tb := testTable(t)
	dir := t.TempDir()
	for part, n := range []int{0, 1, RowGroupRows + 5} {
		data, err := EncodeFragment(sampleFrame(t, tb, n), Stamp{Tick: int64(part), CommitToken: fmt.Sprint("tok", part), WriterEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.parquet", part)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	glob := filepath.Join(dir, "*.parquet")
	var rows, ticks int64
	var sumX float64
	var label string
	var lvl int32
	var active bool
	err = db.QueryRow(fmt.Sprintf(`SELECT count(*), count(DISTINCT tick), sum(position_x),
		max(tag_label) FILTER (WHERE entity_id = 30), max(tag_lvl) FILTER (WHERE entity_id = 30),
		bool_or(tag_active) FILTER (WHERE entity_id = 30)
		FROM read_parquet('%s')`, glob)).Scan(&rows, &ticks, &sumX, &label, &lvl, &active)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(RowGroupRows + 5)
	wantSum := float64(n*(n-1)/2) + 0 // part 1 holds entity 0 with x = 0
	if rows != n+1 || ticks != 2 || math.Abs(sumX-wantSum) > 1e-6 || label != "p10" || lvl != 3 || !active {
		t.Fatalf("duckdb: rows %d ticks %d sum %v label %s lvl %d active %v", rows, ticks, sumX, label, lvl, active)
	}
	var colType string
	if err := db.QueryRow(fmt.Sprintf(`SELECT column_type FROM (DESCRIBE SELECT * FROM read_parquet('%s')) WHERE column_name = 'commit_token'`, glob)).Scan(&colType); err != nil || colType != "VARCHAR" {
		t.Fatalf("commit_token is %s (%v)", colType, err)
	}
	var groups int64
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(DISTINCT row_group_id) FROM parquet_metadata('%s')`, filepath.Join(dir, "2.parquet"))).Scan(&groups); err != nil || groups != 2 {
		t.Fatalf("%d row groups in a fragment of %d rows (%v)", groups, n, err)
	}
}

// Every fragment's metadata names its columns (path_in_schema), including
// fragments encoded after the first by a reused encoder.
func TestFragmentColumnPaths(t *testing.T) {
	tb := testTable(t)
	dir := t.TempDir()
	for i := range 3 {
		data, err := EncodeFragment(sampleFrame(t, tb, 10), Stamp{Tick: 1, CommitToken: "t", WriterEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprint(i, ".parquet")), data, 0o644)
	}
	db, _ := sql.Open("duckdb", "")
	defer db.Close()
	var empty, total int
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FILTER (WHERE path_in_schema = ''), count(*) FROM parquet_metadata('%s/*.parquet')`, dir)).Scan(&empty, &total); err != nil {
		t.Fatal(err)
	}
	if empty != 0 || total != 3*len(tb.Columns) {
		t.Fatalf("%d of %d column chunks have no path_in_schema", empty, total)
	}
}
