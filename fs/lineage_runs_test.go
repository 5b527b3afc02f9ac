package fs

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
)

// Runs other than main: a fork's run of its own inherits its parent's
// fork run (index.Lineage), a fork of a parent's run other than main, and
// a parent that publishes a tick at or before the fork point after the
// mount read it: ticks, heads and listings are index.View's.
func TestLineageOtherRunsAreTheViews(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	publish := func(c *index.Catalog, epoch int64, world, run string, n int64) {
		t.Helper()
		tok := fmt.Sprintf("%s-%s-%d", world, run, n)
		if _, err := c.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: run, Tick: n, CommitToken: tok, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(world, run, "t", tok, 0), Rows: 1}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	gp, gpe, err := index.CreateWorld(ctx, b, "gp", index.WorldCreate{WriterMode: index.ModeResumable}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Close()
	for n := int64(0); n <= 12; n++ {
		publish(gp, gpe, "gp", "main", n)
		if n%2 == 0 {
			publish(gp, gpe, "gp", "side", n)
		}
	}
	if _, err := gp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	worlds := []struct {
		name, parent, forkRun string
		at                    int64
		own                   map[string][]int64
	}{
		{name: "s", parent: "gp", forkRun: "side", at: 8, own: map[string][]int64{"main": {9, 10}, "x": {11}}},
		{name: "late", parent: "gp", forkRun: "main", at: 16, own: map[string][]int64{"main": {17}}},
		{name: "ss", parent: "s", forkRun: "x", at: 20, own: map[string][]int64{"y": {21}}},
	}
	for _, w := range worlds {
		c, epoch, err := index.CreateWorld(ctx, b, w.name, index.WorldCreate{Parent: w.parent, ForkRun: w.forkRun, ForkTick: w.at, WriterMode: index.ModeResumable}, "writer", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		for run, ticks := range w.own {
			for _, n := range ticks {
				publish(c, epoch, w.name, run, n)
			}
		}
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	same := func(a, b tickRef, aok, bok bool) bool {
		return aok == bok && (!aok || a.World == b.World && a.Run == b.Run && a.Tick.Tick == b.Tick.Tick && a.CommitToken == b.CommitToken)
	}
	ca, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(b, Options{Cache: ca, BucketID: "test", Writer: enginetest.Quiet, Freshness: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	compare := func(round string) {
		for _, w := range []string{"s", "late", "ss"} {
			for _, run := range []string{"main", "side", "x", "y", "none"} {
				v, err := index.OpenView(ctx, index.LoadFrom(b), w, run)
				if err != nil {
					t.Fatal(err)
				}
				for n := int64(-1); n <= 22; n++ {
					got, ok, err := m.tick(ctx, w, run, n)
					if err != nil {
						t.Fatal(err)
					}
					if want, wantOK := v.Tick(n); !same(got, want, ok, wantOK) {
						t.Errorf("%s: tick %d of %s/%s: the mount %s:%s (%v), the view %s:%s (%v)", round, n, w, run, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
					}
				}
				got, ok, err := m.head(ctx, w, run)
				if err != nil {
					t.Fatal(err)
				}
				if want, wantOK := v.Head(); !same(got, want, ok, wantOK) {
					t.Errorf("%s: head of %s/%s: the mount %s:%s (%v), the view %s:%s (%v)", round, w, run, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
				}
				var listed, wantListed []string
				st, err := m.openStream(ctx, &ticksDir{dirBase{m: m}, w, run})
				if err != nil {
					t.Fatal(err)
				}
				for {
					if err := st.fill(ctx); err != nil {
						t.Fatal(err)
					}
					if len(st.batch) == 0 {
						break
					}
					for _, r := range st.batch {
						listed = append(listed, r.World+":"+r.CommitToken)
					}
				}
				v.Ticks(math.MinInt64, math.MaxInt64, func(r tickRef) bool {
					wantListed = append(wantListed, r.World+":"+r.CommitToken)
					return true
				})
				if !slices.Equal(listed, wantListed) {
					t.Errorf("%s: ticks/ of %s/%s lists %v, the view %v", round, w, run, listed, wantListed)
				}
			}
		}
	}
	compare("first")
	// The parent publishes ticks 13..16, at or before late's fork point,
	// after the mount read it (freshness an hour): a lookup finds them.
	for n := int64(13); n <= 16; n++ {
		publish(gp, gpe, "gp", "main", n)
	}
	for n := int64(13); n <= 16; n++ {
		if _, ok, err := m.tick(ctx, "late", "main", n); err != nil || !ok {
			t.Errorf("tick %d of late, published by its parent a moment ago: %v %v", n, ok, err)
		}
	}
}
