package iceberg_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// BenchmarkScanAgainstReadParquet reads an exported table with iceberg-go's
// own scan, then the files it plans with DuckDB's read_parquet, and reports
// both times and their ratio (rows must agree). The export is the one
// WORLDFS_SCAN_METADATA names: the metadata file `worldfs bench export`
// prints, for example
//
//	WORLDFS_SCAN_METADATA=/abs/bucket/export/…/metadata/v2.metadata.json \
//	  go test ./export/iceberg -run '^$' -bench ScanAgainstReadParquet -benchtime 1x
//
// The scan lives here, not in the worldfs binary: importing iceberg-go's
// table package costs every worldfs command about 0.2 s and 32 MB at start
// (its substrait extensions are parsed from YAML at init).
func BenchmarkScanAgainstReadParquet(b *testing.B) {
	metadata := os.Getenv("WORLDFS_SCAN_METADATA")
	if metadata == "" {
		b.Skip("set WORLDFS_SCAN_METADATA to the metadata file worldfs bench export printed")
	}
	ctx := context.Background()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var scan, duck time.Duration
	var rows int64
	for b.Loop() {
		start := time.Now()
		tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "bench"}, metadata,
			func(context.Context) (icebergio.IO, error) { return icebergio.LocalFS{}, nil }, nil)
		if err != nil {
			b.Fatal(err)
		}
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rows = at.NumRows()
		at.Release()
		scan += time.Since(start)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var paths []string
		for _, task := range tasks {
			paths = append(paths, "'"+strings.TrimPrefix(task.File.FilePath(), "file://")+"'")
		}
		start = time.Now()
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT * FROM read_parquet(["+strings.Join(paths, ",")+"]))").Scan(&n); err != nil {
			b.Fatal(err)
		}
		duck += time.Since(start)
		if n != rows {
			b.Fatalf("iceberg-go reads %d rows, DuckDB %d from the same files", rows, n)
		}
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(scan.Seconds()/float64(b.N), "iceberg-scan-s/op")
	b.ReportMetric(duck.Seconds()/float64(b.N), "read_parquet-s/op")
	b.ReportMetric(scan.Seconds()/duck.Seconds(), "ratio")
}
