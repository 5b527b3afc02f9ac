package check

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Loss is a file the catalog records that a check found missing or
// damaged: the rows of the ticks that name it are lost to every reader
// (the views fail the queries that read them, the mount answers EIO for
// those ticks) until it is restored.
type Loss struct {
	Fragment string `json:"fragment"`
	What     string `json:"what"` // presence, size, generation, sha256, read
	World    string `json:"world"`
	Run      string `json:"run"`
	Table    string `json:"table"` // the table's name ("": its description cannot be read)
	TableID  string `json:"table_id"`
	// Facts: the file holds facts (or evaluation receipts), which landed at
	// the ticks named.
	Facts bool `json:"facts,omitempty"`
	// From, To and Ticks: the ticks whose rows are lost: those that name
	// the file (a compacted file is named by every tick of its window),
	// within a compacted file's span (the ticks it holds rows of).
	From  int64 `json:"from"`
	To    int64 `json:"to"`
	Ticks int64 `json:"ticks"`
	// Restore is, per tick, what can restore its rows: the fragments its
	// writer published, still in the bucket because a compaction replaced
	// them and collection has not deleted them yet (it does once the
	// compaction is older than the retention).
	Restore []Restore `json:"restore"`
	// Unrestorable counts the ticks nothing found can restore; Differ, of
	// those, the ticks whose replaced fragment is there but differs from
	// what the compacted file's tick index records for the tick.
	Unrestorable int64 `json:"unrestorable"`
	Differ       int64 `json:"differ,omitempty"`
}

// Restore is a tick's fragments that can restore its rows.
type Restore struct {
	Tick      int64    `json:"tick"`
	Fragments []string `json:"fragments"` // one, or a split tick's parts in order
	Bytes     int64    `json:"bytes"`
	// Verified: its size and sha256 are those the lost compacted file's
	// tick index records for the tick; false where nothing records them (no
	// tick index, a tick without rows, a split tick).
	Verified bool `json:"verified"`
}

// findLosses returns what a check's fragment errors lose: for each file
// found missing or damaged, its table, the ticks that name it in s, and
// the replaced fragments that can restore them.
func findLosses(ctx context.Context, b bucket.Bucket, s *index.State, run string, errs []Error) ([]Loss, error) {
	type refs struct {
		loss  *Loss
		frag  index.Fragment
		ticks []index.FragmentRef
	}
	byPath := map[string]*refs{}
	var order []*refs
	for _, e := range errs {
		if e.Fragment == "" || byPath[e.Fragment] != nil {
			continue
		}
		r := &refs{loss: &Loss{Fragment: e.Fragment, What: e.What, World: s.World.ID, Restore: []Restore{}}}
		byPath[e.Fragment], order = r, append(order, r)
	}
	if len(order) == 0 {
		return nil, nil
	}
	if err := s.Fragments(run, func(f index.FragmentRef) bool {
		if r := byPath[f.Path]; r != nil {
			r.frag = f.Fragment
			r.ticks = append(r.ticks, f)
		}
		return true
	}); err != nil {
		return nil, err
	}
	var out []Loss
	for _, r := range order {
		l := r.loss
		if len(r.ticks) == 0 {
			continue
		}
		first := r.ticks[0]
		l.Run, l.TableID = first.Run, first.Table
		if ti, err := frame.ReadTableInfo(ctx, b, l.World, l.TableID); err == nil {
			l.Table = ti.Name
		}
		// A compacted file's ticks outside its span name it but have no
		// rows in it.
		span := index.Span{From: math.MinInt64, To: math.MaxInt64}
		if r.frag.Span != nil {
			span = *r.frag.Span
		}
		l.From, l.To = math.MaxInt64, math.MinInt64
		ticks := map[int64]index.FragmentRef{}
		for _, f := range r.ticks {
			if !span.Contains(f.Tick) {
				continue
			}
			if t, ok := s.Tick(f.Run, f.Tick); !ok || t.CommitToken != f.Token {
				l.Facts = true
			}
			l.From, l.To = min(l.From, f.Tick), max(l.To, f.Tick)
			ticks[f.Tick] = f
		}
		if len(ticks) == 0 {
			l.From, l.To = r.frag.Span.From, r.frag.Span.To
		}
		l.Ticks = int64(len(ticks))
		if err := restorers(ctx, b, r.frag, l, ticks); err != nil {
			return nil, err
		}
		out = append(out, *l)
	}
	return out, nil
}

// restorers fills l.Restore, l.Unrestorable and l.Differ: for each tick
// (by number, the reference that names the lost file), the fragments its
// writer published under its commit token (index.TickFragmentPath, or
// index.FragmentPath's parts), if still in the bucket and other than the
// lost file itself, checked against the lost file's tick index when it has
// one.
func restorers(ctx context.Context, b bucket.Bucket, lost index.Fragment, l *Loss, ticks map[int64]index.FragmentRef) error {
	var x *frame.TickIndex
	if lost.Span != nil {
		x, _ = frame.ReadTickIndex(ctx, b, lost) // none, or damaged: nothing to verify by
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, f := range ticks {
		g.Go(func() error {
			r, differs, err := restorer(gctx, b, l.World, lost.Path, x, f)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r != nil:
				l.Restore = append(l.Restore, *r)
			default:
				l.Unrestorable++
				if differs {
					l.Differ++
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	slices.SortFunc(l.Restore, func(a, b Restore) int { return cmp.Compare(a.Tick, b.Tick) })
	return nil
}

// restorer returns the fragments that can restore the rows of the tick f
// names (nil: none found; differs: one found whose bytes are not those
// the tick index x records).
func restorer(ctx context.Context, b bucket.Bucket, world, lost string, x *frame.TickIndex, f index.FragmentRef) (*Restore, bool, error) {
	present := func(name string) (int64, bool, error) {
		if name == lost {
			return 0, false, nil
		}
		a, err := b.Stat(ctx, name)
		if errors.Is(err, bucket.ErrNotExist) {
			return 0, false, nil
		}
		return a.Size, err == nil, err
	}
	r := &Restore{Tick: f.Tick}
	one := index.TickFragmentPath(world, f.Run, f.Table, f.Token)
	size, ok, err := present(one)
	if err != nil {
		return nil, false, err
	}
	if ok {
		r.Fragments, r.Bytes = []string{one}, size
	} else {
		for part := 0; ; part++ {
			name := index.FragmentPath(world, f.Run, f.Table, f.Token, part)
			size, ok, err := present(name)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				break
			}
			r.Fragments, r.Bytes = append(r.Fragments, name), r.Bytes+size
		}
	}
	if len(r.Fragments) == 0 {
		return nil, false, nil
	}
	e, indexed := tickEntry(x, f.Tick)
	if !indexed || len(r.Fragments) != 1 {
		return r, false, nil
	}
	if r.Bytes != e.Size {
		return nil, true, nil
	}
	data, _, err := b.Get(ctx, r.Fragments[0])
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", r.Fragments[0], err)
	}
	if int64(len(data)) != e.Size || sha256.Sum256(data) != e.Digest {
		return nil, true, nil
	}
	r.Verified = true
	return r, false, nil
}

// tickEntry is tick n's entry in x (false: no index, or no row of n).
func tickEntry(x *frame.TickIndex, n int64) (frame.TickEntry, bool) {
	if x == nil {
		return frame.TickEntry{}, false
	}
	return x.Entry(n)
}
