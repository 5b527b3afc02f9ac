package index

import (
	"errors"
	"fmt"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
)

// tokenFilters returns the token filters of the tick shards of run in
// world w's newest checkpoint, by shard number (nil: none).
func tokenFilters(t *testing.T, b bucket.Bucket, run string) map[int64]*tokenFilter {
	t.Helper()
	newest, shards := newestShards(t, b)
	out := map[int64]*tokenFilter{}
	for _, r := range shards {
		if r.Kind == "t" && r.Run == run {
			var err error
			if out[r.N], err = readTokenFilter(ctxT(t), b, "w", newest, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// tokenFilterNames returns the names of the token filters of w's tick
// shards of run, by shard number.
func tokenFilterNames(t *testing.T, b bucket.Bucket, run string) map[int64]string {
	t.Helper()
	_, shards := newestShards(t, b)
	out := map[int64]string{}
	for _, r := range shards {
		if r.Kind == "t" && r.Run == run {
			out[r.N] = ShardTokenFilterName("w", r.Hash)
		}
	}
	return out
}

// A lookup of a token that does not name its tick (or names one that
// does not carry it) reads the run's token filters and decodes only the
// shards whose filter may hold it (besides those the log after the
// checkpoint touches), and answers as the whole state does; the other
// questions it answers as the whole state does or refuses.
func TestTokenLookupReadsItsCandidates(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	n := 5*tickShardSpan + 100 // shards 0..5 of run r; the log after the checkpoint touches 0 and 5
	full := spanWorld(t, b, n)
	if filters := tokenFilters(t, b, "r"); len(filters) != 6 {
		t.Fatalf("%d token filters of run r's 6 tick shards", len(filters))
	}
	for _, c := range []struct {
		token string
		// tick shards read (0 and 5, that of a tick the token names, the
		// token's candidates), and token filters
		shards, filters int64
	}{
		{"t5000", 3, 4},                      // shard 1
		{"t17000", 3, 4},                     // shard 4
		{"t1", 2, 4},                         // shard 0, read anyway
		{"nowhere", 2, 4},                    // no shard: each filter says so
		{TickToken(9000, [16]byte{1}), 3, 3}, // names tick 9000 (shard 2), which does not carry it
		{TickToken(9001, [16]byte{1}), 3, 3}, // names tick 9001, which carries "t9001"
		{spanToken(9003), 3, 0},              // names its tick: that tick's shard, no filter read
		{"tail1", 2, 4},                      // a tick published after the checkpoint
	} {
		want := Want{Run: "r", From: 1, To: 0, Token: c.token}
		b.shards.Store(0)
		b.filters.Store(0)
		p, _, err := LoadFor(ctx, b, "w", want)
		if err != nil {
			t.Fatalf("%s: %v", c.token, err)
		}
		if got := b.shards.Load(); got != c.shards {
			t.Errorf("token %s: read %d tick shards, want %d", c.token, got, c.shards)
		}
		if got := b.filters.Load(); got != c.filters {
			t.Errorf("token %s: read %d token filters, want %d", c.token, got, c.filters)
		}
		got, ok, err := p.TickByToken("r", c.token)
		wanted, wantOK := full.TickByToken("r", c.token)
		if err != nil || ok != wantOK || ok && got.Tick != wanted.Tick {
			t.Fatalf("token %s: the partial state answers %+v, %v, %v; the whole %+v, %v", c.token, got, ok, err, wanted, wantOK)
		}
		if r, ok := OwnView(p.s, "r").Token(c.token); ok != wantOK || ok && r.Tick.Tick != wanted.Tick {
			t.Fatalf("token %s: the partial state's view answers %+v, %v; the whole %+v, %v", c.token, r, ok, wanted, wantOK)
		}
		if _, err := partialAlike(full, p, want); err != nil {
			t.Fatalf("token %s: %v", c.token, err)
		}
	}
	// A partial state grown for another token reads no filter again,
	// and the shards that may hold it.
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0, Token: "t5000"})
	if err != nil {
		t.Fatal(err)
	}
	b.shards.Store(0)
	b.filters.Store(0)
	if err := p.Load(ctx, Want{Run: "r", From: 1, To: 0, Token: "t17000"}); err != nil {
		t.Fatal(err)
	}
	if s, f := b.shards.Load(), b.filters.Load(); s != 1 || f != 0 {
		t.Fatalf("a partial state grown for a second token read %d tick shards and %d filters; want 1 and none", s, f)
	}
	if tk, ok, err := p.TickByToken("r", "t17000"); err != nil || !ok || tk.Tick != 17000 {
		t.Fatalf("token t17000: %+v, %v, %v", tk, ok, err)
	}
}

// A token published at several ticks in several shards is the lowest of
// them: every shard whose filter may hold it is decoded.
func TestTokenInSeveralShardsAnswersTheLowest(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	dup := map[int64]bool{3*tickShardSpan + 1: true, tickShardSpan + 2: true, 2*tickShardSpan + 3: true}
	var entries []Entry
	for i := range int64(4 * tickShardSpan) {
		token := fmt.Sprint("t", i)
		if dup[i] {
			token = "dup"
		}
		entries = append(entries, publish("r", i, token, epoch))
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
	full, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok := full.TickByToken("r", "dup"); !ok || tk.Tick != tickShardSpan+2 {
		t.Fatalf("the whole state answers %+v, %v", tk, ok)
	}
	b.shards.Store(0)
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0, Token: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.shards.Load(); got != 3 {
		t.Errorf("read %d tick shards; want the 3 that hold the token", got)
	}
	if tk, ok, err := p.TickByToken("r", "dup"); err != nil || !ok || tk.Tick != tickShardSpan+2 {
		t.Fatalf("the partial state answers %+v, %v, %v; want tick %d", tk, ok, err, tickShardSpan+2)
	}
}

// A damaged token filter fails the lookup closed (ErrCorrupt), whether
// or not its shard holds the token; a missing one has its shard decoded.
func TestTokenFilterDamagedOrMissing(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	spanWorld(t, b, 5*tickShardSpan+100)
	names := tokenFilterNames(t, b, "r")
	lookup := func(token string) (*Tick, bool, error) {
		p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0, Token: token})
		if err != nil {
			return nil, false, err
		}
		return p.TickByToken("r", token)
	}
	replace := func(name string, data []byte) { buckettest.Replace(t, b, name, data) }
	// Missing: the filter of the shard holding t5000 (shard 1), and of
	// one that does not hold it (shard 3): both decoded.
	replace(names[1], nil)
	replace(names[3], nil)
	b.shards.Store(0)
	if tk, ok, err := lookup("t5000"); err != nil || !ok || tk.Tick != 5000 {
		t.Fatalf("token t5000 without its shard's filter: %+v, %v, %v", tk, ok, err)
	}
	if got := b.shards.Load(); got != 4 {
		t.Errorf("read %d tick shards; want 0, 5, and 1 and 3 (no filter)", got)
	}
	if tk, ok, err := lookup("t13000"); err != nil || !ok || tk.Tick != 13000 {
		t.Fatalf("token t13000 in a shard without a filter: %+v, %v, %v", tk, ok, err)
	}
	// Damaged: a flipped byte in the filter of shard 2 fails lookups of
	// t9001 (in shard 2) and t17000 (in shard 4) alike.
	data, _, err := b.Get(ctx, names[2])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	replace(names[2], data)
	for _, token := range []string{"t9001", "t17000"} {
		if tk, ok, err := lookup(token); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("token %s with a damaged filter: %+v, %v, %v; want ErrCorrupt", token, tk, ok, err)
		}
	}
	// A token that names its tick is answered there, no filter read.
	if tk, ok, err := lookup(spanToken(9003)); err != nil || !ok || tk.Tick != 9003 {
		t.Fatalf("a token naming its tick, with a damaged filter beside: %+v, %v, %v", tk, ok, err)
	}
	// One valid but bound to another shard is damaged too.
	other, _, err := b.Get(ctx, names[4])
	if err != nil {
		t.Fatal(err)
	}
	replace(names[2], other)
	if _, _, err := lookup("t9001"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a filter bound to another shard: %v; want ErrCorrupt", err)
	}
}

// WriteSidecars writes the token filters a checkpoint's tick shards lack
// (those an older worldfs wrote without them), counts them without
// writing when dry, then writes none.
func TestWriteSidecarsFillsTokenFilters(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	spanWorld(t, b, 2*tickShardSpan+100)
	names := tokenFilterNames(t, b, "r")
	for _, name := range names {
		a, err := b.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.DeleteOnce(ctx, b, name, a.Generation); err != nil {
			t.Fatal(err)
		}
	}
	lack := 3 // those of r's shards 0..2
	if n, err := WriteSidecars(ctx, b, "w", true); err != nil || n.TokenFilters != lack {
		t.Fatalf("a dry run counts %+v, %v; want %d filters", n, err, lack)
	}
	if _, err := b.Stat(ctx, names[0]); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("a dry run wrote a filter: %v", err)
	}
	if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n.TokenFilters != lack {
		t.Fatalf("WriteSidecars wrote %+v, %v; want %d filters", n, err, lack)
	}
	b.shards.Store(0)
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0, Token: "t5000"})
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok, err := p.TickByToken("r", "t5000"); err != nil || !ok || tk.Tick != 5000 || b.shards.Load() != 3 {
		t.Fatalf("token t5000 after the filters are written: %+v, %v, %v, %d shards read; want 3", tk, ok, err, b.shards.Load())
	}
	if n, err := WriteSidecars(ctx, b, "w", false); err != nil || n != (SidecarCounts{}) {
		t.Fatalf("WriteSidecars again wrote %+v, %v; want none", n, err)
	}
}

// The catalog check compares each token filter with its shard's ticks:
// one that decodes and checks out but filters other tokens is a problem.
func TestVerifyCatalogComparesTokenFilters(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, tickShardSpan+100)
	if chk, err := VerifyCatalog(ctx, b, "w", nil); err != nil || len(chk.Problems) != 0 {
		t.Fatalf("the check of a sound world: %+v, %v", chk, err)
	}
	f := tokenFilters(t, b, "r")[0]
	clear(f.bits)
	f.add("another")
	name := tokenFilterNames(t, b, "r")[0]
	a, err := b.Stat(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.DeleteOnce(ctx, b, name, a.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, name, f.encode()); err != nil {
		t.Fatal(err)
	}
	chk, err := VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(chk.Problems) != 1 {
		t.Fatalf("the check of a world with a misleading token filter: %+v, %v; want one problem", chk, err)
	}
}
