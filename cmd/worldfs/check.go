package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	wsql "github.com/worldfs/worldfs/sql"
)

// checkResult is the summary of worldfs check (printed, or as JSON).
type checkResult struct {
	World       string   `json:"world"`
	Run         string   `json:"run,omitempty"`
	Slots       uint64   `json:"slots"`
	FirstSlot   uint64   `json:"first_slot"`
	Checkpoints []uint64 `json:"checkpoints"`
	Fragments   int64    `json:"fragments"`  // distinct files checked (each distinct record of a file once)
	References  int64    `json:"references"` // the catalog's references to them (a compacted file: one per tick it holds)
	Unrecorded  int64    `json:"unrecorded"` // fragments with no size, generation or digest to check
	Bytes       int64    `json:"bytes"`
	// Reverified counts the fragments whose generation differs from the
	// catalog's (a copied bucket: new mtimes, new GCS generations) and
	// whose bytes were found to be the recorded ones: not damage.
	Reverified int64 `json:"reverified"`
	// ReverifiedFragments names them.
	ReverifiedFragments []string     `json:"reverified_fragments"`
	ReadData            bool         `json:"read_data"`
	Errors              []checkError `json:"errors"`
	// Lost is, for each file of Errors, the ticks whose rows it holds and
	// what can restore them (checklost.go).
	Lost []checkLoss `json:"lost"`
}

type checkError struct {
	Fragment string `json:"fragment,omitempty"` // the bucket object ("": the catalog)
	Run      string `json:"run,omitempty"`
	Tick     int64  `json:"tick,omitempty"`
	What     string `json:"what"` // size, generation, sha256, presence, catalog, read
	Want     string `json:"want,omitempty"`
	Got      string `json:"got,omitempty"`
	Message  string `json:"message"`
}

// errCheckFailed: check found errors (they are in the summary).
var errCheckFailed = errors.New("check found errors")

// checkCmd is "worldfs check".
func checkCmd() command {
	var url, world, runName, cacheDir *string
	var readData, asJSON, verbose *bool
	return command{
		name: "check",
		summary: "verify a world's catalog (log, checkpoints) and every fragment it references (presence, size, generation; " +
			"the sha256 of a fragment whose generation differs, as in a copied bucket; with --read-data the sha256 of every byte), " +
			"and list, for each fragment missing or damaged, its table, the ticks whose rows it holds and the replaced fragments still in the bucket that can restore them; exits 1 on any error",
		example: "worldfs check --bucket ./worldfs-data --world w1 --read-data",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			world = fs.String("world", "", "world to check (required)")
			runName = fs.String("run", "", "check only this run's fragments (default: every run)")
			readData = fs.Bool("read-data", false, "read every fragment and check its sha256 (otherwise size and generation, and the sha256 of those whose generation differs)")
			verbose = fs.Bool("verbose", false, "name every fragment re-verified by its bytes because its generation differs (a copied bucket), and every fragment that can restore a lost tick")
			cacheDir = fs.String("cache-dir", defaultCacheDir(), "the cache whose memory of verified files a check reads and adds to (shared with worldfs sql)")
			asJSON = fs.Bool("json", false, "print the summary as one JSON object")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("check takes no arguments")
			}
			if *world == "" {
				return usagef("--world is required")
			}
			b, err := openExisting(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			if err := requireWorld(ctx, b, *world); err != nil {
				return err
			}
			res := &checkResult{World: *world, Run: *runName, ReadData: *readData, Checkpoints: []uint64{}, Errors: []checkError{},
				ReverifiedFragments: []string{}, Lost: []checkLoss{}}
			v := wsql.VerifiedMemory(filepath.Join(*cacheDir, "views"))
			p := progress.New(os.Stderr)
			if err := check(ctx, b, v, bucketID(*url), res, p); err != nil {
				p.Done()
				return err
			}
			p.Done()
			if *asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else {
				printCheck(out, res, *verbose)
			}
			if len(res.Errors) > 0 {
				return fmt.Errorf("world %s: %d error(s) in %d fragments: %w", res.World, len(res.Errors), res.Fragments, errCheckFailed)
			}
			return nil
		},
	}
}

// check fills res: the catalog first (a catalog that cannot be folded ends
// the check), then every fragment it references, several at a time.
func check(ctx context.Context, b bucket.Bucket, v *cache.Verified, id string, res *checkResult, p *progress.Line) error {
	var folded atomic.Int64
	cc, err := index.VerifyCatalog(ctx, b, res.World, func(uint64) { p.Step("catalog: slots folded", folded.Add(1), -1) })
	if errors.Is(err, index.ErrCorrupt) {
		res.Errors = append(res.Errors, checkError{What: "catalog", Message: err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	if !cc.State.World.Created && cc.Slots == 0 {
		if _, merr := index.ReadMarker(ctx, b, res.World); errors.Is(merr, bucket.ErrNotExist) {
			return fmt.Errorf("world %s: no such world in %v", res.World, b)
		}
	}
	res.Slots, res.FirstSlot, res.Checkpoints = cc.Slots, cc.FirstSlot, append(res.Checkpoints, cc.Checkpoints...)
	for _, msg := range cc.Problems {
		res.Errors = append(res.Errors, checkError{What: "catalog", Message: msg})
	}
	// A compacted file is named by every tick it holds (a million ticks
	// of a long world name a few hundred files): each file is checked
	// once for each distinct record of it, and the references counted.
	type record struct {
		path, digest      string
		bytes, generation int64
	}
	seen := map[record]bool{}
	var refs []index.FragmentRef
	collect := func(f index.FragmentRef) bool {
		res.References++
		r := record{f.Path, f.Digest, f.Bytes, f.Generation}
		if !seen[r] {
			seen[r] = true
			refs = append(refs, f)
		}
		return true
	}
	if err := cc.State.Fragments(res.Run, collect); errors.Is(err, index.ErrCorrupt) {
		res.Errors = append(res.Errors, checkError{What: "catalog", Message: err.Error()})
		return nil
	} else if err != nil {
		return err
	}
	if res.Run != "" && len(refs) == 0 {
		if _, ok := cc.State.Run(res.Run); !ok {
			return usagef("world %s has no run %q", res.World, res.Run)
		}
	}
	if err := checkFragments(ctx, b, v, id, refs, res, p); err != nil {
		return err
	}
	lost, err := findLosses(ctx, b, cc.State, res.Run, res.Errors)
	if err != nil {
		return err
	}
	res.Lost = append(res.Lost, lost...)
	return nil
}

// checkFragments checks every fragment of refs through v, several at a
// time, and records in res what it read, what it found damaged and what
// it verified again.
func checkFragments(ctx context.Context, b bucket.Bucket, v *cache.Verified, id string, refs []index.FragmentRef, res *checkResult, p *progress.Line) error {
	var done, bytes atomic.Int64
	total := int64(len(refs))
	desc := "fragments checked"
	if res.ReadData {
		desc = "fragments read"
	}
	p.Step(desc, 0, total)
	errs := make([]*checkError, len(refs))
	copied := make([]bool, len(refs))
	var unrecorded atomic.Int64
	sem := make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, f := range refs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { p.Step(desc, done.Add(1), total); <-sem; wg.Done() }()
			r := wsql.Record(f.Fragment)
			if !r.Recorded() {
				unrecorded.Add(1)
			}
			c, err := v.Check(ctx, b, id, r, res.ReadData)
			bytes.Add(c.Read)
			copied[i] = err == nil && c.Copied
			if err != nil {
				ce := checkError{Fragment: f.Path, Run: f.Run, Tick: f.Tick, What: "read", Message: err.Error()}
				var cf *cache.CorruptFragmentError
				if errors.As(err, &cf) {
					ce.What, ce.Want, ce.Got = cf.What, cf.Want, cf.Got
				}
				errs[i] = &ce
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	res.Fragments, res.Bytes, res.Unrecorded = int64(len(refs)), bytes.Load(), unrecorded.Load()
	for i, e := range errs {
		if e != nil {
			res.Errors = append(res.Errors, *e)
		}
		if copied[i] {
			res.Reverified++
			res.ReverifiedFragments = append(res.ReverifiedFragments, refs[i].Path)
		}
	}
	return nil
}

func printCheck(out io.Writer, res *checkResult, verbose bool) {
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
func printLoss(out io.Writer, l checkLoss, verbose bool) {
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
