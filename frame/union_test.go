package frame_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/frame"
)

// unionSamples are values of each column type at the edges of the casts
// between them: signed zeros, NaNs, infinities, the extremes, integers
// past a float's and a double's exact range (1<<60 + 1<<36 + 1 rounds to
// a different float straight than through a double), and floats on either
// side of the exponent form's bounds.
var unionSamples = map[frame.Type][]any{
	frame.Float64: {0.0, math.Copysign(0, -1), math.NaN(), math.Float64frombits(0xfff8000000000000), math.Inf(1), math.Inf(-1),
		1e300, 5e-324, math.MaxFloat64, 100.0, 0.1, -2.5, 1e21, 1e15, 1e16, 9999999999999998.0, 123456789012345678.0,
		1e-5, 1.5e-5, 1e-4, 0.001, 123456.75},
	frame.Float32: {float32(0), float32(math.Copysign(0, -1)), float32(math.NaN()), math.Float32frombits(0xffc00000), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(3.4e38), float32(1e-45), float32(0.1), float32(16777216), float32(1e15), float32(1e16), float32(1234567), float32(1.5e-5), float32(1e-4)},
	frame.Int64: {int64(0), int64(-1), int64(7), int64(math.MaxInt64), int64(math.MinInt64), int64(1<<53 + 1),
		int64(1<<60 + 1<<36 + 1), -int64(1<<60 + 1<<36 + 1), int64(16777217)},
	frame.Int32:  {int32(0), int32(-1), int32(7), int32(math.MaxInt32), int32(math.MinInt32), int32(16777217)},
	frame.Bool:   {true, false},
	frame.String: {"", "x", "1.5", "a,b", " padded ", "nan"},
}

// duckTypes are DuckDB's names of the column types.
var duckTypes = map[frame.Type]string{frame.Float64: "DOUBLE", frame.Float32: "FLOAT", frame.Int64: "BIGINT",
	frame.Int32: "INTEGER", frame.Bool: "BOOLEAN", frame.String: "VARCHAR"}

// A column that tables of one name give different types has, in
// EncodeView's file, the type and values of the SQL views' union (DuckDB's
// UNION ALL BY NAME of the tables' files, the oracle): for every pair of
// column types, in either order, and for three types at once (each value
// cast straight to the widest), the file's column has DuckDB's type
// (UnionType's), each row DuckDB's value cast to text, and the file's CSV
// (WriteCSV) read back with the file's types gives the same rows.
func TestUnionTypesAreDuckDBs(t *testing.T) {
	cases := []struct {
		types []frame.Type
		want  frame.Type
	}{
		{[]frame.Type{frame.Bool, frame.Int32}, frame.Int32},
		{[]frame.Type{frame.Bool, frame.Int64}, frame.Int64},
		{[]frame.Type{frame.Bool, frame.Float32}, frame.Float32},
		{[]frame.Type{frame.Bool, frame.Float64}, frame.Float64},
		{[]frame.Type{frame.Bool, frame.String}, frame.String},
		{[]frame.Type{frame.Int32, frame.Int64}, frame.Int64},
		{[]frame.Type{frame.Int32, frame.Float32}, frame.Float32},
		{[]frame.Type{frame.Int32, frame.Float64}, frame.Float64},
		{[]frame.Type{frame.Int32, frame.String}, frame.String},
		{[]frame.Type{frame.Int64, frame.Float32}, frame.Float32},
		{[]frame.Type{frame.Int64, frame.Float64}, frame.Float64},
		{[]frame.Type{frame.Int64, frame.String}, frame.String},
		{[]frame.Type{frame.Float32, frame.Float64}, frame.Float64},
		{[]frame.Type{frame.Float32, frame.String}, frame.String},
		{[]frame.Type{frame.Float64, frame.String}, frame.String},
		{[]frame.Type{frame.Int64, frame.Float32, frame.String}, frame.String},
		{[]frame.Type{frame.Int32, frame.Float32, frame.Float64}, frame.Float64},
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	query := func(q string) []string {
		t.Helper()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var e int64
			var typ, v string
			if err := rows.Scan(&e, &typ, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s %q", e, typ, v))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	dir := t.TempDir()
	for _, tc := range cases {
		for _, types := range [][]frame.Type{tc.types, reversed(tc.types)} {
			name := fmt.Sprint(types)
			var parts []frame.Gathered
			var tables []*frame.Table
			var reads []string
			want := types[0]
			for k, typ := range types {
				if k > 0 {
					if want, err = frame.UnionType(want, typ); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				c, err := frame.NewComponent("c", frame.Field{Name: "v", Type: typ})
				if err != nil {
					t.Fatal(err)
				}
				tb, err := frame.NewTable("t", c)
				if err != nil {
					t.Fatal(err)
				}
				f := frame.NewFrame(tb)
				for i, v := range unionSamples[typ] {
					if err := f.Append(int64(100*k+i), frame.Values{"c_v": v}); err != nil {
						t.Fatal(err)
					}
				}
				g := frame.Gathered{Frame: f, Stamps: make([]frame.Stamp, f.Len())}
				data, _, err := frame.EncodeGathered(g, false)
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, fmt.Sprintf("part%d.parquet", k))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				parts, tables = append(parts, g), append(tables, tb)
				reads = append(reads, "SELECT * FROM read_parquet('"+p+"')")
			}
			if want != tc.want {
				t.Errorf("%s: UnionType gives %s, want %s", name, want, tc.want)
			}
			cols, err := frame.UnionColumns(tables...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			data, err := frame.EncodeView(parts, cols, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ours := filepath.Join(dir, "union.parquet")
			if err := os.WriteFile(ours, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var csv bytes.Buffer
			if err := frame.WriteCSV(&csv, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			oursCSV := filepath.Join(dir, "union.csv")
			if err := os.WriteFile(oursCSV, csv.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			const sel = "SELECT entity_id, typeof(c_v)::VARCHAR, c_v::VARCHAR FROM "
			duck := query(sel + "(" + strings.Join(reads, " UNION ALL BY NAME ") + ") ORDER BY entity_id")
			got := query(sel + "read_parquet('" + ours + "') ORDER BY entity_id")
			csvSrc := "read_csv('" + oursCSV + "', header = true, quote = '\"', escape = '\"', allow_quoted_nulls = false, " +
				"columns = {'entity_id': 'BIGINT', 'tick': 'BIGINT', 'c_v': '" + duckTypes[want] + "', 'commit_token': 'VARCHAR', 'writer_epoch': 'BIGINT'})"
			gotCSV := query(sel + csvSrc + " ORDER BY entity_id")
			if len(duck) == 0 || !strings.Contains(duck[0], " "+duckTypes[tc.want]+" ") {
				t.Errorf("%s: DuckDB's union types the column %v, want %s", name, duck[:min(1, len(duck))], duckTypes[tc.want])
			}
			if !slices.Equal(got, duck) {
				t.Errorf("%s: EncodeView's file:\n%s\nDuckDB's union:\n%s", name, strings.Join(got, "\n"), strings.Join(duck, "\n"))
			}
			// WriteCSV writes every NaN as nan (as a tick's CSV always
			// has): a NaN read back from the CSV has lost its sign.
			unsigned := func(rows []string) []string {
				out := slices.Clone(rows)
				for i, r := range out {
					if !strings.Contains(r, " VARCHAR ") {
						out[i] = strings.Replace(r, `"-nan"`, `"nan"`, 1)
					}
				}
				return out
			}
			if !slices.Equal(gotCSV, unsigned(duck)) {
				t.Errorf("%s: EncodeView's file as CSV:\n%s\nread back:\n%s\nDuckDB's union:\n%s", name, csv.String(), strings.Join(gotCSV, "\n"), strings.Join(duck, "\n"))
			}
		}
	}
}

func reversed[T any](xs []T) []T {
	out := slices.Clone(xs)
	slices.Reverse(out)
	return out
}
