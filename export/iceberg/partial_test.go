package iceberg_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/worldfs/worldfs/bucket/buckettest"
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
// from the world's state loaded in part (the checkpoint's shards of the
// head and of the new ticks, not the history before them) and exports
// exactly what an export planned from the whole state exports: the same
// operation, files and rows, reading back (with iceberg-go) as the views.
// So for a plain world, a fork (its own ticks in one shard, its parent
// loaded whole) and a compacted
// world (its last compacted file across the previous snapshot's tick: an
// append of that file's newer rows, not a plan in full), each since a
// tick in the head's shard (the shard before it is not read) and since
// one in the shard before (read then).
func TestIncrementalExportPlansFromAPartialState(t *testing.T) {
	fsys := icebergio.LocalFS{}
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "w", partLast).Close()
	enginetest.Fork(t, lb, "w", "f", partLast-40, partLast+20).Close()
	for _, c := range []struct{ name, world string }{{"plain", "w"}, {"fork", "f"}, {"compacted", "w"}} {
		if c.name == "compacted" {
			compact(t, lb, c.world)
		}
		checkpoint(t, lb, c.world)
		r := &reads{Counting: &buckettest.Counting{Bucket: lb}}
		for _, at := range []int64{partLast - 30, index.PartTicks - 30} {
			results := map[bool]iceberg.TableResult{}
			shards := map[bool]int{}
			for _, whole := range []bool{true, false} {
				iceberg.PlanWhole(whole)
				prefix := fmt.Sprintf("export/%s/%d/%v", c.name, at, whole)
				export(t, r, iceberg.Options{World: c.world, AtTick: &at, Prefix: prefix})
				r.read("")
				res := export(t, r, iceberg.Options{World: c.world, Prefix: prefix})
				shards[whole] = len(slices.DeleteFunc(r.read("worlds/"+c.world+"/state/"), func(n string) bool { return strings.HasSuffix(n, ".sum") }))
				// Reading back costs seconds: the plain world and the fork
				// at one pin, the compacted world at both.
				if !whole && (at == partLast-30 || c.name == "compacted") {
					same(t, lb, fsys, res, nil, nil)
				}
				results[whole] = table_(res, "particle")
			}
			iceberg.PlanWhole(false)
			w, p := results[true], results[false]
			if !p.Incremental || p.Operation != "append" || p.Removed != 0 {
				t.Fatalf("%s: the export of the ticks since tick %d: %+v; want an incremental append", c.name, at, p)
			}
			// Compacted ticks 0..4095 (index.PartTicks) cross the tick
			// before: their rows after it are a filtered copy.
			if c.name == "compacted" && at < index.PartTicks && p.Rewritten != 1 {
				t.Fatalf("compacted, since tick %d: %+v; want the compacted file's rows after it rewritten", at, p)
			}
			if p.Operation != w.Operation || p.Files != w.Files || p.Rows != w.Rows || p.Added != w.Added || p.Rewritten != w.Rewritten {
				t.Fatalf("%s since tick %d: planned from a state loaded in part: %+v; from the whole state: %+v", c.name, at, p, w)
			}
			// The fork's own ticks are all in one shard: it reads what
			// the whole state does (its parent is loaded whole).
			if fewer := at >= index.PartTicks && c.name != "fork"; fewer && shards[false] >= shards[true] || !fewer && shards[false] > shards[true] {
				t.Fatalf("%s: the incremental export since tick %d read %d checkpoint shards of %s, the whole state %d", c.name, at, shards[false], c.world, shards[true])
			}
		}
	}
}

// An export pinned by a token that names its tick plans as one pinned by
// that tick: from the state loaded in part (the token's shard and the
// new ticks'), exporting what the whole state's plan exports.
func TestTokenExportPlansFromAPartialState(t *testing.T) {
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
	r := &reads{Counting: &buckettest.Counting{Bucket: lb}}
	at := int64(partLast - 30)
	results := map[bool]iceberg.TableResult{}
	shards := map[bool]int{}
	for _, whole := range []bool{true, false} {
		iceberg.PlanWhole(whole)
		prefix := fmt.Sprintf("export/%v", whole)
		export(t, r, iceberg.Options{World: "w", AtTick: &at, Prefix: prefix})
		r.read("")
		res := export(t, r, iceberg.Options{World: "w", Token: tk.CommitToken, Prefix: prefix})
		shards[whole] = len(slices.DeleteFunc(r.read("worlds/w/state/"), func(n string) bool { return strings.HasSuffix(n, ".sum") }))
		if res.Tick != tk.Tick || res.Token != tk.CommitToken {
			t.Fatalf("the export by the token of tick %d pinned tick %d, token %s", tk.Tick, res.Tick, res.Token)
		}
		results[whole] = table_(res, "particle")
	}
	iceberg.PlanWhole(false)
	w, p := results[true], results[false]
	if !p.Incremental || p.Operation != w.Operation || p.Files != w.Files || p.Rows != w.Rows || p.Added != w.Added {
		t.Fatalf("by token, planned from a state loaded in part: %+v; from the whole state: %+v", p, w)
	}
	if shards[false] >= shards[true] {
		t.Fatalf("the export by token read %d checkpoint shards, the whole state's plan %d", shards[false], shards[true])
	}
}
