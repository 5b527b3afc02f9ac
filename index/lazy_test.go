package index

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
)

// A cold start decodes no fragment list, and a reader of a slice of
// history decodes the lists of the checkpoint shards that slice touches,
// each once: never the whole history's. What it reads equals what the
// replayed log says.
func TestSliceReadDecodesOnlyItsShards(t *testing.T) {
	w := newScaleWorld(t, 4)
	w.build(t, 10_000) // tick shards 0..4095, 4096..8191, 8192..9999
	bk, name := checkpointOf(t, w.s)
	ctx := ctxT(t)
	start := listDecodes.Load()
	s, _, err := LoadCheckpoint(ctx, bk, "long", name)
	if err != nil {
		t.Fatal(err)
	}
	decodes := func() int64 { return listDecodes.Load() - start }
	if n := decodes(); n != 0 {
		t.Fatalf("a cold start decoded %d shards' fragment lists, want none", n)
	}
	files := func(s *State, from, to int64) []File {
		var out []File
		v := &View{World: "long", Run: "main", Segments: []Segment{{Allowlist: s.Allowlist("main"), State: s}}}
		if err := v.Files(from, to, func(f File) bool { out = append(out, f); return true }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := files(s, 5000, 5100) // within shard 1
	if n := decodes(); n != 1 {
		t.Fatalf("reading ticks 5000..5100 decoded %d shards' lists, want 1", n)
	}
	if want := files(w.s, 5000, 5100); len(got) == 0 || !slicesEqualFiles(got, want) {
		t.Fatalf("ticks 5000..5100 from the checkpoint: %d files, from the log %d", len(got), len(want))
	}
	files(s, 4200, 8000) // shard 1 again
	if n := decodes(); n != 1 {
		t.Fatalf("reading shard 1 again decoded %d shards' lists in all, want 1", n)
	}
	tk, ok := s.Tick("main", 9990) // the recent ticks, shard 2
	if !ok {
		t.Fatal("no tick 9990")
	}
	if tables := tablesOf(t, tk); len(tables) != 4 || tables[0].Fragments[0].Span != nil {
		t.Fatalf("tick 9990's lists: %+v", tables)
	}
	if n := decodes(); n != 2 {
		t.Fatalf("after one tick of shard 2, %d shards' lists decoded, want 2", n)
	}
	// The whole of it (the diff decodes every list) is the log's.
	if d := diff(w.s, s); d != "" {
		t.Fatalf("the loaded state differs: %s", d)
	}
}

func slicesEqualFiles(a, b []File) bool {
	return slices.EqualFunc(a, b, func(x, y File) bool {
		return x.Path == y.Path && x.Tick == y.Tick && x.Token == y.Token && x.Check == y.Check &&
			(x.Keep == nil) == (y.Keep == nil) && (x.Keep == nil || *x.Keep == *y.Keep)
	})
}

// corruptLists rewrites the first tick shard of world's newest checkpoint
// with its fragment lists replaced by lists(the lists' plain bytes) and
// seals the checkpoint again: every hash matches, so only the lists
// themselves are wrong, and nothing notices until they are read.
func corruptLists(t *testing.T, b bucket.Bucket, world string, lists func(plain []byte) []byte) {
	t.Helper()
	ctx := ctxT(t)
	name, _, err := newestCheckpoint(ctx, b, world)
	if err != nil || name == "" {
		t.Fatalf("no checkpoint: %v", err)
	}
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cp.Shards, func(r shardRef) bool { return r.Kind == "t" })
	raw, _, err := b.Get(ctx, ShardName(world, cp.Shards[i].Hash))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := shardDecoder.DecodeAll(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The lists are the shard's last field.
	d := dec{b: plain}
	d.byte()
	d.str()
	d.varint()
	n := d.count()
	for range n {
		d.varint()
		d.str()
		d.varint()
		d.varint()
		d.uvarint()
		d.varint()
		d.uvarint()
	}
	head := plain[:len(plain)-len(d.b)]
	blob := d.bytes()
	if d.err != nil || len(d.b) != 0 {
		t.Fatalf("shard layout: %v", d.err)
	}
	inner, err := shardDecoder.DecodeAll(blob, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := enc{b: slices.Clone(head)}
	e.bytes(lists(inner))
	data := encoder.EncodeAll(e.b, nil)
	sum := sha256.Sum256(data)
	cp.Shards[i].Hash = hex.EncodeToString(sum[:])
	if _, err := bucket.CreateOnce(ctx, b, ShardName(world, cp.Shards[i].Hash), data); err != nil {
		t.Fatal(err)
	}
	sealed, err := cp.seal()
	if err != nil {
		t.Fatal(err)
	}
	buckettest.Replace(t, b, name, sealed)
}

// A fragment list that does not decode fails its reader closed
// (ErrCorrupt), never as a tick without files; the cold start that did not
// read it succeeds, and a verification of the catalog reports it.
func TestCorruptLazyListFailsClosed(t *testing.T) {
	for name, lists := range map[string]func(plain []byte) []byte{
		"not compressed": func(plain []byte) []byte { return []byte("garbage") },
		"truncated list": func(plain []byte) []byte { return encoder.EncodeAll(plain[:len(plain)-3], nil) },
		"a list short": func(plain []byte) []byte {
			d := dec{b: plain}
			n := d.count()
			e := enc{}
			e.uvarint(uint64(n - 1))
			e.b = append(e.b, d.b...)
			return encoder.EncodeAll(e.b, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := memBucket()
			c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
			ctx := ctxT(t)
			for tick := range int64(3) {
				if _, err := c.Commit(ctx, publish("main", tick, "t"+string(rune('a'+tick)), epoch)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			corruptLists(t, b, "w", lists)
			s, _, err := Load(ctx, b, "w")
			if err != nil {
				t.Fatalf("a cold start that reads no list: %v", err)
			}
			tk, ok := s.Tick("main", 1)
			if !ok {
				t.Fatal("no tick 1")
			}
			if tables, err := tk.Tables(); !errors.Is(err, ErrCorrupt) || tables != nil {
				t.Fatalf("tick 1's lists = %+v, %v; want ErrCorrupt", tables, err)
			}
			v := &View{World: "w", Run: "main", Segments: []Segment{{Allowlist: s.Allowlist("main"), State: s}}}
			if err := v.Files(math.MinInt64, math.MaxInt64, func(File) bool { return true }); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Files = %v, want ErrCorrupt", err)
			}
			if err := s.Fragments("", func(FragmentRef) bool { return true }); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Fragments = %v, want ErrCorrupt", err)
			}
			cc, err := VerifyCatalog(ctx, b, "w", nil)
			if err != nil || len(cc.Problems) != 1 || !strings.Contains(cc.Problems[0], "fragment lists") {
				t.Fatalf("VerifyCatalog = %v, problems %q", err, cc.Problems)
			}
		})
	}
}

// A reader refuses a checkpoint of a format newer than its own
// (ErrCorrupt), as a reader of format 3 refuses format 4: it cannot know
// what it would miss, and the world fails closed rather than open with
// less.
func TestNewerCheckpointFormatFailsClosed(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	ctx := ctxT(t)
	if _, err := c.Commit(ctx, publish("main", 0, "t0", epoch)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	name, _, _ := newestCheckpoint(ctx, b, "w")
	data, _, err := b.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var cp checkpoint
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&cp); err != nil {
		t.Fatal(err)
	}
	cp.Format = CheckpointFormat + 1
	sealed, err := cp.seal()
	if err != nil {
		t.Fatal(err)
	}
	buckettest.Replace(t, b, name, sealed)
	if _, _, err := Load(ctx, b, "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a format-%d checkpoint = %v, want ErrCorrupt", cp.Format, err)
	}
}

// A replayed history is held as compactly as a loaded one: the token index
// folds its tree into sorted parts (sixteen bytes a tick, not a tree of
// half-filled nodes), and a compaction carves its ticks' new records and
// tokens from one allocation each, so the records and strings each
// publication left behind are freed whole instead of pinning the memory
// around them.
func TestReplayedHistoryIsCompact(t *testing.T) {
	w := newScaleWorld(t, 2)
	w.build(t, 5000)
	if n := w.s.byToken.Len(); n >= tokenPart || len(w.s.tokens) != 5000/tokenPart {
		t.Fatalf("the token index holds %d ticks in its tree and %d parts, want fewer than %d and %d", n, len(w.s.tokens), tokenPart, 5000/tokenPart)
	}
	var ticks []*Tick
	w.s.Ticks("main", 0, func(tk *Tick) bool { ticks = append(ticks, tk); return tk.Tick < 4095 })
	for i := 1; i < len(ticks); i++ {
		a, b := ticks[i-1], ticks[i]
		if uintptr(unsafe.Pointer(b))-uintptr(unsafe.Pointer(a)) != unsafe.Sizeof(Tick{}) ||
			unsafe.StringData(b.CommitToken) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(a.CommitToken)), len(a.CommitToken))) {
			t.Fatalf("the compacted ticks %d and %d are not carved from one allocation", a.Tick, b.Tick)
		}
	}
}

// setListCacheLimit bounds the decoded-list cache at limit bytes until the
// test ends, dropping what is over it now.
func setListCacheLimit(t *testing.T, limit int64) {
	c := &decodedLists
	set := func(n int64) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.limit = n
		c.trim(nil)
	}
	old := c.limit
	set(limit)
	t.Cleanup(func() { set(old) })
}

// residentShards is how many shards' decoded lists the cache holds.
func residentShards() int {
	c := &decodedLists
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// The decoded-list cache holds its shards weakly: once no state holds a
// shard, neither the shard nor the checkpoint bytes its records share
// stay alive for the cache, whose bound counts decoded lists only (a
// shard of compacted ticks decodes to a few bytes). A process loading
// many states, such as worldfs check comparing every checkpoint of a long
// log with the fold, holds about the states it holds.
func TestDecodedListsKeepNoDroppedState(t *testing.T) {
	w := newScaleWorld(t, 4)
	w.build(t, 10_000)
	bk, name := checkpointOf(t, w.s)
	s, _, err := LoadCheckpoint(ctxT(t), bk, "long", name)
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick("main", 5000)
	if !ok {
		t.Fatal("no tick 5000")
	}
	tablesOf(t, tk) // its shard's lists decoded, in the cache
	shard := weak.Make(tk.frags.lazy)
	if shard.Value() == nil {
		t.Fatal("tick 5000's lists are not held lazily by its shard")
	}
	s, tk = nil, nil
	runtime.GC()
	runtime.GC()
	if shard.Value() != nil {
		t.Fatal("the decoded-list cache keeps the shard of a state no one holds")
	}
}

// Decoded fragment lists are a bounded cache: beyond its bound, the lists
// of the shards read least recently are dropped (here the bound holds one
// shard's), and decoded again when read. What a reader sees is unchanged,
// and ticks that share a list still know it (SameTables) although its
// shard was decoded again in between, into new slices.
func TestDecodedListsAreBounded(t *testing.T) {
	w := newScaleWorld(t, 4)
	w.build(t, 10_000) // tick shards 0..4095 (compacted whole), 4096..8191, 8192..9999
	bk, name := checkpointOf(t, w.s)
	s, _, err := LoadCheckpoint(ctxT(t), bk, "long", name)
	if err != nil {
		t.Fatal(err)
	}
	setListCacheLimit(t, 0)
	tick := func(n int64) *Tick {
		tk, ok := s.Tick("main", n)
		if !ok {
			t.Fatalf("no tick %d", n)
		}
		return tk
	}
	first := tablesOf(t, tick(0))
	for _, n := range []int64{5000, 9990} {
		tablesOf(t, tick(n))
		if r := residentShards(); r != 1 {
			t.Fatalf("after reading tick %d, %d shards' lists are resident; the bound holds one", n, r)
		}
	}
	start := listDecodes.Load()
	last := tablesOf(t, tick(4095))
	if listDecodes.Load() != start+1 || &first[0] == &last[0] {
		t.Fatal("shard 0's lists were not decoded again after they were dropped")
	}
	if !tick(4095).SameTables(tick(0)) || tick(4096).SameTables(tick(4095)) || tick(8704).SameTables(tick(8192)) {
		t.Fatal("SameTables does not say which ticks of a compacted span share their list")
	}
	var got, want []File
	for _, st := range []*State{s, w.s} {
		v := &View{World: "long", Run: "main", Segments: []Segment{{Allowlist: st.Allowlist("main"), State: st}}}
		var out []File
		if err := v.Files(0, math.MaxInt64, func(f File) bool { out = append(out, f); return true }); err != nil {
			t.Fatal(err)
		}
		got, want = want, out
	}
	if len(got) == 0 || !slicesEqualFiles(got, want) {
		t.Fatalf("with lists dropped and decoded again, the checkpoint's files (%d) are not the log's (%d)", len(got), len(want))
	}
	if r := residentShards(); r != 1 {
		t.Fatalf("after reading all of history, %d shards' lists are resident; the bound holds one", r)
	}
}
