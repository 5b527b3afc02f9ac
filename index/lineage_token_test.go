package index

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// A fork's view answers a token by the rule State.TickByToken states (the
// tick the token names, if that tick is visible and carries the token;
// else the lowest visible tick that does), as the mount's tokens/ lookup
// probes it (the named tick through View.Tick first): a token at several
// ticks across a lineage (a log may hold a token published at several)
// is answered alike by every reader.
func TestViewTokenOfAForkFollowsTheNamedRule(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	parent, pe := newWorld(t, b, "parent", Options{NoCompactor: true})
	far := int64(2*tickShardSpan + 1)
	named7 := TickToken(7, [16]byte{7})     // the parent's tick 7; the fork also publishes it at 20
	namedFar := TickToken(far, [16]byte{8}) // the parent's ticks 5 and far (past the fork point)
	named3 := TickToken(3, [16]byte{3})     // the parent's ticks 2 and 3
	commitEach(t, parent,
		ownPublish("parent", "main", 2, named3, pe),
		ownPublish("parent", "main", 3, named3, pe),
		ownPublish("parent", "main", 5, namedFar, pe),
		ownPublish("parent", "main", 7, named7, pe),
		ownPublish("parent", "main", far, namedFar, pe))

	fork := func(name string, at int64, es ...func(epoch int64) Entry) *View {
		t.Helper()
		c, fe, err := CreateWorld(ctx, b, name, WorldCreate{Parent: "parent", ForkRun: "main", ForkTick: at}, "f", Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, e := range es {
			commitEach(t, c, e(fe))
		}
		v, err := OpenView(ctx, LoadFrom(b), name, "main")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		what  string
		v     *View
		token string
		want  string // world:tick
	}{
		{"a fork at 10 that publishes tick 20 under the token of its parent's tick 7",
			fork("f20", 10, func(e int64) Entry { return ownPublish("f20", "main", 20, named7, e) }), named7, "parent:7"},
		{"a fork at 6000 of a parent whose token is at 5 and at the tick it names, past the fork point",
			fork("f6000", 6000), namedFar, "parent:5"},
		{"a fork at 4 of a parent whose token is at 2 and at 3, the tick it names",
			fork("f3", 4), named3, "parent:3"},
	} {
		// The visible ticks that carry the token.
		var carry []string
		c.v.Ticks(-1<<62, 1<<62, func(r TickRef) bool {
			if vis, ok := c.v.Tick(r.Tick.Tick); ok && vis.Tick == r.Tick && r.CommitToken == c.token {
				carry = append(carry, r.World+":"+strconv.FormatInt(r.Tick.Tick, 10))
			}
			return true
		})
		got, probe := "none", "none"
		if r, ok := c.v.Token(c.token); ok {
			got = r.World + ":" + strconv.FormatInt(r.Tick.Tick, 10)
		}
		// The mount's tokens/ lookup probes the named tick first.
		n, _ := TokenTick(c.token)
		if r, ok := c.v.Tick(n); ok && r.CommitToken == c.token {
			probe = r.World + ":" + strconv.FormatInt(r.Tick.Tick, 10)
		}
		if got != c.want {
			t.Errorf("%s: View.Token (sql --token, export --token) answers %s, the mount's named-tick probe %s; want %s (the visible ticks that carry it: %v)",
				c.what, got, probe, c.want, carry)
		}
	}
}

// A fork's own ticks follow its fork point: a publish of a tick at or
// before it, which readers take from the parent, is refused, so that no
// view holds two ticks of one number.
func TestForkPublishesOnlyPastItsForkPoint(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, fe := forkAtFour(t, b)
	for _, tick := range []int64{3, 4} {
		for _, run := range []string{"main", "other"} {
			if _, err := c.Commit(ctx, ownPublish("f", run, tick, "f"+strconv.FormatInt(tick, 10), fe)); !errors.Is(err, ErrRefused) {
				t.Fatalf("a fork at 4 publishing tick %d of run %s: %v; want refused", tick, run, err)
			}
		}
	}
	commitEach(t, c, ownPublish("f", "main", 5, "f5", fe))
	v, err := OpenView(ctx, LoadFrom(b), "f", "main")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	v.Ticks(-1<<62, 1<<62, func(r TickRef) bool {
		got = append(got, r.World+":"+strconv.FormatInt(r.Tick.Tick, 10))
		return true
	})
	if want := []string{"parent:3", "parent:4", "f:5"}; !slices.Equal(got, want) {
		t.Fatalf("the fork's ticks: %v, want %v", got, want)
	}
}

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
		{"f", "parted", "p:" + fmt.Sprint(3*span+5), 2, 4}, // and f's shard of that tick: f did not publish it
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

// A fork whose log an earlier worldfs wrote with a publish at or before
// its fork point (such logs still load:
// TestOldForkLogWithAnEarlyPublishStillLoads) hides its parent's tick of
// that number: View.Tick answers the fork's, and View.Token does not
// answer a token that only the hidden tick carries. LineageToken, which
// reads the lineage one world at a time, answers as the view does.
func TestLineageTokenOfATickAnOldForkHides(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	oldForkWithAnEarlyPublish(t, b) // the parent's p3 and p4, the fork's f3
	v, err := OpenView(ctx, LoadFrom(b), "f", "main")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := v.Tick(3); !ok || r.World != "f" {
		t.Fatalf("the view's tick 3 is %s's (%v); want the fork's own", r.World, ok)
	}
	for _, token := range []string{"p3", "p4", "f3"} {
		want := "none"
		if r, ok := v.Token(token); ok {
			want = fmt.Sprintf("%s:%d", r.World, r.Tick.Tick)
		}
		r, ok, err := LineageToken(ctx, PartsFrom(b), "f", "main", token)
		if err != nil {
			t.Fatalf("token %s: %v", token, err)
		}
		got := "none"
		if ok {
			got = fmt.Sprintf("%s:%d", r.World, r.Tick.Tick)
		}
		if got != want {
			t.Errorf("token %s: LineageToken answers %s, the view %s", token, got, want)
		}
	}
}

// A damaged token filter of an ancestor, of a shard up to the fork point,
// fails a fork's lookup closed (ErrCorrupt): never "not found", nor the
// shard decoded instead.
func TestLineageTokenFailsClosedOnADamagedAncestorFilter(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	spanWorld(t, b, 3*tickShardSpan) // w: run r's shards 0..2, checkpointed
	f, _, err := CreateWorld(ctx, b, "f", WorldCreate{Parent: "w", ForkRun: "r", ForkTick: tickShardSpan + 10}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	names := tokenFilterNames(t, b, "r")
	damaged := names[1] // shard 0 the log after the checkpoint touches: loaded, its filter unread
	a, err := b.Stat(ctx, damaged)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, damaged, a.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, damaged, []byte("worldfs tick token filter 1\nnot a filter, and no sum of it: 32 bytes........")); err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"t1", "absent"} {
		r, ok, err := LineageToken(ctx, PartsFrom(b), "f", "r", token)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("token %s with w's filter of shard 1 damaged: %s:%v %v, %v; want ErrCorrupt", token, r.World, r.Tick, ok, err)
		}
	}
}
