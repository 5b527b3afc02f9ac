package fs

import (
	"context"
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

// tick resolves visible tick n of (world, run): cold, from the part that
// holds it, if the mount has not opened world's catalog (from the cold
// state it holds, however old, if that has it: heldTick).
func (m *Mount) tick(ctx context.Context, world, run string, n int64) (tickRef, bool, error) {
	if tk, ok := m.heldTick(world, run, n); ok {
		return tickRef{World: world, Run: run, Tick: tk}, true, nil
	}
	if t, ok, cold, err := m.coldTick(ctx, world, run, n, false); err != nil || cold {
		return t, ok, err
	}
	return m.resolve(ctx, world, run, func(v *index.View) (tickRef, bool) { return v.Tick(n) })
}

// token resolves a commit token of (world, run) to its visible tick.
func (m *Mount) token(ctx context.Context, world, run, token string) (tickRef, bool, error) {
	return m.resolve(ctx, world, run, func(v *index.View) (tickRef, bool) { return v.Token(token) })
}

// head returns the newest visible tick of (world, run): cold, from the
// part that holds it, if the mount has not opened world's catalog.
func (m *Mount) head(ctx context.Context, world, run string) (tickRef, bool, error) {
	if t, ok, cold, err := m.coldHead(ctx, world, run); err != nil || cold {
		return t, ok, err
	}
	v, err := m.view(ctx, world, run, false)
	if err != nil {
		return tickRef{}, false, err
	}
	t, ok := v.Head()
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
