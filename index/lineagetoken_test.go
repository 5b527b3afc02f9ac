package index

import (
	"fmt"
	"testing"
)

// A lookup of a token in a fork's lineage one world at a time
// (LineageToken) answers as the view of the whole states does
// (View.Token): the fork's own token, an ancestor's before the fork
// point, an ancestor's after it (none), a token at several ticks (the
// lowest visible, an ancestor's before the fork's), a token that names
// another tick; and it reads, of the parent's six tick shards, the
// token filters of those up to the fork point and the shards they say
// may hold the token.
func TestLineageTokenAnswersAsTheView(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	const span = tickShardSpan
	forkAt := int64(3*span + 10) // in the parent's shard 3 of 0..5
	tokens := map[int64]string{
		span + 2:     "dup", // also at 2*span+3 and past the fork point
		2*span + 3:   "dup",
		4*span + 1:   "dup",
		3*span + 5:   "parted", // also past the fork point, and the fork's own
		5*span + 7:   "parted",
		2*span + 5:   "twice", // the fork publishes it too
		100:          TickToken(200, [16]byte{2}),
		5*span + 100: "past",
	}
	parent, pe := newWorld(t, b, "p", Options{NoCompactor: true})
	var entries []Entry
	for i := range int64(6 * span) {
		token, ok := tokens[i]
		if !ok {
			token = fmt.Sprint("p", i)
		}
		entries = append(entries, ownPublish("p", "main", i, token, pe))
	}
	for len(entries) > 0 {
		k := min(len(entries), 1000)
		if _, err := parent.CommitAll(ctx, entries[:k]...); err != nil {
			t.Fatal(err)
		}
		entries = entries[k:]
	}
	if _, err := parent.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	f, fe, err := CreateWorld(ctx, b, "f", WorldCreate{Parent: "p", ForkRun: "main", ForkTick: forkAt}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	commitEach(t, f,
		ownPublish("f", "main", forkAt+1, "own1", fe),
		ownPublish("f", "main", forkAt+2, "twice", fe),
		ownPublish("f", "main", forkAt+3, "parted", fe),
		ownPublish("f", "main", forkAt+4, "own4", fe))
	if _, err := f.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// g forks f at its tick forkAt+2: it sees the parent up to forkAt.
	g, _, err := CreateWorld(ctx, b, "g", WorldCreate{Parent: "f", ForkRun: "main", ForkTick: forkAt + 2}, "g", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()

	for _, c := range []struct {
		world, token string
		want         string // world:tick, or none
		// tick shards read (the parent's and f's), and token filters: of
		// a fork's lookup, the parent's four up to the fork point, and
		// f's one if the parent has no answer
		shards, filters int64
	}{
		{"f", "own1", "f:" + fmt.Sprint(forkAt+1), 1, 5},
		{"f", "p5000", "p:5000", 1, 4},
		{"f", "p" + fmt.Sprint(4*span), "none", 0, 5},
		{"f", "past", "none", 0, 5},
		{"f", "dup", "p:" + fmt.Sprint(span+2), 2, 4},
		{"f", "twice", "p:" + fmt.Sprint(2*span+5), 1, 4},
		{"f", "parted", "p:" + fmt.Sprint(3*span+5), 1, 4},
		{"f", tokens[100], "p:100", 1, 3},
		{"f", TickToken(7, [16]byte{7}), "none", 1, 4},
		{"f", "absent", "none", 0, 5},
		{"g", "own1", "f:" + fmt.Sprint(forkAt+1), 1, 5},
		{"g", "own4", "none", 1, 5},
		{"g", "dup", "p:" + fmt.Sprint(span+2), 2, 4},
		{"p", "dup", "p:" + fmt.Sprint(span+2), 3, 6},
		{"p", "past", "p:" + fmt.Sprint(5*span+100), 1, 6},
	} {
		v, err := OpenView(ctx, LoadFrom(b), c.world, "main")
		if err != nil {
			t.Fatal(err)
		}
		want := "none"
		if r, ok := v.Token(c.token); ok {
			want = fmt.Sprintf("%s:%d", r.World, r.Tick.Tick)
		}
		if want != c.want {
			t.Fatalf("%s, token %s: the view answers %s; the case says %s", c.world, c.token, want, c.want)
		}
		b.shards.Store(0)
		b.filters.Store(0)
		r, ok, err := LineageToken(ctx, PartsFrom(b), c.world, "main", c.token)
		if err != nil {
			t.Fatalf("%s, token %s: %v", c.world, c.token, err)
		}
		got := "none"
		if ok {
			got = fmt.Sprintf("%s:%d", r.World, r.Tick.Tick)
		}
		if got != want {
			t.Errorf("%s, token %s: LineageToken answers %s, the view %s", c.world, c.token, got, want)
		}
		if n, f := b.shards.Load(), b.filters.Load(); n != c.shards || f != c.filters {
			t.Errorf("%s, token %s: read %d tick shards and %d token filters; want %d and %d", c.world, c.token, n, f, c.shards, c.filters)
		}
	}
}
