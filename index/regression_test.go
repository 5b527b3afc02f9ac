package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
)

// Regression tests, each from a defect an independent review found.

// opsOnce asserts that no operation id appears twice in world's log.
func opsOnce(t *testing.T, b bucket.Bucket, world string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tip, _, err := Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	if tip.Seq == 0 {
		return seen
	}
	for ch, err := range Changes(ctx, b, world, 1, time.Millisecond) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[ch.Entry.Op] {
			t.Fatalf("operation %s is in the log twice (again at %d)", ch.Entry.Op, ch.Seq)
		}
		seen[ch.Entry.Op] = true
		if ch.Seq == tip.Seq {
			break
		}
	}
	return seen
}

// Close while slot k is in flight: batches built ahead are never created,
// so their refusals (judged on a state no slot holds) must not escape.
// It runs in a synctest bubble: synctest.Wait returns once every goroutine
// of the catalog is blocked, so each member is queued and built ahead
// before the next step, on no wall-clock guess.
func TestRegressionCloseAbandonsSpeculativeRefusals(t *testing.T) {
	synctest.Test(t, testRegressionCloseAbandonsSpeculativeRefusals)
}

func testRegressionCloseAbandonsSpeculativeRefusals(t *testing.T) {
	inner := memBucket()
	c0, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	c0.Close()
	stalled := newStallReached(faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Prefix: LogPrefix("w"), Times: 1,
		Fault: faulty.Fault{Kind: faulty.Stall, Stall: 2 * time.Second}}))
	b := faulty.Wrap(inner, stalled)
	c, err := Open(ctxT(t), b, "w", Options{NoCompactor: true, MaxBatch: 1, DeepBatch: 1, Ahead: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	go c.Commit(ctx, publish("r", 0, "x", epoch)) // the head, stalled
	stalled.wait(t, ctx)
	fenceDone := make(chan error, 1)
	go func() { _, err := c.Commit(ctx, fence("new")); fenceDone <- err }() // built ahead
	synctest.Wait()
	pubDone := make(chan error, 1)
	go func() { _, err := c.Commit(ctx, publish("r", 1, "y", epoch)); pubDone <- err }() // refused on the fence's candidate
	synctest.Wait()
	c.Close()
	<-fenceDone
	perr := <-pubDone
	final, _, _ := Load(ctx, inner, "w")
	var se *StaleWriterError
	if errors.As(perr, &se) && final.World.Epoch == epoch {
		t.Fatalf("StaleWriterError returned, but the log's fence is still at epoch %d", epoch)
	}
	if !errors.Is(perr, ErrClosed) {
		t.Fatalf("a member of an abandoned batch got %v, want ErrClosed", perr)
	}
}

// While the log cannot be read, a committer whose slots lose pauses
// between rounds instead of spinning, and never tells a live writer it is
// stale. In a synctest bubble, as above: the old writer's member is queued
// before the new writer's.
func TestRegressionCommitterPausesWhileTheLogIsUnreadable(t *testing.T) {
	synctest.Test(t, testRegressionCommitterPausesWhileTheLogIsUnreadable)
}

func testRegressionCommitterPausesWhileTheLogIsUnreadable(t *testing.T) {
	inner := memBucket()
	c0, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	defer c0.Close()
	script := faulty.NewScript()
	stalled := newStallReached(script)
	// While the log cannot be read, every slot c1 builds again loses at
	// once: creates counts them, and past spinLimit ends the members'
	// context, so that a committer spinning without a pause (which in the
	// bubble's time never lets the 5 s below pass) fails the test rather
	// than hangs it.
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	const spinLimit = 1000
	creates := &countCreates{Injector: stalled, limit: spinLimit, over: cancel}
	c1, err := Open(ctxT(t), faulty.Wrap(inner, creates), "w", Options{NoCompactor: true, SlotTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	res, err := c0.Commit(ctxT(t), fence("new")) // c1 has not seen it
	if err != nil {
		t.Fatal(err)
	}
	script.SetRules(
		faulty.Rule{Op: faulty.OpCreate, Prefix: LogPrefix("w"), Times: 1, Fault: faulty.Fault{Kind: faulty.Stall, Stall: 200 * time.Millisecond}},
		faulty.Rule{Op: faulty.OpGet, Prefix: LogPrefix("w"), Fault: faulty.Fault{Kind: faulty.FailBefore}},
	)
	// The log cannot be read back, so the members wait for the tip until
	// their context ends: 5 s, well past the head's stall and SlotTimeout,
	// by when a member refused on the unconfirmed base would have been
	// answered (the test waited out ctxT's two minutes).
	go c1.Commit(ctx, publish("r", 0, "x", epoch)) // the stalled head; it loses
	stalled.wait(t, ctx)
	errs := make(chan error, 2)
	go func() { _, err := c1.Commit(ctx, publish("r", 5, "old", epoch)); errs <- err }()
	synctest.Wait()
	go func() { _, err := c1.Commit(ctx, publish("r", 6, "new-writer", res.Epoch)); errs <- err }()
	for range 2 {
		err := <-errs
		var se *StaleWriterError
		if errors.As(err, &se) && se.Held == res.Epoch {
			t.Fatalf("the live writer (epoch %d) was told it is stale: %v", res.Epoch, err)
		}
	}
	if n := creates.n.Load(); n >= spinLimit {
		t.Fatalf("%d slot creates in the 5 s the log could not be read: the committer spins", n)
	}
}

// An ambiguous head must not answer the members it refused, nor those
// refused in the batches built ahead on its candidate: they were all
// judged on a base never confirmed as the tip, and are judged again on
// the tip. Two cases, each in a synctest bubble (synctest.Wait returns
// once every member is queued and built ahead):
//
//   - refused in the ambiguous slot: b and c are built ahead on a's
//     candidate, where c (the new writer's epoch) is refused as stale; a
//     lands, another writer's fence lands, and b and c's slot fails with
//     its outcome unknown (the log cannot be read back). b gets the
//     unknown outcome; c must be judged again on the tip, where its epoch
//     is the fence's.
//   - refused behind the ambiguous slot: b and c are built ahead on a's
//     candidate as above; another writer's fence takes the slot a is
//     after, and a's create fails with its outcome unknown (the log cannot
//     be read back). a gets the
//     unknown outcome; c, refused in the batch built ahead on a, must be
//     judged again on the tip and commit, and b with it (refused there
//     as stale).
func TestRegressionAmbiguousHeadRequeuesRefusals(t *testing.T) {
	t.Run("refused in the ambiguous slot", func(t *testing.T) {
		synctest.Test(t, testAmbiguousHeadRequeuesItsRefusals)
	})
	t.Run("refused behind the ambiguous slot", func(t *testing.T) {
		synctest.Test(t, testAmbiguousHeadRequeuesRefusalsBuiltAhead)
	})
}

// ambiguousHead is a catalog c1 of world w beside c0, another writer's
// catalog of the same world (epoch e0), whose slot creates are held as h
// says, with commit to send c1 a member.
type ambiguousHead struct {
	c0, c1 *Catalog
	e0     int64
	h      *heldCreates
	commit func(Entry) <-chan error
}

func newAmbiguousHead(t *testing.T, h *heldCreates) *ambiguousHead {
	inner := memBucket()
	c0, e0 := newWorld(t, inner, "w", Options{NoCompactor: true})
	c1, err := Open(ctxT(t), faulty.Wrap(inner, h), "w", Options{NoCompactor: true, MaxBatch: 2, Ahead: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close() })
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	t.Cleanup(cancel)
	return &ambiguousHead{c0: c0, c1: c1, e0: e0, h: h, commit: func(e Entry) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := c1.Commit(ctx, e); done <- err }()
		return done
	}}
}

func testAmbiguousHeadRequeuesItsRefusals(t *testing.T) {
	h := &heldCreates{release: []chan struct{}{make(chan struct{}), make(chan struct{})}, fail: 1, arrived: make(chan struct{}, 2)}
	w := newAmbiguousHead(t, h)
	a := w.commit(publish("r", 0, "a", w.e0))
	<-h.arrived // a's slot is being created
	b, c := w.commit(publish("r", 1, "b", w.e0)), w.commit(publish("r", 2, "c", w.e0+1))
	synctest.Wait() // b and c are built ahead, on a's candidate
	close(h.release[0])
	if err := <-a; err != nil {
		t.Fatalf("a: %v", err)
	}
	<-h.arrived // b and c's slot is being created
	if r, err := w.c0.Commit(ctxT(t), fence("new")); err != nil || r.Epoch != w.e0+1 {
		t.Fatalf("the new writer's fence: %+v, %v", r, err)
	}
	h.failReads.Store(true)
	close(h.release[1])
	if err := <-b; !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("b, in the slot whose outcome is unknown, got %v", err)
	}
	h.failReads.Store(false)
	if err := <-c; err != nil {
		t.Fatalf("c, refused on a base never confirmed as the tip, got %v; on the tip its epoch is the fence's", err)
	}
	if s := w.c1.Stats(); s.Ambiguous != 1 {
		t.Fatalf("%d ambiguous slots, want 1: the test did not make the head's outcome unknown", s.Ambiguous)
	}
}

func testAmbiguousHeadRequeuesRefusalsBuiltAhead(t *testing.T) {
	h := &heldCreates{release: []chan struct{}{make(chan struct{})}, fail: 0, arrived: make(chan struct{}, 1)}
	w := newAmbiguousHead(t, h)
	a := w.commit(publish("r", 0, "a", w.e0))
	<-h.arrived // a's slot is being created
	b, c := w.commit(publish("r", 1, "b", w.e0)), w.commit(publish("r", 2, "c", w.e0+1))
	synctest.Wait() // b and c are built ahead on a's candidate, c refused there
	if r, err := w.c0.Commit(ctxT(t), fence("new")); err != nil || r.Epoch != w.e0+1 {
		t.Fatalf("the new writer's fence (in the slot a's create is after): %+v, %v", r, err)
	}
	h.failReads.Store(true)
	close(h.release[0]) // a's create fails, and cannot be read back: its outcome is unknown
	if err := <-a; !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("a, in the slot whose outcome is unknown, got %v", err)
	}
	h.failReads.Store(false)
	if err := <-c; err != nil {
		t.Fatalf("c, refused in a batch built ahead on a head whose outcome is unknown, got %v; on the tip its epoch is the fence's", err)
	}
	var se *StaleWriterError
	if err := <-b; !errors.As(err, &se) || se.Current != w.e0+1 {
		t.Fatalf("b, judged again on the tip (the fence's epoch %d), got %v", w.e0+1, err)
	}
	if s := w.c1.Stats(); s.Ambiguous != 1 {
		t.Fatalf("%d ambiguous slots, want 1: the test did not make the head's outcome unknown", s.Ambiguous)
	}
}

// heldCreates holds the first creates of log slots until released (the
// one numbered fail then fails without taking effect), and fails every
// other read of the log while failReads is set.
type heldCreates struct {
	n         atomic.Int64
	release   []chan struct{}
	fail      int
	arrived   chan struct{}
	failReads atomic.Bool
}

func (h *heldCreates) Fault(op faulty.Op, name string) faulty.Fault {
	if !strings.HasPrefix(name, LogPrefix("w")) {
		return faulty.Fault{}
	}
	if op != faulty.OpCreate {
		if h.failReads.Load() {
			return faulty.Fault{Kind: faulty.FailBefore}
		}
		return faulty.Fault{}
	}
	i := int(h.n.Add(1) - 1)
	if i >= len(h.release) {
		return faulty.Fault{}
	}
	h.arrived <- struct{}{}
	<-h.release[i]
	if i == h.fail {
		return faulty.Fault{Kind: faulty.FailBefore}
	}
	return faulty.Fault{}
}

// countCreates counts the creates of log slots and calls over once they
// reach limit.
type countCreates struct {
	faulty.Injector
	n     atomic.Int64
	limit int64
	over  func()
}

func (c *countCreates) Fault(op faulty.Op, name string) faulty.Fault {
	if op == faulty.OpCreate && strings.HasPrefix(name, LogPrefix("w")) && c.n.Add(1) == c.limit {
		c.over()
	}
	return c.Injector.Fault(op, name)
}

// A reader's slow probe must not hold up a commit whose slot exists.
func TestRegressionReaderIODoesNotHoldCommits(t *testing.T) {
	inner := memBucket()
	c0, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	c0.Close()
	stalled := newStallReached(faulty.NewScript(faulty.Rule{Op: faulty.OpGet, Prefix: LogPrefix("w"), Skip: 1, Times: 1,
		Fault: faulty.Fault{Kind: faulty.Stall, Stall: 10 * time.Second}}))
	b := faulty.Wrap(inner, stalled)
	c, err := Open(ctxT(t), b, "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Exact(context.Background()) // stalls on its probe
	stalled.wait(t, ctxT(t))
	start := time.Now()
	if _, err := c.Commit(ctxT(t), publish("r", 0, "x", epoch)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a commit took %v behind a reader's stalled probe", d)
	}
}

// The committed state must not share memory with the caller's entry.
func TestRegressionStateOwnsItsEntries(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	e := publish("r", 0, "tok", epoch)
	if _, err := c.Commit(ctxT(t), e); err != nil {
		t.Fatal(err)
	}
	e.TickPublish.Tables[0].Fragments[0].Path = "caller-reused-buffer"
	tk, _ := c.Tip().Tick("r", 0)
	if tablesOf(t, tk)[0].Fragments[0].Path != FragmentPath("w", "r", "position", "tok", 0) {
		t.Fatalf("the live state follows the caller's buffer: %s", tablesOf(t, tk)[0].Fragments[0].Path)
	}
}

// A world with many tables per tick must still open after a checkpoint.
func TestRegressionLargeShardStillLoads(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	var tables []TableFragments
	for i := range 150 {
		tables = append(tables, TableFragments{Table: fmt.Sprintf("Archetype%03d", i), Fragments: []Fragment{{
			Path: fmt.Sprintf("data/w/main/archetype%03d/0123456789abcdef0123456789abcdef/part-%d.parquet", i, i), Rows: 1, Bytes: 1, Digest: fmt.Sprintf("%064x", i)}}})
	}
	const perCommit = 32
	for s := 0; s < tickShardSpan; s += perCommit {
		var es []Entry
		for i := s; i < s+perCommit; i++ {
			es = append(es, Entry{Kind: KindTickPublish, TickPublish: &TickPublish{Run: "main", Tick: int64(i), CommitToken: fmt.Sprintf("tok-%08d", i), WriterEpoch: epoch, Tables: tables}})
		}
		if _, err := c.CommitAll(ctxT(t), es...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, info, err := Load(ctxT(t), b, "w"); err != nil || info.CheckpointSeq == 0 {
		t.Fatalf("the world no longer opens: %v (%+v)", err, info)
	}
}

// Incremental checkpoints are byte-identical to full ones.
func TestRegressionIncrementalEqualsFull(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 5000)
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	fill(t, c, epoch, 5000, 40)
	seq, err := c.Checkpoint(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	other := mem.New(mem.Options{})
	name, _, err := WriteCheckpoint(ctxT(t), other, c.Tip(), nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _, _ := b.Get(ctxT(t), CheckpointName("w", seq))
	y, _, _ := other.Get(ctxT(t), name)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatal("an incremental checkpoint differs from a full one of the same state")
	}
}

// A well-formed checkpoint whose contents were changed fails closed.
func TestRegressionTamperedCheckpointFailsClosed(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 3)
	if _, err := c.Commit(ctxT(t), fence("second")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	name, _, _ := newestCheckpoint(ctxT(t), b, "w")
	data, a, _ := b.Get(ctxT(t), name)
	forged := bytes.Replace(data, []byte(`"Epoch":2`), []byte(`"Epoch":1`), 1)
	if bytes.Equal(forged, data) {
		t.Fatalf("no epoch in %s", data)
	}
	b.Delete(ctxT(t), name, a.Generation)
	b.Create(ctxT(t), name, forged)
	if _, _, err := Load(ctxT(t), b, "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a tampered checkpoint = %v, want ErrCorrupt", err)
	}
}

// A refused CreateWorld must not leave its marker behind.
func TestRegressionRefusedCreateKeepsTheName(t *testing.T) {
	b := memBucket()
	if _, _, err := CreateWorld(ctxT(t), b, "f", WorldCreate{Parent: "p"}, "h", Options{NoCompactor: true}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a fork without its fork run = %v, want ErrRefused", err)
	}
	c, _, err := CreateWorld(ctxT(t), b, "f", WorldCreate{Parent: "p", ForkRun: "main"}, "h", Options{NoCompactor: true})
	if err != nil {
		t.Fatalf("the corrected CreateWorld = %v", err)
	}
	c.Close()
}

// A feed at the tip after a full slot, whose early slots were collected,
// delivers the next commit.
func TestRegressionFeedAtTipAfterFullSlot(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 20)
	var es []Entry
	for i := range MaxSlotEntries {
		es = append(es, publish("r", int64(100+i), fmt.Sprint("b", i), epoch))
	}
	if _, err := c.CommitAll(ctxT(t), es...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := CollectSlots(ctxT(t), b, "w", 0, time.Now()); err != nil || n == 0 {
		t.Fatalf("CollectSlots = %d, %v", n, err)
	}
	tip := c.Tip()
	at := newTipReached(c.b, c.world)
	commitAtTip(t.Context(), at, c, publish("r", 1_000_000, "after", epoch)) // past the full slot's ticks
	got, err := collectChangesOf(t, at, c.world, tip.Seq+1, 1)
	if err != nil || len(got) != 1 || got[0].Seq != tip.Seq+1 {
		t.Fatalf("feed from the tip: %v, %v", got, err)
	}
	if err := (&Options{DeepBatch: MaxSlotEntries + 1, MaxBatch: 16}).Validate(); err == nil {
		t.Fatal("a deep batch over MaxSlotEntries was accepted")
	}
}

// With creates that land but whose answers are lost and reads that fail
// for a while, the committer's own unknown-outcome path runs: no operation
// is in the log twice and every acknowledged one is in it.
func TestRegressionAmbiguousSlotsNeverDuplicate(t *testing.T) {
	inner := memBucket()
	_, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	script := faulty.NewScript()
	c, err := Open(ctxT(t), faulty.Wrap(inner, script), "w", Options{NoCompactor: true, SlotTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	script.SetRules(
		faulty.Rule{Op: faulty.OpCreate, Prefix: LogPrefix("w"), Times: 4, Fault: faulty.Fault{Kind: faulty.FailAfter}},
		faulty.Rule{Op: faulty.OpGet, Prefix: LogPrefix("w"), Times: 30, Fault: faulty.Fault{Kind: faulty.FailBefore}},
	)
	acked := map[int64]bool{}
	for i := range 12 {
		_, err := c.Commit(ctxT(t), publish("r", int64(i), fmt.Sprint("t", i), epoch))
		if err == nil {
			acked[int64(i)] = true
		} else if !errors.Is(err, bucket.ErrAmbiguous) && !errors.Is(err, bucket.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	if c.Stats().Ambiguous == 0 {
		t.Fatal("no slot create stayed ambiguous: the test did not reach the path it is for")
	}
	opsOnce(t, inner, "w")
	final, _, _ := Load(ctxT(t), inner, "w")
	for tick := range acked {
		if _, ok := final.Tick("r", tick); !ok {
			t.Fatalf("acknowledged tick %d is not in the log", tick)
		}
	}
}

// Close does not wait out the committer's pause between rounds while its
// log cannot be read (up to maxUnreadWait). In a synctest bubble: the
// committer has backed off to full pauses when Close is called between
// two of them, so any time the bubble's clock moves during Close is the
// pause it waited out.
func TestCloseCutsTheCommittersWaitShort(t *testing.T) {
	synctest.Test(t, testCloseCutsTheCommittersWaitShort)
}

func testCloseCutsTheCommittersWaitShort(t *testing.T) {
	inner := memBucket()
	c0, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	defer c0.Close()
	script := faulty.NewScript()
	c1, err := Open(ctxT(t), faulty.Wrap(inner, script), "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Commit(ctxT(t), fence("new")); err != nil { // c1 has not seen it
		t.Fatal(err)
	}
	script.SetRules(faulty.Rule{Op: faulty.OpGet, Prefix: LogPrefix("w"), Fault: faulty.Fault{Kind: faulty.FailBefore}})
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c1.Commit(ctx, publish("r", 0, "x", epoch)); done <- err }()
	time.Sleep(time.Second + maxUnreadWait/2) // rounds lost, pauses at their longest
	start := time.Now()
	c1.Close()
	if waited := time.Since(start); waited > 0 {
		t.Errorf("Close waited %v for the committer's pause to end", waited)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("the member got %v, want ErrClosed", err)
	}
}
