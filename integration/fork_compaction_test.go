package integration

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine/enginetest"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A fork's inherited tick read after compaction and collection moved its
// parent's rows: the open is planned again at the parent's tip, as an
// open of the parent's own tick is.
func TestForkInheritedTickFollowsCompaction(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 30)
	c, _, err := index.CreateWorld(ctxT(t), b, "f", index.WorldCreate{Parent: "w", ForkRun: "main", ForkTick: 20, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	db := duck(t)
	cols := "entity_id, tick, position_x, position_y, velocity_x, velocity_y"
	file := func(world string, tick int64) string {
		return mt.path(world, "runs", "main", "ticks", strconv.FormatInt(tick, 10), "particle.parquet")
	}
	read := func(p string) ([]string, error) {
		if _, err := os.ReadFile(p); err != nil {
			return nil, err
		}
		return rows(t, db, "SELECT "+cols+" FROM read_parquet("+lit(p)+") ORDER BY entity_id"), nil
	}
	want := map[int64][]string{}
	for _, tick := range []int64{5, 7} {
		r, err := read(file("w", tick))
		if err != nil || len(r) == 0 {
			t.Fatalf("tick %d: %v", tick, err)
		}
		want[tick] = r
	}
	// The mount reads the fork's tick 5 (its parent's state is read now).
	if r, err := read(file("f", 5)); err != nil || !slices.Equal(r, want[5]) {
		t.Fatalf("fork tick 5 before: %v", err)
	}
	old := fragmentOf(t, b, 7)
	enginetest.Run(t, w, 150)
	if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := maintenance.Collect(ctxT(t), b, w.Catalog(), maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true, Now: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctxT(t), old.Path); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("collection left %s (%v); the test proves nothing", old.Path, err)
	}
	for _, world := range []string{"f", "w"} {
		r, err := read(file(world, 7)) // never opened before through this world
		if err != nil || !slices.Equal(r, want[7]) {
			t.Errorf("%s: tick 7 after compaction and collection: %d rows, want %d (%v)", world, len(r), len(want[7]), err)
		}
	}
}
