package fs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/worldfs/worldfs/index"
)

// A world whose catalog the mount has not opened is read cold: its runs,
// a run's head, a lookup of one tick and a listing of ticks/ read only the
// checkpoint parts that hold them (index.LoadFor), never the whole
// history. The mount keeps the partial state it read of each such world
// and answers from it, adding the parts a question reads, for as long as
// a catalog snapshot would (Options.Freshness); a tick it does not hold is
// looked for at the tip, as an exact snapshot would. A state older than
// that is brought to the tip from the log after it (index.Partial.Refresh:
// the slots published since and the parts they touch, not the
// checkpoint), or loaded anew when it is too far behind or its checkpoint
// was replaced and collected. Questions that need a newer state than the
// one held wait for one load or refresh and share it: a burst of lookups
// of ticks not yet published reads the log's tail once, not the
// checkpoint once each. A lookup in tokens/ of a token that does not name
// its tick reads the run's token filters and the parts they say may hold
// it (coldToken), and in a fork those of each world of its lineage in
// turn, an ancestor's up to the fork point. facts/ reads the claims,
// which a cold state holds whole: the lineage's states, each world's
// cold where it can be (claimsState). What needs the whole state (a
// writer's ctl) opens the world's catalog as before (a listing
// of tables/ plans from the summaries of its compacted history:
// tableNames), and from then on every read of the world uses that
// catalog. A world without a checkpoint is read by
// replaying its log once, not cold. A fork's own ticks are read like any
// world's; a tick it inherits is its parent's, looked up in the parent
// the same way (Mount.lineageTick), so a lookup in a fork of a long world
// reads the parts that hold the tick, not the ancestors' histories; a
// listing of a fork's ticks/ reads its ancestors' ticks a part at a time
// too (tickStream).

// coldState is the partial state of a world read cold.
type coldState struct {
	// flight is held by the one question that brings the state to the
	// tip (catchUp); the questions that need a newer state wait for it,
	// the others go on with the state held.
	flight sync.Mutex
	mu     sync.Mutex
	// p is read and grown (Partial.Load) only with mu held, never
	// refreshed in place: a refresh works on a copy (Partial.Clone),
	// put in its place once at the tip. Nil until it is loaded.
	p *index.Partial
	// at is when the load or refresh that brought p to the tip began:
	// p holds every slot created before it.
	at time.Time
}

// behind reports whether cs, whose mu is held, lacks a state brought to
// the tip within maxAge of call and after stale.
func (cs *coldState) behind(call time.Time, maxAge time.Duration, stale time.Time) bool {
	return cs.p == nil || cs.at.Before(call.Add(-maxAge)) || cs.at.Before(stale)
}

// loadCold loads world's state at the tip for want, or returns nil if
// world is to be read through its catalog (the mount holds it, or it has
// no checkpoint).
func (m *Mount) loadCold(ctx context.Context, world string, want index.Want) (*index.Partial, error) {
	m.mu.Lock()
	open := m.cats.Contains(world)
	m.mu.Unlock()
	if open {
		return nil, nil
	}
	defer m.stats.op("cold load", time.Now())
	want.CheckpointOnly = true // a world without one is read through its catalog, loaded once
	p, _, err := index.LoadFor(finish(ctx), m.b, world, want)
	if err != nil || p == nil {
		return nil, err
	}
	return p, nil
}

// withCold calls use with world's partial state holding want, if world is
// read cold (cold false otherwise, and use is not called): the state the
// mount holds if it was at the tip within maxAge of the call (maxAge 0:
// after the call began), else that state brought to the tip (catchUp).
func (m *Mount) withCold(ctx context.Context, world string, want index.Want, maxAge time.Duration, use func(*index.Partial) error) (cold bool, err error) {
	call := time.Now()
	m.mu.Lock()
	if open := m.cats.Contains(world); open {
		m.mu.Unlock()
		return false, nil
	}
	cs := m.mu.colds[world]
	if cs == nil {
		for w := range m.mu.colds {
			if len(m.mu.colds) < m.opts.MaxCatalogs {
				break
			}
			delete(m.mu.colds, w)
		}
		cs = &coldState{}
		m.mu.colds[world] = cs
	}
	stale := m.mu.coldsStale
	m.mu.Unlock()
	cs.mu.Lock()
	if cs.behind(call, maxAge, stale) {
		cs.mu.Unlock()
		if err := m.catchUp(ctx, world, cs, want, false, func() bool { return cs.behind(call, maxAge, stale) }); err != nil {
			return false, err
		}
		cs.mu.Lock()
	}
	defer cs.mu.Unlock()
	if cs.p == nil {
		return false, nil
	}
	err = cs.p.Load(finish(ctx), want)
	if errors.Is(err, index.ErrSuperseded) { // its checkpoint collected since
		cs.mu.Unlock()
		err = m.catchUp(ctx, world, cs, want, true, nil)
		cs.mu.Lock()
		if err == nil && cs.p != nil {
			err = cs.p.Load(finish(ctx), want)
		}
	}
	if err != nil {
		cs.p = nil // a part half added: load it anew
		return false, err
	}
	if cs.p == nil {
		return false, nil
	}
	return true, use(cs.p)
}

// coldKeepParts is the most checkpoint parts a cold state is refreshed
// with: one that has grown past it (lookups all over the history) is
// loaded anew for what is asked now, so that it holds what its readers
// use lately, not everything they ever touched.
const coldKeepParts = 16

// catchUp brings cs, the state of world read cold, to the tip, unless
// behind (asked with cs.mu held) says that another question brought it
// there meanwhile: from the log after it (index.Partial.Refresh, on a
// copy, so that questions answered by the state held go on meanwhile) if
// it has one that is not too far behind or too large (coldKeepParts),
// else (or if reload) loaded anew for want. It leaves cs.p nil if world
// is not to be read cold, or on an error. Neither cs.mu nor m.mu is held;
// it holds cs.flight, and cs.mu only to read and replace cs.p.
func (m *Mount) catchUp(ctx context.Context, world string, cs *coldState, want index.Want, reload bool, behind func() bool) error {
	cs.flight.Lock()
	defer cs.flight.Unlock()
	start := time.Now()
	cs.mu.Lock()
	if !reload && !behind() {
		cs.mu.Unlock()
		return nil // brought to the tip by the question before
	}
	var p *index.Partial
	if cs.p != nil && !reload && cs.p.Parts() <= coldKeepParts {
		p = cs.p.Clone()
	}
	cs.mu.Unlock()
	if p != nil {
		err := p.Refresh(finish(ctx))
		m.stats.op("cold refresh", start)
		if err == nil {
			cs.mu.Lock()
			cs.p, cs.at = p, start
			cs.mu.Unlock()
			return nil
		}
		if !errors.Is(err, index.ErrReload) && !errors.Is(err, index.ErrSuperseded) {
			cs.mu.Lock()
			cs.p = nil // loaded anew by the next question
			cs.mu.Unlock()
			return err
		}
	}
	p, err := m.loadCold(ctx, world, want)
	cs.mu.Lock()
	cs.p, cs.at = p, start
	cs.mu.Unlock()
	if err != nil || p == nil {
		m.mu.Lock()
		if m.mu.colds[world] == cs {
			delete(m.mu.colds, world) // read through its catalog, or loaded again by the next question
		}
		m.mu.Unlock()
		return err
	}
	return nil
}

// coldRuns returns the runs of world with published ticks (for a fork,
// and its "main" run, which inherits its parent's), read cold (cold
// false: read them through the catalog).
func (m *Mount) coldRuns(ctx context.Context, world string, exact bool) (runs []string, cold bool, err error) {
	cold, err = m.withCold(ctx, world, index.Want{From: 1, To: 0}, m.maxAge(exact), func(p *index.Partial) error {
		runs = []string{}
		for _, r := range p.Runs() {
			runs = append(runs, r.Name)
		}
		if p.World().Parent != "" && !slices.Contains(runs, index.DefaultRun) {
			runs = append(runs, index.DefaultRun)
			slices.Sort(runs)
		}
		return nil
	})
	return runs, cold, err
}

// coldHead returns the newest tick of (world, run) that world published
// itself, and world's record, read cold (cold false: read them through
// the catalog).
func (m *Mount) coldHead(ctx context.Context, world, run string) (t tickRef, ok bool, w index.World, cold bool, err error) {
	cold, err = m.withCold(ctx, world, index.Want{Run: run, From: 1, To: 0, Head: true}, m.opts.Freshness, func(p *index.Partial) error {
		w = p.World()
		tk, found, err := p.Last(run, math.MaxInt64)
		if found {
			t, ok = tickRef{World: world, Run: run, Tick: tk}, true
		}
		return err
	})
	return t, ok, w, cold, err
}

// coldTick returns tick n of (world, run) if world published it itself,
// and world's record, read cold (cold false: read them through the
// catalog); a tick the state read last lacks is looked for at the tip (a
// tick published a moment ago exists), unless it is one a fork inherits.
func (m *Mount) coldTick(ctx context.Context, world, run string, n int64, exact bool) (t tickRef, ok bool, w index.World, cold bool, err error) {
	find := func(p *index.Partial) error {
		w = p.World()
		tk, found, err := p.Tick(run, n)
		if found {
			t, ok = tickRef{World: world, Run: run, Tick: tk}, true
		}
		return err
	}
	want := index.Want{Run: run, From: n, To: n}
	cold, err = m.withCold(ctx, world, want, m.maxAge(exact), find)
	if err == nil && cold && !ok && !exact && !inherited(w, n) {
		cold, err = m.withCold(ctx, world, want, 0, find)
	}
	return t, ok, w, cold, err
}

// coldToken returns the tick of (world, run)'s view that commit token
// published, as index.View.Token finds it, read one world of the lineage
// at a time (index.LineageToken, through lineageParts): each world the
// mount reads cold only in the parts that hold the tick the token names,
// or that the run's token filters say may hold the token (for an
// ancestor, up to the fork point); a token not found in states at most
// Freshness old is looked for at the tip. cold false: read it through the
// view, as for a token that more than coldKeepParts parts of a world read
// cold may hold (parts without filters, written by a worldfs that wrote
// none): the world's catalog, kept and refreshed, serves such lookups
// better than a cold state that would be loaded anew for each.
func (m *Mount) coldToken(ctx context.Context, world, run, token string) (t tickRef, ok, cold bool, err error) {
	for _, exact := range []bool{false, true} {
		t, ok, err = index.LineageToken(ctx, m.lineageParts(exact), world, run, token)
		if errors.Is(err, errManyParts) || errors.Is(err, index.ErrNotLoaded) {
			return tickRef{}, false, false, nil
		}
		if err != nil || ok {
			return t, ok, true, err
		}
	}
	return tickRef{}, false, true, nil
}

// errManyParts is lineageParts' refusal of a token that more than
// coldKeepParts parts of a world read cold may hold.
var errManyParts = errors.New("more parts may hold the token than a cold state keeps")

// lineageParts reads each world of a lineage for index.LineageToken:
// cold if the mount reads it cold, from a state at most Freshness old
// (exact: at the tip), else from its catalog, as ownTick reads one
// (counted as a resolve). A token that more than coldKeepParts parts of
// a world read cold may hold is errManyParts, before any part is read.
func (m *Mount) lineageParts(exact bool) index.PartReader {
	return func(ctx context.Context, world string, want index.Want, use func(*index.Partial) error) error {
		if want.Token != "" {
			many := false
			cold, err := m.withCold(ctx, world, index.Want{Run: want.Run, From: 1, To: 0}, m.maxAge(exact), func(p *index.Partial) error {
				n, err := p.TokenCandidates(finish(ctx), want)
				many = n > coldKeepParts
				return err
			})
			if err != nil {
				return err
			}
			if cold && many {
				return fmt.Errorf("world %s, token %s: %w", world, want.Token, errManyParts)
			}
		}
		if cold, err := m.withCold(ctx, world, want, m.maxAge(exact), use); err != nil || cold {
			return err
		}
		defer m.stats.op("resolve", time.Now())
		s, err := m.state(ctx, world, exact)
		if err != nil {
			return err
		}
		return use(index.PartialOf(s))
	}
}

// inherited reports whether tick n of a world whose record is w is its
// parent's: at or before a fork's fork point, where a fork publishes no
// tick of its own (the catalog refuses it).
func inherited(w index.World, n int64) bool { return w.Parent != "" && n <= w.ForkTick }

// held answers from the cold state the mount holds of world, however old
// (held false: it holds none): tick n of run if that state has it among
// the parts it already read (found), and world's record. A published
// tick never changes, nor does a fork's record, so a lookup can take
// them from there (an open plans where its rows live now: see
// snapFile.plan). It reads nothing; a part the state lacks may be
// collected by now, if the state is old, so such a lookup loads a fresh
// state instead.
func (m *Mount) held(world, run string, n int64) (tk *index.Tick, found bool, w index.World, held bool) {
	m.mu.Lock()
	open := m.cats.Contains(world)
	cs := m.mu.colds[world]
	m.mu.Unlock()
	if open || cs == nil {
		return nil, false, index.World{}, false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.p == nil {
		return nil, false, index.World{}, false
	}
	tk, found, err := cs.p.Tick(run, n)
	return tk, err == nil && found, cs.p.World(), true
}

// maxAge is how old a cold state may be to answer: exact, none; else
// Freshness.
func (m *Mount) maxAge(exact bool) time.Duration {
	if exact {
		return 0
	}
	return m.opts.Freshness
}

// coldTime is when world last changed (worldTime), read cold: the newest
// of its creation and its runs' heads (ok false: read it through the
// catalog). Each head is read as coldHead reads it, so that a part it
// lacks is added as any question adds one.
func (m *Mount) coldTime(ctx context.Context, world string) (ms int64, ok bool, err error) {
	var runs []string
	ok, err = m.withCold(ctx, world, index.Want{From: 1, To: 0}, m.opts.Freshness, func(p *index.Partial) error {
		ms = p.World().CreatedUnixMs
		for _, r := range p.Runs() {
			runs = append(runs, r.Name)
		}
		return nil
	})
	for _, run := range runs {
		if !ok || err != nil {
			break
		}
		var t tickRef
		var found bool
		if t, found, _, ok, err = m.coldHead(ctx, world, run); found {
			ms = max(ms, t.PublishedUnixMs)
		}
	}
	return ms, ok, err
}
