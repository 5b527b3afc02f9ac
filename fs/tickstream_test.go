package fs

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/index"
)

// longState is the catalog state of world w whose run main published
// ticks 0..n-1 (fragment lists only; no data).
func longState(t testing.TB, n int) *index.State {
	t.Helper()
	s := index.Empty("w")
	entries := []index.Entry{
		{Kind: index.KindWorldCreate, WorldCreate: &index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}},
		{Kind: index.KindFenceAcquire, FenceAcquire: &index.FenceAcquire{Holder: "writer"}},
	}
	for tick := range int64(n) {
		token := fmt.Sprintf("%032x", tick)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: 1,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("w", "main", "t", token, 0), Rows: 1}}}}}})
	}
	s, err := s.ApplySlot(&index.Slot{Format: index.SlotFormat, World: "w", FirstSeq: 1, Entries: entries}, "h")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// streamOf is a listing of d's run in st, a whole state.
func streamOf(d *ticksDir, st *index.State) *tickStream {
	return &tickStream{d: d, next: math.MinInt64, segs: []*streamSeg{{world: d.world, run: d.run, upTo: math.MaxInt64, p: index.PartialOf(st)}}}
}

// A listing of ticks/ returns every tick in order, a batch of the view at a
// time, without an allocation per entry (names are carved from one buffer
// per batch), and seeks by position.
func TestTickListingStreams(t *testing.T) {
	const n = 5000
	st := longState(t, n)
	d := &ticksDir{world: "w", run: "main"}
	ctx := context.Background()
	list := func() []string {
		s := streamOf(d, st)
		var names []string
		for {
			de, errno := s.Readdirent(ctx)
			if errno != 0 {
				t.Fatal(errno)
			}
			if de == nil {
				return names
			}
			if de.Ino != ino("w", "runs", "main", "ticks", de.Name) || de.Off != uint64(len(names)+1) {
				t.Fatalf("entry %d: %+v", len(names), de)
			}
			names = append(names, de.Name)
		}
	}
	names := list()
	if len(names) != n {
		t.Fatalf("%d entries, want %d", len(names), n)
	}
	for i, name := range names {
		if name != fmt.Sprintf("%012d", i) {
			t.Fatalf("entry %d is %q", i, name)
		}
	}
	if !slices.IsSorted(names) {
		t.Fatal("the names' lexical order is not the ticks' order")
	}
	s := streamOf(d, st)
	if errno := s.Seekdir(ctx, 1234); errno != 0 {
		t.Fatal(errno)
	}
	if de, _ := s.Readdirent(ctx); de == nil || de.Name != "000000001234" {
		t.Fatalf("after a seek to 1234: %+v", de)
	}

	s = streamOf(d, st)
	allocs := testing.AllocsPerRun(1, func() {
		s.next, s.seg, s.pos, s.batch = math.MinInt64, 0, 0, s.batch[:0]
		for de, _ := s.Readdirent(ctx); de != nil; de, _ = s.Readdirent(ctx) {
		}
	})
	if allocs > n/64 {
		t.Fatalf("listing %d ticks made %.0f allocations; want a few per batch of %d", n, allocs, tickBatch)
	}
}

// A listing of tokens/ returns the tokens in the order it holds them, with
// positions as offsets, and seeks by position.
func TestTokenListingSeeks(t *testing.T) {
	const n = 3000
	v := index.OwnView(longState(t, n), "main")
	l := &tokenList{d: &tokensDir{world: "w"}}
	v.Ticks(math.MinInt64, math.MaxInt64, func(t tickRef) bool { l.entries = append(l.entries, tokenEntry{t: t}); return true })
	ctx := context.Background()
	for i := range n + 1 {
		de, errno := l.Readdirent(ctx)
		switch {
		case errno != 0:
			t.Fatal(errno)
		case i == n && de != nil:
			t.Fatalf("an entry past the end: %+v", de)
		case i < n && (de == nil || de.Name != fmt.Sprintf("%032x", i) || de.Off != uint64(i+1) || de.Ino != ino("w", "tokens", de.Name)):
			t.Fatalf("entry %d: %+v", i, de)
		}
	}
	for _, off := range []uint64{1234, 0, n - 1} {
		if errno := l.Seekdir(ctx, off); errno != 0 {
			t.Fatal(errno)
		}
		if de, _ := l.Readdirent(ctx); de == nil || de.Name != fmt.Sprintf("%032x", off) {
			t.Fatalf("after a seek to %d: %+v", off, de)
		}
	}
	if errno := l.Seekdir(ctx, n+5); errno != 0 {
		t.Fatal(errno)
	}
	if de, _ := l.Readdirent(ctx); de != nil {
		t.Fatalf("after a seek past the end: %+v", de)
	}
}
