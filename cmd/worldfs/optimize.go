package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/frame"
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
		summary: "compact a world's small fragments into large files (readers switch at once; safe beside a live writer), give compacted files written before tick indexes theirs, write the summaries of compacted history the views plan from, and the reference lists of exports an older worldfs wrote (collection keeps what they name)",
		example: "worldfs optimize --bucket ./worldfs-data --world w1 --run main\n" +
			"  worldfs optimize --bucket ./worldfs-data --world w1 --recent 8 --windows 4096,512,64,8",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			world = fs.String("world", "", "world to compact (required)")
			run = fs.String("run", index.DefaultRun, "run to compact")
			tables = fs.String("table", "", "compact only these tables (comma-separated names); default all")
			recent = fs.Int64("recent", 256, "the newest ticks stay as written (0: none, every whole window up to the head is compacted)")
			workers = fs.Int("workers", 0, "files rewritten at once (default: the number of CPUs)")
			targetRows = fs.Int64("target-rows", 1<<20, "most rows in one compacted file")
			windows = fs.String("windows", "", "compaction windows in ticks, comma-separated, largest first, each a multiple of the next "+
				"(default 4096,512,64; a writer's background compaction and other compactors nest with them while every window divides the larger ones)")
			asJSON = fs.Bool("json", false, "print the result as JSON")
			dryRun = fs.Bool("dry-run", false, "count the compacted files without a tick index (and damaged indexes) and the exports without a reference list; compact and write nothing")
		},
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			if *world == "" {
				return usagef("--world is required")
			}
			if *recent < 0 {
				return usagef("--recent %d: give 0 or more (0 compacts every whole window up to the head)", *recent)
			}
			opts := maintenance.CompactOptions{Run: *run, Recent: *recent, TargetRows: *targetRows, Workers: *workers}
			if *recent == 0 {
				opts.Recent = maintenance.NoRecent
			}
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
				if err := checkTables(ctx, b, *world, opts.Tables); err != nil {
					return err
				}
			}
			// First (once the options are checked) the reference lists of exports an older worldfs
			// wrote (or damaged ones): collection deletes nothing of the
			// world while one is missing.
			refs, err := iceberg.WriteReferenceLists(ctx, b, *world, false)
			if err != nil {
				return fmt.Errorf("world %s: the reference lists of its exports: %w", *world, err)
			}
			status := progress.New(os.Stderr)
			var plan windowsSeen
			opts.Progress = func(p maintenance.CompactProgress) {
				status.Step("compacting windows", int64(p.Done), int64(p.Total))
				plan.see(p)
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
					"tick_indexes_written": xres.Written, "tick_indexes_damaged": len(xres.Damaged), "export_reference_lists_written": refs.Written, "seconds": secs,
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
				fmt.Fprintf(out, "; %d windows changed meanwhile (a publish or another compactor) and were left: run optimize again to compact them", res.Refused)
			}
			if res.Windows == 0 && res.Facts == 0 && res.Refused == 0 {
				fmt.Fprintf(out, "; %s", whyNothing(cat.Tip(), *run, *recent, opts.SmallestWindow(), plan))
			}
			if xres.Written > 0 {
				fmt.Fprintf(out, "; %d compacted files written before tick indexes given theirs (%d ticks, %s)", xres.Written, xres.Ticks, mib(xres.Bytes))
			}
			if refs.Written > 0 {
				fmt.Fprintf(out, "; %d export reference lists written (%d missing, %d damaged)", refs.Written, refs.Missing, refs.Damaged)
			}
			fmt.Fprintln(out)
			return xerr
		},
	}
}

// windowsSeen is what Compact's progress told of the windows it planned.
type windowsSeen struct {
	planned int        // windows planned
	last    index.Span // the newest of them
}

func (w *windowsSeen) see(p maintenance.CompactProgress) {
	w.planned = p.Total
	if p.Span.To > w.last.To || w.planned == 1 {
		w.last = p.Span
	}
}

// whyNothing says why Compact compacted no window of run, from the state
// of the catalog and the windows it planned (plan), and what would
// compact ticks: the run has no ticks of its own, its ticks below the
// newest --recent fill no whole window, or the windows there had nothing
// left to compact. Windows are aligned to multiples of
// the smallest window w from tick 0; a fork's own ticks start past its
// fork point.
func whyNothing(s *index.State, run string, recent, w int64, plan windowsSeen) string {
	r, ok := s.Run(run)
	own := int64(-1)
	s.Ticks(run, 0, func(t *index.Tick) bool { own = t.Tick; return false })
	if !ok || r.Head < 0 || own < 0 {
		return fmt.Sprintf("nothing to compact: run %s has no ticks of its own", run)
	}
	what := "nothing compacted: "
	start := own - own%w // the next window that can hold ticks of the run's own
	if plan.planned > 0 {
		windows := fmt.Sprintf("the %d windows", plan.planned)
		if plan.planned == 1 {
			windows = "the window"
		}
		what = fmt.Sprintf("%s of ticks 0..%d had nothing left to compact (compacted already: a writer compacts by itself); ", windows, plan.last.To)
		start = max(start, plan.last.To+1)
	}
	end := start + w - 1 // it compacts once the head is past it by --recent ticks
	if bound := r.Head - recent; bound >= start {
		what += fmt.Sprintf("ticks %d..%d, below the newest %d (--recent %d: they stay as written), fill no whole window of %d ticks", start, bound, recent, recent, w)
	} else {
		what += fmt.Sprintf("the ticks from %d on are among the newest %d (--recent %d: they stay as written), and compaction takes whole windows of %d ticks", start, recent, recent, w)
	}
	if k := r.Head - end; k >= 1 {
		return fmt.Sprintf("%s; --recent %d would compact ticks %d..%d", what, k, start, end)
	}
	later := fmt.Sprintf("%s; the head is tick %d: ticks %d..%d compact once it reaches tick %d with --recent 1", what, r.Head, start, end, end+1)
	if recent > 1 {
		later += fmt.Sprintf(" (tick %d with --recent %d)", end+recent, recent)
	}
	return later
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
	refs, rerr := iceberg.WriteReferenceLists(ctx, b, world, true)
	if rerr != nil {
		return fmt.Errorf("world %s: the reference lists of its exports: %w", world, rerr)
	}
	if asJSON {
		if err := json.NewEncoder(out).Encode(map[string]any{"world": world, "run": run, "dry_run": true, "compacted_files": res.Files,
			"tick_indexes_missing": res.Missing, "tick_indexes_damaged": len(res.Damaged), "tick_indexes_foreign": len(res.Foreign),
			"summaries_missing": sidecars.Summaries, "token_filters_missing": sidecars.TokenFilters,
			"export_reference_lists_missing": refs.Missing, "export_reference_lists_damaged": refs.Damaged}); err != nil {
			return err
		}
		return err
	}
	fmt.Fprintf(out, "world %s run %s (dry run, nothing written): %d compacted files, %d without a tick index, %d tick shards without a summary, %d without a token filter (optimize writes them)",
		world, run, res.Files, res.Missing, sidecars.Summaries, sidecars.TokenFilters)
	if len(res.Foreign) > 0 {
		fmt.Fprintf(out, "; %d with one another build wrote (left)", len(res.Foreign))
	}
	if refs.Missing+refs.Damaged > 0 {
		fmt.Fprintf(out, "; %d exported tables whose latest version has no reference list, %d a damaged one (optimize writes them; collection deletes nothing of the world until then)", refs.Missing, refs.Damaged)
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

// checkTables refuses a table name world does not describe (by name or
// id), naming the nearest it does and listing them.
func checkTables(ctx context.Context, b bucket.Bucket, world string, names []string) error {
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	var tables []string
	for _, id := range ids {
		info, err := frame.ReadTableInfo(ctx, b, world, id)
		if err != nil {
			return err
		}
		known[id], known[info.Name] = true, true
		tables = append(tables, info.Name)
	}
	for _, n := range names {
		if !known[n] {
			return usagef("--table %s: world %s has no table %q%s Its tables: %s", n, world, n, orStop(n, tables), quotedAll(slices.Compact(slices.Sorted(slices.Values(tables)))))
		}
	}
	return nil
}

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
