package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
)

// The mount resolves a tick, a head and a listing of ticks/ one world of
// the lineage at a time (lineageTick, head, tickStream), reading each
// world cold where it can; its answers are index.View's, over the whole
// lineage, for every tick of every world
// of a three-level lineage (a fork of a fork, a fork at a tick its parent
// inherits, a fork that published nothing), read cold and through open
// catalogs.
func TestLineageTickIsTheViews(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	type world struct {
		name, parent string
		at           int64   // fork point
		ticks        []int64 // its own
		checkpoint   bool
	}
	worlds := []world{
		{name: "gp", ticks: span(0, 20), checkpoint: true},
		{name: "p", parent: "gp", at: 10, ticks: span(11, 15), checkpoint: true},
		{name: "f", parent: "p", at: 13, ticks: append(span(14, 16), 20)},
		{name: "f5", parent: "p", at: 5, ticks: []int64{9}, checkpoint: true},
		{name: "empty", parent: "f", at: 15},
	}
	for _, w := range worlds {
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
		if w.checkpoint {
			if _, err := c.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	same := func(a, b tickRef, aok, bok bool) bool {
		return aok == bok && (!aok || a.World == b.World && a.Run == b.Run && a.Tick.Tick == b.Tick.Tick && a.CommitToken == b.CommitToken)
	}
	for _, open := range []bool{false, true} {
		m := lineageMount(t, b)
		for _, w := range worlds {
			if open {
				if _, err := m.state(ctx, w.name, false); err != nil {
					t.Fatal(err)
				}
			}
			v, err := index.OpenView(ctx, index.LoadFrom(b), w.name, "main")
			if err != nil {
				t.Fatal(err)
			}
			for n := int64(-1); n <= 22; n++ {
				got, ok, err := m.tick(ctx, w.name, "main", n)
				if err != nil {
					t.Fatal(err)
				}
				want, wantOK := v.Tick(n)
				if !same(got, want, ok, wantOK) {
					t.Errorf("catalogs open %v: tick %d of %s: the mount answers %s:%s (%v), the view %s:%s (%v)", open, n, w.name, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
				}
			}
			// A listing of ticks/: the view's ticks, in order.
			var listed, wantListed []string
			st, err := m.openStream(ctx, &ticksDir{dirBase{m: m}, w.name, "main"})
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
				t.Errorf("catalogs open %v: ticks/ of %s lists %v, the view %v", open, w.name, listed, wantListed)
			}
			// world.json's lineage: the view's segments.
			data, err := m.worldJSON(ctx, w.name)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Lineage []struct {
					World, Run, Visibility string
					UpTo                   *int64 `json:"up_to_tick"`
				}
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			var gotSegs, wantSegs []string
			for _, sg := range doc.Lineage {
				upTo := "-"
				if sg.UpTo != nil {
					upTo = fmt.Sprint(*sg.UpTo)
				}
				gotSegs = append(gotSegs, fmt.Sprintf("%s/%s<=%s %s", sg.World, sg.Run, upTo, sg.Visibility))
			}
			for _, sg := range v.Segments {
				upTo := "-"
				if sg.World != w.name {
					upTo = fmt.Sprint(sg.UpTo)
				}
				wantSegs = append(wantSegs, fmt.Sprintf("%s/%s<=%s %s", sg.World, sg.Run, upTo, sg.Mode))
			}
			if !slices.Equal(gotSegs, wantSegs) {
				t.Errorf("catalogs open %v: world.json of %s has lineage %v, the view %v", open, w.name, gotSegs, wantSegs)
			}
			got, ok, err := m.head(ctx, w.name, "main")
			if err != nil {
				t.Fatal(err)
			}
			want, wantOK := v.Head()
			if !same(got, want, ok, wantOK) {
				t.Errorf("catalogs open %v: head of %s: the mount answers %s:%s (%v), the view %s:%s (%v)", open, w.name, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
			}
		}
		if open {
			continue
		}
		m.mu.Lock()
		opened := len(m.mu.cats)
		m.mu.Unlock()
		if opened != 2 {
			t.Errorf("resolving every tick cold opened %d catalogs; want 2 (the worlds without a checkpoint)", opened)
		}
	}
}

func span(from, to int64) []int64 {
	var out []int64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func tokenOf(t tickRef) string {
	if t.Tick == nil {
		return "-"
	}
	return t.CommitToken
}

// lineageMount is a mount of b, not served.
func lineageMount(t *testing.T, b bucket.Bucket) *Mount {
	t.Helper()
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(b, Options{Cache: c, BucketID: "test", Writer: enginetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
