// Package check verifies a world as worldfs check does: its catalog (the
// log folded whole, every checkpoint compared with the fold, their
// sidecars with their ticks) and every fragment the catalog references
// (presence, size and generation; the sha256 where the generation
// differs, as in a copied bucket, or of every byte), and, for each file
// found missing or damaged, what it loses and what in the bucket can
// restore it (lost.go).
//
// It reads the bucket, the catalog (index), the byte layouts it needs to
// name what a lost file held (frame) and the local memory of verified
// files (cache), which it adds to. It writes nothing to the bucket.
package check

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
)

// Options is what a check reads, and how.
type Options struct {
	// Run, if set, checks only this run's fragments (the catalog whole).
	Run string
	// ReadData reads every fragment and checks its sha256, and a
	// compacted file's tick index summaries against its rows (summaries);
	// otherwise its presence, size and generation, and the sha256 of
	// those whose generation differs.
	ReadData bool
	// Verified is the memory of verified files the check reads and adds
	// to (required: worldfs check's is the views', sql.VerifiedMemory);
	// BucketID names the bucket in it, as the cache does.
	Verified *cache.Verified
	BucketID string
	// Workers bounds the fragments checked at once (default: twice
	// GOMAXPROCS, at least 4).
	Workers int
	// Progress, if set, hears how far the check has got: done of total
	// under desc (total -1: not known).
	Progress func(desc string, done, total int64)
}

// Report is what a check found (worldfs check prints it, or its JSON).
type Report struct {
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
	ReverifiedFragments []string `json:"reverified_fragments"`
	ReadData            bool     `json:"read_data"`
	Errors              []Error  `json:"errors"`
	// Lost is, for each file of Errors, the ticks whose rows it holds and
	// what can restore them (lost.go).
	Lost []Loss `json:"lost"`
}

// Error is one thing a check found wrong: in the catalog, or a fragment.
type Error struct {
	Fragment string `json:"fragment,omitempty"` // the bucket object ("": the catalog)
	Run      string `json:"run,omitempty"`
	Tick     int64  `json:"tick,omitempty"`
	What     string `json:"what"` // size, generation, sha256, presence, catalog, read, tick index
	Want     string `json:"want,omitempty"`
	Got      string `json:"got,omitempty"`
	Message  string `json:"message"`
}

// ErrNoRun: Options.Run names a run the world has neither ticks nor
// fragments of.
var ErrNoRun = errors.New("no such run")

// World checks world in b: the catalog first (one that cannot be folded
// ends the check, an Error of the report), then every fragment it
// references, several at a time, then what each file found missing or
// damaged loses. An error means the check could not be made (the bucket
// failed, the world does not exist, ErrNoRun); what it found is the
// report's.
func World(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Report, error) {
	if opts.Verified == nil {
		return nil, errors.New("check: Options.Verified is required")
	}
	res := &Report{World: world, Run: opts.Run, ReadData: opts.ReadData, Checkpoints: []uint64{}, Errors: []Error{},
		ReverifiedFragments: []string{}, Lost: []Loss{}}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int64, int64) {}
	}
	var folded atomic.Int64
	cc, err := index.VerifyCatalog(ctx, b, world, func(uint64) { progress("catalog: slots folded", folded.Add(1), -1) })
	if errors.Is(err, index.ErrCorrupt) {
		res.Errors = append(res.Errors, Error{What: "catalog", Message: err.Error()})
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	if !cc.State.World.Created && cc.Slots == 0 {
		if _, merr := index.ReadMarker(ctx, b, world); errors.Is(merr, bucket.ErrNotExist) {
			return nil, fmt.Errorf("world %s: no such world in %v", world, b)
		}
	}
	res.Slots, res.FirstSlot, res.Checkpoints = cc.Slots, cc.FirstSlot, append(res.Checkpoints, cc.Checkpoints...)
	for _, msg := range cc.Problems {
		res.Errors = append(res.Errors, Error{What: "catalog", Message: msg})
	}
	c := &checker{b: b, s: cc.State, opts: opts, progress: progress, res: res}
	n, err := c.records()
	if errors.Is(err, index.ErrCorrupt) {
		res.Errors = append(res.Errors, Error{What: "catalog", Message: err.Error()})
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	if opts.Run != "" && n == 0 {
		if _, ok := cc.State.Run(opts.Run); !ok {
			return nil, fmt.Errorf("world %s has no run %q: %w", world, opts.Run, ErrNoRun)
		}
	}
	if err := c.fragments(ctx, n); err != nil {
		return nil, err
	}
	lost, err := findLosses(ctx, b, cc.State, opts.Run, res.Errors)
	if err != nil {
		return nil, err
	}
	res.Lost = append(res.Lost, lost...)
	return res, nil
}

// checker checks the fragments of one catalog state.
type checker struct {
	b        bucket.Bucket
	s        *index.State
	opts     Options
	progress func(desc string, done, total int64)
	res      *Report
	// seen: each distinct record of a file (recordKey), and whether it
	// was checked. A compacted file is named by every tick it holds (a
	// million ticks of a long world name a few hundred files): each is
	// checked once for each distinct record of it, and the references
	// counted. A key, not the record: the check holds 16 bytes a record
	// however long the history, never every reference at once.
	seen map[[16]byte]bool
}

// recordKey identifies a record of a file: its path, digest, size and
// generation (a hash: two records that differ collide with probability
// 2^-128).
func recordKey(f index.Fragment) [16]byte {
	b := make([]byte, 0, 32+len(f.Path)+len(f.Digest))
	b = binary.AppendUvarint(b, uint64(len(f.Path)))
	b = append(b, f.Path...)
	b = binary.AppendUvarint(b, uint64(len(f.Digest)))
	b = append(b, f.Digest...)
	b = binary.BigEndian.AppendUint64(b, uint64(f.Bytes))
	b = binary.BigEndian.AppendUint64(b, uint64(f.Generation))
	sum := sha256.Sum256(b)
	return [16]byte(sum[:16])
}

// sameRecord reports whether a and b are the same record of a file: the
// ticks of a compacted span name their file one after another, so a walk
// compares a reference with the one before it before it hashes it.
func sameRecord(a, b index.Fragment) bool {
	return a.Path == b.Path && a.Digest == b.Digest && a.Bytes == b.Bytes && a.Generation == b.Generation
}

// records walks the catalog's references (of opts.Run), counting them and
// the distinct records, which it returns; a fragment list that does not
// decode is ErrCorrupt, before any fragment is checked.
func (c *checker) records() (int64, error) {
	c.seen = map[[16]byte]bool{}
	var prev index.Fragment
	err := c.s.Fragments(c.opts.Run, func(f index.FragmentRef) bool {
		c.res.References++
		if c.res.References > 1 && sameRecord(f.Fragment, prev) {
			return true
		}
		prev = f.Fragment
		if k := recordKey(f.Fragment); !c.seen[k] {
			c.seen[k] = false
		}
		return true
	})
	return int64(len(c.seen)), err
}

// fragments checks each of the n distinct records the catalog walk
// yields (records) through opts.Verified, several at a time, as the walk
// yields them, and records in the report what it read, what it found
// damaged and what it verified again, in the walk's order.
func (c *checker) fragments(ctx context.Context, total int64) error {
	desc := "fragments checked"
	if c.opts.ReadData {
		desc = "fragments read"
	}
	c.progress(desc, 0, total)
	var t tally
	var done atomic.Int64
	workers := c.opts.Workers
	if workers <= 0 {
		workers = max(4, 2*runtime.GOMAXPROCS(0))
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	i := int64(0)
	var prev *index.Fragment
	err := c.s.Fragments(c.opts.Run, func(f index.FragmentRef) bool {
		if prev != nil && sameRecord(f.Fragment, *prev) {
			return true
		}
		prev = &f.Fragment
		k := recordKey(f.Fragment)
		if c.seen[k] {
			return true
		}
		c.seen[k] = true
		if ctx.Err() != nil {
			return false
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int64) {
			defer func() { c.progress(desc, done.Add(1), total); <-sem; wg.Done() }()
			c.one(ctx, f, i, &t)
		}(i)
		i++
		return true
	})
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err != nil {
		return err // the walk decoded every list before (records)
	}
	t.report(c.res, total)
	return nil
}

// tally is what the checks of fragments found, each by the place of its
// record in the walk (found.i).
type tally struct {
	mu                sync.Mutex
	errs, copied      []found
	bytes, unrecorded atomic.Int64
}

type found struct {
	i      int64
	err    *Error
	copied string
}

// one checks the record of f, the walk's i-th distinct one, into t.
func (c *checker) one(ctx context.Context, f index.FragmentRef, i int64, t *tally) {
	r := record(f.Fragment)
	if !r.Recorded() {
		t.unrecorded.Add(1)
	}
	ch, err := c.opts.Verified.Check(ctx, c.b, c.opts.BucketID, r, c.opts.ReadData)
	t.bytes.Add(ch.Read)
	var sumErr error
	if err == nil && c.opts.ReadData {
		sumErr = summaries(ctx, c.b, f.Fragment, ch.Data)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil && ch.Copied {
		t.copied = append(t.copied, found{i: i, copied: f.Path})
	}
	if sumErr != nil {
		t.errs = append(t.errs, found{i: i, err: &Error{Fragment: f.Path, Run: f.Run, Tick: f.Tick, What: "tick index",
			Message: fmt.Sprintf("the tick index of %s: %v", f.Path, sumErr)}})
	}
	if err != nil {
		e := Error{Fragment: f.Path, Run: f.Run, Tick: f.Tick, What: "read", Message: err.Error()}
		var cf *cache.CorruptFragmentError
		if errors.As(err, &cf) {
			e.What, e.Want, e.Got = cf.What, cf.Want, cf.Got
		}
		t.errs = append(t.errs, found{i: i, err: &e})
	}
}

// report adds to res what t found of total records, in the walk's order.
func (t *tally) report(res *Report, total int64) {
	byWalk := func(a, b found) int { return cmp.Compare(a.i, b.i) }
	slices.SortFunc(t.errs, byWalk)
	slices.SortFunc(t.copied, byWalk)
	res.Fragments, res.Bytes, res.Unrecorded = total, t.bytes.Load(), t.unrecorded.Load()
	for _, e := range t.errs {
		res.Errors = append(res.Errors, *e.err)
	}
	for _, f := range t.copied {
		res.Reverified++
		res.ReverifiedFragments = append(res.ReverifiedFragments, f.copied)
	}
}

// record is what the catalog records of fragment f, as the cache checks it.
func record(f index.Fragment) cache.Record {
	return cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
}
