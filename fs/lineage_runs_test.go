package fs

import (
	"context"
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
	gp, gpe, err := index.CreateWorld(ctx, b, "gp", index.WorldCreate{WriterMode: index.ModeResumable}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Close()
	for n := int64(0); n <= 12; n++ {
		publishTick(t, gp, gpe, "gp", "main", n)
		if n%2 == 0 {
			publishTick(t, gp, gpe, "gp", "side", n)
		}
	}
	if _, err := gp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	buildLineage(t, b, []lineageWorld{
		{name: "s", parent: "gp", forkRun: "side", at: 8, own: map[string][]int64{"main": {9, 10}, "x": {11}}, checkpoint: true},
		{name: "late", parent: "gp", at: 16, own: map[string][]int64{"main": {17}}, checkpoint: true},
		{name: "ss", parent: "s", forkRun: "x", at: 20, own: map[string][]int64{"y": {21}}, checkpoint: true},
	})
	ca, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(b, Options{Cache: ca, BucketID: "test", Writer: enginetest.Quiet, Freshness: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range []string{"s", "late", "ss"} {
		for _, run := range []string{"main", "side", "x", "y", "none"} {
			sameAsView(t, m, b, w, run, "first")
		}
	}
	// The parent publishes ticks 13..16, at or before late's fork point,
	// after the mount read it (freshness an hour): a lookup finds them.
	for n := int64(13); n <= 16; n++ {
		publishTick(t, gp, gpe, "gp", "main", n)
	}
	for n := int64(13); n <= 16; n++ {
		if _, ok, err := m.tick(ctx, "late", "main", n); err != nil || !ok {
			t.Errorf("tick %d of late, published by its parent a moment ago: %v %v", n, ok, err)
		}
	}
}
