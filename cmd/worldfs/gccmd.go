package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance"
)

// gcCmd is "worldfs gc".
func gcCmd() command {
	var url, run, cacheDir *string
	var worlds worldsFlags
	var retention *time.Duration
	var dryRun, asJSON, unsafeRetention *bool
	return command{
		name: "gc",
		summary: "delete what the catalog proves dead: replaced fragments after the retention, dead attempts " +
			"(by token absence), old slots, checkpoints and shards, stale view lists",
		example: "worldfs gc --bucket ./worldfs-data --world w1 --dry-run\n" +
			"  worldfs gc --bucket ./worldfs-data --worlds 'sweep-*'   # each world of a sweep, one after another",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			worlds.define(fs, "collect")
			run = fs.String("run", "", "examine only this run's fragments (default: every run)")
			retention = fs.Duration("retention", maintenance.DefaultRetention,
				"replaced files, slots, checkpoints and shards stay this long after nothing names them (a reader pinned before keeps working); at least 24h unless --unsafe-retention")
			unsafeRetention = fs.Bool("unsafe-retention", false,
				"take a --retention under 24h: readers of older snapshots (a views script, an open session, a file open on a mount of a remote bucket) may find their files gone; the catalog stays whole at any retention")
			dryRun = fs.Bool("dry-run", false, "print what would be deleted and why; delete nothing")
			cacheDir = fs.String("cache-dir", defaultCacheDir(), "the cache whose views/ fragment lists unused for the retention are removed")
			asJSON = fs.Bool("json", false, "print each object and the summary as JSON lines")
		},
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			if err := worlds.validate(); err != nil {
				return err
			}
			if *retention <= 0 {
				return usagef("--retention %v: must be positive (e.g. 168h)", *retention)
			}
			if *retention < maintenance.MinRetention && !*unsafeRetention {
				return usagef("--retention: %v", &maintenance.RetentionError{Retention: *retention})
			}
			if *run != "" {
				if err := index.ValidateRunName(*run); err != nil {
					return usagef("--run: %v", err)
				}
			}
			b, err := openExisting(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			ws, err := worlds.resolve(ctx, b)
			if err != nil {
				return err
			}
			opts := maintenance.CollectOptions{Run: *run, Retention: *retention, UnsafeRetention: *unsafeRetention, DryRun: *dryRun}
			if *cacheDir != "" {
				opts.ViewsDir = filepath.Join(*cacheDir, "views")
			}
			done := "collected"
			if *dryRun {
				done = "examined"
			}
			enc := json.NewEncoder(out)
			return eachWorld(ctx, "gc", ws, *run, *asJSON, out, done, func(world, label string) error {
				return gcWorld(ctx, b, world, label, opts, *asJSON, out, enc)
			})
		},
	}
}

// gcWorld collects world with opts (maintenance.Collect), printing each
// object and the summary (JSON lines with asJSON, on enc); label names
// the world in the progress of several.
func gcWorld(ctx context.Context, b bucket.Bucket, world, label string, opts maintenance.CollectOptions, asJSON bool, out io.Writer, enc *json.Encoder) error {
	cat, err := openCatalog(ctx, b, world, !opts.DryRun)
	if err != nil {
		return err
	}
	defer cat.Close()
	verb := "deleted"
	if opts.DryRun {
		verb = "would delete"
	}
	status := progress.New(os.Stderr)
	opts.Report = func(c maintenance.Collected) {
		status.Clear()
		printCollectedObject(out, enc, c, verb, asJSON, opts.DryRun)
	}
	opts.Progress = func(p maintenance.CollectProgress) {
		status.Step(fmt.Sprintf("%s%s: %d %s, examined", label, p.Phase, p.Deleted, verb), int64(p.Examined), -1)
	}
	res, err := maintenance.Collect(ctx, b, cat, opts)
	status.Done()
	if err != nil {
		return err
	}
	if asJSON {
		return enc.Encode(map[string]any{"world": world, "dry_run": opts.DryRun, "examined": res.Examined,
			"deleted": res.Deleted, "bytes": res.Bytes, "kept": res.Kept, "by_kind": res.ByKind})
	}
	printCollected(out, world, verb, res)
	return nil
}

// printCollectedObject prints one object gc deleted (verb: or would),
// kept or closed, and why: a line, or a JSON object with asJSON.
func printCollectedObject(out io.Writer, enc *json.Encoder, c maintenance.Collected, verb string, asJSON, dryRun bool) {
	if asJSON {
		_ = enc.Encode(map[string]any{"object": c.Name, "kind": c.Kind, "bytes": c.Bytes, "reason": c.Reason,
			"kept": c.Kept, "closed": c.Closed, "deleted": !c.Kept && !c.Closed && !dryRun})
		return
	}
	switch {
	case c.Kept:
		verb = "kept"
	case c.Closed:
		verb = "closed"
	}
	fmt.Fprintf(out, "%s %s (%s): %s\n", verb, c.Name, c.Kind, c.Reason)
}

// printCollected prints gc's summary line: what was deleted (verb: or
// would be), by kind, and what was examined and kept.
func printCollected(out io.Writer, world, verb string, res maintenance.CollectResult) {
	fmt.Fprintf(out, "world %s: %d objects %s (%s)", world, res.Deleted, verb, mib(res.Bytes))
	for _, k := range []string{maintenance.KindReplaced, maintenance.KindCompacted, maintenance.KindAttempt, maintenance.KindSlot,
		maintenance.KindCheckpoint, maintenance.KindShard, maintenance.KindViewList} {
		if n := res.ByKind[k]; n > 0 {
			fmt.Fprintf(out, ", %d %s", n, k)
		}
	}
	fmt.Fprintf(out, "; %d data objects examined", res.Examined)
	if res.Kept > 0 {
		fmt.Fprintf(out, "; %d kept for lack of usable statistics", res.Kept)
	}
	fmt.Fprintln(out)
}
