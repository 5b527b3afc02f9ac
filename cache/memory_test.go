package cache

import (
	"context"
	"errors"
	"testing"

	"github.com/worldfs/worldfs/bucket/buckettest"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
)

func TestMemoryServesRepeatedReads(t *testing.T) {
	ctx := context.Background()
	inner := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	inner.Bucket.Create(ctx, "worlds/w/log/0000000000000001", []byte("slot one"))
	m, err := NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Wrap(inner)
	for range 5 {
		got, a, err := b.Get(ctx, "worlds/w/log/0000000000000001")
		if err != nil || string(got) != "slot one" || a.Size != 8 {
			t.Fatalf("Get = %q %+v %v", got, a, err)
		}
		got[0] = 'X' // a caller's copy is its own
		m.c.Wait()
	}
	if n := inner.Gets.Load(); n != 1 {
		t.Fatalf("5 reads went to the bucket %d times", n)
	}
	if got, err := b.GetRange(ctx, "worlds/w/log/0000000000000001", 5, 3); err != nil || string(got) != "one" {
		t.Fatalf("GetRange from the cache = %q, %v", got, err)
	}
	// Not-found stays strong: a missing name is asked each time, and
	// found once it exists.
	if _, _, err := b.Get(ctx, "worlds/w/log/0000000000000002"); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatal(err)
	}
	inner.Bucket.Create(ctx, "worlds/w/log/0000000000000002", []byte("slot two"))
	if got, _, err := b.Get(ctx, "worlds/w/log/0000000000000002"); err != nil || string(got) != "slot two" {
		t.Fatalf("a name created after a miss: %q, %v", got, err)
	}
}
