package maintenance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
	"github.com/worldfs/worldfs/maintenance"
)

// namesNoMissingObject fails the test unless every object the catalog of
// world names is in the bucket with the bytes it records, and every
// compacted file of ticks has its tick index (what `worldfs check
// --read-data` reads).
func namesNoMissingObject(t *testing.T, b bucket.Bucket, world string) {
	t.Helper()
	ctx := ctxT(t)
	s, _, err := index.Load(ctx, b, world)
	if err != nil {
		t.Fatal(err)
	}
	if chk, err := index.VerifyCatalog(ctx, b, world, nil); err != nil || len(chk.Problems) != 0 {
		t.Fatalf("the catalog check: %v %+v", err, chk)
	}
	seen := map[string]bool{}
	var missing []string
	err = s.Fragments("", func(r index.FragmentRef) bool {
		if seen[r.Path] {
			return true
		}
		seen[r.Path] = true
		data, _, err := b.Get(ctx, r.Path)
		switch {
		case err != nil:
			missing = append(missing, fmt.Sprintf("%s (table %s, tick %d): %v", r.Path, r.Table, r.Tick, err))
		case frame.Digest(data) != r.Digest:
			missing = append(missing, r.Path+": other bytes than the catalog records")
		case r.Span != nil && isTick(s, r):
			if _, err := frame.ReadTickIndex(ctx, b, r.Fragment); err != nil {
				missing = append(missing, fmt.Sprintf("the tick index of %s: %v", r.Path, err))
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("the catalog names %d objects that are not in the bucket as recorded:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// isTick reports whether r is a tick's fragment (not a claim's, whose
// compacted files have no tick index).
func isTick(s *index.State, r index.FragmentRef) bool {
	t, ok := s.Tick(r.Run, r.Tick)
	return ok && t.CommitToken == r.Token
}

// heldCompaction starts `optimize` (gcChild) on the bucket in dir and holds
// it at the commit of its first entry, every file of it written; it
// returns once the child holds there, with the function that lets it go
// on and waits for it to exit.
func heldCompaction(t *testing.T, dir string) (finish func()) {
	t.Helper()
	cmd := crashtest.Command("gc", "optimize", dir)
	wait, release := crashtest.Hold(t, cmd, maintenance.FailpointCompactPublishing+"@1", t.TempDir())
	p := crashtest.Start(t, cmd)
	wait()
	return func() {
		t.Helper()
		release()
		if _, killed := p.Wait(); killed || !p.Cmd.ProcessState.Success() {
			t.Fatalf("the held compaction: %v", p.Cmd.ProcessState)
		}
	}
}

// collectNow collects w's world at the given retention on the real
// clock (or at now, if set), unsafe retentions allowed.
func collectNow(t *testing.T, b bucket.Bucket, cat *index.Catalog, retention time.Duration, now time.Time) maintenance.CollectResult {
	t.Helper()
	opts := maintenance.CollectOptions{Retention: retention, UnsafeRetention: true}
	if !now.IsZero() {
		opts.Now = func() time.Time { return now }
	}
	res, err := maintenance.Collect(ctxT(t), b, cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Invariant 16: a compaction held between writing its files (and their
// tick indexes) and committing the entry that names them, for longer than
// the retention, while collection runs at a retention of a millisecond:
// collection keeps the files (they carry the compaction's open intent),
// the entry lands, and the catalog never names a missing object. The same
// for a window of fresh fragments, a merge of compacted files and a
// compaction of facts.
func TestCollectionKeepsACompactionInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		// build makes the world the held compaction compacts and returns
		// what to check it did.
		build func(t *testing.T, b bucket.Bucket) (*engine.World, func(t *testing.T))
	}{
		{"window of fresh fragments", func(t *testing.T, b bucket.Bucket) (*engine.World, func(t *testing.T)) {
			w := simWorld(t, b, "w", 150)
			return w, func(t *testing.T) {
				if all, compacted := files(t, b, "w", 0, 127); compacted == 0 || all != compacted {
					t.Fatalf("ticks 0..127: %d files, %d compacted; want all compacted", all, compacted)
				}
			}
		}},
		{"merge of compacted files", func(t *testing.T, b bucket.Bucket) (*engine.World, func(t *testing.T)) {
			w := simWorld(t, b, "w", 150)
			if res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows != 2 {
				t.Fatalf("the first compaction: %+v, %v", res, err)
			}
			// Only the window 0..511 is due: it merges the compacted files of
			// 0..63 and 64..127 with the fragments after them.
			if err := drive(ctxT(t), w, 530); err != nil {
				t.Fatal(err)
			}
			return w, func(t *testing.T) {
				if all, compacted := files(t, b, "w", 0, 511); compacted == 0 || all != len(particles.Tables()) {
					t.Fatalf("ticks 0..511: %d files, %d compacted; want one compacted file a table", all, compacted)
				}
			}
		}},
		{"facts of a claim shard", func(t *testing.T, b bucket.Bucket) (*engine.World, func(t *testing.T)) {
			w := simWorld(t, b, "w", 5)
			// MinFacts (16) facts in one claim shard and a few elsewhere:
			// that shard alone is due, so the held entry is the only one.
			shard := index.ClaimShardOf(index.ClaimKey{Run: "main", Producer: "p", ExternalID: "0"})
			for i, n := 0, 0; n < 16; i++ {
				id := fmt.Sprint(i)
				if i >= 8 && index.ClaimShardOf(index.ClaimKey{Run: "main", Producer: "p", ExternalID: id}) != shard {
					continue
				}
				if index.ClaimShardOf(index.ClaimKey{Run: "main", Producer: "p", ExternalID: id}) == shard {
					n++
				}
				if _, err := w.Ingest(ctxT(t), reading("p", id, float64(i))); err != nil {
					t.Fatal(err)
				}
			}
			return w, func(t *testing.T) {
				s, _ := w.Catalog().Exact(ctxT(t))
				compacted := 0
				s.Claims("main", func(c *index.Claim) bool {
					if c.Tables[0].Fragments[0].Span != nil {
						compacted++
					}
					return true
				})
				if compacted != 16 {
					t.Fatalf("%d facts compacted; want the 16 of the due shard", compacted)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b, _ := local.Open(dir)
			w, compacted := tc.build(t, b)
			before, facts := visibleRows(t, b, "w", "main"), visibleFactRows(t, b, "w", "main")
			finish := heldCompaction(t, dir)
			// The held files are older than the retention by now, and no
			// tick names them yet.
			time.Sleep(2 * time.Millisecond)
			collectNow(t, b, w.Catalog(), time.Millisecond, time.Time{})
			finish()
			compacted(t)
			namesNoMissingObject(t, b, "w")
			if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
				t.Fatal("the visible rows changed")
			}
			if after := visibleFactRows(t, b, "w", "main"); !mapsEqual(facts, after) {
				t.Fatal("the visible facts changed")
			}
			// Closed with its work done, the intent keeps nothing more: a
			// collection now deletes what the compaction replaced.
			s, _ := w.Catalog().Exact(ctxT(t))
			if n := len(s.Intents()); n != 0 {
				t.Fatalf("%d intents open after the compaction ended", n)
			}
			if res := collectNow(t, b, w.Catalog(), time.Millisecond, time.Time{}); res.ByKind[maintenance.KindReplaced] == 0 && res.ByKind[maintenance.KindCompacted] == 0 {
				t.Fatalf("nothing replaced was collected after the compaction: %+v", res)
			}
			namesNoMissingObject(t, b, "w")
		})
	}
}

// An intent whose lease ended is closed by a collector; the compaction
// that held it then commits nothing (its entry is refused), its files are
// garbage that the same collection may delete, and the catalog names no
// missing object.
func TestCollectionClosesAnIntentPastItsLease(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	// One window only (0..63: 80 ticks, 10 recent), so that the entry
	// held is the compaction's only one.
	w := simWorld(t, b, "w", 80)
	before := visibleRows(t, b, "w", "main")
	finish := heldCompaction(t, dir)
	s, _ := w.Catalog().Exact(ctxT(t))
	if n := len(s.Intents()); n != 1 {
		t.Fatalf("%d intents open while a compaction holds; want 1", n)
	}
	held := s.Intents()[0]
	// A clock past the lease: the collector closes the intent, then
	// deletes its files as unnamed garbage.
	res := collectNow(t, b, w.Catalog(), time.Millisecond, time.UnixMilli(held.LeaseUntilMs).Add(time.Second))
	if res.ByKind[maintenance.KindIntent] != 1 || res.ByKind[maintenance.KindCompacted] == 0 {
		t.Fatalf("collection past the lease: %+v; want the intent closed and its files deleted", res)
	}
	finish()
	if all, compacted := files(t, b, "w", 0, 79); compacted != 0 || all == 0 {
		t.Fatalf("ticks 0..79 name %d compacted files of %d after their intent was closed; want none", compacted, all)
	}
	namesNoMissingObject(t, b, "w")
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("the visible rows changed")
	}
}

// The catalog refuses a compaction under an intent that is not open, and
// one naming a file not written under its intent.
func TestCompactionEntriesNeedTheirIntent(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 10)
	cat := w.Catalog()
	s, _ := cat.Exact(ctx)
	tk, _ := s.Tick("main", 3)
	tables, _ := tk.Tables()
	in, err := cat.OpenIntent(ctx, "a test", 0)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(intent, path string) error {
		f := tables[0].Fragments[0]
		f.Path, f.Span = path, &index.Span{From: 3, To: 3}
		s, _ := cat.Exact(ctx)
		_, err := cat.Commit(context.Background(), index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: &index.FragmentsRewrite{
			Run: "main", Span: &index.Span{From: 3, To: 3}, ReadSeq: s.Seq, Intent: intent,
			Tables: []index.TableFragments{{Table: tables[0].Table, Fragments: []index.Fragment{f}}}}})
		return err
	}
	foreign := index.CompactedPath("w", "main", tables[0].Table, "00", index.NewIntentID())
	if err := rewrite(in.ID(), foreign); err == nil || !strings.Contains(err.Error(), "not written under it") {
		t.Fatalf("a rewrite naming another intent's file: %v", err)
	}
	if err := in.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(in.ID(), index.CompactedPath("w", "main", tables[0].Table, "00", in.ID())); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Fatalf("a rewrite under a closed intent: %v", err)
	}
}

// A replaced fragment stays while the file that replaced it is missing:
// it is what can restore the rows (worldfs check names it). The others go.
func TestCollectionKeepsWhatCanRestoreALostFile(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 150)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows != 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _ := w.Catalog().Exact(ctx)
	tk, _ := s.Tick("main", 5)
	tables, _ := tk.Tables()
	lost := tables[0].Fragments[0]
	if err := bucket.DeleteOnce(ctx, b, lost.Path, lost.Generation); err != nil {
		t.Fatal(err)
	}
	// The ticks of the lost file's span keep their own fragments of its
	// table; every other replaced fragment goes.
	var want []string
	s.Ticks("main", lost.Span.From, func(tk *index.Tick) bool {
		if tk.Tick > lost.Span.To {
			return false
		}
		p := index.TickFragmentPath("w", "main", tables[0].Table, tk.CommitToken)
		if _, err := b.Stat(ctx, p); err == nil {
			want = append(want, p)
		}
		return true
	})
	var kept []string
	opts := maintenance.CollectOptions{Retention: time.Millisecond, UnsafeRetention: true, Report: func(c maintenance.Collected) {
		if c.Kept {
			kept = append(kept, c.Name)
		}
	}}
	time.Sleep(2 * time.Millisecond)
	res, err := maintenance.Collect(ctx, b, w.Catalog(), opts)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kept)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(kept, want) || res.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("kept %d objects (%v), want the %d fragments of the lost file's ticks; collected %+v", len(kept), kept, len(want), res)
	}
}
