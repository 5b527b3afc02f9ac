package index

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

// summaryWorld commits to a new world w of b ticks 0, step, 2·step, ...
// below n, every window of `window` tick numbers compacted into one file
// (span rewrite), then fresh ticks n..n+9, and writes a checkpoint.
func summaryWorld(t *testing.T, n, step, window int64) (*mem.Bucket, *Catalog, func() *State) {
	t.Helper()
	b := memBucket()
	c := summaryWorldOn(t, b, n, step, window)
	return b, c, func() *State {
		p, _, err := LoadSummarized(ctxT(t), b, "w")
		if err != nil {
			t.Fatal(err)
		}
		return p.s
	}
}

// summaryWorldOn is summaryWorld on bucket b.
func summaryWorldOn(t *testing.T, b bucket.Bucket, n, step, window int64) *Catalog {
	t.Helper()
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	for lo := int64(0); lo < n; lo += window {
		var es []Entry
		for tk := lo; tk < min(lo+window, n); tk += step {
			es = append(es, ownPublish("w", "main", tk, fmt.Sprintf("t%d", tk), epoch))
		}
		if _, err := c.CommitAll(ctx, es...); err != nil {
			t.Fatal(err)
		}
		tip, err := c.Exact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		file := Fragment{Path: CompactedPath("w", "main", "pos", fmt.Sprint(lo), ""), Rows: int64(len(es)), Span: &Span{From: lo, To: min(lo+window, n) - 1}}
		rw := &FragmentsRewrite{Run: "main", Span: file.Span, ReadSeq: tip.Seq, Tables: []TableFragments{{Table: "pos", Fragments: []Fragment{file}}}}
		if _, err := c.Commit(ctx, Entry{Kind: KindFragmentsRewrite, Rewrite: rw}); err != nil {
			t.Fatal(err)
		}
	}
	for tk := n; tk < n+10; tk++ {
		if _, err := c.Commit(ctx, ownPublish("w", "main", tk, fmt.Sprintf("t%d", tk), epoch)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// filesOf lists what v.Files(from, to) gives (of a View or a Plan).
func filesOf(v interface {
	Files(from, to int64, fn func(File) bool) error
}, from, to int64) ([]string, error) {
	var out []string
	err := v.Files(from, to, func(f File) bool {
		out = append(out, fmt.Sprintf("%s@%d/%s/%d keep %v", f.Path, f.Tick, f.Token, f.Epoch, f.Keep))
		return true
	})
	return out, err
}

// View.Files and View.Visible of a state holding summaries (LoadSummarized)
// answer as those of the whole state, for every bound, or refuse
// (ErrNotLoaded) where a summary cannot tell: never another answer. With
// ticks numbered without gaps only a start inside a stretch is refused.
func TestSummarizedViewsAnswerAsTheWholeState(t *testing.T) {
	for _, c := range []struct{ n, step, window int64 }{{3 * tickShardSpan, 1, 3000}, {2 * tickShardSpan, 2, 2 * tickShardSpan}} {
		t.Run(fmt.Sprintf("step%d", c.step), func(t *testing.T) {
			_, cat, load := summaryWorld(t, c.n, c.step, c.window)
			whole, err := cat.Exact(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			sum := load()
			if len(sum.part.sums) != int(c.n/tickShardSpan) {
				t.Fatalf("%d shards summarized, want %d", len(sum.part.sums), c.n/tickShardSpan)
			}
			// Decoded, the summarized state is the whole state; it stays
			// summarized itself.
			u, err := (&Partial{s: sum}).LoadAll(ctxT(t))
			if err != nil || u.part != nil {
				t.Fatalf("LoadAll: %v (partial: %v)", err, u.part != nil)
			}
			if d := diff(u, whole); d != "" {
				t.Fatalf("the state decoded whole differs from the whole state: %s", d)
			}
			if len(sum.part.sums) == 0 {
				t.Fatal("LoadAll changed the state it decoded")
			}
			wv, sv := OwnView(whole, "main"), OwnView(sum, "main")
			bounds := []int64{math.MinInt64, 0, 1, 2999, 3000, 3001, tickShardSpan - 1, tickShardSpan, tickShardSpan + 1, c.n - 1, c.n, c.n + 5, math.MaxInt64}
			refused := 0
			for _, from := range bounds {
				for _, to := range bounds {
					want, err := filesOf(wv, from, to)
					if err != nil {
						t.Fatal(err)
					}
					got, err := filesOf(sv, from, to)
					if errors.Is(err, ErrNotLoaded) {
						refused++
						if c.step == 1 && (from == math.MinInt64 || from%c.window == 0) {
							t.Fatalf("files %d..%d refused: %v", from, to, err)
						}
						continue
					}
					if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("files %d..%d from summaries: %v, %v\nwant %v", from, to, got, err, want)
					}
				}
				wantV, err := wv.Visible(from)
				if err != nil {
					t.Fatal(err)
				}
				gotV, err := sv.Visible(from)
				if errors.Is(err, ErrNotLoaded) && c.step > 1 {
					refused++
					continue
				}
				if err != nil || *gotV != *wantV {
					t.Fatalf("visible up to %d from summaries: %v, %v; want %v", from, gotV, err, wantV)
				}
			}
			if refused == 0 {
				t.Fatal("no bound was refused: the summaries were not read")
			}
		})
	}
}

// A checkpoint writes the summaries of the tick shards it writes that
// name only compacted files: a shard with a fresh tick has none until its
// ticks are compacted.
func TestSummariesFollowTheShardsWritten(t *testing.T) {
	ctx := ctxT(t)
	b, cat, load := summaryWorld(t, 2*tickShardSpan, 1, tickShardSpan)
	count := func() int {
		t.Helper()
		n := 0
		for a, err := range b.List(ctx, ShardPrefix("w"), "") {
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := ShardOfSummary(a.Name); ok {
				n++
			}
		}
		return n
	}
	if n, held := count(), len(load().part.sums); n != 2 || held != 2 {
		t.Fatalf("%d summaries written, %d read; want those of the 2 compacted shards", n, held)
	}
	// The fresh ticks 8192..8201 compacted: their shard gets its summary.
	tip, err := cat.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := Fragment{Path: CompactedPath("w", "main", "pos", "fresh", ""), Rows: 10, Span: &Span{From: 2 * tickShardSpan, To: 2*tickShardSpan + 9}}
	rw := &FragmentsRewrite{Run: "main", Span: file.Span, ReadSeq: tip.Seq, Tables: []TableFragments{{Table: "pos", Fragments: []Fragment{file}}}}
	if _, err := cat.Commit(ctx, Entry{Kind: KindFragmentsRewrite, Rewrite: rw}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	s := load()
	if n, held := count(), len(s.part.sums); n != 3 || held != 3 {
		t.Fatalf("after the fresh ticks' compaction: %d summaries written, %d read; want 3", n, held)
	}
	if sp, err := OwnView(s, "main").Visible(math.MaxInt64); err != nil || *sp != (Span{From: 0, To: 2*tickShardSpan + 9}) {
		t.Fatalf("visible ticks from summaries alone: %v, %v", sp, err)
	}
}

// WriteSummaries writes the summaries a checkpoint's shards lack (those
// an older worldfs wrote without them), then none.
func TestWriteSummariesFillsWhatIsMissing(t *testing.T) {
	ctx := ctxT(t)
	b, _, load := summaryWorld(t, 2*tickShardSpan, 1, tickShardSpan)
	for a, err := range b.List(ctx, ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ShardOfSummary(a.Name); ok || strings.HasSuffix(a.Name, summariesSuffix) {
			if err := bucket.DeleteOnce(ctx, b, a.Name, a.Generation); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(load().part.sums); n != 0 {
		t.Fatalf("%d summaries read after they were deleted", n)
	}
	if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n.Summaries != 2 || !n.CheckpointSummaries {
		t.Fatalf("WriteSidecars wrote %+v, %v; want 2 summaries and the checkpoint's", n, err)
	}
	if n := len(load().part.sums); n != 2 {
		t.Fatalf("%d summaries read after WriteSummaries; want 2", n)
	}
	if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n.Summaries != 0 || n.CheckpointSummaries {
		t.Fatalf("WriteSidecars again wrote %+v, %v; want none", n, err)
	}
}

// The catalog check compares each summary with its shard's ticks: one
// that decodes and checks out but tells another token is a problem.
func TestVerifyCatalogComparesSummaries(t *testing.T) {
	ctx := ctxT(t)
	b, _, _ := summaryWorld(t, 2*tickShardSpan, 1, tickShardSpan)
	if chk, err := VerifyCatalog(ctx, b, "w", nil); err != nil || len(chk.Problems) != 0 {
		t.Fatalf("the check of a sound world: %+v, %v", chk, err)
	}
	newest, shards := newestShards(t, b)
	r := shards[0]
	sum, err := readSummary(ctx, b, "w", newest, r)
	if err != nil || sum == nil {
		t.Fatalf("summary of %v: %v, %v", r.key(), sum, err)
	}
	sum.spans[0].Token = "another"
	buckettest.Replace(t, b, ShardSummaryName("w", r.Hash), sum.encode())
	chk, err := VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(chk.Problems) != 1 {
		t.Fatalf("the check of a world with a misleading summary: %+v, %v; want one problem", chk, err)
	}
	// The same summary in the checkpoint's summaries object, sealed
	// anew: one more problem.
	cp, err := readCheckpoint(ctx, b, "w", newest)
	if err != nil {
		t.Fatal(err)
	}
	_, _, entries, _, err := readSummaries(ctx, b, "w", newest, cp)
	if err != nil || entries[r.Hash] == nil {
		t.Fatalf("the checkpoint's summaries: %v, %v", entries, err)
	}
	entries[r.Hash] = sum.encode()
	buckettest.Replace(t, b, CheckpointSummariesName("w", cp.Sum), encodeSummaries(cp, entries))
	chk, err = VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(chk.Problems) != 2 {
		t.Fatalf("the check of a world with a misleading summary in its checkpoint's summaries too: %+v, %v; want two problems", chk, err)
	}
}

// A log collected behind a checkpoint starts from it: with no slot left
// to compare the checkpoint with, the check still reads its sidecars,
// and a damaged summary or token filter of it is a problem.
func TestVerifyCatalogChecksTheCheckpointALogStartsFrom(t *testing.T) {
	ctx := ctxT(t)
	b, _, _ := summaryWorld(t, 2*tickShardSpan, 1, tickShardSpan)
	plan := collectLog(t, b)
	// Only the base stays: a checkpoint after it, sharing its shards,
	// would be compared with the log and its sidecars checked with it.
	newest, _ := newestShards(t, b)
	if newest == CheckpointName("w", plan.Base) {
		t.Fatalf("the newest checkpoint %s is the base", newest)
	}
	buckettest.Replace(t, b, newest, nil)
	chk, err := VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(chk.Problems) != 0 || len(chk.Checkpoints) != 0 || chk.FirstSlot != plan.Base+1 {
		t.Fatalf("the check of a sound collected world: %+v, %v; want no problem, no checkpoint compared, the log from slot %d", chk, err, plan.Base+1)
	}
	newest, shards := newestShards(t, b)
	if newest != CheckpointName("w", plan.Base) {
		t.Fatalf("the newest checkpoint is %s, not the one the log starts from (%d)", newest, plan.Base)
	}
	r := tickShardOf(t, shards, "main", 0)
	flip := func(name string) {
		t.Helper()
		data, _, err := b.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		buckettest.Replace(t, b, name, data)
	}
	for i, name := range []string{ShardSummaryName("w", r.Hash), ShardTokenFilterName("w", r.Hash)} {
		flip(name)
		chk, err := VerifyCatalog(ctx, b, "w", nil)
		if err != nil || len(chk.Problems) != i+1 {
			t.Fatalf("the check after %s was damaged: %+v, %v; want %d problems", name, chk, err, i+1)
		}
		if !strings.Contains(chk.Problems[i], newest) {
			t.Fatalf("problem %q does not name checkpoint %s", chk.Problems[i], newest)
		}
	}
}

// LoadSummarizedAtMost decodes at most the parts it is given leave to: a
// history mostly without summaries, or a world without a checkpoint,
// fails with ErrUnsummarized before any part is decoded; within the
// bound it loads what LoadSummarized loads.
func TestLoadSummarizedAtMost(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	spanWorld(t, b, 3*tickShardSpan+100) // five tick parts, none summarized
	b.shards.Store(0)
	if _, _, err := LoadSummarizedAtMost(ctx, b, "w", 2); !errors.Is(err, ErrUnsummarized) || b.shards.Load() != 0 {
		t.Fatalf("at most 2 of 5 parts without summaries: %v, %d parts decoded; want ErrUnsummarized and none", err, b.shards.Load())
	}
	got, _, err := LoadSummarizedAtMost(ctx, b, "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := LoadSummarized(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(got.s, want.s); d != "" {
		t.Fatalf("within the bound, a load differs from LoadSummarized's: %s", d)
	}
	newWorld(t, b, "young", Options{NoCompactor: true})
	if _, _, err := LoadSummarizedAtMost(ctx, b, "young", 10); !errors.Is(err, ErrUnsummarized) {
		t.Fatalf("a world without a checkpoint: %v; want ErrUnsummarized", err)
	}
}

// A views load reads a checkpoint's summaries in one object, which also
// tells the shards that have none, and plans from them as from the
// shards' own; without the object it reads those. A damaged
// object fails closed (ErrCorrupt), whatever the shards' summaries say.
func TestCheckpointSummariesReadInOne(t *testing.T) {
	ctx := ctxT(t)
	mb, _, _ := summaryWorld(t, 3*tickShardSpan, 1, tickShardSpan)
	b := &countingBucket{Bucket: mb}
	load := func() (*State, int64, int64) {
		t.Helper()
		b.summaries.Store(0)
		b.checkpointSummaries.Store(0)
		p, _, err := LoadSummarized(ctx, b, "w")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(p.s.part.sums); n != 3 {
			t.Fatalf("%d shards summarized, want the 3 compacted", n)
		}
		return p.s, b.checkpointSummaries.Load(), b.summaries.Load()
	}
	plan := func(s *State) string {
		t.Helper()
		files, err := filesOf(OwnView(s, "main"), math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		v, err := OwnView(s, "main").Visible(math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(files, *v)
	}
	s, objects, shardSums := load()
	// The fresh ticks' shard has no summary, which its entry says.
	if objects != 1 || shardSums != 0 {
		t.Fatalf("a load read %d checkpoint summaries objects and %d shard summaries; want 1 and none", objects, shardSums)
	}
	want := plan(s)

	newest, _, err := newestCheckpoint(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := readCheckpoint(ctx, b, "w", newest)
	if err != nil {
		t.Fatal(err)
	}
	name := CheckpointSummariesName("w", cp.Sum)
	a, err := b.Stat(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.DeleteOnce(ctx, b, name, a.Generation); err != nil {
		t.Fatal(err)
	}
	s, _, shardSums = load()
	if shardSums != 4 {
		t.Fatalf("without the summaries object a load read %d shard summaries; want the 4 tick shards'", shardSums)
	}
	if got := plan(s); got != want {
		t.Fatalf("planned from the shards' summaries: %s\nfrom the checkpoint's: %s", got, want)
	}

	damaged := slices.Clone(data)
	damaged[len(damaged)-1] ^= 1
	if _, err := b.Create(ctx, name, damaged); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadSummarized(ctx, b, "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a load with a damaged summaries object: %v; want ErrCorrupt", err)
	}
}

// A checkpoint writer that holds neither a shard's ticks nor its summary
// object (one an older worldfs wrote) gives it no entry: a load reads the
// shard's own summary, so one written later (worldfs optimize) is read.
// Shards whose ticks it holds get their entry from them.
func TestCheckpointSummariesLeaveOutWhatTheWriterCannotTell(t *testing.T) {
	ctx := ctxT(t)
	mb, _, _ := summaryWorld(t, 3*tickShardSpan, 1, tickShardSpan)
	b := &countingBucket{Bucket: mb}
	// An older worldfs: no summaries object, and shards 0 and 1 without
	// their summaries.
	prev, shards := dropSummariesObject(t, b)
	for _, n := range []int64{0, 1} {
		buckettest.Replace(t, b, ShardSummaryName("w", tickShardOf(t, shards, "main", n).Hash), nil)
	}
	// A writer holding shard 0's ticks and the head's (the fresh ticks'
	// shard 3), not shard 1's, checkpoints again.
	part, _, err := LoadFor(ctx, b, "w", Want{Run: "main", From: 0, To: 0, Head: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteCheckpoint(ctx, b, part.s, prev); err != nil {
		t.Fatal(err)
	}
	_, _, entries, ok, err := readSummaries(ctx, b, "w", CheckpointName("w", prev.Seq), prev)
	if err != nil || !ok {
		t.Fatalf("the summaries object written: %v, %v", ok, err)
	}
	if e, has := entries[tickShardOf(t, shards, "main", 0).Hash]; !has || len(e) == 0 {
		t.Fatal("shard 0, whose ticks the writer holds, has no summary in the object")
	}
	if _, has := entries[tickShardOf(t, shards, "main", 1).Hash]; has {
		t.Fatal("shard 1, whose ticks the writer does not hold, has an entry")
	}
	if e, has := entries[tickShardOf(t, shards, "main", 3).Hash]; !has || len(e) != 0 {
		t.Fatal("shard 3, of fresh ticks, has no entry saying it has no summary")
	}
	if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n.Summaries != 2 {
		t.Fatalf("WriteSidecars wrote %+v, %v; want the summaries of shards 0 and 1", n, err)
	}
	b.summaries.Store(0)
	s, _, err := LoadSummarized(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if n, read := len(s.s.part.sums), b.summaries.Load(); n != 3 || read != 1 {
		t.Fatalf("a load holds %d summaries, reading %d shards' own; want 3, reading shard 1's", n, read)
	}
}

// A checkpoint writer that takes a shard's summary from its own object
// (the previous checkpoint left no summaries object) carries no damage
// into the checkpoint's: a damaged summary object, emptied or with a byte
// flipped, gets no entry, so a load reads it and fails closed
// (ErrCorrupt) as it did without the summaries object, never reading the
// shard as one without a summary; and once the summary is written anew
// (worldfs optimize) a load plans from it again. On a local bucket, whose
// reads give an emptied object as no bytes, not nil.
func TestCheckpointSummariesCarryNoDamagedSummary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"emptied", func([]byte) []byte { return []byte{} }},
		{"flipped", func(data []byte) []byte {
			data = slices.Clone(data)
			data[len(data)/2] ^= 1
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			b, err := local.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			summaryWorldOn(t, b, 3*tickShardSpan, 1, tickShardSpan)
			// An older worldfs left no summaries object; shard 0's
			// summary is damaged.
			prev, shards := dropSummariesObject(t, b)
			sum0 := ShardSummaryName("w", tickShardOf(t, shards, "main", 0).Hash)
			data, _, err := b.Get(ctx, sum0)
			if err != nil {
				t.Fatal(err)
			}
			buckettest.Replace(t, b, sum0, tc.damage(data))
			s, _, err := Load(ctx, b, "w")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := WriteCheckpoint(ctx, b, s, prev); err != nil {
				t.Fatal(err)
			}
			if _, _, err := LoadSummarized(ctx, b, "w"); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a load with shard 0's summary %s: %v; want ErrCorrupt", tc.name, err)
			}
			// The summary written anew: a load plans from it.
			buckettest.Replace(t, b, sum0, nil)
			if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n.Summaries != 1 {
				t.Fatalf("WriteSidecars wrote %+v, %v; want shard 0's summary", n, err)
			}
			p, _, err := LoadSummarized(ctx, b, "w")
			if err != nil {
				t.Fatalf("a load after shard 0's summary was written anew: %v", err)
			}
			if n := len(p.s.part.sums); n != 3 {
				t.Fatalf("a load after shard 0's summary was written anew holds %d summaries; want the 3 compacted shards'", n)
			}
		})
	}
}

// dropSummariesObject deletes the summaries object of world w's newest
// checkpoint, as a worldfs that wrote none left it, and returns that
// checkpoint and its shards.
func dropSummariesObject(t *testing.T, b bucket.Bucket) (*checkpoint, []shardRef) {
	t.Helper()
	newest, shards := newestShards(t, b)
	cp, err := readCheckpoint(ctxT(t), b, "w", newest)
	if err != nil {
		t.Fatal(err)
	}
	buckettest.Replace(t, b, CheckpointSummariesName("w", cp.Sum), nil)
	return cp, shards
}
