package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance"
)

// optimizeCmd is "worldfs optimize".
func optimizeCmd() command {
	var url, world, run, tables *string
	var recent, targetRows *int64
	var workers *int
	var asJSON *bool
	return command{
		name:    "optimize",
		summary: "compact a world's small fragments into large files (readers switch at once; safe beside a live writer), and write the summaries of compacted history the views plan from",
		example: "worldfs optimize --bucket ./worldfs-data --world w1 --run main",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			world = fs.String("world", "", "world to compact (required)")
			run = fs.String("run", index.DefaultRun, "run to compact")
			tables = fs.String("table", "", "compact only these tables (comma-separated names); default all")
			recent = fs.Int64("recent", 256, "the newest ticks stay as written")
			workers = fs.Int("workers", 0, "files rewritten at once (default: the number of CPUs)")
			targetRows = fs.Int64("target-rows", 1<<20, "most rows in one compacted file")
			asJSON = fs.Bool("json", false, "print the result as JSON")
		},
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			if *world == "" {
				return usagef("--world is required")
			}
			b, cat, err := openWorld(ctx, *url, *world, true)
			if err != nil {
				return err
			}
			defer b.Close()
			defer cat.Close()
			opts := maintenance.CompactOptions{Run: *run, Recent: *recent, TargetRows: *targetRows, Workers: *workers}
			if *tables != "" {
				opts.Tables = strings.Split(*tables, ",")
			}
			status := progress.New(os.Stderr)
			opts.Progress = func(p maintenance.CompactProgress) {
				status.Step("compacting windows", int64(p.Done), int64(p.Total))
			}
			start := time.Now()
			res, err := maintenance.Compact(ctx, b, cat, opts)
			secs := time.Since(start).Seconds()
			status.Done()
			if err != nil {
				return err
			}
			// Summaries of the compacted stretches that a worldfs
			// writing none left without (a views build reads them instead
			// of every tick record).
			sums, err := index.WriteSummaries(ctx, b, *world)
			if err != nil {
				return fmt.Errorf("world %s: tick shard summaries: %w", *world, err)
			}
			if *asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"world": *world, "run": *run, "windows": res.Windows, "summaries_written": sums,
					"fact_shards": res.Facts, "refused": res.Refused, "files": res.Files, "files_replaced": res.FilesIn,
					"rows": res.Rows, "bytes_read": res.BytesIn, "bytes_written": res.BytesOut, "tick_index_bytes": res.IndexBytes, "seconds": secs,
					"files_per_second": float64(res.FilesIn) / secs, "mb_per_second": float64(res.BytesIn) / 1e6 / secs})
			}
			fmt.Fprintf(out, "world %s run %s: %d windows and %d claim shards of facts compacted: %d files replace %d (%d rows, %s read, %s written, %s of tick indexes) in %.1f s (%.0f files/s, %.1f MB/s)",
				*world, *run, res.Windows, res.Facts, res.Files, res.FilesIn, res.Rows, mib(res.BytesIn), mib(res.BytesOut), mib(res.IndexBytes),
				secs, float64(res.FilesIn)/secs, float64(res.BytesIn)/1e6/secs)
			if sums > 0 {
				fmt.Fprintf(out, "; %d tick shard summaries written", sums)
			}
			if res.Refused > 0 {
				fmt.Fprintf(out, "; %d windows changed meanwhile (a publish or another compactor) and were left", res.Refused)
			}
			fmt.Fprintln(out)
			return nil
		},
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// openWorld opens the bucket at url and the catalog of an existing world in
// it, for the maintenance commands (optimize, gc); the caller closes both.
// A catalog that writes checkpoints as a writer's does, so a maintainer
// leaves the world at rest with a checkpoint at its tip
// (index.RestCheckpointSlots); one that only looks (gc --dry-run) writes
// nothing.
func openWorld(ctx context.Context, url, world string, writes bool) (bucket.Bucket, *index.Catalog, error) {
	b, err := openExisting(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	cat, err := index.Open(ctx, b, world, index.Options{NoCompactor: !writes})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	if !cat.Tip().World.Created {
		cat.Close()
		b.Close()
		return nil, nil, fmt.Errorf("world %s: %w", world, index.ErrNoWorld)
	}
	return b, cat, nil
}
