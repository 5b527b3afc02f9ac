package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

func exportSpec(env Env) Bench {
	var url, world *string
	var ticks, more, archetypes, entities *int
	return benchSpec[*exportBench]{
		name: "export",
		summary: "measure Iceberg exports: a whole compacted world, then an incremental export of more ticks " +
			"(and print the command that compares iceberg-go's scan of the export with DuckDB's read_parquet)",
		example: "worldfs bench export --bucket ./bench-export --ticks 100000 --more 1000 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
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
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*exportBench, error) {
			if *world == "" {
				*world = fmt.Sprintf("bench-export-%dx%dx%d", *ticks, *archetypes, *entities)
			}
			r := &exportBench{World: *world, Ticks: *ticks, More: *more}
			h := &HistoryReport{World: *world, Ticks: *ticks, Archetypes: *archetypes, Entities: *entities}
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
			_, err = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{})
			cat.Close()
			if err != nil {
				return nil, err
			}
			r.CompactSeconds = time.Since(start).Seconds()
			say("exporting")
			start, cpu := time.Now(), cpuSeconds()
			full, err := iceberg.Export(ctx, b, iceberg.Options{World: *world, Prefix: prefix})
			if err != nil {
				return nil, err
			}
			r.FullSeconds, r.FullCPUSeconds = time.Since(start).Seconds(), cpuSeconds()-cpu
			r.FullFiles = full.Tables[0].Files
			say("adding %d ticks", *more)
			w, err := engine.ResumeWorld(ctx, b, *world, tables, engine.Options{NoMaintenance: true})
			if err != nil {
				return nil, err
			}
			for range *more {
				if _, err := w.Submit(ctx); err != nil {
					w.Close()
					return nil, err
				}
			}
			_, err = w.Flush(ctx)
			w.Close()
			if err != nil {
				return nil, err
			}
			start, cpu = time.Now(), cpuSeconds()
			inc, err := iceberg.Export(ctx, b, iceberg.Options{World: *world, Prefix: prefix})
			if err != nil {
				return nil, err
			}
			r.IncrementalSeconds, r.IncrementalCPUSeconds = time.Since(start).Seconds(), cpuSeconds()-cpu
			r.IncrementalAdded = inc.Tables[0].Added
			r.IncrementalFiles = inc.Tables[0].Files
			r.IncrementalPlanned = true
			for _, t := range inc.Tables {
				r.IncrementalPlanned = r.IncrementalPlanned && t.Incremental
			}
			r.Metadata = inc.Tables[0].Metadata
			return r, nil
		},
		table: func(out io.Writer, r *exportBench) error {
			fmt.Fprintf(out, "world %s: %d ticks (built in %.1fs, compacted in %.1fs)\n", r.World, r.Ticks, r.BuildSeconds, r.CompactSeconds)
			fmt.Fprintf(out, "full export: %.3fs (%.3fs CPU; %d files in table 0)\n", r.FullSeconds, r.FullCPUSeconds, r.FullFiles)
			fmt.Fprintf(out, "incremental export of %d ticks: %.3fs (%.3fs CPU; +%d files, %d in all; planned incrementally: %v)\n",
				r.More, r.IncrementalSeconds, r.IncrementalCPUSeconds, r.IncrementalAdded, r.IncrementalFiles, r.IncrementalPlanned)
			fmt.Fprintf(out, "table 0's metadata: %s\n", r.Metadata)
			if path, ok := strings.CutPrefix(r.Metadata, "file://"); ok {
				fmt.Fprintf(out, "iceberg-go's scan against read_parquet: WORLDFS_SCAN_METADATA=%s go test ./export/iceberg -run '^$' -bench ScanAgainstReadParquet -benchtime 1x\n", path)
			}
			return nil
		},
	}.bench()
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
	IncrementalPlanned bool `json:"incremental_planned"`
	// Metadata: table 0's metadata file after the incremental export, the
	// one export/iceberg's BenchmarkScanAgainstReadParquet scans.
	Metadata string `json:"metadata"`
}
