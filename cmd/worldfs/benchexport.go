package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
)

func init() {
	var url, world *string
	var ticks, more, archetypes, entities *int
	registerBench(benchSpec[*exportBench]{
		name: "export",
		summary: "measure Iceberg exports: a whole compacted world, then an incremental export of more ticks, " +
			"then iceberg-go's scan of the export against DuckDB's read_parquet of the same files",
		example: "worldfs bench export --bucket ./bench-export --ticks 100000 --more 1000 --json",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			ticks = fs.Int("ticks", 100000, "ticks of the world before the first export (compacted first)")
			more = fs.Int("more", 1000, "ticks added before the incremental export")
			archetypes = fs.Int("archetypes", 2, "archetypes (one table each)")
			entities = fs.Int("entities", 20, "entities per archetype")
			world = fs.String("world", "", "world name (default bench-export-<ticks>x<archetypes>x<entities>); reused if the bucket holds it "+
				"with at least --ticks ticks (e.g. a copy of a world bench history built: --world bench-history-100000x4x50 --archetypes 4 --entities 50)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *ticks < 1 || *more < 1 || *archetypes < 1 || *entities < 1 {
				return usagef("bench export takes no arguments and positive --ticks, --more, --archetypes and --entities")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return openBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*exportBench, error) {
			lb, ok := bucket.As[*local.Bucket](b)
			if !ok {
				return nil, usagef("bench export needs a local bucket (DuckDB reads the files in place)")
			}
			if *world == "" {
				*world = fmt.Sprintf("bench-export-%dx%dx%d", *ticks, *archetypes, *entities)
			}
			r := &exportBench{World: *world, Ticks: *ticks, More: *more}
			h := &historyBench{World: *world, Ticks: *ticks, Archetypes: *archetypes, Entities: *entities}
			tables := benchTables(*archetypes)
			start := time.Now()
			if err := historyWorld(ctx, b, h, tables); err != nil {
				return nil, err
			}
			r.BuildSeconds = time.Since(start).Seconds()
			prefix := fmt.Sprintf("bench-export/%d", time.Now().UnixNano())
			// A reused world may hold ticks a previous run added: compacting
			// costs what is not compacted yet.
			cat, err := index.Open(ctx, b, *world, index.Options{NoCompactor: true})
			if err != nil {
				return nil, err
			}
			say("compacting")
			start = time.Now()
			_, err = engine.Compact(ctx, b, cat, engine.CompactOptions{})
			cat.Close()
			if err != nil {
				return nil, err
			}
			r.CompactSeconds = time.Since(start).Seconds()
			say("exporting")
			start, cpu := time.Now(), cpuTime()
			full, err := iceberg.Export(ctx, b, iceberg.Options{World: *world, Prefix: prefix})
			if err != nil {
				return nil, err
			}
			r.FullSeconds, r.FullCPUSeconds = time.Since(start).Seconds(), (cpuTime() - cpu).Seconds()
			r.FullFiles = full.Tables[0].Files
			say("adding %d ticks", *more)
			w, err := engine.ResumeWorld(ctx, b, *world, tables, engine.Options{NoMaintenance: true})
			if err != nil {
				return nil, err
			}
			for range *more {
				if _, err := w.Step(ctx); err != nil {
					w.Close()
					return nil, err
				}
			}
			w.Close()
			start, cpu = time.Now(), cpuTime()
			inc, err := iceberg.Export(ctx, b, iceberg.Options{World: *world, Prefix: prefix})
			if err != nil {
				return nil, err
			}
			r.IncrementalSeconds, r.IncrementalCPUSeconds = time.Since(start).Seconds(), (cpuTime() - cpu).Seconds()
			r.IncrementalAdded = inc.Tables[0].Added
			r.IncrementalFiles = inc.Tables[0].Files
			r.IncrementalPlanned = true
			for _, t := range inc.Tables {
				r.IncrementalPlanned = r.IncrementalPlanned && t.Incremental
			}
			if err := scanBench(ctx, lb, inc.Tables[0].Metadata, r); err != nil {
				return nil, err
			}
			return r, nil
		},
		table: func(out io.Writer, r *exportBench) error {
			fmt.Fprintf(out, "world %s: %d ticks (built in %.1fs, compacted in %.1fs)\n", r.World, r.Ticks, r.BuildSeconds, r.CompactSeconds)
			fmt.Fprintf(out, "full export: %.3fs (%.3fs CPU; %d files in table 0)\n", r.FullSeconds, r.FullCPUSeconds, r.FullFiles)
			fmt.Fprintf(out, "incremental export of %d ticks: %.3fs (%.3fs CPU; +%d files, %d in all; planned incrementally: %v)\n",
				r.More, r.IncrementalSeconds, r.IncrementalCPUSeconds, r.IncrementalAdded, r.IncrementalFiles, r.IncrementalPlanned)
			fmt.Fprintf(out, "scan of %d rows: iceberg-go %.3fs, DuckDB read_parquet %.3fs (ratio %.2f)\n", r.Rows, r.IcebergScanSeconds, r.DuckDBSeconds, r.ScanRatio)
			return nil
		},
	})
}

// exportBench is the result of bench export.
type exportBench struct {
	World          string  `json:"world"`
	Ticks          int     `json:"ticks"`
	More           int     `json:"more_ticks"`
	BuildSeconds   float64 `json:"build_seconds"`
	CompactSeconds float64 `json:"compact_seconds"`
	FullSeconds    float64 `json:"full_export_seconds"`
	FullFiles      int     `json:"full_export_files"`
	// CPU seconds (user and system) of the process during each export:
	// what a loaded machine's wall time hides.
	FullCPUSeconds        float64 `json:"full_export_cpu_seconds"`
	IncrementalCPUSeconds float64 `json:"incremental_export_cpu_seconds"`
	IncrementalSeconds    float64 `json:"incremental_export_seconds"`
	IncrementalAdded      int     `json:"incremental_added_files"`
	IncrementalFiles      int     `json:"incremental_total_files"`
	// IncrementalPlanned: every table's export planned only the new ticks.
	IncrementalPlanned bool    `json:"incremental_planned"`
	Rows               int64   `json:"rows"`
	IcebergScanSeconds float64 `json:"iceberg_scan_seconds"`
	DuckDBSeconds      float64 `json:"duckdb_read_parquet_seconds"`
	ScanRatio          float64 `json:"scan_ratio"`
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scanBench reads the exported table with iceberg-go's scan, then its
// files with DuckDB's read_parquet, and checks both count the same rows.
func scanBench(ctx context.Context, lb *local.Bucket, metadata string, r *exportBench) error {
	fsysF := func(context.Context) (icebergio.IO, error) { return icebergio.LocalFS{}, nil }
	start := time.Now()
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "bench"}, metadata, fsysF, nil)
	if err != nil {
		return err
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return err
	}
	r.Rows = at.NumRows()
	at.Release()
	r.IcebergScanSeconds = time.Since(start).Seconds()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return err
	}
	var paths []string
	for _, task := range tasks {
		paths = append(paths, "'"+strings.TrimPrefix(task.File.FilePath(), "file://")+"'")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	start = time.Now()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT * FROM read_parquet(["+strings.Join(paths, ",")+"]))").Scan(&n); err != nil {
		return err
	}
	r.DuckDBSeconds = time.Since(start).Seconds()
	if n != r.Rows {
		return fmt.Errorf("iceberg-go reads %d rows, DuckDB %d from the same files", r.Rows, n)
	}
	if r.DuckDBSeconds > 0 {
		r.ScanRatio = r.IcebergScanSeconds / r.DuckDBSeconds
	}
	return nil
}
