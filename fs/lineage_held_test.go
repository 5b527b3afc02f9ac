package fs

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
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
	for _, w := range []struct {
		name, parent string
		at           int64
		ticks        []int64
	}{{"gp", "", 0, span(0, 20)}, {"f", "gp", 10, []int64{11}}} {
		create := index.WorldCreate{Parent: w.parent, ForkTick: w.at, WriterMode: index.ModeResumable}
		if w.parent != "" {
			create.ForkRun = "main"
		}
		c, epoch, err := index.CreateWorld(ctx, b, w.name, create, "writer", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range w.ticks {
			tok := fmt.Sprintf("%s-%d", w.name, n)
			if _, err := c.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: n, CommitToken: tok, WriterEpoch: epoch,
				Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(w.name, "main", "t", tok, 0), Rows: 1}}}}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
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
