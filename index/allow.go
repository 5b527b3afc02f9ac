package index

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/worldfs/worldfs/bucket"
)

// Visibility is how an allowlist filters a (world, run) segment
// (docs/ARCHITECTURE.md, "Visibility").
type Visibility int

const (
	// Unfiltered: no manifests and no writer fence: uncoordinated or
	// pre-commit-column history; every row is visible.
	Unfiltered Visibility = iota
	// Filtered: rows are visible only if the tick's published token (or a
	// completed claim's token) matches; legacy epoch-0 rows always are.
	// A fenced run with no manifests yet shows nothing current-generation.
	Filtered
)

func (v Visibility) String() string {
	if v == Unfiltered {
		return "unfiltered"
	}
	return "filtered"
}

// Allowlist decides which rows of one (world, run) segment are visible, from
// one pinned state.
type Allowlist struct {
	World, Run string
	Mode       Visibility
	// UpTo is the last tick of the segment: a fork's ancestors are read up
	// to the fork point; a world's own segment has no bound.
	UpTo int64

	state  *State
	claims map[string]bool // completed claim tokens of the run
}

// Allowlist returns the allowlist of run in s.
func (s *State) Allowlist(run string) *Allowlist {
	a := &Allowlist{World: s.World.ID, Run: run, UpTo: math.MaxInt64, state: s, claims: map[string]bool{}}
	if a.Mode = s.visibility(run); a.Mode == Unfiltered {
		return a
	}
	s.Claims(run, func(c *Claim) bool {
		if c.State == ClaimComplete {
			a.claims[c.CommitToken] = true
		}
		return true
	})
	return a
}

// visibility is how run's rows are filtered: unfiltered while it has no
// publication and no writer ever fenced the world.
func (s *State) visibility(run string) Visibility {
	if _, published := s.Run(run); !published && s.World.Epoch == 0 {
		return Unfiltered
	}
	return Filtered
}

// Admits reports whether a row of the segment stamped (tick, token, epoch)
// is visible: within the segment's bound, and, if filtered, by RowRule.
func (a *Allowlist) Admits(tick int64, token string, epoch int64) bool {
	if tick > a.UpTo {
		return false
	}
	return a.Mode == Unfiltered || RowRule.Eval(Stamp{Tick: tick, Token: token, Epoch: epoch}, a)
}

// Publishes reports whether the segment's run published (tick, token): a
// tick's manifest, or a completed claim.
func (a *Allowlist) Publishes(tick int64, token string) bool {
	if t, ok := a.state.Tick(a.Run, tick); ok && t.CommitToken == token {
		return true
	}
	return a.claims[token]
}

// Ticks calls fn with each visible (tick, token) of the segment in tick
// order, until fn returns false. An unfiltered segment has none to list.
func (a *Allowlist) Ticks(fn func(tick int64, token string) bool) {
	a.state.ticksIn("Allowlist.Ticks", a.Run, math.MinInt64, a.UpTo, func(t *Tick) bool {
		return fn(t.Tick, t.CommitToken)
	})
}

// ClaimTokens returns the completed claim tokens of the segment.
func (a *Allowlist) ClaimTokens() []string {
	out := make([]string, 0, len(a.claims))
	for t := range a.claims {
		out = append(out, t)
	}
	return out
}

// Segment is one piece of a world's history: a run of one world, read up to
// a tick, with that world's allowlist.
type Segment struct {
	*Allowlist
	State *State
}

// Loader returns the current state of a world (for example from an open
// Catalog's Exact, or Load).
type Loader func(ctx context.Context, world string) (*State, error)

// Lineage returns the segments of (world, run), oldest ancestor first: for
// a fork, each ancestor's fork run up to the fork point, resolved against
// that ancestor's own catalog, then the world's own run. A parent the
// catalog names but that does not exist is ErrCorrupt.
func Lineage(ctx context.Context, load Loader, world, run string) ([]Segment, error) {
	var segs []Segment
	seen := map[string]bool{}
	upTo := int64(math.MaxInt64)
	for w, r := world, run; ; {
		if seen[w] {
			return nil, fmt.Errorf("world %s: lineage loops through %s: %w", world, w, ErrCorrupt)
		}
		seen[w] = true
		s, err := load(ctx, w)
		if err != nil {
			return nil, err
		}
		if w != world && !s.World.Created {
			return nil, fmt.Errorf("world %s: ancestor %s does not exist: %w", world, w, ErrCorrupt)
		}
		a := s.Allowlist(r)
		a.UpTo = upTo
		segs = append(segs, Segment{Allowlist: a, State: s})
		if s.World.Parent == "" {
			break
		}
		// An ancestor is read up to the nearest fork point below it: a fork
		// of a fork at tick 3 sees its grandparent only up to tick 3.
		w, r, upTo = s.World.Parent, s.World.ForkRun, min(upTo, s.World.ForkTick)
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return segs, nil
}

// LoadSummarizedFrom is LoadFrom with LoadSummarized: states for
// planning views (OpenPlan).
func LoadSummarizedFrom(b bucket.Bucket) PartLoader {
	return func(ctx context.Context, world string) (*Partial, error) {
		p, _, err := LoadSummarized(ctx, b, world)
		if err != nil && !errors.Is(err, bucket.ErrNotExist) {
			return nil, err
		}
		return p, err
	}
}

// LoadFrom returns a Loader that reads each world's state from the bucket.
func LoadFrom(b bucket.Bucket) Loader {
	return func(ctx context.Context, world string) (*State, error) {
		s, _, err := Load(ctx, b, world)
		if err != nil && !errors.Is(err, bucket.ErrNotExist) {
			return nil, err
		}
		return s, err
	}
}
