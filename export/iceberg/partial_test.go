package iceberg_test

import (
	"fmt"
	"testing"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
)

// partLast is the head of the worlds below: its ticks fill the
// checkpoint's first tick shard and part of the second
// (index.PartTicks ticks a shard).
const partLast = index.PartTicks + 60

// checkpoint writes a checkpoint of world's catalog at its tip.
func checkpoint(t *testing.T, b *local.Bucket, world string) {
	t.Helper()
	cat, err := index.Open(ctxT(t), b, world, index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// An export that appends the ticks since its previous snapshot plans
// only those (it holds the whole catalog: it opens an intent on it) and
// appends their files: for a plain world, a fork (its parent up to the
// fork point) and a compacted world (its last compacted file across the
// previous snapshot's tick: an append of that file's newer rows, not a
// plan in full), each since a tick in the head's checkpoint part and
// since one in the part before, reading back (with iceberg-go) as the
// views.
func TestIncrementalExportAppendsTheTicksSince(t *testing.T) {
	fsys := icebergio.LocalFS{}
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "w", partLast).Close()
	enginetest.Fork(t, lb, "w", "f", partLast-40, partLast+20).Close()
	for _, c := range []struct{ name, world string }{{"plain", "w"}, {"fork", "f"}, {"compacted", "w"}} {
		if c.name == "compacted" {
			compact(t, lb, c.world)
		}
		checkpoint(t, lb, c.world)
		for _, at := range []int64{partLast - 30, index.PartTicks - 30} {
			prefix := fmt.Sprintf("export/%s/%d", c.name, at)
			export(t, lb, iceberg.Options{World: c.world, AtTick: &at, Prefix: prefix})
			res := export(t, lb, iceberg.Options{World: c.world, Prefix: prefix})
			// Reading back costs seconds: the plain world and the fork
			// at one pin, the compacted world at both.
			if at == partLast-30 || c.name == "compacted" {
				same(t, lb, fsys, res, nil, nil)
			}
			p := table_(res, "particle")
			if !p.Incremental || p.Operation != "append" || p.Removed != 0 || p.Added == 0 {
				t.Fatalf("%s: the export of the ticks since tick %d: %+v; want an incremental append", c.name, at, p)
			}
			// Compacted ticks 0..4095 (index.PartTicks) cross the tick
			// before: their rows after it are a filtered copy.
			if c.name == "compacted" && at < index.PartTicks && p.Rewritten != 1 {
				t.Fatalf("compacted, since tick %d: %+v; want the compacted file's rows after it rewritten", at, p)
			}
		}
	}
}

// An export pinned by a token that names its tick plans as one pinned by
// that tick: incrementally, the token's tick exported.
func TestTokenExportIsIncremental(t *testing.T) {
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "w", partLast).Close()
	checkpoint(t, lb, "w")
	s, _, err := index.Load(ctxT(t), lb, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick(index.DefaultRun, partLast-10)
	if !ok {
		t.Fatalf("no tick %d", partLast-10)
	}
	at := int64(partLast - 30)
	export(t, lb, iceberg.Options{World: "w", AtTick: &at})
	res := export(t, lb, iceberg.Options{World: "w", Token: tk.CommitToken})
	if res.Tick != tk.Tick || res.Token != tk.CommitToken {
		t.Fatalf("the export by the token of tick %d pinned tick %d, token %s", tk.Tick, res.Tick, res.Token)
	}
	if p := table_(res, "particle"); !p.Incremental || p.Operation != "append" || p.Added != 20 {
		t.Fatalf("by token: %+v; want an incremental append of the 20 ticks since tick %d", p, at)
	}
}
