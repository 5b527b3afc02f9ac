package fs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/worldfs/worldfs/index"
)

// view returns the visibility plan of (world, run): its lineage, each
// segment resolved against its world's catalog snapshot (exact: confirmed
// at the tip now; otherwise within the freshness bound).
func (m *Mount) view(ctx context.Context, world, run string, exact bool) (*index.View, error) {
	return index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		return m.state(ctx, w, exact)
	}, world, run)
}

// runs returns the runs of world that have visible ticks of their own or,
// for a fork, inherited ones (its "main" run).
func (m *Mount) runs(ctx context.Context, world string) ([]string, error) {
	if runs, ok, err := m.coldRuns(ctx, world, false); err != nil || ok {
		return runs, err
	}
	s, err := m.state(ctx, world, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range s.Runs() {
		out = append(out, r.Name)
	}
	if s.World.Parent != "" && !slices.Contains(out, index.DefaultRun) {
		out = append(out, index.DefaultRun)
		slices.Sort(out)
	}
	return out, nil
}

// place is a view a tick is found through: a world's run (for a fork's
// inherited tick, the fork's, not the parent's that published it).
type place struct{ world, run string }

// tickRef is one visible tick as the mount serves it: the manifest and the
// segment (world, run) whose catalog published it.
type tickRef = index.TickRef

// resolve finds what find looks for in (world, run)'s view: in a fresh
// snapshot, then, if it is not there, in an exact one (a tick published a
// moment ago exists). The stats count these searches ("resolve").
func (m *Mount) resolve(ctx context.Context, world, run string, find func(*index.View) (tickRef, bool)) (tickRef, bool, error) {
	defer m.stats.op("resolve", time.Now())
	for _, exact := range []bool{false, true} {
		v, err := m.view(ctx, world, run, exact)
		if err != nil {
			return tickRef{}, false, err
		}
		if t, ok := find(v); ok {
			return t, true, nil
		}
	}
	return tickRef{}, false, nil
}

// tick resolves visible tick n of (world, run), for a lookup: from the
// cold state the mount holds, however old, if that has it (held),
// else as lineageTick does.
func (m *Mount) tick(ctx context.Context, world, run string, n int64) (tickRef, bool, error) {
	return m.lineageTick(ctx, world, run, n, true, false)
}

// lineageTick resolves visible tick n of (world, run) as index.View.Tick
// does, one world at a time: a tick the world published itself comes
// from its own state (ownTick); one at or before a fork's fork point is
// its parent's visible tick n of the fork run, resolved the same way (the
// parent's segment of the lineage ends there, and a fork publishes no
// tick there). Each world is read cold where it can be, so a lookup in a
// fork of a long world reads the parts that hold the tick, not its
// ancestors' histories. held: a state the mount holds may answer however
// old it is (a lookup); exact: at the tip.
func (m *Mount) lineageTick(ctx context.Context, world, run string, n int64, held, exact bool) (tickRef, bool, error) {
	var seen []string
	for {
		t, ok, w, err := m.ownTick(ctx, world, run, n, held, exact)
		if len(seen) > 0 && (errors.Is(err, index.ErrNoWorld) || err == nil && !ok && !w.Created) {
			return tickRef{}, false, fmt.Errorf("world %s: ancestor %s does not exist: %w", seen[0], world, index.ErrCorrupt)
		}
		if err != nil || ok || !inherited(w, n) {
			return t, ok, err
		}
		seen = append(seen, world)
		if slices.Contains(seen, w.Parent) {
			return tickRef{}, false, fmt.Errorf("world %s: lineage loops through %s: %w", seen[0], w.Parent, index.ErrCorrupt)
		}
		// The parent as exact as the fork: an open planned again at the
		// tip (snapFile.plan) must see where compaction moved the rows.
		world, run = w.Parent, w.ForkRun
	}
}

// ownTick returns tick n of (world, run) if world published it itself,
// and world's record: cold if it can (coldTick), else from world's own
// catalog, never its ancestors'. A tick not found within the freshness is
// looked for at the tip, unless it is one a fork inherits (held and exact
// as for lineageTick).
func (m *Mount) ownTick(ctx context.Context, world, run string, n int64, held, exact bool) (tickRef, bool, index.World, error) {
	if held {
		tk, found, w, ok := m.held(world, run, n)
		if found {
			return tickRef{World: world, Run: run, Tick: tk}, true, w, nil
		}
		// A fork's record never changes: a tick it inherits is its
		// parent's, whatever the fork published since.
		if ok && inherited(w, n) {
			return tickRef{}, false, w, nil
		}
	}
	if t, ok, w, cold, err := m.coldTick(ctx, world, run, n, exact); err != nil || cold {
		return t, ok, w, err
	}
	defer m.stats.op("resolve", time.Now())
	for {
		s, err := m.state(ctx, world, exact)
		if err != nil {
			return tickRef{}, false, index.World{}, err
		}
		if tk, ok := s.Tick(run, n); ok {
			return tickRef{World: world, Run: run, Tick: tk}, true, s.World, nil
		}
		if exact || inherited(s.World, n) {
			return tickRef{}, false, s.World, nil
		}
		exact = true
	}
}

// token resolves a commit token of (world, run) to its visible tick: one
// world of the lineage at a time, each read cold where it can be, from
// the parts its token filters name (coldToken); else from the view.
func (m *Mount) token(ctx context.Context, world, run, token string) (tickRef, bool, error) {
	if t, ok, cold, err := m.coldToken(ctx, world, run, token); err != nil || cold {
		return t, ok, err
	}
	return m.resolve(ctx, world, run, func(v *index.View) (tickRef, bool) { return v.Token(token) })
}

// head returns the newest visible tick of (world, run): the newest the
// world published itself (cold, from the part that holds it, if the mount
// has not opened world's catalog); for a fork that published none, its
// fork point, looked up in its parent as lineageTick does.
func (m *Mount) head(ctx context.Context, world, run string) (tickRef, bool, error) {
	t, ok, w, cold, err := m.coldHead(ctx, world, run)
	if err != nil {
		return tickRef{}, false, err
	}
	if !cold {
		s, err := m.state(ctx, world, false)
		if err != nil {
			return tickRef{}, false, err
		}
		tk, found := s.Last(run, math.MaxInt64)
		t, ok, w = tickRef{World: world, Run: run, Tick: tk}, found, s.World
	}
	if ok || w.Parent == "" {
		return t, ok, nil
	}
	if t, ok, err := m.lineageTick(ctx, w.Parent, w.ForkRun, w.ForkTick, true, false); err != nil || ok {
		return t, ok, err
	}
	// A fork point that is not a visible tick (a fork made without
	// checking it): the newest visible tick before it, as the view says.
	v, err := m.view(ctx, world, run, false)
	if err != nil {
		return tickRef{}, false, err
	}
	t, ok = v.Head()
	return t, ok, nil
}

// tickTables returns the tables a tick published, by readable name.
func (m *Mount) tickTables(ctx context.Context, t tickRef) (map[string]index.TableFragments, error) {
	tables, err := t.Tables()
	if err != nil {
		return nil, err
	}
	out := make(map[string]index.TableFragments, len(tables))
	for _, tf := range tables {
		info, err := m.tableInfo(ctx, t.World, tf.Table)
		if err != nil {
			return nil, err
		}
		out[info.Name] = tf
	}
	return out, nil
}

// isExact reports whether tf's fragment is exactly the tick's visible rows
// of the table: one fragment, which the catalog proves holds only rows
// stamped with the tick's token.
func isExact(t tickRef, tf index.TableFragments) bool {
	return len(tf.Fragments) == 1 && index.Proven(t.World, t.Run, tf.Table, t.CommitToken, tf.Fragments[0])
}
