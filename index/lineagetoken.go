package index

import (
	"context"
	"fmt"
	"math"

	"github.com/worldfs/worldfs/bucket"
)

// A PartReader reads one world of a lineage in part for LineageToken: it
// calls use with a state of world that holds at least what want asks
// (LoadFor, Partial.Load), and must not let another goroutine change
// that state while use runs. Its error is LineageToken's.
type PartReader func(ctx context.Context, world string, want Want, use func(*Partial) error) error

// PartsFrom returns a PartReader that reads each world from b: LoadFor
// the first time a world is asked for, then that state grown
// (Partial.Load). A world without a checkpoint loads whole. It is for
// one goroutine.
func PartsFrom(b bucket.Bucket) PartReader {
	held := map[string]*Partial{}
	return func(ctx context.Context, world string, want Want, use func(*Partial) error) error {
		p := held[world]
		if p == nil {
			var err error
			if p, _, err = LoadFor(ctx, b, world, want); err != nil {
				return err
			}
			held[world] = p
		} else if err := p.Load(ctx, want); err != nil {
			return err
		}
		return use(p)
	}
}

// LineageToken returns the visible tick of (world, run) that commit
// token published, as View.Token finds it, reading the lineage one world
// at a time through read, each only in the parts that may hold the
// answer: first each world's record, from world up to its oldest
// ancestor; then the tick the token names (TokenTick), newest segment
// first, as View.Tick finds it, if it carries the token; else, oldest
// segment first, the lowest tick of the segment's run up to its bound
// that carries the token (Want.Token, Want.TokenTo: the parts whose
// token filters may hold it). An ancestor's tick is the answer only if
// no newer world of the lineage published a tick of its number, as
// View.Token checks: the catalog refuses a fork's publish at or before
// its fork point, but a log an earlier worldfs wrote may hold one, which
// hides the ancestor's tick from every reader. ErrNotLoaded if a
// state read does not hold every tick that may carry the token (a
// reader that did not load it): only the whole states can tell. A
// lineage that loops, or names an ancestor that does not exist, is
// ErrCorrupt, as for Lineage.
func LineageToken(ctx context.Context, read PartReader, world, run, token string) (TickRef, bool, error) {
	type segment struct {
		world, run string
		upTo       int64
	}
	var segs []segment // world first
	seen := map[string]bool{}
	for w, r, upTo := world, run, int64(math.MaxInt64); ; {
		if seen[w] {
			return TickRef{}, false, fmt.Errorf("world %s: lineage loops through %s: %w", world, w, ErrCorrupt)
		}
		seen[w] = true
		var rec World
		if err := read(ctx, w, Want{Run: r, From: 1, To: 0}, func(p *Partial) error {
			rec = p.World()
			return nil
		}); err != nil {
			return TickRef{}, false, err
		}
		if w != world && !rec.Created {
			return TickRef{}, false, fmt.Errorf("world %s: ancestor %s does not exist: %w", world, w, ErrCorrupt)
		}
		segs = append(segs, segment{w, r, upTo})
		if rec.Parent == "" {
			break
		}
		w, r, upTo = rec.Parent, rec.ForkRun, min(upTo, rec.ForkTick)
	}
	// tickOf returns tick n of the first of segs that published it (the
	// newest, as View.Tick finds it) and that segment's index; -1 if none.
	tickOf := func(segs []segment, n int64) (int, *Tick, error) {
		for i, s := range segs {
			if n > s.upTo {
				continue
			}
			var t *Tick
			var found bool
			if err := read(ctx, s.world, Want{Run: s.run, From: n, To: n}, func(p *Partial) (err error) {
				t, found, err = p.Tick(s.run, n)
				return err
			}); err != nil {
				return -1, nil, err
			}
			if found {
				return i, t, nil
			}
		}
		return -1, nil, nil
	}
	if n, ok := TokenTick(token); ok {
		i, t, err := tickOf(segs, n)
		if err != nil {
			return TickRef{}, false, err
		}
		if i >= 0 && t.CommitToken == token {
			return TickRef{segs[i].world, segs[i].run, t}, true, nil
		}
	}
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		var t *Tick
		var found bool
		if err := read(ctx, s.world, Want{Run: s.run, From: 1, To: 0, Token: token, TokenTo: s.upTo}, func(p *Partial) (err error) {
			t, found, err = p.lowestByToken(s.run, token, s.upTo)
			return err
		}); err != nil {
			return TickRef{}, false, err
		}
		if !found {
			continue
		}
		// A tick a newer world re-published (a log an earlier worldfs
		// wrote) hides the ancestor's.
		j, _, err := tickOf(segs[:i], t.Tick)
		if err != nil {
			return TickRef{}, false, err
		}
		if j < 0 {
			return TickRef{s.world, s.run, t}, true, nil
		}
	}
	return TickRef{}, false, nil
}

// lowestByToken returns the lowest tick of run up to upTo that carries
// token, or ErrNotLoaded if p lacks a tick shard of those ticks whose
// token filter may hold it.
func (p *Partial) lowestByToken(run, token string, upTo int64) (*Tick, bool, error) {
	if part := p.s.part; part != nil {
		if err := part.coversToken(run, token, upTo); err != nil {
			return nil, false, err
		}
	}
	// The lowest of run that carries token: if it is past upTo, so is
	// every other.
	t, ok := p.s.tickByToken(run, token)
	if !ok || t.Tick > upTo {
		return nil, false, nil
	}
	return t, true, nil
}
