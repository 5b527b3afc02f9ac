package frame_test

import (
	"bytes"
	"context"
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// WriteCSV writes a Parquet file's rows so that DuckDB's read_csv, given
// the Parquet file's column types, reads back exactly its rows: every
// kind of column, NaN, infinities, -0.0, extremes, whole floats, and strings
// that need quoting; and a file DuckDB wrote, with NULLs.
func TestCSVReadsBackAsTheParquetRows(t *testing.T) {
	c, err := frame.NewComponent("v",
		frame.Field{Name: "d", Type: frame.Float64}, frame.Field{Name: "f", Type: frame.Float32},
		frame.Field{Name: "i", Type: frame.Int64}, frame.Field{Name: "j", Type: frame.Int32},
		frame.Field{Name: "b", Type: frame.Bool}, frame.Field{Name: "s", Type: frame.String})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := frame.NewTable("all", c)
	if err != nil {
		t.Fatal(err)
	}
	doubles := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e300, 5e-324, 100, 0.1, -2.5, 1e21, 123456789012345678}
	strs := []string{"", "a,b", `say "hi"`, "line\nbreak", " padded ", "plain", "crlf\r\n", "ünïcode", "tab\there", "x", "1", "nan"}
	f := frame.NewFrame(tb)
	for i, d := range doubles {
		if err := f.Insert(int64(i), frame.Values{"v_d": d, "v_f": float32(d), "v_i": int64(i*1e12) - 7, "v_j": int32(-i), "v_b": i%2 == 0, "v_s": strs[i]}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := frame.EncodeFragment(f, frame.Stamp{Tick: 3, CommitToken: "tok", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.parquet")
	if err := os.WriteFile(ours, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	nulls := filepath.Join(dir, "nulls.parquet")
	if _, err := db.Exec(`COPY (SELECT * FROM (VALUES (1, NULL::DOUBLE, 'x'), (2, 2.5, NULL), (NULL, NULL, ''))) TO '` + nulls + `' (FORMAT parquet)`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ours, nulls} {
		var csv bytes.Buffer
		r, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := r.Stat()
		if err := frame.WriteCSV(&csv, r, info.Size()); err != nil {
			t.Fatal(err)
		}
		r.Close()
		cp := strings.TrimSuffix(p, ".parquet") + ".csv"
		if err := os.WriteFile(cp, csv.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		// The Parquet file's column types, for read_csv.
		rows, err := db.Query(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('` + p + `'))`)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for rows.Next() {
			var n, ty string
			if err := rows.Scan(&n, &ty); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, "'"+n+"': '"+ty+"'")
		}
		rows.Close()
		csvSrc := `read_csv('` + cp + `', header = true, columns = {` + strings.Join(cols, ", ") + `}, quote = '"', escape = '"', allow_quoted_nulls = false)`
		var missing, extra, n int
		q := `SELECT (SELECT count(*) FROM (FROM read_parquet('` + p + `') EXCEPT ALL FROM ` + csvSrc + `)),
			(SELECT count(*) FROM (FROM ` + csvSrc + ` EXCEPT ALL FROM read_parquet('` + p + `'))),
			(SELECT count(*) FROM ` + csvSrc + `)`
		if err := db.QueryRow(q).Scan(&missing, &extra, &n); err != nil {
			t.Fatalf("%s:\n%s\n%v", p, csv.String(), err)
		}
		if missing != 0 || extra != 0 || n == 0 {
			t.Errorf("%s: the CSV misses %d rows and adds %d (of %d):\n%s", filepath.Base(p), missing, extra, n, csv.String())
		}
		if p == ours && !strings.Contains(csv.String(), ",-0.0,") {
			t.Errorf("-0.0 lost its sign:\n%s", csv.String())
		}
		if p == ours {
			// A file without rows: the footer's schema gives the header.
			empty, err := frame.EncodeFragment(frame.NewFrame(tb), frame.Stamp{})
			if err != nil {
				t.Fatal(err)
			}
			var header bytes.Buffer
			if err := frame.WriteCSV(&header, bytes.NewReader(empty), int64(len(empty))); err != nil {
				t.Fatal(err)
			}
			eb := mem.New(mem.Options{})
			if _, err := eb.Create(context.Background(), "e.parquet", empty); err != nil {
				t.Fatal(err)
			}
			size, ok, err := frame.ReadCSVSize(context.Background(), eb, index.Fragment{Path: "e.parquet", Bytes: int64(len(empty))})
			if err != nil || !ok || size != int64(header.Len()) || size != frame.EmptyCSVSize(tb) {
				t.Errorf("the footer of a file without rows gives a CSV of %d bytes (%v, %v); WriteCSV wrote %d", size, ok, err, header.Len())
			}
			// The writer recorded the size of this rendering in the footer.
			b := mem.New(mem.Options{})
			if _, err := b.Create(context.Background(), "f.parquet", data); err != nil {
				t.Fatal(err)
			}
			size, ok, err = frame.ReadCSVSize(context.Background(), b, index.Fragment{Path: "f.parquet", Rows: int64(f.Len()), Bytes: int64(len(data))})
			if err != nil || !ok || size != int64(csv.Len()) {
				t.Errorf("the footer records a CSV of %d bytes (%v, %v); WriteCSV wrote %d", size, ok, err, csv.Len())
			}
		}
	}
}
