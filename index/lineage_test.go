package index

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/bucket/buckettest"
)

func TestLineageSegments(t *testing.T) {
	b := memBucket()
	ctx := ctxT(t)
	parent, pe := newWorld(t, b, "parent", Options{NoCompactor: true})
	for tick := range int64(10) {
		if _, err := parent.Commit(ctx, publish("main", tick, "p"+string(rune('0'+tick)), pe)); err != nil {
			t.Fatal(err)
		}
	}
	fork, fe, err := CreateWorld(ctx, b, "fork", WorldCreate{Parent: "parent", ForkRun: "main", ForkTick: 4}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	if _, err := fork.Commit(ctx, publish("main", 5, "f5", fe)); err != nil {
		t.Fatal(err)
	}
	segs, err := Lineage(ctx, LoadFrom(b), "fork", "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].World != "parent" || segs[0].UpTo != 4 || segs[1].World != "fork" {
		t.Fatalf("segments %+v", segs)
	}
	if !segs[0].Admits(4, "p4", 1) || segs[0].Admits(5, "p5", 1) {
		t.Fatal("the parent segment must end at the fork point")
	}
	if !segs[1].Admits(5, "f5", 1) || segs[1].Admits(5, "p5", 1) {
		t.Fatal("the fork's own segment resolves against its own manifests")
	}
	var ticks []int64
	segs[0].Ticks(func(tick int64, _ string) bool { ticks = append(ticks, tick); return true })
	if len(ticks) != 5 {
		t.Fatalf("parent segment lists ticks %v, want 0..4", ticks)
	}
	// A fork whose parent's catalog is gone is corrupt, loudly.
	orphan, _, err := CreateWorld(ctx, b, "orphan", WorldCreate{Parent: "ghost", ForkRun: "main", ForkTick: 1}, "o", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	orphan.Close()
	if _, err := Lineage(ctx, LoadFrom(b), "orphan", "main"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lineage of a fork without its parent = %v, want ErrCorrupt", err)
	}
}

// Path-exact reads probe the next slot; listing reads serve a snapshot
// confirmed within the freshness bound, and see another writer's commit
// once it has passed.
//
// The bound is waited for on synctest's clock: the test takes no wall time
// for it, and the catalog's own goroutines run in the same bubble.
func TestExactAndFreshSnapshots(t *testing.T) {
	synctest.Test(t, testExactAndFreshSnapshots)
}

func testExactAndFreshSnapshots(t *testing.T) {
	inner := memBucket()
	writer, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	cb := &buckettest.Counting{Bucket: inner}
	reader, err := Open(ctxT(t), cb, "w", Options{NoCompactor: true, Freshness: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx := ctxT(t)
	if _, err := reader.Exact(ctx); err != nil { // confirmed now
		t.Fatal(err)
	}
	if _, err := writer.Commit(ctx, publish("r", 0, "t0", epoch)); err != nil {
		t.Fatal(err)
	}
	before := cb.Gets.Load()
	s, _ := reader.Fresh(ctx)
	if _, ok := s.Tick("r", 0); ok || cb.Gets.Load() != before {
		t.Fatal("a fresh read within the bound went to the bucket")
	}
	s, _ = reader.Exact(ctx)
	if _, ok := s.Tick("r", 0); !ok || cb.Gets.Load() == before {
		t.Fatal("an exact read missed a committed slot")
	}
	if _, err := writer.Commit(ctx, publish("r", 1, "t1", epoch)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the bound, in the bubble's time
	if s, _ = reader.Fresh(ctx); !func() bool { _, ok := s.Tick("r", 1); return ok }() {
		t.Fatal("a fresh read past the bound did not see the new slot")
	}
}

// A commit's slot is the same size whatever the size of the world.
func TestCommitCostIndependentOfWorldSize(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	ctx := ctxT(t)
	slotSize := func(tick int64) int64 {
		if _, err := c.Commit(ctx, publish("r", tick, "tok-fixed-len", epoch)); err != nil {
			t.Fatal(err)
		}
		// The slot's JSON, not its zstd bytes: at the fastest level those
		// vary by a few bytes with the random hash it names.
		data, _, err := b.Get(ctx, SlotName("w", c.Tip().Seq))
		if err != nil {
			t.Fatal(err)
		}
		canonical, err := decoder.DecodeAll(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(canonical))
	}
	small := slotSize(1_000_001)
	fill(t, c, epoch, 0, 3000)
	large := slotSize(1_000_002)
	if large > small+8 { // the same entry, a few bytes of sequence digits apart
		t.Fatalf("a publish costs %d bytes in a small world and %d in a large one", small, large)
	}
}
