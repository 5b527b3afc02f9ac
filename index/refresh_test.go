package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/worldfs/worldfs/bucket"
)

// slotReads counts the log slots read through it.
type slotReads struct {
	bucket.Bucket
	slots atomic.Int64
}

func (s *slotReads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if strings.Contains(name, "/log/") {
		s.slots.Add(1)
	}
	return s.Bucket.Get(ctx, name)
}

// A partial state whose log has since gone on for two checkpoint
// intervals (and been checkpointed) is not followed slot by slot through
// the whole tail: the refresh stops within an interval (ErrReload), and a
// load from the newer checkpoint holds the tail more compactly.
func TestPartialRefreshOfALongTailReloads(t *testing.T) {
	ctx := ctxT(t)
	b := &slotReads{Bucket: memBucket()}
	spanWorld(t, b, 100)
	p, c := loadThenWrite(t, b, Want{Run: "r", From: 5, To: 5})
	epoch := c.Tip().World.Epoch
	const behind = 2 * defaultCheckpointSlots
	for i := range int64(behind) {
		commitEach(t, c, publish("s", 100+i, fmt.Sprint("t", 100+i), epoch))
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b.slots.Store(0)
	err := p.Refresh(ctx)
	if read := b.slots.Load(); !errors.Is(err, ErrReload) || read > defaultCheckpointSlots+readAheadSlots {
		t.Fatalf("refresh of a state %d slots behind the tip (a newer checkpoint holds them): %v after reading %d slots; want ErrReload within an interval (load it anew)", behind, err, read)
	}
}

// A fork's log that holds a publish at or before its fork point, which an
// earlier version's catalog accepted (a new one refuses it: see
// TestForkPublishesOnlyPastItsForkPoint), still loads: the refusal is
// for new entries only, so readers of such a fork and of its forks, and
// copies of it, go on working.
func TestOldForkLogWithAnEarlyPublishStillLoads(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	oldForkWithAnEarlyPublish(t, b)
	if _, _, err := Load(ctx, b, "f"); err != nil {
		t.Fatalf("loading a fork whose log an earlier version wrote: %v", err)
	}
}

// A slot lost from the log's tail (slots after it exist) fails a refresh
// closed, as it fails a load (ErrCorrupt: the slots past the gap are
// seen), rather than being taken for the log's end, where every later
// refresh would confirm the state again.
func TestPartialRefreshFailsClosedOnALostSlot(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, 100)
	p, c := loadThenWrite(t, b, Want{Run: "r", From: 5, To: 5})
	epoch := c.Tip().World.Epoch
	at := c.Tip().Seq
	commitEach(t, c, publish("s", 100, "t100", epoch), publish("s", 101, "t101", epoch), publish("s", 102, "t102", epoch))
	lost := SlotName("w", at+2)
	a, err := b.Stat(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, lost, a.Generation); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 5, To: 5}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a load of the log with slot %s lost: %v; want ErrCorrupt", lost, err)
	}
	err = p.Refresh(ctx)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a refresh over the log with slot %s lost: %v (state at sequence %d, the log goes on to %d); want ErrCorrupt, as a load gives", lost, err, p.Seq(), at+3)
	}
}
