package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// Regression tests, each from a defect an independent review found.

// A Step whose caller gives up while the publish is in flight must not
// judge the tick absent before the publish is decided.
func TestRegressionCancelledPublishInFlight(t *testing.T) {
	inner, _ := local.Open(t.TempDir())
	script := faulty.NewScript()
	w, err := engine.CreateWorld(ctxT(t), faulty.Wrap(inner, script), "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, 3); err != nil {
		t.Fatal(err)
	}
	script.SetRules(faulty.Rule{Op: faulty.OpCreate, Prefix: index.LogPrefix("w"), Times: 1,
		Fault: faulty.Fault{Kind: faulty.Stall, Stall: 500 * time.Millisecond}})
	particles.Schedule(w)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	r, err := w.Step(ctx)
	cancel()
	if err != nil || r.Tick != 4 {
		t.Fatalf("a step whose caller left during the publish = %+v, %v; want the decided outcome", r, err)
	}
	if err := drive(ctxT(t), w, 10); err != nil {
		t.Fatal(err)
	}
	if got, want := particles.Fingerprint(w), reference(t, 10); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

// While a publish is unreconciled, no mutation is admitted; and a tick
// consumes only the cache entries it applied.
func TestRegressionFrozenWorldRefusesMutations(t *testing.T) {
	inner, _ := local.Open(t.TempDir())
	script := faulty.NewScript()
	opts := quiet
	opts.Catalog.SlotTimeout = 200 * time.Millisecond
	w, err := engine.CreateWorld(ctxT(t), faulty.Wrap(inner, script), "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, 3); err != nil {
		t.Fatal(err)
	}
	script.SetRules(
		faulty.Rule{Op: faulty.OpCreate, Prefix: index.LogPrefix("w"), Times: 1, Fault: faulty.Fault{Kind: faulty.FailAfter}},
		faulty.Rule{Op: faulty.OpGet, Prefix: index.LogPrefix("w"), Skip: 1, Fault: faulty.Fault{Kind: faulty.FailBefore}},
	)
	if _, err := w.Step(ctxT(t)); !errors.Is(err, engine.ErrFrozen) {
		t.Fatalf("step = %v, want ErrFrozen", err)
	}
	if _, err := w.Spawn("emitter", engine.Values{"position_x": 1.0}); !errors.Is(err, engine.ErrFrozen) {
		t.Fatalf("spawn while frozen = %v, want ErrFrozen", err)
	}
	if err := w.Despawn(0); !errors.Is(err, engine.ErrFrozen) {
		t.Fatalf("despawn while frozen = %v", err)
	}
	if err := w.Enqueue(ctxT(t), particles.Nudge("n", 9, 1, 1)); !errors.Is(err, engine.ErrFrozen) {
		t.Fatalf("enqueue while frozen = %v", err)
	}
	script.SetRules()
	if r, err := w.Step(ctxT(t)); err != nil || r.Tick != 4 {
		t.Fatalf("reconciled step = %+v, %v", r, err)
	}
}

// A legacy table emptied before the history's last tick stays empty, and
// entity ids continue past every id the history used.
func TestRegressionLegacyEmptiedTable(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	lts := enginetest.LegacyTables(t)
	byName := map[string]*engine.Table{}
	for _, lt := range lts {
		byName[lt.Name] = lt
	}
	put := func(name string, tick int64, ids ...int64) {
		lt := byName[name]
		f := engine.NewFrame(lt)
		for _, id := range ids {
			if err := f.Insert(id, nil); err != nil {
				t.Fatal(err)
			}
		}
		data, err := engine.EncodeFragment(f, engine.Stamp{Tick: tick})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctxT(t), index.LegacyPrefix("lw", "main", lt.ID)+fmt.Sprint(tick, ".parquet"), data); err != nil {
			t.Fatal(err)
		}
	}
	put("emitter", 0, 0)
	put("particle", 0, 1, 50)
	put("emitter", 1, 0)
	put("particle", 1, 1)
	put("emitter", 2, 0)
	put("particle", 2) // every particle despawned at tick 2
	w, err := engine.ContinueLegacyWorld(ctxT(t), b, "lw", particles.Tables(), lts, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Tick() != 2 || w.Frame("particle").Len() != 0 || w.Frame("emitter").Len() != 1 || w.NextEntity() != 51 {
		t.Fatalf("continued at tick %d with particles %v, next id %d", w.Tick(), w.Frame("particle").Entities, w.NextEntity())
	}
}

// A continued legacy world resumed before its first publish starts where
// the legacy history ends.
func TestRegressionLegacyResumeBeforePublish(t *testing.T) {
	b, _ := local.Open(copyFixture(t))
	w, err := engine.ContinueLegacyWorld(ctxT(t), b, "legacyworld", particles.Tables(), enginetest.LegacyTables(t), quiet)
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // the writer goes away before its first Step
	opts := quiet
	opts.Legacy = enginetest.LegacyTables(t)
	r, err := engine.ResumeWorld(ctxT(t), b, "legacyworld", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Tick() != 4 || r.NextEntity() != 109 || r.Frame("particle").Len() != 9 {
		t.Fatalf("resumed at tick %d, next entity %d, %d particles (want 4, 109, 9)", r.Tick(), r.NextEntity(), r.Frame("particle").Len())
	}
}

// A fork of a fork, at a tick the first fork inherited; and a fork that
// never published resumes at its fork point.
func TestRegressionForkOfFork(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	p, err := engine.CreateWorld(ctxT(t), b, "p", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), p, 10); err != nil {
		t.Fatal(err)
	}
	p.Close()
	f1, err := engine.ForkWorld(ctxT(t), b, "p", "f1", "main", 5, particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	next := f1.NextEntity()
	f1.Close()
	r, err := engine.ResumeWorld(ctxT(t), b, "f1", particles.Tables(), quiet)
	if err != nil || r.Tick() != 5 || r.NextEntity() != next {
		t.Fatalf("resume of an unpublished fork: tick %d next %d (want 5, %d), %v", r.Tick(), r.NextEntity(), next, err)
	}
	r.Close()
	f3, err := engine.ForkWorld(ctxT(t), b, "f1", "f3", "main", 3, particles.Tables(), quiet)
	if err != nil {
		t.Fatalf("fork of a fork at an inherited tick: %v", err)
	}
	defer f3.Close()
	if err := drive(ctxT(t), f3, 10); err != nil {
		t.Fatal(err)
	}
	if got, want := particles.Fingerprint(f3), reference(t, 10); got != want {
		t.Fatalf("fork of a fork: %s\nwant %s", got, want)
	}
	segs, err := index.Lineage(ctxT(t), index.LoadFrom(b), "f3", "main")
	if err != nil || len(segs) != 3 || segs[0].World != "p" || segs[0].UpTo != 3 || segs[1].World != "f1" || segs[1].UpTo != 3 {
		t.Fatalf("lineage of the fork of a fork: %+v, %v", segs, err)
	}
}

// A fork that fails after its lineage rows are written (here: its first
// slot cannot be created) can be retried; one refused before (its marker
// cannot be created) writes no lineage.
func TestRegressionForkRetry(t *testing.T) {
	inner, _ := local.Open(t.TempDir())
	p, err := engine.CreateWorld(ctxT(t), inner, "p", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), p, 6); err != nil {
		t.Fatal(err)
	}
	p.Close()
	noMarker := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Prefix: index.MarkerName("f"),
		Fault: faulty.Fault{Kind: faulty.FailBefore}}))
	if _, err = engine.ForkWorld(ctxT(t), noMarker, "p", "f", "main", 5, particles.Tables(), quiet); err == nil {
		t.Fatal("the fork succeeded without its marker")
	}
	if _, err := inner.Stat(ctxT(t), index.LineagePath("f")); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("a fork that never held the name wrote its lineage: %v", err)
	}
	// The first slot create fails every time: CreateOnce gives up (a few
	// seconds of backoff) and the fork fails after its lineage is written.
	noSlot := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Prefix: index.LogPrefix("f"),
		Fault: faulty.Fault{Kind: faulty.FailBefore}}))
	if _, err = engine.ForkWorld(ctxT(t), noSlot, "p", "f", "main", 5, particles.Tables(), quiet); err == nil {
		t.Fatal("the fork succeeded without its catalog")
	}
	if _, err := inner.Stat(ctxT(t), index.LineagePath("f")); err != nil {
		t.Fatalf("the lineage rows were not written before the first slot: %v", err)
	}
	f, err := engine.ForkWorld(ctxT(t), inner, "p", "f", "main", 5, particles.Tables(), quiet)
	if err != nil {
		t.Fatalf("retrying the fork: %v", err)
	}
	f.Close()
}
