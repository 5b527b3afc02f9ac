package index

import (
	"errors"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// Old slots go behind a checkpoint written at their end; the checkpoint
// the log then starts from is kept by checkpoint collection however old,
// so the check folds every remaining slot; a feed before it resyncs.
func TestCollectSlotsBehindACheckpoint(t *testing.T) {
	b := memBucket()
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 30)
	plan := collectLog(t, b)
	if !plan.Write {
		t.Fatalf("plan %+v writes no checkpoint", plan)
	}
	// Two newer checkpoints: the base is neither young nor among them.
	fill(t, c, epoch, 30, 5)
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, c, epoch, 35, 5)
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := CollectCheckpoints(ctx, b, "w", 1, 0, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("collected %d checkpoints (%v), want the one between the base and the newest", n, err)
	}
	if _, err := b.Stat(ctx, CheckpointName("w", plan.Base)); err != nil {
		t.Fatalf("the checkpoint the log starts from was collected: %v", err)
	}
	chk, err := VerifyCatalog(ctx, b, "w", nil)
	logSlots, _ := bucket.Collect(b.List(ctx, LogPrefix("w"), ""))
	if err != nil || len(chk.Problems) != 0 || chk.FirstSlot != plan.Base+1 || chk.Slots != uint64(len(logSlots)) {
		t.Fatalf("check: %v %+v (%d slots in the log)", err, chk, len(logSlots))
	}
	if s, _, err := Load(ctx, b, "w"); err != nil || s.Seq != c.Tip().Seq {
		t.Fatalf("cold start: %v", err)
	}
	for _, err := range Changes(ctx, b, "w", plan.Base, time.Millisecond) {
		if !errors.Is(err, ErrResync) {
			t.Fatalf("a feed from a collected sequence: %v", err)
		}
		break
	}
}

// collectLog collects the slots of world w's log behind a checkpoint, as
// gc does an hour on (PlanRebase, Rebase, the slots deleted), and returns
// the plan it carried out.
func collectLog(t *testing.T, b bucket.Bucket) RebasePlan {
	t.Helper()
	ctx := ctxT(t)
	plan, err := PlanRebase(ctx, b, "w", time.Now().Add(time.Hour))
	if err != nil || len(plan.Slots) == 0 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	if err := Rebase(ctx, b, "w", plan); err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Slots {
		if err := bucket.DeleteOnce(ctx, b, s.Name, s.Generation); err != nil {
			t.Fatal(err)
		}
	}
	return plan
}
