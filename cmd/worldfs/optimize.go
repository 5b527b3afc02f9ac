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

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance"
)

// optimizeCmd is "worldfs optimize": maintenance.Optimize, with the
// exports' reference lists written by export/iceberg.
func optimizeCmd() command {
	f := &optimizeFlags{}
	return command{
		name:    "optimize",
		summary: "compact a world's small fragments into large files (readers switch at once; safe beside a live writer), give compacted files written before tick indexes (or before their current format, with column summaries) theirs, write the summaries of compacted history the views plan from, and the reference lists of exports an older worldfs wrote (collection keeps what they name)",
		example: "worldfs optimize --bucket ./worldfs-data --world w1 --run main\n" +
			"  worldfs optimize --bucket ./worldfs-data --world w1 --recent 8 --windows 4096,512,64,8\n" +
			"  worldfs optimize --bucket ./worldfs-data --worlds 'sweep-*' --recent 0   # a sweep's finished runs, each compacted to its head",
		flags: f.define,
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			return f.optimize(ctx, out)
		},
	}
}

// optimizeFlags are worldfs optimize's flags.
type optimizeFlags struct {
	worldsFlags
	url, run, tables   *string
	windows            *string
	recent, targetRows *int64
	workers            *int
	asJSON, dryRun     *bool
}

func (f *optimizeFlags) define(fs *flag.FlagSet) {
	f.url = bucketFlag(fs)
	f.worldsFlags.define(fs, "compact")
	f.run = fs.String("run", index.DefaultRun, "run to compact")
	f.tables = fs.String("table", "", "compact only these tables (comma-separated names); default all")
	f.recent = fs.Int64("recent", 256, "the newest ticks stay as written (0: none, every whole window up to the head is compacted)")
	f.workers = fs.Int("workers", 0, "files rewritten at once (default: the number of CPUs)")
	f.targetRows = fs.Int64("target-rows", 1<<20, "most rows in one compacted file")
	f.windows = fs.String("windows", "", "compaction windows in ticks, comma-separated, largest first, each a multiple of the next "+
		"(default 4096,512,64; a writer's background compaction and other compactors nest with them while every window divides the larger ones)")
	f.asJSON = fs.Bool("json", false, "print the result as JSON")
	f.dryRun = fs.Bool("dry-run", false, "count the compacted files without a tick index of the current format (and damaged indexes) and the exports without a reference list; compact and write nothing")
}

// optimize checks the flags and optimizes each world they name in turn
// (eachWorld, optimizeWorld).
func (f *optimizeFlags) optimize(ctx context.Context, out io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	if *f.recent < 0 {
		return usagef("--recent %d: give 0 or more (0 compacts every whole window up to the head)", *f.recent)
	}
	var windows []int64
	if *f.windows != "" {
		ws, err := parseWindows(*f.windows)
		if err == nil {
			err = (&maintenance.CompactOptions{Run: index.DefaultRun, Windows: ws}).Validate()
		}
		if err != nil {
			return usagef("--windows %q: want windows of at least a tick, largest first, each a multiple of the next (e.g. 4096,512,64)", *f.windows)
		}
		windows = ws
	}
	b, err := openExisting(ctx, *f.url)
	if err != nil {
		return err
	}
	defer b.Close()
	worlds, err := f.resolve(ctx, b)
	if err != nil {
		return err
	}
	return eachWorld(ctx, "optimize", worlds, *f.run, *f.asJSON, out, "compacted", func(w, label string) error {
		return f.optimizeWorld(ctx, b, w, windows, label, out)
	})
}

// optimizeWorld runs maintenance.Optimize on world and prints what it
// did; damaged tick indexes (left as they are) are its error after the
// report. label names the world in the progress of several.
func (f *optimizeFlags) optimizeWorld(ctx context.Context, b bucket.Bucket, world string, windows []int64, label string, out io.Writer) error {
	cat, err := openCatalog(ctx, b, world, !*f.dryRun)
	if err != nil {
		return err
	}
	defer cat.Close()
	opts := maintenance.OptimizeOptions{DryRun: *f.dryRun, ExportRefs: exportRefLists,
		Compact: maintenance.CompactOptions{Run: *f.run, Recent: *f.recent, TargetRows: *f.targetRows, Workers: *f.workers, Windows: windows}}
	if *f.recent == 0 {
		opts.Compact.Recent = maintenance.NoRecent
	}
	if *f.tables != "" && !*f.dryRun {
		opts.Compact.Tables = strings.Split(*f.tables, ",")
		if err := checkTables(ctx, b, world, opts.Compact.Tables); err != nil {
			return err
		}
	}
	status := progress.New(os.Stderr)
	var plan windowsSeen
	if !*f.dryRun {
		opts.Compact.Progress = func(p maintenance.CompactProgress) {
			status.Step(label+"compacting windows", int64(p.Done), int64(p.Total))
			plan.see(p)
		}
		opts.IndexProgress = func(done, total int) {
			status.Step(label+"writing missing and older tick indexes", int64(done), int64(total))
		}
	}
	res, err := maintenance.Optimize(ctx, b, cat, opts)
	status.Done()
	if err != nil && !res.Done {
		return err
	}
	switch {
	case *f.asJSON:
		if jerr := json.NewEncoder(out).Encode(optimizeJSON(res)); jerr != nil {
			return jerr
		}
	case res.DryRun:
		printOptimizeDry(out, res)
	default:
		printOptimize(out, res, optimizeWhy(cat.Tip(), res, *f.recent, opts.Compact.SmallestWindow(), plan))
	}
	return err
}

// exportRefLists is maintenance.OptimizeOptions.ExportRefs by
// export/iceberg, which maintenance does not import.
func exportRefLists(ctx context.Context, b bucket.Bucket, world string, dryRun bool) (maintenance.RefLists, error) {
	r, err := iceberg.WriteReferenceLists(ctx, b, world, dryRun)
	return maintenance.RefLists{Tables: r.Tables, Missing: r.Missing, Damaged: r.Damaged, Written: r.Written}, err
}

// optimizeJSON is worldfs optimize --json's object.
func optimizeJSON(res maintenance.OptimizeResult) map[string]any {
	x, refs := res.TickIndexes, res.RefLists
	if res.DryRun {
		return map[string]any{"world": res.World, "run": res.Run, "dry_run": true, "compacted_files": x.Files,
			"tick_indexes_missing": x.Missing, "tick_indexes_older": x.Older, "tick_indexes_damaged": len(x.Damaged), "tick_indexes_foreign": len(x.Foreign),
			"summaries_missing": res.Sidecars.Summaries, "token_filters_missing": res.Sidecars.TokenFilters,
			"export_reference_lists_missing": refs.Missing, "export_reference_lists_damaged": refs.Damaged}
	}
	c, secs := res.Compact, res.Seconds
	return map[string]any{"world": res.World, "run": res.Run, "windows": c.Windows, "summaries_written": res.Sidecars.Summaries, "token_filters_written": res.Sidecars.TokenFilters,
		"fact_shards": c.Facts, "refused": c.Refused, "files": c.Files, "files_replaced": c.FilesIn,
		"rows": c.Rows, "bytes_read": c.BytesIn, "bytes_written": c.BytesOut, "tick_index_bytes": c.IndexBytes + x.Bytes,
		"tick_indexes_written": x.Written, "tick_indexes_older": x.Older, "tick_indexes_damaged": len(x.Damaged), "export_reference_lists_written": refs.Written, "seconds": secs,
		"files_per_second": float64(c.FilesIn) / secs, "mb_per_second": float64(c.BytesIn) / 1e6 / secs}
}

// optimizeWhy is why optimize compacted nothing (whyNothing), or "" if it
// compacted something or another compactor changed what it planned.
func optimizeWhy(s *index.State, res maintenance.OptimizeResult, recent, w int64, plan windowsSeen) string {
	if c := res.Compact; c.Windows > 0 || c.Facts > 0 || c.Refused > 0 {
		return ""
	}
	return whyNothing(s, res.Run, recent, w, plan)
}

// printOptimize prints what optimize did, and why (a whyNothing) it
// compacted nothing.
func printOptimize(out io.Writer, res maintenance.OptimizeResult, why string) {
	c, x, refs, secs := res.Compact, res.TickIndexes, res.RefLists, res.Seconds
	fmt.Fprintf(out, "world %s run %s: %d windows and %d claim shards of facts compacted: %d files replace %d (%d rows, %s read, %s written, %s of tick indexes) in %.1f s (%.0f files/s, %.1f MB/s)",
		res.World, res.Run, c.Windows, c.Facts, c.Files, c.FilesIn, c.Rows, mib(c.BytesIn), mib(c.BytesOut), mib(c.IndexBytes),
		secs, float64(c.FilesIn)/secs, float64(c.BytesIn)/1e6/secs)
	if res.Sidecars.Summaries > 0 {
		fmt.Fprintf(out, "; %d tick shard summaries written", res.Sidecars.Summaries)
	}
	if res.Sidecars.TokenFilters > 0 {
		fmt.Fprintf(out, "; %d tick shard token filters written", res.Sidecars.TokenFilters)
	}
	if c.Refused > 0 {
		fmt.Fprintf(out, "; %d windows changed meanwhile (a publish or another compactor) and were left: run optimize again to compact them", c.Refused)
	}
	if why != "" {
		fmt.Fprintf(out, "; %s", why)
	}
	if x.Written > 0 {
		fmt.Fprintf(out, "; %d compacted files given a tick index of the current format, %d of them had one of an older format (%d ticks, %s)", x.Written, x.Older, x.Ticks, mib(x.Bytes))
	}
	if refs.Written > 0 {
		fmt.Fprintf(out, "; %d export reference lists written (%d missing, %d damaged)", refs.Written, refs.Missing, refs.Damaged)
	}
	fmt.Fprintln(out)
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

// printOptimizeDry prints what optimize --dry-run counted: the compacted
// files of the run without a tick index, the damaged indexes, the tick
// shards without sidecars, the exports without a reference list.
func printOptimizeDry(out io.Writer, res maintenance.OptimizeResult) {
	x, refs := res.TickIndexes, res.RefLists
	fmt.Fprintf(out, "world %s run %s (dry run, nothing written): %d compacted files, %d without a tick index, %d with one of an older format only, %d tick shards without a summary, %d without a token filter (optimize writes them)",
		res.World, res.Run, x.Files, x.Missing, x.Older, res.Sidecars.Summaries, res.Sidecars.TokenFilters)
	if len(x.Foreign) > 0 {
		fmt.Fprintf(out, "; %d with one another build wrote (left)", len(x.Foreign))
	}
	if refs.Missing+refs.Damaged > 0 {
		fmt.Fprintf(out, "; %d exported tables whose latest version has no reference list, %d a damaged one (optimize writes them; collection deletes nothing of the world until then)", refs.Missing, refs.Damaged)
	}
	fmt.Fprintln(out)
}

// parseWindows reads --windows: ticks, comma-separated.
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

// openCatalog opens the catalog of an existing world of b. A catalog
// that writes checkpoints as a writer's does, so a maintainer leaves the
// world at rest with a checkpoint at its tip (index.RestCheckpointSlots);
// one that only looks (gc --dry-run) writes nothing.
func openCatalog(ctx context.Context, b bucket.Bucket, world string, writes bool) (*index.Catalog, error) {
	cat, err := index.Open(ctx, b, world, index.Options{NoCompactor: !writes})
	if err != nil {
		return nil, err
	}
	if !cat.Tip().World.Created {
		cat.Close()
		return nil, fmt.Errorf("world %s: %w", world, index.ErrNoWorld)
	}
	return cat, nil
}
