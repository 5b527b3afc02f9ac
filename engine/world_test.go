package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

func TestMain(m *testing.M) {
	crashtest.Main(m, map[string]crashtest.Func{
		"sim":  simChild,
		"fact": factChild,
	})
}

// The kit (engine/enginetest) under the names this package's tests use.
var (
	ctxT  = enginetest.Context
	quiet = enginetest.Quiet
	// simWorld creates a particle world run to a tick, closed with the test.
	simWorld = enginetest.World
)

// nudge12 is a durable command due at tick 12, enqueued by every driver:
// the identical enqueue is a no-op, and the command must take effect
// exactly once whatever crashes around it.
var nudge12 = particles.Nudge("nudge-12", 12, 5, -1)

// drive brings w to tick last (enginetest.Drive, with nudge12).
func drive(ctx context.Context, w *engine.World, last int64) error {
	return enginetest.Drive(ctx, w, last, nudge12)
}

// reference is the fingerprint of an uninterrupted run to last.
func reference(t *testing.T, last int64) string { return enginetest.Reference(t, last, nudge12) }

// simChild creates (or resumes) world p[1] in the bucket at p[0] and runs
// it to tick p[2]; crash tests kill it at a failpoint. With p[3], it runs
// pipelined at that depth, every slot created with the pipeline full
// (fullGate), and prints how many ticks are in flight before computing
// each tick.
func simChild(p []string) int {
	last, _ := strconv.ParseInt(p[2], 10, 64)
	ctx := context.Background()
	inner, err := local.Open(p[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var b bucket.Bucket = inner
	opts := quiet
	var gate *fullGate
	if len(p) > 3 {
		opts.Depth, _ = strconv.Atoi(p[3])
		gate = newFullGate(p[1], int64(opts.Depth), last, nil)
		b = faulty.Wrap(inner, gate)
	}
	w, err := engine.CreateWorld(ctx, b, p[1], particles.Tables(), opts)
	if errors.Is(err, index.ErrWorldExists) {
		w, err = engine.ResumeWorld(ctx, b, p[1], particles.Tables(), opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer w.Close()
	if gate != nil {
		gate.watch(w, os.Stdout)
	}
	if err := drive(ctx, w, last); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

// checkPublished asserts every tick 0..last is published once, with all
// tables, and that no manifest names an orphan.
func checkPublished(t *testing.T, b bucket.Bucket, world string, last int64) *index.State {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := s.Run("main")
	if run.Head != last || run.Published != last+1 {
		t.Fatalf("run %+v, want ticks 0..%d published once each", run, last)
	}
	for tick := range last + 1 {
		tk, ok := s.Tick("main", tick)
		if !ok || len(enginetest.Tables(t, tk)) != 3 {
			t.Fatalf("tick %d: manifest %+v", tick, tk)
		}
		if n, named := index.TokenTick(tk.CommitToken); !named || n != tick {
			t.Fatalf("tick %d's token %s names tick %d (%v): a reader of the token would read every tick", tick, tk.CommitToken, n, named)
		}
		for _, tf := range enginetest.Tables(t, tk) {
			if !strings.Contains(tf.Fragments[0].Path, tk.CommitToken) {
				t.Fatalf("tick %d publishes %s under token %s", tick, tf.Fragments[0].Path, tk.CommitToken)
			}
		}
	}
	return s
}

func TestRunResumeMatchesUninterrupted(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), w, 20); err != nil {
		t.Fatal(err)
	}
	live := particles.Fingerprint(w)
	if !strings.Contains(live, "debris") || w.Frame("particle").Len() == 0 {
		t.Fatalf("the simulation did nothing: %s", live)
	}
	w.Close()
	checkPublished(t, b, "w", 20)
	r, err := engine.ResumeWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := particles.Fingerprint(r); got != live {
		t.Fatalf("resumed state %s\nlive state    %s", got, live)
	}
	if r.Epoch() != 2 {
		t.Fatalf("resume took epoch %d", r.Epoch())
	}
	if err := drive(ctxT(t), r, 30); err != nil {
		t.Fatal(err)
	}
	if got, want := particles.Fingerprint(r), reference(t, 30); got != want {
		t.Fatalf("resumed run %s\nuninterrupted %s", got, want)
	}
}

// A writer process killed at each failpoint of the protocol: a fresh
// process resumes, and the world ends exactly where an uninterrupted run
// does, every tick published once, nothing partial visible.
func TestCrashAtEveryFailpoint(t *testing.T) {
	const last = 25
	want := reference(t, last)
	for _, fp := range engine.Failpoints {
		t.Run(fp, func(t *testing.T) {
			dir := t.TempDir()
			hit := 13 // tick 12, the tick that materializes the durable command
			if fp == engine.FailpointAppended {
				hit = 3*12 + 2 // mid-tick: after two of tick 12's three appends
			}
			crashtest.KilledAt(t, fp+"@"+strconv.Itoa(hit), "sim", dir, "w", strconv.Itoa(last))
			resumeAfterCrash(t, dir, fp, quiet, last, want)
		})
	}
}

// resumeAfterCrash resumes world w in the bucket at dir, after a writer
// was killed at failpoint fp, with opts, drives it to tick last, and
// checks it ends where an uninterrupted run does (want), every tick
// published once.
func resumeAfterCrash(t *testing.T, dir, fp string, opts engine.Options, last int64, want string) {
	t.Helper()
	b, _ := local.Open(dir)
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	crashedAt, _ := s.Run("main")
	w, err := engine.ResumeWorld(ctxT(t), b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, last); err != nil {
		t.Fatal(err)
	}
	if got := particles.Fingerprint(w); got != want {
		t.Fatalf("after a crash at %s (head %d): %s\nuninterrupted: %s", fp, crashedAt.Head, got, want)
	}
	checkPublished(t, b, "w", last)
}

// Writer A is fenced by B: A's publish fails and A stops; the rows A
// appended at a tick B already published never surface.
func TestStaleWriter(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	a, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := drive(ctxT(t), a, 5); err != nil {
		t.Fatal(err)
	}
	bw, err := engine.ResumeWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Close()
	if err := drive(ctxT(t), bw, 6); err != nil { // B publishes tick 6
		t.Fatal(err)
	}
	particles.Schedule(a)
	_, err = a.Step(ctxT(t)) // A computes and appends tick 6 too, late
	var se *index.StaleWriterError
	if !errors.As(err, &se) {
		t.Fatalf("the fenced-out writer's step = %v, want StaleWriterError", err)
	}
	if _, err := a.Step(ctxT(t)); !errors.As(err, &se) {
		t.Fatalf("a stale writer stepped again: %v", err)
	}
	s, _, _ := index.Load(ctxT(t), b, "w")
	allow := s.Allowlist("main")
	tk, _ := s.Tick("main", 6)
	// A's fragments for tick 6 are in the bucket, under a token no manifest names.
	var lateTokens int
	for obj, err := range b.List(ctxT(t), index.RunDataPrefix("w", index.DefaultRun), "") {
		if err != nil {
			t.Fatal(err)
		}
		token := strings.Split(obj.Name, "/")[4]
		if token == tk.CommitToken {
			continue
		}
		if allow.Admits(6, token, 1) {
			t.Fatalf("the stale writer's late rows under %s are visible", token)
		}
		if _, published := func() (bool, bool) {
			found := false
			s.Ticks("main", 0, func(x *index.Tick) bool { found = found || x.CommitToken == token; return !found })
			return found, found
		}(); !published {
			lateTokens++
		}
	}
	if lateTokens == 0 {
		t.Fatal("the stale writer appended nothing: the test proves nothing")
	}
}

// Uncertain publishes: "committed but the response was lost" is finalized
// without a second catalog write; "not committed" is recomputed under a
// fresh token. Until reconciled, the world is frozen.
func TestUncertainPublish(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprint("landed=", landed), func(t *testing.T) {
			inner, _ := local.Open(t.TempDir())
			script := faulty.NewScript()
			b := faulty.Wrap(inner, script)
			opts := quiet
			opts.Catalog.SlotTimeout = 200 * time.Millisecond
			w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := drive(ctxT(t), w, 3); err != nil {
				t.Fatal(err)
			}
			unknownOutcome(script, "w", landed)
			particles.Schedule(w)
			_, err = w.Step(ctxT(t))
			if !errors.Is(err, engine.ErrFrozen) {
				t.Fatalf("step with an unknown publish = %v, want ErrFrozen", err)
			}
			if _, err := w.Step(ctxT(t)); !errors.Is(err, engine.ErrFrozen) || w.Tick() != 3 {
				t.Fatalf("a frozen world stepped: %v (tick %d)", err, w.Tick())
			}
			before, _, _ := index.Load(ctxT(t), inner, "w")
			script.SetRules() // the bucket recovers
			r, err := w.Step(ctxT(t))
			after, _, _ := index.Load(ctxT(t), inner, "w")
			if landed {
				if err != nil || r.Tick != 4 || after.Seq != before.Seq {
					t.Fatalf("reconciling a landed publish: %+v, %v; catalog %d → %d (no second write allowed)", r, err, before.Seq, after.Seq)
				}
				if tk, _ := after.Tick("main", 4); tk.CommitToken != r.Token {
					t.Fatal("the finalized receipt names another token")
				}
			} else {
				if !errors.Is(err, engine.ErrNotPublished) || w.Tick() != 3 {
					t.Fatalf("reconciling an absent publish = %v (tick %d), want ErrNotPublished", err, w.Tick())
				}
				r, err := w.Step(ctxT(t)) // recomputed under a fresh token
				if err != nil || r.Tick != 4 {
					t.Fatalf("recompute: %+v %v", r, err)
				}
			}
			if err := drive(ctxT(t), w, 10); err != nil {
				t.Fatal(err)
			}
			if got, want := particles.Fingerprint(w), reference(t, 10); got != want {
				t.Fatalf("after reconciliation: %s\nuninterrupted: %s", got, want)
			}
		})
	}
}

// unknownOutcome makes the next slot create of world fail (after applying
// if landed, else before) and every read of its log after the next one
// (the next tick's due-command probe) fail, so that the outcome stays
// unknown.
func unknownOutcome(script *faulty.Script, world string, landed bool) {
	kind, times := faulty.FailAfter, 1
	if !landed {
		// The catalog answers an unknown create by creating once more
		// (CreateOnce): that one fails too.
		kind, times = faulty.FailBefore, 2
	}
	script.SetRules(
		faulty.Rule{Op: faulty.OpCreate, Prefix: index.LogPrefix(world), Times: times, Fault: faulty.Fault{Kind: kind}},
		faulty.Rule{Op: faulty.OpGet, Prefix: index.LogPrefix(world), Skip: 1, Fault: faulty.Fault{Kind: faulty.FailBefore}},
	)
}

func TestForkAndLineage(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	p, err := engine.CreateWorld(ctxT(t), b, "parent", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), p, 20); err != nil {
		t.Fatal(err)
	}
	p.Close()
	f, err := engine.ForkWorld(ctxT(t), b, "parent", "fork", "main", 10, particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tick() != 10 {
		t.Fatalf("fork starts at tick %d", f.Tick())
	}
	if err := drive(ctxT(t), f, 20); err != nil {
		t.Fatal(err)
	}
	if got, want := particles.Fingerprint(f), reference(t, 20); got != want {
		t.Fatalf("a fork that replays the same steps: %s\nwant %s", got, want)
	}
	// The parent settled its command at tick 12, after the fork point: the
	// fork has its own catalog, so it took the command itself.
	fs, _, _ := index.Load(ctxT(t), b, "fork")
	if c, ok := fs.Command("nudge-12"); !ok || c.Settled != 12 {
		t.Fatalf("the fork's command: %+v", c)
	}
	f.Close()
	// Its lineage is one append: negative ids, epoch 0, naming the parent.
	data, _, err := b.Get(ctxT(t), index.LineagePath("fork"))
	if err != nil {
		t.Fatal(err)
	}
	lin, err := engine.DecodeFragment(engine.LineageTable(), data, func(r engine.StampedRow) bool {
		return r.Entity < 0 && r.WriterEpoch == 0 && r.CommitToken == ""
	})
	if err != nil || lin.Len() != 1 || lin.String("lineage_parent")[0] != "parent" || lin.Int64("lineage_fork_tick")[0] != 10 {
		t.Fatalf("lineage rows: %v %v", lin, err)
	}
	// The fork resumes; with its lineage rows gone it is refused loudly.
	r, err := engine.ResumeWorld(ctxT(t), b, "fork", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	a, _ := b.Stat(ctxT(t), index.LineagePath("fork"))
	b.Delete(ctxT(t), index.LineagePath("fork"), a.Generation)
	if _, err := engine.ResumeWorld(ctxT(t), b, "fork", particles.Tables(), quiet); !errors.Is(err, engine.ErrLineageMissing) {
		t.Fatalf("resume of a fork without lineage = %v, want ErrLineageMissing", err)
	}
}

func TestCleanupOnlyNeverResumes(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.WriterMode = index.ModeCleanupOnly
	w, err := engine.CreateWorld(ctxT(t), b, "evidence", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), w, 2); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := engine.ResumeWorld(ctxT(t), b, "evidence", particles.Tables(), quiet); !errors.Is(err, index.ErrRefused) {
		t.Fatalf("mutable resume of a cleanup_only world = %v, want a refusal", err)
	}
}

func TestUncoordinatedWritesNoManifests(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w, err := engine.Uncoordinated(ctxT(t), "bare", b, particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctxT(t), w, 3); err != nil {
		t.Fatal(err)
	}
	if logs, _ := bucket.Collect(b.List(ctxT(t), "worlds/", "")); len(logs) != 0 {
		t.Fatalf("an uncoordinated world wrote catalog objects: %v", logs)
	}
	frags, _ := bucket.Collect(b.List(ctxT(t), index.RunDataPrefix("bare", index.DefaultRun), ""))
	if len(frags) != 12 {
		t.Fatalf("%d fragments, want 4 ticks × 3 tables", len(frags))
	}
	// Every row of every fragment is stamped with the implicit ""/0.
	rows := 0
	for _, fr := range frags {
		data, _, _ := b.Get(ctxT(t), fr.Name)
		var tb *engine.Table
		for _, x := range particles.Tables() {
			if strings.Contains(fr.Name, "/"+x.ID+"/") {
				tb = x
			}
		}
		if _, err := engine.DecodeFragment(tb, data, func(r engine.StampedRow) bool {
			rows++
			if r.CommitToken != "" || r.WriterEpoch != 0 {
				t.Fatalf("uncoordinated row stamped %q/%d", r.CommitToken, r.WriterEpoch)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if rows == 0 {
		t.Fatal("no rows were checked")
	}
}

func TestDurableCommandTakesEffectOnce(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, 11); err != nil {
		t.Fatal(err)
	}
	before := w.Frame("emitter").Float64("position_x")[0]
	if err := drive(ctxT(t), w, 14); err != nil {
		t.Fatal(err)
	}
	if after := w.Frame("emitter").Float64("position_x")[0]; after != before+5 {
		t.Fatalf("emitter x %v → %v, want moved by 5 exactly once", before, after)
	}
	s, _, _ := index.Load(ctxT(t), b, "w")
	c, ok := s.Command("nudge-12")
	if !ok || c.Settled != 12 {
		t.Fatalf("command %+v", c)
	}
	// A command of a kind nobody materializes blocks the tick loudly.
	if err := w.Enqueue(ctxT(t), index.Command{ID: "x", Due: 15, Kind: "unknown"}); err != nil {
		t.Fatal(err)
	}
	particles.Schedule(w)
	if _, err := w.Step(ctxT(t)); err == nil || !strings.Contains(err.Error(), "no materializer") {
		t.Fatalf("step with an unhandled command = %v", err)
	}
	if w.Tick() != 14 {
		t.Fatal("a tick with a failed command advanced")
	}
}
