package engine_test

import (
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A world whose tables a worldfs before declared order described (columns
// by name) keeps them: a program that declares the same archetypes now
// (engine.NewTable: declared order, another table id) resumes and forks it
// on the world's own tables, so the world's archetype stays one table,
// read and written as before.
func TestResumeAndForkKeepTheWorldsTables(t *testing.T) {
	ctx := ctxT(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	comps := func() []engine.Component {
		st, _ := engine.NewComponent("state", engine.Field{Name: "energy", Type: engine.Float64}, engine.Field{Name: "age", Type: engine.Int64})
		pos, _ := engine.NewComponent("pos", engine.Field{Name: "x", Type: engine.Float64})
		return []engine.Component{st, pos}
	}
	old, err := frame.NewTable("agent", comps()...) // as every worldfs before declared order made it
	if err != nil {
		t.Fatal(err)
	}
	now, err := engine.NewTable("agent", comps()...)
	if err != nil || now.ID == old.ID {
		t.Fatalf("the archetype declared now: %v, id %s (before: %s)", err, now.ID, old.ID)
	}
	w, err := engine.CreateWorld(ctx, b, "w", []*engine.Table{old}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := w.Spawn("agent", engine.Values{"state_energy": float64(i), "state_age": int64(i), "pos_x": 1.0}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	r, err := engine.ResumeWorld(ctx, b, "w", []*engine.Table{now}, quiet)
	if err != nil {
		t.Fatalf("resume with the archetype declared now: %v", err)
	}
	defer r.Close()
	if got := r.Tables()[0].ID; got != old.ID || r.Frame("agent").Len() != 3 {
		t.Errorf("resumed on table %s with %d rows; want the world's %s with 3", got, r.Frame("agent").Len(), old.ID)
	}
	if _, err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := engine.ForkWorld(ctx, b, "w", "f", index.DefaultRun, 1, []*engine.Table{now}, quiet)
	if err != nil {
		t.Fatalf("fork with the archetype declared now: %v", err)
	}
	defer f.Close()
	if got := f.Tables()[0].ID; got != old.ID || f.Frame("agent").Len() != 2 {
		t.Errorf("forked on table %s with %d rows; want the parent's %s with 2", got, f.Frame("agent").Len(), old.ID)
	}
	for _, world := range []string{"w", "f"} {
		ids, err := engine.TableIDs(ctx, b, world)
		if err != nil || len(ids) != 1 || ids[0] != old.ID {
			t.Errorf("world %s describes tables %v (%v); want only %s", world, ids, err, old.ID)
		}
	}
	// A new world takes the declared order.
	n, err := engine.CreateWorld(ctx, b, "n", []*engine.Table{now}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := n.Tables()[0]; got.ID != now.ID || got.Format != frame.FormatDeclared {
		t.Errorf("a new world's table: %s format %d, want %s declared", got.ID, got.Format, now.ID)
	}
}
