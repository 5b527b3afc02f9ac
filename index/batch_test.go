package index

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// While the queue is deep, batches grow past MaxBatch and the old cap of
// 32 entries, up to the byte bound: no slot is larger than SlotBytes, the
// bound is what stops them, and every write is committed exactly once.
func TestBatchesGrowToSlotBytes(t *testing.T) {
	const slotBytes, n = 8 << 10, 2000
	inner := memBucket()
	gate := &gateBucket{Bucket: inner}
	c, epoch := newWorld(t, gate, "w", Options{NoCompactor: true, SlotBytes: slotBytes})
	// Hold the first slot until every write is queued behind it.
	gate.hold()
	ops0 := c.ops.Load()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Commit(ctxT(t), publish("r", int64(i), fmt.Sprint("t", i), epoch)); err != nil {
				errs <- err
			}
		}()
	}
	for c.ops.Load()-ops0 < n {
		runtime.Gosched()
	}
	gate.release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	most, largest := 0, 0
	for a, err := range inner.List(ctxT(t), LogPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := inner.Get(ctxT(t), a.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > slotBytes {
			t.Errorf("slot %s is %d bytes, over SlotBytes %d", a.Name, len(data), slotBytes)
		}
		slot, _, err := DecodeSlot("w", a.Name, data)
		if err != nil {
			t.Fatal(err)
		}
		most, largest = max(most, len(slot.Entries)), max(largest, len(data))
	}
	if most <= 32 {
		t.Errorf("the largest slot held %d entries: batches did not grow with the queue", most)
	}
	if largest < slotBytes/2 {
		t.Errorf("the largest slot is %d bytes: the byte bound (%d) never stopped a batch", largest, slotBytes)
	}
	t.Logf("largest slot: %d entries, %d bytes", most, largest)
	if got := len(opsOnce(t, inner, "w")); got != n+2 { // the world's create and first fence
		t.Fatalf("%d operations in the log, want %d", got, n+2)
	}
}
