package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfs/worldfs/engine/enginetest"
	wfs "github.com/worldfs/worldfs/fs"
	wsql "github.com/worldfs/worldfs/sql"
)

// The mount's tick directories and worldfs_ticks tell one time: every
// tick directory's mtime is the published_at of its tick in the views,
// on a world with a fork (whose inherited ticks carry its parent's
// publish times). With worldfs_ticks' published_at truncated to the
// second, it fails.
func TestTickDirectoriesAndWorldfsTicksAgree(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 40)
	w.Close()
	enginetest.Fork(t, b, "w", "f", 20, 30).Close()
	mt := testMount(t, b)
	for _, world := range []string{"w", "f"} {
		s, err := wsql.Build(ctxT(t), b, world, wsql.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		views, err := wsql.Open(ctxT(t), s)
		if err != nil {
			t.Fatal(err)
		}
		defer views.Close()
		published := map[string]time.Time{}
		r, err := views.Query("SELECT tick, published_at FROM worldfs_ticks")
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var tick int64
			var at time.Time
			if err := r.Scan(&tick, &at); err != nil {
				t.Fatal(err)
			}
			published[wfs.TickName(tick)] = at
		}
		r.Close()
		ticks := mt.path(world, "runs", "main", "ticks")
		names := ls(t, ticks)
		if len(names) != len(published) || len(names) < 30 {
			t.Fatalf("world %s: %d tick directories, worldfs_ticks %d", world, len(names), len(published))
		}
		distinct := map[time.Time]bool{}
		for _, name := range names {
			info, err := os.Lstat(filepath.Join(ticks, name))
			if err != nil {
				t.Fatal(err)
			}
			want, ok := published[name]
			if !ok || !info.ModTime().Equal(want) {
				t.Fatalf("world %s: ticks/%s: mtime %v, worldfs_ticks says %v", world, name, info.ModTime(), want)
			}
			distinct[want] = true
		}
		if len(distinct) < 2 {
			t.Fatalf("world %s: every tick published at one instant: the comparison proves little", world)
		}
	}
}
