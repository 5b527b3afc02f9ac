package index

import (
	"errors"
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
