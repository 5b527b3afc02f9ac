package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
)

// partialAlike checks that p, loaded for want, answers every question it
// was loaded for exactly as full does, and every other question as full
// does or with ErrNotLoaded, never otherwise. It returns how many
// questions p refused.
func partialAlike(full *State, p *Partial, want Want) (refused int, err error) {
	if !p.World().Same(full.World) || p.Seq() != full.Seq || !reflect.DeepEqual(p.Runs(), full.Runs()) {
		return 0, fmt.Errorf("partial state at %d (%+v, runs %+v), the whole at %d (%+v, runs %+v)", p.Seq(), p.World(), p.Runs(), full.Seq, full.World, full.Runs())
	}
	same := func(q string, got *Tick, gotOK bool, gotErr error, wanted *Tick, wantOK bool, mustAnswer bool) error {
		if gotErr != nil {
			if !errors.Is(gotErr, ErrNotLoaded) || mustAnswer {
				return fmt.Errorf("%s: %v", q, gotErr)
			}
			refused++
			return nil
		}
		gv, err1 := valueOf(got)
		wv, err2 := valueOf(wanted)
		if gotOK != wantOK || err1 != nil || err2 != nil || !reflect.DeepEqual(gv, wv) {
			return fmt.Errorf("%s: the partial state answers %+v (%v, %v), the whole %+v (%v, %v)", q, gv, gotOK, err1, wv, wantOK, err2)
		}
		return nil
	}
	head := map[string]int64{}
	for _, r := range full.Runs() {
		head[r.Name] = r.Head
	}
	asked := func(run string, n int64) bool {
		return run == want.Run && (want.From <= n && n <= want.To || want.Head && n == head[run])
	}
	var all []*Tick
	allTicks(full, func(t *Tick) bool { all = append(all, t); return true })
	for _, t := range all {
		for _, n := range []int64{t.Tick, t.Tick + 1} { // published, and (mostly) not
			got, ok, err := p.Tick(t.Run, n)
			wanted, wantOK := full.Tick(t.Run, n)
			if err := same(fmt.Sprintf("tick %s/%d", t.Run, n), got, ok, err, wanted, wantOK, asked(t.Run, n)); err != nil {
				return refused, err
			}
			got, ok, err = p.Last(t.Run, n)
			wanted, wantOK = full.Last(t.Run, n)
			if err := same(fmt.Sprintf("last of %s at or below %d", t.Run, n), got, ok, err, wanted, wantOK, false); err != nil {
				return refused, err
			}
		}
		// A token that names its tick is answered wherever its tick is.
		got, ok, err := p.TickByToken(t.Run, t.CommitToken)
		wanted, wantOK := full.TickByToken(t.Run, t.CommitToken)
		named, isNamed := TokenTick(t.CommitToken)
		mustAnswer := isNamed && named == t.Tick && (asked(t.Run, t.Tick) || t.Run == want.Run && t.CommitToken == want.Token)
		if err := same(fmt.Sprintf("token %s of %s", t.CommitToken, t.Run), got, ok, err, wanted, wantOK, mustAnswer); err != nil {
			return refused, err
		}
	}
	if want.Token != "" {
		// The token asked for: answered as the whole state does (the
		// lowest tick that carries it), from the shards its filters
		// name.
		got, ok, err := p.TickByToken(want.Run, want.Token)
		wanted, wantOK := full.TickByToken(want.Run, want.Token)
		if err := same("the token "+want.Token+" of "+want.Run, got, ok, err, wanted, wantOK, true); err != nil {
			return refused, err
		}
	}
	if want.Head {
		got, ok, err := p.Last(want.Run, math.MaxInt64)
		wanted, wantOK := full.Last(want.Run, math.MaxInt64)
		if err := same("the head of "+want.Run, got, ok, err, wanted, wantOK, true); err != nil {
			return refused, err
		}
	}
	var got, wanted []*Tick
	if err := p.Ticks(want.Run, want.From, want.To, func(t *Tick) bool { got = append(got, t); return true }); err != nil {
		return refused, fmt.Errorf("ticks %d..%d of %s: %w", want.From, want.To, want.Run, err)
	}
	full.Ticks(want.Run, want.From, func(t *Tick) bool {
		if t.Tick > want.To {
			return false
		}
		wanted = append(wanted, t)
		return true
	})
	if len(got) != len(wanted) {
		return refused, fmt.Errorf("ticks %d..%d of %s: %d, the whole state %d", want.From, want.To, want.Run, len(got), len(wanted))
	}
	for i := range got {
		if err := same(fmt.Sprintf("ticks %d..%d of %s, #%d", want.From, want.To, want.Run, i), got[i], true, nil, wanted[i], true, true); err != nil {
			return refused, err
		}
	}
	return refused, nil
}

// countingBucket counts the checkpoint shards, the token filters, the
// shards' summaries, the checkpoints' summaries objects and the
// checkpoints read.
type countingBucket struct {
	bucket.Bucket
	shards, filters, summaries, checkpointSummaries, checkpoints atomic.Int64
}

func (c *countingBucket) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	switch {
	case strings.HasSuffix(name, tokenFilterSuffix):
		c.filters.Add(1)
	case strings.HasSuffix(name, summarySuffix):
		c.summaries.Add(1)
	case strings.HasSuffix(name, summariesSuffix):
		c.checkpointSummaries.Add(1)
	case strings.Contains(name, "/state/"):
		c.shards.Add(1)
	}
	if strings.Contains(name, "/checkpoints/") {
		c.checkpoints.Add(1)
	}
	return c.Bucket.Get(ctx, name)
}

// spanWorld builds world w with run "r" of ticks 0..n-1 (n past several
// tick shards) and run "s" of ticks 0..9, checkpoints it, then commits a
// tail after the checkpoint: a rewrite of tick 5 of "r" (in its first
// shard), ticks n..n+2 of "r", and a fence. It returns the whole state.
func spanWorld(t *testing.T, b bucket.Bucket, n int) *State {
	t.Helper()
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	var entries []Entry
	for i := range n {
		entries = append(entries, publish("r", int64(i), spanToken(int64(i)), epoch))
	}
	for i := range 10 {
		entries = append(entries, publish("s", int64(i), fmt.Sprint("s", i), epoch))
	}
	for len(entries) > 0 {
		k := min(len(entries), 1000)
		if _, err := c.CommitAll(ctx, entries[:k]...); err != nil {
			t.Fatal(err)
		}
		entries = entries[k:]
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	old := tablesOf(t, mustTick(t, c.Tip(), "r", 5))[0].Fragments
	rw := Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "r", Tick: 5, Table: "Position",
		Old: []string{old[0].Path}, New: []Fragment{{Path: "data/w/r/position/merged/0.parquet", Rows: old[0].Rows, Bytes: 1, Digest: "d-m"}}}}
	tail := []Entry{rw, publish("r", int64(n), "tail0", epoch), publish("r", int64(n+1), "tail1", epoch), fence("other"), publish("r", int64(n+2), "tail2", epoch)}
	for _, e := range tail {
		if _, err := c.Commit(ctx, e); err != nil && e.Kind != KindTickPublish || err != nil && e.TickPublish.Tick < int64(n+2) {
			t.Fatal(err)
		}
	}
	full, info, err := Load(ctx, b, "w")
	if err != nil || info.CheckpointSeq == 0 || info.SlotsReplayed == 0 {
		t.Fatalf("load: %v (%+v)", err, info)
	}
	return full
}

// spanToken is tick i's token in spanWorld's run "r": one that names its
// tick (TickToken) for every third tick, "t<i>" for the others.
func spanToken(i int64) string {
	if i%3 != 0 {
		return fmt.Sprint("t", i)
	}
	var r [16]byte
	binary.LittleEndian.PutUint64(r[:], uint64(i)*0x9e3779b97f4a7c15)
	return TickToken(i, r)
}

func mustTick(t *testing.T, s *State, run string, n int64) *Tick {
	t.Helper()
	tk, ok := s.Tick(run, n)
	if !ok {
		t.Fatalf("no tick %s/%d", run, n)
	}
	return tk
}

// A reader of one tick, a range or the head reads only the checkpoint
// shards that hold them, plus those the log after the checkpoint touches,
// and its partial state answers what it was loaded for exactly as the
// whole state does and refuses the rest (ErrNotLoaded).
func TestPartialLoadReadsWhatItAsks(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	n := 3*tickShardSpan + 100 // shards 0..3 of run r
	full := spanWorld(t, b, n)
	for _, c := range []struct {
		want Want
		// tick shards read: those asked for, and those the log after
		// the checkpoint touches: shard 0 (the rewrite of tick 5) and
		// shard 3 (the ticks published after it)
		shards int
	}{
		{Want{Run: "r", From: 5000, To: 5000}, 3},                   // shard 1
		{Want{Run: "r", From: 0, To: 10}, 2},                        // shard 0
		{Want{Run: "r", From: 4000, To: 9000}, 4},                   // shards 0..2
		{Want{Run: "r", From: 1, To: 0, Head: true}, 2},             // shard 3, the head's at the checkpoint
		{Want{Run: "s", From: 3, To: 3}, 3},                         // s's only shard
		{Want{Run: "r", From: math.MinInt64, To: math.MaxInt64}, 4}, // all of r
		{Want{Run: "r", From: 1, To: 0, Token: spanToken(9000)}, 3}, // shard 2, which holds the tick the token names
	} {
		b.shards.Store(0)
		p, _, err := LoadFor(ctx, b, "w", c.want)
		if err != nil {
			t.Fatalf("%+v: %v", c.want, err)
		}
		if got := b.shards.Load(); got != int64(c.shards) {
			t.Errorf("%+v: read %d tick shards, want %d", c.want, got, c.shards)
		}
		refused, err := partialAlike(full, p, c.want)
		if err != nil {
			t.Fatalf("%+v: %v", c.want, err)
		}
		whole, ok := p.Whole()
		if (refused == 0) != ok || ok && diff(whole, full) != "" {
			t.Fatalf("%+v: %d questions refused, whole %v", c.want, refused, ok)
		}
		if c.want.Token != "" {
			// A token that names a tick it did not publish: the
			// tick's part cannot tell where it is.
			forged := TickToken(9000, [16]byte{1})
			if _, _, err := p.TickByToken("r", forged); !errors.Is(err, ErrNotLoaded) {
				t.Fatalf("a token naming tick 9000 that tick does not carry: %v", err)
			}
		}
		if c.want.From == 5000 {
			// Ticks of shard 2 are not held: refused, not absent.
			if _, _, err := p.Tick("r", 9000); !errors.Is(err, ErrNotLoaded) {
				t.Fatalf("tick 9000 of a partial state loaded for tick 5000: %v", err)
			}
			if err := p.Ticks("r", 0, 9000, func(*Tick) bool { return true }); !errors.Is(err, ErrNotLoaded) {
				t.Fatalf("ticks 0..9000 of a partial state loaded for tick 5000: %v", err)
			}
		}
	}
}

// A flipped byte in a checkpoint shard a reader reads fails its load
// closed; one in a shard it does not read goes unnoticed until a reader
// reads that shard, which then fails closed.
func TestPartialLoadCorruptShard(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, 3*tickShardSpan+100)
	flipTickShard(t, b, "r", 2)
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 5000, To: 5000})
	if err != nil {
		t.Fatalf("a load that does not read the flipped shard: %v", err)
	}
	if tk, ok, err := p.Tick("r", 5000); err != nil || !ok || tk.CommitToken != "t5000" {
		t.Fatalf("tick 5000: %v %v %v", tk, ok, err)
	}
	for _, want := range []Want{{Run: "r", From: 9000, To: 9000}, {Run: "r", From: 0, To: math.MaxInt64}} {
		if _, _, err := LoadFor(ctx, b, "w", want); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a load of %+v, which reads the flipped shard: %v", want, err)
		}
	}
	if _, _, err := Load(ctx, b, "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a whole load: %v", err)
	}
}

// A cold start hashes and sorts no commit token until a reader looks one
// up; the first lookup builds the token index of the loaded shards once,
// for every state derived from the load, and finds every tick.
func TestTokenIndexBuiltOnFirstLookup(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, 2*tickShardSpan+10)
	before := tokenBuilds.Load()
	s, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if n := tokenBuilds.Load() - before; n != 0 {
		t.Fatalf("a cold start built %d parts of the token index", n)
	}
	derived := s.clone()
	for _, c := range []struct {
		s          *State
		run, token string
		tick       int64
	}{{s, "r", "t4100", 4100}, {derived, "r", "t7", 7}, {s, "s", "s3", 3}, {derived, "r", "tail1", 2*tickShardSpan + 11}} {
		tk, ok := c.s.TickByToken(c.run, c.token)
		if !ok || tk.Tick != c.tick {
			t.Fatalf("token %s of %s: %v %v, want tick %d", c.token, c.run, tk, ok, c.tick)
		}
	}
	if n := tokenBuilds.Load() - before; n != int64(len(s.tokens)) {
		t.Fatalf("lookups built %d parts of the token index, of %d", n, len(s.tokens))
	}
}

// failingShard fails reads of one object with bucket.ErrUnavailable.
type failingShard struct {
	bucket.Bucket
	name string
}

func (f *failingShard) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if name == f.name {
		return nil, bucket.Attrs{}, fmt.Errorf("reading %s: %w", name, bucket.ErrUnavailable)
	}
	return f.Bucket.Get(ctx, name)
}

// A shard the log after the checkpoint touches that cannot be read fails
// the partial load with that failure, not as a corrupt catalog.
func TestPartialLoadShardUnavailable(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, 3*tickShardSpan+100)
	_, shards := newestShards(t, b)
	f := &failingShard{Bucket: b, name: ShardName("w", tickShardOf(t, shards, "r", 0).Hash)}
	// Shard 0 holds tick 5, which the log after the checkpoint rewrites.
	_, _, err := LoadFor(ctx, f, "w", Want{Run: "r", From: 5000, To: 5000})
	if !errors.Is(err, bucket.ErrUnavailable) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("a partial load whose tail's shard cannot be read: %v", err)
	}
}

// partialsAlike checks that loads of world w of b for a tick, a range and
// the head of its run "main" answer as s, its whole state, does
// (checkpoints of every format a reader reads).
func partialsAlike(t *testing.T, b bucket.Bucket, s *State) {
	t.Helper()
	for _, want := range []Want{{Run: "main", From: 1, To: 1}, {Run: "main", From: 0, To: 3}, {Run: "main", From: 1, To: 0, Head: true}} {
		p, _, err := LoadFor(ctxT(t), b, "w", want)
		if err != nil {
			t.Fatalf("LoadFor(%+v): %v", want, err)
		}
		if _, err := partialAlike(s, p, want); err != nil {
			t.Fatalf("LoadFor(%+v): %v", want, err)
		}
	}
}

// A partial state grows a part at a time (Partial.Load): each step reads
// only the parts it adds, answers what it then holds as the whole state
// does, and once every part is added it is the whole state. A flipped
// byte in a part it adds fails that step closed.
func TestPartialLoadGrows(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	n := 3*tickShardSpan + 100 // shards 0..3 of run r
	full := spanWorld(t, b, n)
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 5000, To: 5000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		want Want
		read int // tick shards read: those the state lacked
	}{
		{Want{Run: "r", From: 5000, To: 5000}, 0},       // shard 1, held
		{Want{Run: "r", From: 1, To: 0, Head: true}, 0}, // shard 3, which the tail touched
		{Want{Run: "r", From: 9000, To: 9001}, 1},       // shard 2
		{Want{Run: "s", From: 0, To: 9, Head: true}, 1}, // s's only shard, its head's too
		{Want{Run: "r", From: 0, To: math.MaxInt64}, 0}, // shard 0, which the tail touched
	} {
		b.shards.Store(0)
		if err := p.Load(ctx, c.want); err != nil {
			t.Fatalf("%+v: %v", c.want, err)
		}
		if got := b.shards.Load(); got != int64(c.read) {
			t.Errorf("%+v: read %d tick shards, want %d", c.want, got, c.read)
		}
		if _, err := partialAlike(full, p, c.want); err != nil {
			t.Fatalf("%+v: %v", c.want, err)
		}
	}
	whole, ok := p.Whole()
	if !ok || diff(whole, full) != "" {
		t.Fatalf("a partial state grown to every part: whole %v, %s", ok, diff(whole, full))
	}

	// A flipped byte in a part a step adds fails it closed.
	flipTickShard(t, b, "r", 2)
	p, _, err = LoadFor(ctx, b, "w", Want{Run: "r", From: 5000, To: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Load(ctx, Want{Run: "r", From: 9000, To: 9000}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("adding a flipped part: %v", err)
	}
}

// With CheckpointOnly, a world without a checkpoint is not loaded at all
// (a reader that reads it another way does not pay for a whole load it
// throws away); without it, it loads whole.
func TestPartialLoadCheckpointOnly(t *testing.T) {
	inner := memBucket()
	c, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
	for tick := range int64(3) {
		if _, err := c.Commit(ctxT(t), publish("r", tick, fmt.Sprintf("t%d", tick), epoch)); err != nil {
			t.Fatal(err)
		}
	}
	cb := &buckettest.Counting{Bucket: inner}
	p, _, err := LoadFor(ctxT(t), cb, "w", Want{Run: "r", From: 1, To: 1, CheckpointOnly: true})
	if err != nil || p != nil || cb.Gets.Load() != 0 {
		t.Fatalf("CheckpointOnly on a world without a checkpoint: %v, %v, %d objects read; want nothing loaded", p, err, cb.Gets.Load())
	}
	p, _, err = LoadFor(ctxT(t), cb, "w", Want{Run: "r", From: 1, To: 1})
	if err != nil || p == nil {
		t.Fatalf("a partial load of a world without a checkpoint: %v, %v", p, err)
	}
	if _, ok, err := p.Tick("r", 1); !ok || err != nil {
		t.Fatalf("tick 1 of the whole load: %v, %v", ok, err)
	}
}

// flipTickShard flips a byte in the middle of tick shard n of run in world
// w's newest checkpoint.
func flipTickShard(t *testing.T, b bucket.Bucket, run string, n int64) {
	t.Helper()
	_, shards := newestShards(t, b)
	shard := ShardName("w", tickShardOf(t, shards, run, n).Hash)
	data, _, err := b.Get(ctxT(t), shard)
	if err != nil {
		t.Fatal(err)
	}
	data = slices.Clone(data)
	data[len(data)/2] ^= 0x40
	buckettest.Replace(t, b, shard, data)
}

// A partial state refreshed from the log (Partial.Refresh) reads the
// slots after it and the checkpoint parts they touch that it lacks, never
// the checkpoint again, and then answers as a load at the tip does; a part
// it adds later is as the tip holds it. A state too far behind is refused
// (ErrReload), and one whose checkpoint was replaced and collected fails
// with ErrSuperseded, not as corrupt.
func TestPartialRefreshReadsTheTail(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	n := 3*tickShardSpan + 100 // shards 0..3 of run r
	full := spanWorld(t, b, n)
	want := Want{Run: "r", From: 5000, To: 5000, Head: true}
	p, c := loadThenWrite(t, b, want)
	epoch := full.World.Epoch
	rewrite := func(tick int64) Entry { return moveRows(t, c, tick) }
	// A rewrite in shard 2, which p lacks, and two ticks after the head.
	commitEach(t, c, rewrite(9000), publish("r", int64(n+3), "tail3", epoch), publish("r", int64(n+4), "tail4", epoch))
	b.shards.Store(0)
	b.checkpoints.Store(0)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if s, cps := b.shards.Load(), b.checkpoints.Load(); s != 1 || cps != 0 {
		t.Fatalf("a refresh read %d tick shards and %d checkpoints; want 1 (shard 2, which the rewrite touched) and none", s, cps)
	}
	tip, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := partialAlike(tip, p, want); err != nil {
		t.Fatalf("refreshed: %v", err)
	}
	later := Want{Run: "r", From: 9000, To: 9000}
	if err := p.Load(ctx, later); err != nil {
		t.Fatal(err)
	}
	if _, err := partialAlike(tip, p, later); err != nil {
		t.Fatalf("refreshed, then loaded for tick 9000: %v", err)
	}

	// Too long unconfirmed: the slots after it may be collected.
	p.confirmed = time.Now().Add(-DefaultReloadAfter - time.Minute)
	if err := p.Refresh(ctx); !errors.Is(err, ErrReload) {
		t.Fatalf("refresh of a state last at the tip 12 h ago: %v; want ErrReload", err)
	}

	// A checkpoint interval of slots past its checkpoint: load anew.
	p, _, err = LoadFor(ctx, b, "w", want)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(defaultCheckpointSlots) {
		commitEach(t, c, publish("s", 10+i, fmt.Sprint("s", 10+i), epoch))
	}
	if err := p.Refresh(ctx); !errors.Is(err, ErrReload) {
		t.Fatalf("refresh of a state whose log went on %d slots: %v; want ErrReload", defaultCheckpointSlots, err)
	}

	// Its checkpoint replaced, and a part of it collected: superseded.
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	p, _, err = LoadFor(ctx, b, "w", want)
	if err != nil {
		t.Fatal(err)
	}
	_, old := newestShards(t, b)
	commitEach(t, c, rewrite(100)) // shard 0, which p lacks
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	shard := ShardName("w", tickShardOf(t, old, "r", 0).Hash)
	a, err := b.Stat(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, shard, a.Generation); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("refresh reading a collected part of a replaced checkpoint: %v; want ErrSuperseded", err)
	}
}
