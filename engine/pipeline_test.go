package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// fullGate is a fault injector that holds every create of a log slot while
// the writer has fewer than depth ticks computed and unpublished (unless it
// has computed its last tick), so that each slot is created with the
// pipeline full, whatever the speed of the disk. The world's hooks count
// the ticks; next, if set, decides the faults after the gate opens.
type fullGate struct {
	depth, last int64
	world       string
	next        faulty.Injector

	mu   sync.Mutex
	cond *sync.Cond
	// INVARIANT: computed >= published; both are ticks.
	computed, published int64
	armed               bool
	// released: the ticks computed and unpublished when each armed slot
	// create went ahead.
	released []int64
}

func newFullGate(world string, depth, last int64, next faulty.Injector) *fullGate {
	g := &fullGate{depth: depth, last: last, world: world, next: next, armed: true}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// watch counts w's ticks from its current state (nothing in flight).
func (g *fullGate) watch(w *engine.World, out *os.File) {
	g.mu.Lock()
	g.computed, g.published = w.Tick(), w.Tick()
	g.mu.Unlock()
	w.OnPreTick(func(_ context.Context, tick int64) error {
		if out != nil {
			fmt.Fprintf(out, "inflight %d\n", w.InFlight())
		}
		g.mu.Lock()
		g.computed = tick
		g.cond.Broadcast()
		g.mu.Unlock()
		return nil
	})
	w.OnPostTick(func(_ context.Context, tick int64) error {
		g.mu.Lock()
		g.published = tick
		g.cond.Broadcast()
		g.mu.Unlock()
		return nil
	})
}

// firstRelease is how many ticks were computed and unpublished when the
// first armed slot create went ahead (-1: none did).
func (g *fullGate) firstRelease() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.released) == 0 {
		return -1
	}
	return g.released[0]
}

func (g *fullGate) arm(on bool) {
	g.mu.Lock()
	g.armed = on
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *fullGate) Fault(op faulty.Op, name string) faulty.Fault {
	if op == faulty.OpCreate && strings.HasPrefix(name, index.LogPrefix(g.world)) {
		g.mu.Lock()
		for g.armed && g.computed-g.published >= 1 && g.computed-g.published < g.depth && g.computed < g.last {
			g.cond.Wait()
		}
		if g.armed {
			g.released = append(g.released, g.computed-g.published)
		}
		g.mu.Unlock()
	}
	if g.next == nil {
		return faulty.Fault{}
	}
	return g.next.Fault(op, name)
}

// maxInFlight is the most ticks in flight a pipelined simChild printed.
func maxInFlight(out []byte) int {
	most := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "inflight "); ok {
			v, _ := strconv.Atoi(n)
			most = max(most, v)
		}
	}
	return most
}

// A pipelined writer (depth 4, every slot created with the pipeline full)
// killed at each failpoint of the protocol: a fresh pipelined writer
// resumes, and the world ends exactly where an uninterrupted run does,
// every tick published once, nothing partial or out of order visible.
func TestPipelinedCrashAtEveryFailpoint(t *testing.T) {
	const last, depth = 25, 4
	want := reference(t, last)
	for _, fp := range engine.Failpoints {
		t.Run(fp, func(t *testing.T) {
			dir := t.TempDir()
			hit := 13 // tick 12, the tick that materializes the durable command
			if fp == engine.FailpointAppended {
				hit = 3*12 + 2 // among tick 12's appends (the ticks in flight append in parallel)
			}
			out := crashtest.KilledAt(t, fp+"@"+strconv.Itoa(hit), "sim", dir, "w", strconv.Itoa(last), strconv.Itoa(depth))
			if n := maxInFlight(out); n != depth-1 {
				t.Fatalf("before the kill, at most %d ticks were in flight while one computed; want the pipeline full (%d)", n, depth-1)
			}
			opts := quiet
			opts.Depth = depth
			resumeAfterCrash(t, dir, fp, opts, last, want)
		})
	}
}

// dataObjects counts the fragments in world's data.
func dataObjects(t *testing.T, b bucket.Bucket, world string) int {
	t.Helper()
	objs, err := bucket.Collect(b.List(ctxT(t), index.RunDataPrefix(world, index.DefaultRun), ""))
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// Two writers with deep pipelines race: B resumes (fencing A) while A has
// ticks in flight, and both keep stepping. A learns it is stale and stops
// (it appends nothing more); no tick of A lands after B's fence; every tick
// is published exactly once; and B's world is the uninterrupted run's.
func TestRacingPipelinedWriters(t *testing.T) {
	const last, depth = 60, 8
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.Depth = depth
	a, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := drive(ctx, a, 5); err != nil {
		t.Fatal(err)
	}
	// A stops at its receipt of tick 20, its pipeline full behind it,
	// until B holds the fence.
	at20, resumed := make(chan struct{}), make(chan struct{})
	a.OnPostTick(func(_ context.Context, tick int64) error {
		if tick == 20 {
			close(at20)
			<-resumed
		}
		return nil
	})
	errA := make(chan error, 1)
	go func() { errA <- drive(ctx, a, last) }()
	<-at20
	bw, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), opts)
	close(resumed)
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Close()
	if err := drive(ctx, bw, last); err != nil {
		t.Fatal(err)
	}
	var se *index.StaleWriterError
	if err := <-errA; !errors.As(err, &se) {
		t.Fatalf("the fenced-out writer's run = %v, want StaleWriterError", err)
	}
	// The loser stops: it computes and appends nothing more.
	before := dataObjects(t, b, "w")
	particles.Schedule(a)
	if _, err := a.Submit(ctx); !errors.As(err, &se) {
		t.Fatalf("a stale writer submitted again: %v", err)
	}
	if after := dataObjects(t, b, "w"); after != before {
		t.Fatalf("the stopped writer appended %d fragments", after-before)
	}
	s := checkPublished(t, b, "w", last)
	// A's ticks are a prefix, B's the rest: nothing of A landed after B's
	// fence.
	seenB := false
	for tick := range int64(last + 1) {
		tk, _ := s.Tick("main", tick)
		switch {
		case tk.WriterEpoch == bw.Epoch():
			seenB = true
		case seenB:
			t.Fatalf("tick %d of the stale writer (epoch %d) was published after the new writer's ticks", tick, tk.WriterEpoch)
		}
	}
	if !seenB {
		t.Fatal("the new writer published nothing: the race proves nothing")
	}
	if got, want := particles.Fingerprint(bw), reference(t, last); got != want {
		t.Fatalf("after the race: %s\nuninterrupted: %s", got, want)
	}
}

// An unknown publish outcome for a slot created with the pipeline full
// (depth 4): the world freezes, the ticks behind it are discarded and
// nothing later publishes, even once the bucket would take their slots;
// mutations are refused. When the bucket recovers, reconciliation decides:
// landed ticks are finalized without a second catalog write, absent ones
// released. A resumed writer then ends where an uninterrupted run does.
func TestUnknownOutcomeInFullPipeline(t *testing.T) {
	const depth = 4
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprint("landed=", landed), func(t *testing.T) {
			ctx := ctxT(t)
			inner, _ := local.Open(t.TempDir())
			script := faulty.NewScript()
			gate := newFullGate("w", depth, 1<<62, script)
			gate.arm(false)
			b := faulty.Wrap(inner, gate)
			opts := quiet
			opts.Depth = depth
			w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := drive(ctx, w, 5); err != nil {
				t.Fatal(err)
			}
			gate.watch(w, nil)
			gate.arm(true)
			// The first slot after tick 5 has an unknown outcome; the slots
			// after it would be taken.
			unknownOutcome(script, "w", landed)
			for range 4 * depth {
				particles.Schedule(w)
				if _, err = w.Submit(ctx); err != nil {
					break
				}
			}
			if !errors.Is(err, engine.ErrFrozen) {
				t.Fatalf("submitting through an unknown publish = %v, want ErrFrozen", err)
			}
			if n := gate.firstRelease(); n != depth {
				t.Fatalf("the slot with the unknown outcome was created with %d ticks in flight, want the pipeline full (%d)", n, depth)
			}
			if w.Published() != 5 || w.Tick() != 5 || w.InFlight() != 0 {
				t.Fatalf("frozen world: published %d, tick %d, %d in flight; want 5, 5, 0", w.Published(), w.Tick(), w.InFlight())
			}
			frozen := dataObjects(t, inner, "w")
			if _, err := w.Submit(ctx); !errors.Is(err, engine.ErrFrozen) {
				t.Fatalf("a frozen world submitted: %v", err)
			}
			if _, err := w.Spawn("emitter", engine.Values{}); !errors.Is(err, engine.ErrFrozen) {
				t.Fatalf("a frozen world took a spawn: %v", err)
			}
			if n := dataObjects(t, inner, "w"); n != frozen {
				t.Fatalf("a frozen world appended %d fragments", n-frozen)
			}
			before, _, err := index.Load(ctx, inner, "w")
			if err != nil {
				t.Fatal(err)
			}
			// The slot with the unknown outcome holds ticks 6.. (those that
			// were ready together) if it landed; no later slot exists.
			run, _ := before.Run("main")
			if landed != (run.Head > 5) || run.Published != run.Head+1 {
				t.Fatalf("after the unknown outcome (landed %v) the catalog shows %+v", landed, run)
			}
			for tick := run.Head + 1; tick <= run.Head+4*depth; tick++ {
				if _, ok := before.Tick("main", tick); ok {
					t.Fatalf("tick %d published past the unknown outcome (head %d)", tick, run.Head)
				}
			}
			// The bucket recovers.
			gate.arm(false)
			script.SetRules()
			rs, err := w.Submit(ctx)
			after, _, _ := index.Load(ctx, inner, "w")
			if landed {
				if err != nil || len(rs) == 0 || after.Seq != before.Seq || rs[len(rs)-1].Tick != run.Head || w.Tick() != run.Head {
					t.Fatalf("reconciling a landed publish: %d receipts, %v; catalog %d → %d (no second write allowed); tick %d, head %d",
						len(rs), err, before.Seq, after.Seq, w.Tick(), run.Head)
				}
				for _, r := range rs {
					if tk, _ := after.Tick("main", r.Tick); tk.CommitToken != r.Token {
						t.Fatalf("the finalized receipt of tick %d names another token", r.Tick)
					}
				}
			} else if !errors.Is(err, engine.ErrNotPublished) || w.Tick() != 5 || after.Seq != before.Seq {
				t.Fatalf("reconciling an absent publish = %v (tick %d), want ErrNotPublished", err, w.Tick())
			}
			w.Close()
			r, err := engine.ResumeWorld(ctx, inner, "w", particles.Tables(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := drive(ctx, r, 20); err != nil {
				t.Fatal(err)
			}
			if got, want := particles.Fingerprint(r), reference(t, 20); got != want {
				t.Fatalf("after reconciliation and resume: %s\nuninterrupted: %s", got, want)
			}
			checkPublished(t, inner, "w", 20)
		})
	}
}

// Depth 1 is the serial writer: a tick is computed only once the tick
// before it is published, whether the driver calls Step or Submit.
func TestDepthOneIsSerial(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.Depth = 1
	w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var overlapped []int64
	w.OnPreTick(func(_ context.Context, tick int64) error {
		if w.InFlight() != 0 || w.Published() != tick-1 {
			overlapped = append(overlapped, tick)
		}
		return nil
	})
	if err := drive(ctxT(t), w, 10); err != nil {
		t.Fatal(err)
	}
	if len(overlapped) > 0 {
		t.Fatalf("at depth 1, ticks %v were computed while another was in flight", overlapped)
	}
	if got, want := particles.Fingerprint(w), reference(t, 10); got != want {
		t.Fatalf("depth 1: %s\nuninterrupted: %s", got, want)
	}
}
