package index

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

// fill commits n publishes on run "r" (plus a claim every 10th and a
// command enqueued and later settled every 14th), one slot each, and
// returns the catalog's tip.
func fill(t *testing.T, c *Catalog, epoch int64, from, n int) *State {
	t.Helper()
	ctx := ctxT(t)
	for i := from; i < from+n; i++ {
		e := publish("r", int64(i), fmt.Sprint("t", i), epoch)
		if i%14 == 13 {
			e = settling(e, fmt.Sprint("cmd", i-7))
		}
		if _, err := c.Commit(ctx, e); err != nil {
			t.Fatal(err)
		}
		if i%14 == 6 {
			if _, err := c.Commit(ctx, enqueue(fmt.Sprint("cmd", i), int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		if i%10 == 0 {
			e := claimEntry(KindClaimAcquire, "r", "p", fmt.Sprint("e", i), "d", fmt.Sprint("c", i), "h", 1, 2)
			if _, err := c.Commit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c.Tip()
}

func TestCheckpointEqualsReplay(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 5000) // spans two tick shards
	ctx := ctxT(t)
	seq, err := c.Checkpoint(ctx)
	if err != nil || seq != c.Tip().Seq {
		t.Fatalf("Checkpoint = %d, %v", seq, err)
	}
	live := fill(t, c, epoch, 5000, 30)
	fromCheckpoint, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != seq || info.SlotsReplayed != 35 { // 30 publishes, 3 claims, 2 commands
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	if d := diff(live, fromCheckpoint); d != "" {
		t.Fatalf("checkpoint + slots differs from the live state: %s", d)
	}
	// Replay from checkpoint zero: the log alone gives the same state.
	replayed := Empty("w")
	for a, err := range b.List(ctx, LogPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		if replayed, _, err = readSlot(ctx, b, replayed, a.Name); err != nil {
			t.Fatal(err)
		}
	}
	if d := diff(live, replayed); d != "" {
		t.Fatalf("replay from zero differs from the live state: %s", d)
	}
}

// Racing compactors write identical bytes, from live or reloaded states.
func TestRacingCompactorsWriteIdenticalBytes(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	live := fill(t, c, epoch, 0, 300)
	ctx := ctxT(t)
	reloaded, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	bkA, bkB := mem.New(mem.Options{}), mem.New(mem.Options{})
	var wg sync.WaitGroup
	for _, x := range []struct {
		b bucket.Bucket
		s *State
	}{{bkA, live}, {bkB, reloaded}, {b, live}, {b, reloaded}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := WriteCheckpoint(ctx, x.b, x.s, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	name := CheckpointName("w", live.Seq)
	a, _, _ := bkA.Get(ctx, name)
	bb, _, _ := bkB.Get(ctx, name)
	if len(a) == 0 || !bytes.Equal(a, bb) {
		t.Fatalf("two compactors wrote different checkpoints (%d vs %d bytes)", len(a), len(bb))
	}
	objsA, _ := bucket.Collect(bkA.List(ctx, "", ""))
	objsB, _ := bucket.Collect(bkB.List(ctx, "", ""))
	if len(objsA) != len(objsB) {
		t.Fatalf("%d vs %d objects", len(objsA), len(objsB))
	}
	for i := range objsA {
		x, _, _ := bkA.Get(ctx, objsA[i].Name)
		y, _, _ := bkB.Get(ctx, objsB[i].Name)
		if objsA[i].Name != objsB[i].Name || !bytes.Equal(x, y) {
			t.Fatalf("object %s differs", objsA[i].Name)
		}
	}
}

// A checkpoint writes only the shards that changed since the previous
// one, and its summaries object (summary.go), whose entries for the other
// shards it takes from the previous checkpoint's: it reads no shard's
// summary.
func TestCheckpointCostFollowsChange(t *testing.T) {
	b := &countingBucket{Bucket: memBucket()}
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 3*tickShardSpan)
	ctx := ctxT(t)
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// The shards, and their sidecars (a token filter beside each tick
	// shard: tokenfilter.go).
	shards := func() (n, sidecars, summaries int) {
		all, _ := bucket.Collect(b.List(ctx, WorldPrefix("w")+"state/", ""))
		for _, a := range all {
			if _, ok := ShardOfSidecar(a.Name); ok {
				sidecars++
			} else if strings.HasSuffix(a.Name, summariesSuffix) {
				summaries++
			} else {
				n++
			}
		}
		return n, sidecars, summaries
	}
	before, sidecarsBefore, summariesBefore := shards()
	fill(t, c, epoch, 3*tickShardSpan+25, 5) // one tick shard changes (no claim or command)
	b.summaries.Store(0)
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	n, sidecars, summaries := shards()
	if wrote := n - before; wrote != 1 {
		t.Fatalf("an incremental checkpoint wrote %d shards, want 1 (of %d)", wrote, before+1)
	}
	if wrote := sidecars - sidecarsBefore; wrote != 1 {
		t.Fatalf("an incremental checkpoint wrote %d sidecars, want the token filter of its one tick shard", wrote)
	}
	if wrote, read := summaries-summariesBefore, b.summaries.Load(); wrote != 1 || read != 0 {
		t.Fatalf("an incremental checkpoint wrote %d summaries objects and read %d shard summaries; want its own and none", wrote, read)
	}
}

func TestOldCheckpointsCollected(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true, KeepCheckpoints: 3, KeepCheckpointAge: time.Nanosecond})
	ctx := ctxT(t)
	for i := range 6 {
		fill(t, c, epoch, i*10, 10)
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cps, _ := bucket.Collect(b.List(ctx, CheckpointPrefix("w"), ""))
	if len(cps) != 3 || cps[2].Name != CheckpointName("w", c.Tip().Seq) {
		t.Fatalf("%d checkpoints kept, want the newest 3", len(cps))
	}
	// Young checkpoints stay whatever their number.
	if n, err := CollectCheckpoints(ctx, b, "w", 1, time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("collected %d young checkpoints, %v", n, err)
	}
}

func TestAutomaticCheckpoint(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{CheckpointSlots: 50, CheckpointDelay: time.Millisecond})
	tip := fill(t, c, epoch, 0, 60)
	// The committer starts the compactor (bg.Add) when it decides the 50th
	// slot, before it takes the next commit, so once fill has returned the
	// compactor has started: waiting for it is deterministic.
	c.bg.Wait()
	if n := c.Stats().Checkpoints; n != 1 {
		t.Fatalf("%d checkpoints after %d slots, want 1", n, tip.Slots)
	}
	newest, _, err := newestCheckpoint(ctxT(t), b, "w")
	if err != nil || checkpointSeq("w", newest) < 50 {
		t.Fatalf("newest checkpoint %q (%v), want one at or past sequence 50", newest, err)
	}
}

// Corrupt catalog data fails closed: the world does not open.
func TestCorruptCatalogFailsClosed(t *testing.T) {
	// The memory bucket's log is listed after the checkpoint, the local
	// bucket's is followed by name (load): both fail closed.
	backends := map[string]func(t *testing.T) bucket.Bucket{
		"mem": func(*testing.T) bucket.Bucket { return memBucket() },
		"local": func(t *testing.T) bucket.Bucket {
			b, err := local.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	build := func(t *testing.T, backend string) (bucket.Bucket, *State, uint64) {
		b := backends[backend](t)
		c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
		fill(t, c, epoch, 0, 20)
		cp, err := c.Checkpoint(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return b, fill(t, c, epoch, 20, 5), cp
	}
	forge := func(t *testing.T, b bucket.Bucket, n string, change func(*Slot)) {
		data, _, _ := b.Get(ctxT(t), n)
		slot, _, _ := DecodeSlot("w", n, data)
		change(slot)
		forged, _, _ := EncodeSlot(slot)
		buckettest.Replace(t, b, n, forged)
	}
	for name, corrupt := range map[string]func(t *testing.T, b bucket.Bucket, s *State, cp uint64){
		"flipped slot byte": func(t *testing.T, b bucket.Bucket, s *State, _ uint64) {
			n := SlotName("w", s.Seq)
			data, _, _ := b.Get(ctxT(t), n)
			data[len(data)/2] ^= 0x55
			buckettest.Replace(t, b, n, data)
		},
		"broken hash chain": func(t *testing.T, b bucket.Bucket, s *State, _ uint64) {
			forge(t, b, SlotName("w", s.Seq), func(slot *Slot) { slot.Prev = strings.Repeat("0", 64) })
		},
		"slot of another world": func(t *testing.T, b bucket.Bucket, _ *State, cp uint64) {
			forge(t, b, SlotName("w", cp+2), func(slot *Slot) { slot.World = "v" })
		},
		"gap in the log": func(t *testing.T, b bucket.Bucket, s *State, _ uint64) {
			buckettest.Replace(t, b, SlotName("w", s.Seq-1), nil)
		},
		"gap right after the checkpoint": func(t *testing.T, b bucket.Bucket, _ *State, cp uint64) {
			buckettest.Replace(t, b, SlotName("w", cp+1), nil)
		},
		"missing checkpoint shard": func(t *testing.T, b bucket.Bucket, s *State, _ uint64) {
			// A shard the checkpoint lists, not one of the sidecars
			// beside the shards, whose loss only costs a reader time.
			_, shards := newestShards(t, b)
			buckettest.Replace(t, b, ShardName("w", shards[0].Hash), nil)
		},
		"corrupt checkpoint": func(t *testing.T, b bucket.Bucket, s *State, _ uint64) {
			cps, _ := bucket.Collect(b.List(ctxT(t), CheckpointPrefix("w"), ""))
			buckettest.Replace(t, b, cps[0].Name, []byte(`{"format":1,"world":{"ID":"w"},"seq":3}`))
		},
	} {
		for backend := range backends {
			t.Run(backend+"/"+name, func(t *testing.T) {
				b, s, cp := build(t, backend)
				corrupt(t, b, s, cp)
				if _, err := Open(ctxT(t), b, "w", Options{NoCompactor: true}); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open of a corrupt catalog = %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

// A world checkpointed by a format-1 writer (testdata/format1: ticks 0 and
// 1, a completed claim, a checkpoint at sequence 6, then tick 2) still
// opens; its next checkpoint is the current format and loads the same.
func TestFormat1CheckpointStillLoads(t *testing.T) {
	b := fixtureBucket(t, "testdata/format1")
	ctx := ctxT(t)
	s, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != 6 || info.SlotsReplayed != 1 {
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	c, ok := s.Claim(ClaimKey{Run: "main", Producer: "p", ExternalID: "e"})
	if run, _ := s.Run("main"); !ok || c.State != ClaimComplete || run.Head != 2 {
		t.Fatalf("claim %+v, run %+v", c, run)
	}
	partialsAlike(t, b, s)
	checkpointsAlike(t, b, s, 7)
}

// A released claim is released in checkpoints as in the live state, its
// shard loads back, and the feed carries the release.
func TestReleaseInCheckpointAndFeed(t *testing.T) {
	b := memBucket()
	c, _ := newWorld(t, b, "w", Options{NoCompactor: true})
	ctx := ctxT(t)
	for _, e := range []Entry{
		claimEntry(KindClaimAcquire, "r", "p", "kept", "d", "c1", "h", 1, 2),
		claimEntry(KindClaimAcquire, "r", "p", "gone", "d", "c2", "h", 1, 2),
		claimEntry(KindClaimRelease, "r", "p", "gone", "d", "c2", "h", 1, 0),
	} {
		if _, err := c.Commit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	seq, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loaded, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != seq {
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	if d := diff(c.Tip(), loaded); d != "" {
		t.Fatalf("the checkpoint differs from the live state: %s", d)
	}
	if c, ok := loaded.Claim(ClaimKey{Run: "r", Producer: "p", ExternalID: "gone"}); !ok || c.State != ClaimReleased || c.Digest != "d" {
		t.Fatalf("the released claim in the checkpoint: %+v, %v", c, ok)
	}
	if _, ok := loaded.Claim(ClaimKey{Run: "r", Producer: "p", ExternalID: "kept"}); !ok {
		t.Fatal("the other claim is not")
	}
	changes, err := collectChanges(t, c, 1, int(seq))
	if err != nil {
		t.Fatal(err)
	}
	if last := changes[len(changes)-1].Entry; last.Kind != KindClaimRelease || last.Claim.Key.ExternalID != "gone" {
		t.Fatalf("the feed's last change: %+v", last)
	}
}

// A world checkpointed by a format-2 writer (testdata/format2: fragments
// without generations; ticks 0 and 1, a completed claim, a checkpoint at
// sequence 6, then tick 2) still opens, its fragments read with generation
// 0 (checked by size and digest only), and its next checkpoint is the
// current format and loads the same.
func TestFormat2CheckpointStillLoads(t *testing.T) {
	b := fixtureBucket(t, "testdata/format2")
	ctx := ctxT(t)
	s, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != 6 || info.SlotsReplayed != 1 {
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	tk, ok := s.Tick("main", 1)
	if !ok || len(tablesOf(t, tk)) != 1 || tablesOf(t, tk)[0].Fragments[0] != (Fragment{Path: FragmentPath("w", DefaultRun, "position", "t1", 0), Rows: 11, Bytes: 1001, Digest: "d-t1"}) {
		t.Fatalf("tick 1 from the format-2 checkpoint: %+v", tk)
	}
	partialsAlike(t, b, s)
	checkpointsAlike(t, b, s, 7)
}

// writeFixture writes the world of the checkpoint fixtures from format 3
// on (testdata/format3, testdata/format4) with the current writer: ticks 0
// to 3 (published times, generations), ticks 0 and 1 compacted into one
// file, a completed claim, a checkpoint at sequence 9, then tick 4.
// Regenerate a fixture only ever with a writer of its format, by running
// its test with WORLDFS_WRITE_FORMAT<n>=<dir>.
func writeFixture(t *testing.T, b bucket.Bucket) {
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	commit := func(e Entry) {
		t.Helper()
		if _, err := c.Commit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for tick := range int64(4) {
		e := publish("main", tick, fmt.Sprintf("t%d", tick), epoch)
		e.TickPublish.PublishedUnixMs = 1_700_000_000_000 + tick
		commit(e)
	}
	span := Span{From: 0, To: 1}
	commit(Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "main", Span: &span, ReadSeq: c.Tip().Seq,
		Tables: []TableFragments{{Table: "Position", Fragments: []Fragment{{Path: CompactedPath("w", DefaultRun, "position", "ab", ""),
			Rows: 21, Bytes: 2001, Digest: "d-c", Generation: 7, Span: &span}}}}}})
	commit(claimEntry(KindClaimAcquire, "main", "p", "e", "d", "c1", "h", 1, 2))
	commit(claimEntry(KindClaimComplete, "main", "p", "e", "d", "c1", "h", 1, 0))
	if seq, err := c.Checkpoint(ctx); err != nil || seq != 9 {
		t.Fatalf("checkpoint at %d: %v", seq, err)
	}
	commit(publish("main", 4, "t4", epoch))
}

// A world checkpointed by a format-3 writer (testdata/format3, see
// writeFixture: each tick's fragment lists inline with its record) still
// opens, and its next checkpoint (the current format) loads the same.
func TestFormat3CheckpointStillLoads(t *testing.T) { fixtureStillLoads(t, 3) }

// A world checkpointed by a format-4 writer (testdata/format4, see
// writeFixture: fragment lists apart from the tick records, decoded when
// read) opens, and its next checkpoint loads the same.
func TestFormat4CheckpointStillLoads(t *testing.T) { fixtureStillLoads(t, 4) }

// fixtureStillLoads checks the fixture of a format: its compacted ticks
// share one file with its span and generation, its publish times and
// claims load, and its next checkpoint loads the same.
func fixtureStillLoads(t *testing.T, format int) {
	if dir := os.Getenv(fmt.Sprintf("WORLDFS_WRITE_FORMAT%d", format)); dir != "" {
		if format != CheckpointFormat {
			t.Fatalf("the format-%d fixture is written only by a format-%d writer; this one writes format %d", format, format, CheckpointFormat)
		}
		b, err := local.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		writeFixture(t, b)
	}
	b := fixtureBucket(t, fmt.Sprintf("testdata/format%d", format))
	ctx := ctxT(t)
	cp, err := readCheckpoint(ctx, b, "w", CheckpointName("w", 9))
	if err != nil || cp.Format != format {
		t.Fatalf("the fixture's checkpoint: %v (%+v)", err, cp)
	}
	s, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != 9 || info.SlotsReplayed != 1 {
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	t0, _ := s.Tick("main", 0)
	t1, _ := s.Tick("main", 1)
	t2, _ := s.Tick("main", 2)
	compacted := Fragment{Path: CompactedPath("w", DefaultRun, "position", "ab", ""), Rows: 21, Bytes: 2001, Digest: "d-c", Generation: 7, Span: &Span{From: 0, To: 1}}
	if t0 == nil || t1 == nil || t2 == nil || !reflect.DeepEqual(tablesOf(t, t0)[0].Fragments, []Fragment{compacted}) || !t1.SameTables(t0) ||
		t2.PublishedUnixMs != 1_700_000_000_002 || tablesOf(t, t2)[0].Fragments[0].Generation != 1_700_000_000_000_000_002 {
		t.Fatalf("ticks from the format-%d checkpoint: %+v %+v %+v", format, t0, t1, t2)
	}
	if tk, ok := s.TickByToken("main", "t1"); !ok || tk.Tick != 1 {
		t.Fatalf("TickByToken(t1) = %+v", tk)
	}
	c, ok := s.Claim(ClaimKey{Run: "main", Producer: "p", ExternalID: "e"})
	if run, _ := s.Run("main"); !ok || c.State != ClaimComplete || len(c.Tables) != 1 || run.Head != 4 {
		t.Fatalf("claim %+v, run %+v", c, run)
	}
	partialsAlike(t, b, s)
	checkpointsAlike(t, b, s, 10)
}

// fixtureBucket is a copy of a bucket directory under testdata.
func fixtureBucket(t *testing.T, fixture string) bucket.Bucket {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkpointsAlike writes a checkpoint of world w (of the current format)
// at sequence seq and checks that it loads as s.
func checkpointsAlike(t *testing.T, b bucket.Bucket, s *State, seq uint64) {
	t.Helper()
	ctx := ctxT(t)
	cat, err := Open(ctx, b, "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	again, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq != seq {
		t.Fatalf("after a new checkpoint: %v (%+v)", err, info)
	}
	if d := diff(s, again); d != "" {
		t.Fatalf("the new checkpoint differs: %s", d)
	}
}

// A checkpoint falls due after CheckpointEntries entries even when few
// slots hold them: slots of thousands of entries must not let the replay
// a cold start pays grow with the slot size.
func TestCheckpointDueAfterEntries(t *testing.T) {
	c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true, CheckpointSlots: 1 << 20, CheckpointInterval: time.Hour, CheckpointEntries: 100})
	due := func() bool {
		c.ckpt.Lock()
		defer c.ckpt.Unlock()
		return c.checkpointDueLocked(c.Tip())
	}
	slot := func(from int64) {
		var es []Entry
		for i := range int64(60) {
			es = append(es, publish("r", from+i, fmt.Sprint("t", from+i), epoch))
		}
		if _, err := c.CommitAll(ctxT(t), es...); err != nil {
			t.Fatal(err)
		}
	}
	slot(0)
	if due() {
		t.Fatalf("a checkpoint is due at %d entries in %d slots, before the bound of 100", c.Tip().Seq, c.Tip().Slots)
	}
	slot(60)
	if !due() {
		t.Fatalf("no checkpoint is due at %d entries in %d slots, past the bound of 100", c.Tip().Seq, c.Tip().Slots)
	}
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	slot(120)
	if due() {
		t.Fatalf("a checkpoint is due 60 entries after the last one")
	}
}

// A catalog closes by checkpointing its tip once the tip is
// RestCheckpointSlots past the newest checkpoint: a world at rest loads
// with no replay. A shorter tail is left to the next automatic one.
func TestClosingCheckpointsAWorldAtRest(t *testing.T) {
	for _, tc := range []struct {
		slots int
		want  bool
	}{{RestCheckpointSlots / 2, false}, {RestCheckpointSlots, true}} {
		b := memBucket()
		c, epoch := newWorld(t, b, "w", Options{CheckpointDelay: time.Millisecond})
		tip := fill(t, c, epoch, 0, tc.slots)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		newest, _, err := newestCheckpoint(ctxT(t), b, "w")
		if err != nil {
			t.Fatal(err)
		}
		if got := checkpointSeq("w", newest) == tip.Seq; got != tc.want {
			t.Errorf("closed after %d slots (sequence %d): newest checkpoint %q, at the tip: %v, want %v",
				tip.Slots, tip.Seq, newest, got, tc.want)
		}
		if tc.want {
			if _, info, err := Load(ctxT(t), b, "w"); err != nil || info.SlotsReplayed != 0 {
				t.Errorf("a load after the closing checkpoint replayed %d slots (%v), want 0", info.SlotsReplayed, err)
			}
		}
	}
}

// The closing checkpoint is bounded: on a bucket that stalls its writes,
// Close returns after restCheckpointTimeout, not the automatic
// checkpoints' CheckpointTimeout (minutes), and not never. The clock is
// synctest's, so the wait costs no real time.
func TestClosingOnAStalledBucketReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := faulty.NewScript()
		b := faulty.Wrap(memBucket(), script)
		c, epoch := newWorld(t, b, "w", Options{CheckpointDelay: time.Millisecond})
		fill(t, c, epoch, 0, RestCheckpointSlots)
		stall := faulty.Fault{Kind: faulty.Stall, Stall: time.Hour}
		script.SetRules(faulty.Rule{Op: faulty.OpCreate, Prefix: WorldPrefix("w") + "state/", Fault: stall},
			faulty.Rule{Op: faulty.OpCreate, Prefix: CheckpointPrefix("w"), Fault: stall})
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > restCheckpointTimeout {
			t.Fatalf("Close on a stalled bucket took %v, want at most %v", took, restCheckpointTimeout)
		}
		if script.Injected == 0 {
			t.Fatal("the closing checkpoint wrote nothing: the stall was never met")
		}
	})
}
