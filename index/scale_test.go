package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
)

// A cold start allocates in proportion to the records it loads: a shard of
// a few records (most claim shards of a world with facts) costs a few
// records, not a fixed slab.
func TestColdLoadAllocatesByRecords(t *testing.T) {
	w := newScaleWorld(t, 4)
	w.factEvery = 20
	w.build(t, 10_000)
	bk, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	name, cp, err := WriteCheckpoint(ctx, bk, w.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	claimShards := 0
	for _, r := range cp.Shards {
		if r.Kind == "c" {
			claimShards++
		}
	}
	records := tickCount(w.s) + w.s.claims.Len()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, _, err := LoadCheckpoint(ctx, bk, "long", name)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(w.s, s); d != "" {
		t.Fatalf("the loaded state differs: %s", d)
	}
	// A tick costs its record, its tree and token entries and its share
	// of the decoded shard (about 200 bytes); 1 KiB each is generous.
	perRecord := float64(after.TotalAlloc-before.TotalAlloc) / float64(records)
	t.Logf("%d records (%d claim shards): %.0f bytes allocated each", records, claimShards, perRecord)
	if claimShards < 100 || perRecord > 1024 {
		t.Fatalf("%d records in %d claim shards allocated %.0f bytes each, want at most 1024", records, claimShards, perRecord)
	}
}

// The catalog at scale: what a long world costs in memory and at a cold
// start. Run with
//
//	go test ./index -run '^$' -bench 'CatalogMemory|CatalogLoad|CatalogSlice' -benchtime 1x -timeout 90m
//
// These are measurements, not assertions: they report numbers.

// scaleWorld builds, through ApplySlot (the replay path), the state of a
// world of ticks ticks of `tables` tables, as a writer publishing tick by
// tick and the engine's continuous compaction leave it: history compacted
// into aligned windows of 4,096 ticks, then 512 and 64, the newest 256
// ticks as published, and facts (one per 100 ticks) compacted per claim
// shard. Slots are not encoded: hashes are labels.
type scaleWorld struct {
	s      *State
	tables []string
	hashes int
	// factEvery: a fact lands every this many ticks (100).
	factEvery int64
	// uncompacted: no compaction runs (a history as published).
	uncompacted bool
}

func newScaleWorld(tb testing.TB, tables int) *scaleWorld {
	w := &scaleWorld{s: Empty("long"), factEvery: 100}
	for i := range tables {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		w.tables = append(w.tables, fmt.Sprintf("archetype%d-%s", i, hex.EncodeToString(sum[:8])))
	}
	w.apply(tb, Entry{Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: ModeResumable, CreatedUnixMs: 1}},
		Entry{Kind: KindFenceAcquire, FenceAcquire: &FenceAcquire{Holder: "writer"}})
	return w
}

// apply applies entries as one slot.
func (w *scaleWorld) apply(tb testing.TB, entries ...Entry) {
	w.hashes++
	n, err := w.s.ApplySlot(&Slot{Format: SlotFormat, World: w.s.World.ID, FirstSeq: w.s.Seq + 1, Prev: w.s.Hash, Entries: entries},
		fmt.Sprintf("%064x", w.hashes))
	if err != nil {
		tb.Fatal(err)
	}
	w.s = n
}

func scaleToken(kind string, n int64) string {
	sum := sha256.Sum256([]byte(kind + strconv.FormatInt(n, 10)))
	return hex.EncodeToString(sum[:16])
}

func scaleDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (w *scaleWorld) fragment(path string, rows int64, span *Span) Fragment {
	return Fragment{Path: path, Rows: rows, Bytes: 3000 + rows*40, Digest: scaleDigest(path), Generation: 1700000000000000 + int64(len(path))*7919, Span: span}
}

// publish is tick's publication: 50 rows per table.
func (w *scaleWorld) publish(tick int64) Entry {
	token := scaleToken("tick", tick)
	p := &TickPublish{Run: "main", Tick: tick, CommitToken: token, WriterEpoch: 1, NextEntity: 200, PublishedUnixMs: 1700000000000 + tick*20}
	for _, table := range w.tables {
		p.Tables = append(p.Tables, TableFragments{Table: table, Fragments: []Fragment{w.fragment(FragmentPath("long", "main", table, token, 0), 50, nil)}})
	}
	return Entry{Kind: KindTickPublish, TickPublish: p}
}

// compact rewrites window span of every table into one file, as
// maintenance.Compact would.
func (w *scaleWorld) compact(tb testing.TB, span Span) {
	rw := &FragmentsRewrite{Run: "main", Span: &span, ReadSeq: w.s.Seq}
	rows := (span.To - span.From + 1) * 50
	for _, table := range w.tables {
		path := CompactedPath("long", "main", table, scaleDigest(fmt.Sprint(table, span))[7:], "")
		rw.Tables = append(rw.Tables, TableFragments{Table: table, Fragments: []Fragment{w.fragment(path, rows, &span)}})
	}
	w.apply(tb, Entry{Kind: KindFragmentsRewrite, Rewrite: rw})
}

// fact acquires and completes a one-row fact at the run's head.
func (w *scaleWorld) fact(tb testing.TB, n int64) {
	key := ClaimKey{Run: "main", Producer: "sensor", ExternalID: "reading-" + strconv.FormatInt(n, 10)}
	token := scaleToken("fact", n)
	digest := scaleDigest(key.String())
	w.apply(tb, Entry{Kind: KindClaimAcquire, Claim: &ClaimOp{Key: key, Digest: digest, CommitToken: token, Holder: "writer", LeaseUntilMs: 2, NowMs: 1}})
	path := FragmentPath("long", "main", w.tables[0], token, 0)
	w.apply(tb, Entry{Kind: KindClaimComplete, Claim: &ClaimOp{Key: key, Digest: digest, CommitToken: token,
		Fragments: []TableFragments{{Table: w.tables[0], Fragments: []Fragment{w.fragment(path, 1, nil)}}}}})
}

const scaleRecent = 256

// build publishes ticks 0..ticks-1 in slots of 16, compacting 4,096-tick
// windows as they fall behind the recent ticks, and finishes with the
// smaller windows the engine's plan leaves.
func (w *scaleWorld) build(tb testing.TB, ticks int64) {
	var batch []Entry
	nextWindow := int64(0)
	for tick := range ticks {
		batch = append(batch, w.publish(tick))
		if len(batch) == 16 || tick == ticks-1 {
			w.apply(tb, batch...)
			batch = batch[:0]
		}
		if tick%w.factEvery == w.factEvery-1 {
			w.fact(tb, tick/w.factEvery)
		}
		if !w.uncompacted && tick-scaleRecent >= nextWindow+4095 && tick%16 == 15 {
			w.compact(tb, Span{From: nextWindow, To: nextWindow + 4095})
			nextWindow += 4096
		}
	}
	if w.uncompacted {
		return
	}
	for _, size := range []int64{4096, 512, 64} {
		for ; nextWindow+size-1 <= ticks-1-scaleRecent; nextWindow += size {
			w.compact(tb, Span{From: nextWindow, To: nextWindow + size - 1})
		}
	}
	// Facts compacted per claim shard, as the engine does.
	for shard := range int64(claimBuckets) {
		var rows int64
		lo, hi := int64(-1), int64(-1)
		w.s.Claims("main", func(c *Claim) bool {
			if c.shard == shard && c.State == ClaimComplete {
				rows++
				if lo < 0 {
					lo = c.Tick
				}
				lo, hi = min(lo, c.Tick), max(hi, c.Tick)
			}
			return true
		})
		if rows < 2 {
			continue
		}
		span := Span{From: max(lo, 0), To: max(hi, 0)}
		path := CompactedPath("long", "main", w.tables[0], scaleDigest(fmt.Sprint("facts", shard))[7:], "")
		w.apply(tb, Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "main", Facts: true, ClaimShard: shard, ReadSeq: w.s.Seq,
			Tables: []TableFragments{{Table: w.tables[0], Fragments: []Fragment{w.fragment(path, rows, &span)}}}}})
	}
}

// checkpointOf writes a checkpoint of s into a new local bucket under the
// test's directory: the bucket and the checkpoint's name.
func checkpointOf(tb testing.TB, s *State) (bucket.Bucket, string) {
	bk, err := local.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	name, _, err := WriteCheckpoint(context.Background(), bk, s, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return bk, name
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

var scaleSizes = []int64{10_000, 100_000, 1_000_000}

// BenchmarkCatalogMemory reports the resident size of a long world's
// catalog state: heap in use after a collection, in all and per tick, as
// built by replaying its log and as loaded from a checkpoint of it (and
// that load's time).
func BenchmarkCatalogMemory(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("ticks=%d", n), func(b *testing.B) {
			for range b.N {
				before := heapInuse()
				w := newScaleWorld(b, 4)
				w.build(b, n)
				after := heapInuse()
				runtime.KeepAlive(w)
				b.ReportMetric(float64(after-before)/(1<<20), "MiB")
				b.ReportMetric(float64(after-before)/float64(n), "B/tick")
				// The same state as a cold start loads it.
				bk, _ := checkpointOf(b, w.s)
				ctx := context.Background()
				w = nil
				before = heapInuse()
				start, cpu := time.Now(), cpuTime()
				s, _, err := Load(ctx, bk, "long")
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "load-ms")
				b.ReportMetric(float64((cpuTime() - cpu).Milliseconds()), "load-cpu-ms")
				after = heapInuse()
				runtime.KeepAlive(s)
				b.ReportMetric(float64(after-before)/(1<<20), "loaded-MiB")
			}
		})
	}
}

// BenchmarkCatalogLoad reports a cold start of a checkpointed long world:
// the checkpoint's write, then Load (the checkpoint and a tail of 200
// slots of one publish each, as a writer leaves them between checkpoints),
// and a lookup of one tick and of the head after it.
func BenchmarkCatalogLoad(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("ticks=%d", n), func(b *testing.B) {
			w := newScaleWorld(b, 4)
			w.build(b, n)
			dir := b.TempDir()
			bk, err := local.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			start := time.Now()
			if _, _, err := WriteCheckpoint(ctx, bk, w.s, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds()), "write-ms")
			for tick := n; tick < n+200; tick++ {
				slot := &Slot{Format: SlotFormat, World: "long", FirstSeq: w.s.Seq + 1, Prev: w.s.Hash, Store: "s", Entries: []Entry{w.publish(tick)}}
				data, hash, err := EncodeSlot(slot)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bucket.CreateOnce(ctx, bk, SlotName("long", slot.FirstSeq), data); err != nil {
					b.Fatal(err)
				}
				if w.s, err = w.s.ApplySlot(slot, hash); err != nil {
					b.Fatal(err)
				}
			}
			want := w.s
			w = nil
			runtime.GC()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				s, info, err := Load(ctx, bk, "long")
				if err != nil || info.SlotsReplayed != 200 || s.Seq != want.Seq {
					b.Fatalf("Load = %v (%+v)", err, info)
				}
				if _, ok := s.Tick("main", n/2); !ok {
					b.Fatal("no middle tick")
				}
				if _, ok := s.Last("main", n+199); !ok {
					b.Fatal("no head")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "load-ms")
			// CPU time (all goroutines) says more than wall time on a
			// shared machine.
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "load-cpu-ms")
		})
	}
}

// BenchmarkCatalogSlice reports what a reader of a slice of a long
// uncompacted history holds (every tick its own fragment lists, the worst
// case for memory): the state as a cold start loads it, after reading the
// files of 100 ticks (one checkpoint shard's lists decoded), and after
// reading every tick's (every shard's, which a format-3 cold start held
// from the start).
func BenchmarkCatalogSlice(b *testing.B) {
	const n = 100_000
	for range b.N {
		w := newScaleWorld(b, 4)
		w.uncompacted = true
		w.build(b, n)
		bk, _ := checkpointOf(b, w.s)
		ctx := context.Background()
		w = nil
		before := heapInuse()
		s, _, err := Load(ctx, bk, "long")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heapInuse()-before)/(1<<20), "loaded-MiB")
		v := &View{World: "long", Run: "main", Segments: []Segment{{Allowlist: s.Allowlist("main"), State: s}}}
		files := 0
		if err := v.Files(n/2, n/2+99, func(File) bool { files++; return true }); err != nil || files < 400 {
			b.Fatalf("Files = %v (%d files)", err, files)
		}
		b.ReportMetric(float64(heapInuse()-before)/(1<<20), "slice-MiB")
		if err := s.Fragments("", func(FragmentRef) bool { return true }); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heapInuse()-before)/(1<<20), "all-MiB")
		runtime.KeepAlive(s)
	}
}
