package frame

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// compactedLike encodes ticks 0..ticks-1 of perTick rows each as one file
// ordered by (tick, entity), as compaction writes its files: entity ids
// ascending across the file (tick*perTick + i), every row stamped with its
// tick and token "tok-<tick>", and a foreign row (a crashed attempt's
// token) in each tick.
func compactedLike(t *testing.T, tb *Table, ticks, perTick int) ([]byte, []Stamp) {
	t.Helper()
	f := NewFrame(tb)
	var stamps []Stamp
	for tick := range ticks {
		for i := range perTick {
			e := int64(tick*perTick + i)
			if err := f.Append(e, Values{"position_x": float64(e), "position_y": -float64(e)}); err != nil {
				t.Fatal(err)
			}
			token := fmt.Sprintf("tok-%d", tick)
			if i == perTick/2 {
				token = "crashed"
			}
			stamps = append(stamps, Stamp{Tick: int64(tick), CommitToken: token, WriterEpoch: 1})
		}
	}
	data, err := EncodeStamped(f, func(i int) Stamp { return stamps[i] })
	if err != nil {
		t.Fatal(err)
	}
	return data, stamps
}

// Gather with a tick reads that tick's rows alone out of a file of many
// ticks (several pages of its tick column: the page index skips the
// others), keeps the rows Keep admits, and orders them by entity id
// either way; the same rows encode to the same bytes.
func TestGatherSelectsATicksRows(t *testing.T) {
	tb := testTable(t)
	const ticks, perTick = 5, 9000
	data, stamps := compactedLike(t, tb, ticks, perTick)
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	col := slices.IndexFunc(file.Schema().Columns(), func(p []string) bool { return p[0] == ColTick })
	ci, err := file.RowGroups()[0].ColumnChunks()[col].ColumnIndex()
	if err != nil || ci.NumPages() < ticks {
		t.Fatalf("the tick column has %v pages (%v); the test needs one or more a tick", ci, err)
	}
	src := []Source{{R: bytes.NewReader(data), Size: int64(len(data)), Name: "file"}}
	for tick := range int64(ticks) {
		keep := func(r StampedRow) bool { return r.CommitToken == fmt.Sprintf("tok-%d", r.Tick) }
		for _, desc := range []bool{false, true} {
			g, err := Gather(tb, src, Selection{Tick: &tick, Keep: keep, Desc: desc})
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for i := range perTick {
				if e := tick*perTick + int64(i); stamps[e].CommitToken != "crashed" {
					want = append(want, e)
				}
			}
			if desc {
				slices.Reverse(want)
			}
			if !slices.Equal(g.Frame.Entities, want) {
				t.Fatalf("tick %d (desc %v): %d rows gathered, want %d (first %v)", tick, desc, g.Frame.Len(), len(want), g.Frame.Entities[:min(3, g.Frame.Len())])
			}
			for i, e := range g.Frame.Entities {
				if g.Stamps[i].Tick != tick || g.Frame.Float64("position_x")[i] != float64(e) || g.Frame.Float64("position_y")[i] != -float64(e) {
					t.Fatalf("tick %d: row %d: entity %d stamped %+v, x %v", tick, i, e, g.Stamps[i], g.Frame.Float64("position_x")[i])
				}
			}
		}
	}
	// Deterministic: gathering and encoding again gives the same bytes.
	var enc [][]byte
	for range 2 {
		n := int64(3)
		g, err := Gather(tb, src, Selection{Tick: &n})
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := EncodeGathered(g, true)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, data)
	}
	if !bytes.Equal(enc[0], enc[1]) {
		t.Fatal("the same rows encoded to different bytes")
	}
}

// EncodeView merges tables of two schemas by entity id into the union of
// their columns, NULL where a schema lacks one (a column of two types:
// TestUnionTypesAreDuckDBs).
func TestEncodeViewUnion(t *testing.T) {
	x, _ := NewComponent("reading", Field{Name: "value", Type: Float64})
	xs, _ := NewComponent("reading", Field{Name: "value", Type: Float64}, Field{Name: "sensor", Type: String})
	a, _ := NewTable("reading", x)
	b, _ := NewTable("reading", xs)
	fa, fb := NewFrame(a), NewFrame(b)
	for _, e := range []int64{1, 4} {
		if err := fa.Append(e, Values{"reading_value": float64(e)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []int64{2, 3} {
		if err := fb.Append(e, Values{"reading_value": float64(e), "reading_sensor": fmt.Sprint("s", e)}); err != nil {
			t.Fatal(err)
		}
	}
	gather := func(f *Frame) Gathered {
		return Gathered{Frame: f, Stamps: make([]Stamp, f.Len())}
	}
	cols, err := UnionColumns(a, b)
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeView([]Gathered{gather(fa), gather(fb)}, cols, true)
	if err != nil {
		t.Fatal(err)
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// The views' order: entity_id, tick, the components (these tables'
	// by name), the commit columns.
	want := "entity_id,tick,reading_sensor,reading_value,commit_token,writer_epoch\n" +
		`4,0,,4.0,"",0` + "\n" + `3,0,s3,3.0,"",0` + "\n" + `2,0,s2,2.0,"",0` + "\n" + `1,0,,1.0,"",0` + "\n"
	if csv.String() != want {
		t.Fatalf("union as CSV:\n%s\nwant\n%s", csv.String(), want)
	}
}
