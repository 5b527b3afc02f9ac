package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/worldfs/worldfs/check"
	"github.com/worldfs/worldfs/internal/progress"
	wsql "github.com/worldfs/worldfs/sql"
)

// errCheckFailed: check found errors (they are in the summary).
var errCheckFailed = errors.New("check found errors")

// checkCmd is "worldfs check": check.World, printed.
func checkCmd() command {
	var url, runName, cacheDir *string
	var worlds worldsFlags
	var readData, asJSON, verbose *bool
	return command{
		name: "check",
		summary: "verify a world's catalog (log, checkpoints) and every fragment it references (presence, size, generation; " +
			"the sha256 of a fragment whose generation differs, as in a copied bucket; with --read-data the sha256 of every byte), " +
			"and list, for each fragment missing or damaged, its table, the ticks whose rows it holds and the replaced fragments still in the bucket that can restore them; exits 1 on any error",
		example: "worldfs check --bucket ./worldfs-data --world w1 --read-data\n" +
			"  worldfs check --bucket ./worldfs-data --lineage w1   # w1 and every fork below it, one after another",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			worlds.define(fs, "check")
			runName = fs.String("run", "", "check only this run's fragments (default: every run)")
			readData = fs.Bool("read-data", false, "read every fragment and check its sha256, and each compacted file's tick index summaries against its rows (otherwise size and generation, and the sha256 of those whose generation differs)")
			verbose = fs.Bool("verbose", false, "name every fragment re-verified by its bytes because its generation differs (a copied bucket), and every fragment that can restore a lost tick")
			cacheDir = fs.String("cache-dir", defaultCacheDir(), "the cache whose memory of verified files a check reads and adds to (shared with worldfs sql)")
			asJSON = fs.Bool("json", false, "print the summary as one JSON object (with --worlds or --lineage, one a world, one after another, and a line {world, error} after a world that failed)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("check takes no arguments")
			}
			if err := worlds.validate(); err != nil {
				return err
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
			opts := check.Options{Run: *runName, ReadData: *readData, BucketID: bucketID(*url), Verified: wsql.VerifiedMemory(filepath.Join(*cacheDir, "views"))}
			return eachWorld(ctx, "check", ws, *runName, *asJSON, out, "checked", func(world, label string) error {
				if err := requireWorld(ctx, b, world); err != nil {
					return err
				}
				p := progress.New(os.Stderr)
				opts := opts
				opts.Progress = func(desc string, done, total int64) { p.Step(label+desc, done, total) }
				res, err := check.World(ctx, b, world, opts)
				p.Done()
				if errors.Is(err, check.ErrNoRun) {
					return usagef("world %s has no run %q", world, *runName)
				}
				if err != nil {
					return err
				}
				if *asJSON {
					if err := writeJSON(out, res); err != nil {
						return err
					}
				} else {
					printCheck(out, res, *verbose)
				}
				if len(res.Errors) > 0 {
					return fmt.Errorf("%d error(s) in %d fragments: %w", len(res.Errors), res.Fragments, errCheckFailed)
				}
				return nil
			})
		},
	}
}

func printCheck(out io.Writer, res *check.Report, verbose bool) {
	fmt.Fprintf(out, "world %s: catalog of %d slots", res.World, res.Slots)
	if res.FirstSlot > 1 {
		fmt.Fprintf(out, " (from slot %d; older ones collected)", res.FirstSlot)
	}
	fmt.Fprintf(out, " folded; %d checkpoints compared with the log\n", len(res.Checkpoints))
	what := "presence, size and generation; the sha256 where the generation differs"
	if res.ReadData {
		what = "presence, size, generation and the sha256 of every byte"
	}
	fmt.Fprintf(out, "%d fragments checked (%s)", res.Fragments, what)
	if res.References > res.Fragments {
		fmt.Fprintf(out, ", named %d times by the catalog", res.References)
	}
	if res.ReadData {
		fmt.Fprintf(out, ", %.1f MiB read", float64(res.Bytes)/(1<<20))
	}
	if res.Unrecorded > 0 {
		fmt.Fprintf(out, "; %d have no record to check", res.Unrecorded)
	}
	fmt.Fprintln(out)
	if res.Reverified > 0 {
		fmt.Fprintf(out, "%d fragments re-verified by their bytes: their generation differs from the catalog's (a copied bucket), their sha256 is the recorded one\n",
			res.Reverified)
		if verbose {
			for _, name := range res.ReverifiedFragments {
				fmt.Fprintf(out, "re-verified: %s\n", name)
			}
		}
	}
	for _, e := range res.Errors {
		switch {
		case e.Fragment == "":
			fmt.Fprintf(out, "error: catalog: %s\n", e.Message)
		default:
			fmt.Fprintf(out, "error: %s\n", e.Message)
		}
	}
	restorable := false
	for _, l := range res.Lost {
		printLoss(out, l, verbose)
		restorable = restorable || len(l.Restore) > 0
	}
	if restorable {
		fmt.Fprintln(out, "worldfs gc deletes replaced fragments once their compaction is older than its retention: keep those named (--verbose, --json) until the lost files are restored; no worldfs command restores them yet")
	}
	if len(res.Errors) == 0 {
		fmt.Fprintln(out, "no errors were found")
	} else {
		fmt.Fprintf(out, "%d errors\n", len(res.Errors))
	}
}

// printLoss prints what a missing or damaged file loses and what can
// restore it (each restoring fragment with verbose).
func printLoss(out io.Writer, l check.Loss, verbose bool) {
	table := l.Table
	if table == "" {
		table = "id " + l.TableID
	}
	ticks := fmt.Sprintf("ticks %d..%d (%d ticks)", l.From, l.To, l.Ticks)
	if l.Ticks == 1 {
		ticks = fmt.Sprintf("tick %d", l.From)
	}
	if l.Facts {
		ticks = "the facts of " + ticks
	}
	state := "missing from the bucket"
	switch l.What {
	case "size", "generation", "sha256":
		state = "damaged (its " + l.What + " differs from the catalog's record)"
	case "read":
		state = "unreadable"
	}
	fmt.Fprintf(out, "lost: table %s of world %s, run %s: the rows of %s are in %s, which is %s\n", table, l.World, l.Run, ticks, l.Fragment, state)
	if n := len(l.Restore); n > 0 {
		verified := 0
		for _, r := range l.Restore {
			if r.Verified {
				verified++
			}
		}
		fmt.Fprintf(out, "  %d of those ticks can be restored from the fragments a compaction replaced, still in the bucket (%d verified against the lost file's tick index), such as tick %d's %s\n",
			n, verified, l.Restore[0].Tick, l.Restore[0].Fragments[0])
		if verbose {
			for _, r := range l.Restore {
				mark := ""
				if r.Verified {
					mark = " (verified)"
				}
				for _, f := range r.Fragments {
					fmt.Fprintf(out, "  restore: tick %d: %s%s\n", r.Tick, f, mark)
				}
			}
		}
	}
	if l.Unrestorable > 0 {
		fmt.Fprintf(out, "  nothing in the bucket restores %d of those ticks", l.Unrestorable)
		if l.Differ > 0 {
			fmt.Fprintf(out, " (for %d, a replaced fragment is there but differs from the lost file's tick index)", l.Differ)
		}
		fmt.Fprintln(out)
	}
}
