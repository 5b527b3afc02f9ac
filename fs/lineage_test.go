package fs

import (
	"cmp"
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

// The mount resolves a tick, a head, a listing of ticks/ and world.json
// one world of the lineage at a time (lineageTick, head, tickStream,
// worldInfo), reading each world cold where it can; its answers are
// index.View's, over the whole lineage, for every tick of every world of
// a three-level lineage (a fork of a fork, a fork at a tick its parent
// inherits, a fork that published nothing), read cold and through open
// catalogs.
func TestLineageTickIsTheViews(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	worlds := []lineageWorld{
		{name: "gp", own: map[string][]int64{"main": span(0, 20)}, checkpoint: true},
		{name: "p", parent: "gp", at: 10, own: map[string][]int64{"main": span(11, 15)}, checkpoint: true},
		{name: "f", parent: "p", at: 13, own: map[string][]int64{"main": append(span(14, 16), 20)}},
		{name: "f5", parent: "p", at: 5, own: map[string][]int64{"main": {9}}, checkpoint: true},
		{name: "empty", parent: "f", at: 15},
	}
	buildLineage(t, b, worlds)
	for _, open := range []bool{false, true} {
		m := lineageMount(t, b)
		round := fmt.Sprintf("catalogs open %v", open)
		for _, w := range worlds {
			if open {
				if _, err := m.state(ctx, w.name, false); err != nil {
					t.Fatal(err)
				}
			}
			v := sameAsView(t, m, b, w.name, "main", round)
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
				t.Errorf("%s: world.json of %s has lineage %v, the view %v", round, w.name, gotSegs, wantSegs)
			}
		}
		if open {
			continue
		}
		m.mu.Lock()
		opened := m.cats.Len()
		m.mu.Unlock()
		if opened != 2 {
			t.Errorf("resolving every tick cold opened %d catalogs; want 2 (the worlds without a checkpoint)", opened)
		}
	}
}

// lineageWorld is a world of a lineage a test builds (buildLineage): its
// parent and fork point (ForkRun main unless forkRun), the ticks each of
// its runs publishes, and whether it is checkpointed.
type lineageWorld struct {
	name, parent, forkRun string
	at                    int64
	own                   map[string][]int64
	checkpoint            bool
}

// buildLineage creates worlds in b, in order, each publishing its ticks
// (publishTick), catalog only.
func buildLineage(t *testing.T, b bucket.Bucket, worlds []lineageWorld) {
	t.Helper()
	ctx := context.Background()
	for _, w := range worlds {
		create := index.WorldCreate{Parent: w.parent, ForkTick: w.at, WriterMode: index.ModeResumable}
		if w.parent != "" {
			create.ForkRun = cmp.Or(w.forkRun, "main")
		}
		c, epoch, err := index.CreateWorld(ctx, b, w.name, create, "writer", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		for run, ticks := range w.own {
			for _, n := range ticks {
				publishTick(t, c, epoch, w.name, run, n)
			}
		}
		if w.checkpoint {
			if _, err := c.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
}

// publishTick commits through c tick n of (world, run), its token
// "<world>-<run>-<n>", one fragment of table t (never written).
func publishTick(t *testing.T, c *index.Catalog, epoch int64, world, run string, n int64) {
	t.Helper()
	tok := fmt.Sprintf("%s-%s-%d", world, run, n)
	if _, err := c.Commit(context.Background(), index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: run, Tick: n, CommitToken: tok, WriterEpoch: epoch,
		Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(world, run, "t", tok, 0), Rows: 1}}}}}}); err != nil {
		t.Fatal(err)
	}
}

// sameAsView checks that m answers every tick -1..22, the head and the
// listing of ticks/ of (world, run) as index.View over b does, and
// returns that view; round names the case in errors.
func sameAsView(t *testing.T, m *Mount, b bucket.Bucket, world, run, round string) *index.View {
	t.Helper()
	ctx := context.Background()
	v, err := index.OpenView(ctx, index.LoadFrom(b), world, run)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b tickRef, aok, bok bool) bool {
		return aok == bok && (!aok || a.World == b.World && a.Run == b.Run && a.Tick.Tick == b.Tick.Tick && a.CommitToken == b.CommitToken)
	}
	for n := int64(-1); n <= 22; n++ {
		got, ok, err := m.tick(ctx, world, run, n)
		if err != nil {
			t.Fatal(err)
		}
		if want, wantOK := v.Tick(n); !same(got, want, ok, wantOK) {
			t.Errorf("%s: tick %d of %s/%s: the mount answers %s:%s (%v), the view %s:%s (%v)", round, n, world, run, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
		}
	}
	got, ok, err := m.head(ctx, world, run)
	if err != nil {
		t.Fatal(err)
	}
	if want, wantOK := v.Head(); !same(got, want, ok, wantOK) {
		t.Errorf("%s: head of %s/%s: the mount answers %s:%s (%v), the view %s:%s (%v)", round, world, run, got.World, tokenOf(got), ok, want.World, tokenOf(want), wantOK)
	}
	var listed, wantListed []string
	st, err := m.openStream(ctx, &ticksDir{dirBase{m: m}, world, run})
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
		t.Errorf("%s: ticks/ of %s/%s lists %v, the view %v", round, world, run, listed, wantListed)
	}
	return v
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
