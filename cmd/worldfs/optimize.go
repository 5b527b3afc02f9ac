package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance"
)

// optimizeCmd is "worldfs optimize".
func optimizeCmd() command {
	var url, world, run, tables, windows *string
	var recent, targetRows *int64
	var workers *int
	var asJSON, dryRun *bool
	return command{
		name:    "optimize",
		summary: "compact a world's small fragments into large files (readers switch at once; safe beside a live writer), give compacted files written before tick indexes theirs, and write the summaries of compacted history the views plan from",
		example: "worldfs optimize --bucket ./worldfs-data --world w1 --run main\n" +
			"  worldfs optimize --bucket ./worldfs-data --world w1 --recent 8 --windows 4096,512,64,8",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			world = fs.String("world", "", "world to compact (required)")
			run = fs.String("run", index.DefaultRun, "run to compact")
			tables = fs.String("table", "", "compact only these tables (comma-separated names); default all")
			recent = fs.Int64("recent", 256, "the newest ticks stay as written")
			workers = fs.Int("workers", 0, "files rewritten at once (default: the number of CPUs)")
			targetRows = fs.Int64("target-rows", 1<<20, "most rows in one compacted file")
			windows = fs.String("windows", "", "compaction windows in ticks, comma-separated, largest first, each a multiple of the next "+
				"(default 4096,512,64; a writer's background compaction and other compactors nest with them while every window divides the larger ones)")
			asJSON = fs.Bool("json", false, "print the result as JSON")
			dryRun = fs.Bool("dry-run", false, "count the compacted files without a tick index (and damaged indexes); compact and write nothing")
		},
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			if *world == "" {
				return usagef("--world is required")
			}
			opts := maintenance.CompactOptions{Run: *run, Recent: *recent, TargetRows: *targetRows, Workers: *workers}
			if *windows != "" {
				ws, err := parseWindows(*windows)
				if err != nil {
					return usagef("--windows %q: %v", *windows, err)
				}
				opts.Windows = ws
				if err := (&maintenance.CompactOptions{Run: index.DefaultRun, Windows: ws}).Validate(); err != nil {
					return usagef("--windows %q: want windows of at least a tick, largest first, each a multiple of the next (e.g. 4096,512,64)", *windows)
				}
			}
			b, cat, err := openWorld(ctx, *url, *world, !*dryRun)
			if err != nil {
				return err
			}
			defer b.Close()
			defer cat.Close()
			if *dryRun {
				return tickIndexesDryRun(ctx, b, cat, *world, *run, *workers, *asJSON, out)
			}
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
			// Summaries of the compacted stretches and token filters
			// that a worldfs writing none left without (a views build
			// reads the summaries instead of every tick record, a lookup
			// of a token that names no tick the filters).
			sidecars, err := index.WriteSidecars(ctx, b, *world, false)
			if err != nil {
				return fmt.Errorf("world %s: tick shard summaries and token filters: %w", *world, err)
			}
			// The tick indexes of the compacted files written before them
			// (those compaction left as they were): a mount sizes their
			// ticks from them instead of deriving each from its rows.
			xopts := maintenance.TickIndexOptions{Run: *run, Workers: *workers, Progress: func(done, total int) {
				status.Step("writing missing tick indexes", int64(done), int64(total))
			}}
			xres, xerr := maintenance.WriteTickIndexes(ctx, b, cat, xopts)
			status.Done()
			if xerr != nil && len(xres.Damaged) == 0 {
				return xerr
			}
			if *asJSON {
				if err := json.NewEncoder(out).Encode(map[string]any{"world": *world, "run": *run, "windows": res.Windows, "summaries_written": sidecars.Summaries, "token_filters_written": sidecars.TokenFilters,
					"fact_shards": res.Facts, "refused": res.Refused, "files": res.Files, "files_replaced": res.FilesIn,
					"rows": res.Rows, "bytes_read": res.BytesIn, "bytes_written": res.BytesOut, "tick_index_bytes": res.IndexBytes + xres.Bytes,
					"tick_indexes_written": xres.Written, "tick_indexes_damaged": len(xres.Damaged), "seconds": secs,
					"files_per_second": float64(res.FilesIn) / secs, "mb_per_second": float64(res.BytesIn) / 1e6 / secs}); err != nil {
					return err
				}
				return xerr
			}
			fmt.Fprintf(out, "world %s run %s: %d windows and %d claim shards of facts compacted: %d files replace %d (%d rows, %s read, %s written, %s of tick indexes) in %.1f s (%.0f files/s, %.1f MB/s)",
				*world, *run, res.Windows, res.Facts, res.Files, res.FilesIn, res.Rows, mib(res.BytesIn), mib(res.BytesOut), mib(res.IndexBytes),
				secs, float64(res.FilesIn)/secs, float64(res.BytesIn)/1e6/secs)
			if sidecars.Summaries > 0 {
				fmt.Fprintf(out, "; %d tick shard summaries written", sidecars.Summaries)
			}
			if sidecars.TokenFilters > 0 {
				fmt.Fprintf(out, "; %d tick shard token filters written", sidecars.TokenFilters)
			}
			if res.Refused > 0 {
				fmt.Fprintf(out, "; %d windows changed meanwhile (a publish or another compactor) and were left", res.Refused)
			}
			if xres.Written > 0 {
				fmt.Fprintf(out, "; %d compacted files written before tick indexes given theirs (%d ticks, %s)", xres.Written, xres.Ticks, mib(xres.Bytes))
			}
			fmt.Fprintln(out)
			return xerr
		},
	}
}

// tickIndexesDryRun prints how many compacted files of the run lack a
// tick index (optimize would write them) and names the damaged indexes.
func tickIndexesDryRun(ctx context.Context, b bucket.Bucket, cat *index.Catalog, world, run string, workers int, asJSON bool, out io.Writer) error {
	sidecars, err := index.WriteSidecars(ctx, b, world, true)
	if err != nil {
		return fmt.Errorf("world %s: tick shard summaries and token filters: %w", world, err)
	}
	res, err := maintenance.WriteTickIndexes(ctx, b, cat, maintenance.TickIndexOptions{Run: run, Workers: workers, DryRun: true})
	if err != nil && len(res.Damaged) == 0 {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(out).Encode(map[string]any{"world": world, "run": run, "dry_run": true, "compacted_files": res.Files,
			"tick_indexes_missing": res.Missing, "tick_indexes_damaged": len(res.Damaged), "tick_indexes_foreign": len(res.Foreign),
			"summaries_missing": sidecars.Summaries, "token_filters_missing": sidecars.TokenFilters}); err != nil {
			return err
		}
		return err
	}
	fmt.Fprintf(out, "world %s run %s (dry run, nothing written): %d compacted files, %d without a tick index, %d tick shards without a summary, %d without a token filter (optimize writes them)",
		world, run, res.Files, res.Missing, sidecars.Summaries, sidecars.TokenFilters)
	if len(res.Foreign) > 0 {
		fmt.Fprintf(out, "; %d with one another build wrote (left)", len(res.Foreign))
	}
	fmt.Fprintln(out)
	return err
}

// parseWindows parses a comma-separated list of tick counts (the
// windows' order and multiples are CompactOptions.Validate's to check).
func parseWindows(s string) ([]int64, error) {
	var ws []int64
	for _, f := range strings.Split(s, ",") {
		w, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number of ticks", f)
		}
		ws = append(ws, w)
	}
	return ws, nil
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
