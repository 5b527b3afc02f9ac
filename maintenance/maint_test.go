package maintenance_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// factFiles returns the files the complete claims of run name, by fact id.
func factFiles(t *testing.T, w *engine.World, run string) map[int64]index.Fragment {
	t.Helper()
	s, err := w.Catalog().Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]index.Fragment{}
	s.Claims(run, func(c *index.Claim) bool {
		if c.State == index.ClaimComplete {
			out[c.FactID] = c.Tables[0].Fragments[0]
		}
		return true
	})
	return out
}

// Facts spread thinly over the claim shards (no shard holds MinFacts of
// them) still compact once their table has MaxFactFragments fragments of
// their own waiting: the count of small fact files per table stays
// bounded, and the visible facts stay exactly as they were.
func TestCompactFactsByTableCount(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 5)
	for i := range 40 {
		if _, err := w.Ingest(ctx, reading("p", fmt.Sprint(i), float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	before := visibleFactRows(t, b, "w", "main")
	// Below the bound: 40 facts over 256 shards, none holds 16.
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MaxFactFragments: 64}); err != nil || res.Facts != 0 {
		t.Fatalf("40 facts waiting, bound 64: %+v, %v; want nothing compacted", res, err)
	}
	res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MaxFactFragments: 32})
	if err != nil || res.Facts == 0 || res.Refused != 0 {
		t.Fatalf("40 facts waiting, bound 32: %+v, %v; want them compacted", res, err)
	}
	for id, f := range factFiles(t, w, "main") {
		if f.Span == nil {
			t.Errorf("fact %d still waits in %s", id, f.Path)
		}
	}
	if after := visibleFactRows(t, b, "w", "main"); !mapsEqual(before, after) || len(after) != 40 {
		t.Fatalf("compaction changed the visible facts (%d before, %d after)", len(before), len(after))
	}
}

// The fragments a compaction of facts replaced are collected once the
// retention has passed (and not before), decided from the claims: a
// complete claim names its rows' files, so one it no longer names was
// replaced.
func TestCollectReplacedFacts(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 5)
	for i := range 20 {
		if _, err := w.Ingest(ctx, reading("p", fmt.Sprint(i), float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	own := factFiles(t, w, "main")
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MinFacts: 1}); err != nil || res.Facts == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	before := visibleFactRows(t, b, "w", "main")

	res, _ := collect(t, b, time.Now(), false)
	if res.ByKind[maintenance.KindReplaced] != 0 {
		t.Fatalf("within the retention collection deleted %+v", res.ByKind)
	}
	res, seen := collect(t, b, time.Now().Add(maintenance.DefaultRetention+time.Hour), false)
	for id, f := range own {
		p := f.Path
		if _, err := b.Stat(ctx, p); !errors.Is(err, bucket.ErrNotExist) || seen[p].Kind != maintenance.KindReplaced {
			t.Errorf("fact %d's replaced fragment %s: %v, reported %+v", id, p, err, seen[p])
		}
	}
	if res.ByKind[maintenance.KindReplaced] != len(own) {
		t.Fatalf("past the retention %d replaced fragments went (%+v), want %d", res.ByKind[maintenance.KindReplaced], res.ByKind, len(own))
	}
	if after := visibleFactRows(t, b, "w", "main"); !mapsEqual(before, after) || len(after) != 20 {
		t.Fatal("collection changed the visible facts")
	}
}

// A compacted file of facts that a later compaction of its claim shard
// replaced is dated by that later change to its table's claims, not by its
// own age: a reader pinned before the second compaction reads it for the
// retention after it.
func TestCollectDatesReplacedFactFiles(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	w := simWorld(t, b, "w", 5)
	shardOf := func(id string) int64 {
		return index.ClaimShardOf(index.ClaimKey{Run: "main", Producer: "p", ExternalID: id})
	}
	if _, err := w.Ingest(ctx, reading("p", "0", 0)); err != nil {
		t.Fatal(err)
	}
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MinFacts: 1}); err != nil || res.Facts != 1 {
		t.Fatalf("the first compaction: %+v, %v", res, err)
	}
	files := factFiles(t, w, "main")
	if len(files) != 1 {
		t.Fatalf("%d facts, want 1", len(files))
	}
	var first string
	for _, f := range files {
		if f.Span == nil {
			t.Fatalf("the fact is in %s, not a compacted file", f.Path)
		}
		first = f.Path
	}
	// Everything so far (the compacted file, the ticks' and the claims'
	// slots) is made an hour old, so that only the second compaction is
	// recent.
	hourAgo := time.Now().Add(-time.Hour)
	age := []string{first}
	for a, err := range b.List(ctx, index.LogPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		age = append(age, a.Name)
	}
	for _, name := range age {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(name)), hourAgo, hourAgo); err != nil {
			t.Fatal(err)
		}
	}
	// A second fact in the same shard, then the shard compacted again: its
	// new file replaces the first.
	for i := 1; ; i++ {
		if id := fmt.Sprint(i); shardOf(id) == shardOf("0") {
			if _, err := w.Ingest(ctx, reading("p", id, float64(i))); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MinFacts: 1}); err != nil || res.Facts != 1 {
		t.Fatalf("the second compaction: %+v, %v", res, err)
	}
	for _, f := range factFiles(t, w, "main") {
		if f.Path == first {
			t.Fatal("the second compaction did not replace the first file")
		}
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot, _, _, err := index.SlotHolding(ctx, b, "w", s.Seq)
	if err != nil {
		t.Fatal(err)
	}
	// Just inside the retention after the second compaction, more than it
	// after everything else: the first file stays.
	_, seen := collect(t, b, slot.Created.Add(maintenance.DefaultRetention-time.Second), false)
	if _, err := b.Stat(ctx, first); err != nil || seen[first].Name != "" {
		t.Fatalf("the replaced compacted file %s within the retention of its replacement: %v, reported %+v", first, err, seen[first])
	}
	_, seen = collect(t, b, slot.Created.Add(maintenance.DefaultRetention+time.Second), false)
	if _, err := b.Stat(ctx, first); !errors.Is(err, bucket.ErrNotExist) || seen[first].Kind != maintenance.KindCompacted {
		t.Fatalf("the replaced compacted file %s past the retention: %v, reported %+v", first, err, seen[first])
	}
}
