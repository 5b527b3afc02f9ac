package fs

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
)

// worldReads counts the bucket calls that read world f's objects and
// world gp's.
type worldReads struct{ f, gp atomic.Int64 }

func (c *worldReads) Fault(_ faulty.Op, name string) faulty.Fault {
	if strings.Contains(name, "/f/") || strings.HasSuffix(name, "/f") {
		c.f.Add(1)
	} else if strings.Contains(name, "/gp/") {
		c.gp.Add(1)
	}
	return faulty.Fault{}
}

// A lookup of a tick a fork inherits, held in its parent's cold state,
// reads nothing, as one of a world's own held tick does (a freshness of
// 1 ns makes every state stale at once): the fork's record, which routes
// it to the parent, never changes.
func TestColdLookupOfAnInheritedTickReadsNothing(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	buildLineage(t, b, []lineageWorld{
		{name: "gp", own: map[string][]int64{"main": span(0, 20)}, checkpoint: true},
		{name: "f", parent: "gp", at: 10, own: map[string][]int64{"main": {11}}, checkpoint: true},
	})
	reads := &worldReads{}
	ca, _ := cache.Open(t.TempDir(), cache.Options{})
	m, err := New(struct{ bucket.Bucket }{faulty.Wrap(b, reads)}, Options{Cache: ca, BucketID: "test", Writer: enginetest.Quiet, Freshness: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range []string{"gp", "f"} {
		if _, ok, err := m.tick(ctx, w, "main", 5); err != nil || !ok {
			t.Fatal(ok, err)
		}
		f0, g0 := reads.f.Load(), reads.gp.Load()
		for i := 0; i < 10; i++ {
			if _, ok, err := m.tick(ctx, w, "main", int64(i)); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		if f, gp := reads.f.Load()-f0, reads.gp.Load()-g0; f != 0 || gp != 0 {
			t.Errorf("10 lookups of held ticks of %s read %d of f's objects and %d of gp's; want none", w, f, gp)
		}
	}
}
