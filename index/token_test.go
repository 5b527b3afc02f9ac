package index

import (
	"crypto/rand"
	"strings"
	"testing"
)

// A tick's token names its tick, and only a token of that form names one.
func TestTickTokenNamesItsTick(t *testing.T) {
	var r [16]byte
	_, _ = rand.Read(r[:])
	for _, tick := range []int64{0, 1, 4095, 4096, 1_000_000, tickTokenMax} {
		tok := TickToken(tick, r)
		if n, ok := TokenTick(tok); !ok || n != tick || len(tok) != 32 {
			t.Fatalf("TickToken(%d) = %s: names %d, %v", tick, tok, n, ok)
		}
		if _, ok := TokenTick(strings.ToUpper(tok)); ok {
			t.Fatalf("%s in capitals names a tick", tok)
		}
	}
	if a, b := TickToken(7, r), TickToken(7, [16]byte{}); a == b {
		t.Fatalf("two attempts at tick 7 with different random bytes share token %s", a)
	}
	for _, tick := range []int64{-1, tickTokenMax + 1} {
		marked := r
		marked[8] = tickTokenMark // random bytes that would name a tick
		if n, ok := TokenTick(TickToken(tick, marked)); ok {
			t.Fatalf("a token minted for tick %d names tick %d", tick, n)
		}
	}
	for _, tok := range []string{"", "t5", "0123456789abcdef0200000000000005", "0123456789abcdef01000000000000zz", "0123456789abcdef010000000000000"} {
		if n, ok := TokenTick(tok); ok {
			t.Fatalf("token %q names tick %d", tok, n)
		}
	}
}

// A token that names a tick it published is that tick, in whole states
// and in states loaded in part alike, even where it also published a
// lower tick (a log may hold a token at several ticks); one its named
// tick does not carry is the lowest that does, which only every tick
// that may carry it tells (the shards its token filters name).
func TestTokenAtSeveralTicksAnswersAlike(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	named := int64(2*tickShardSpan + 1)
	twice, elsewhere := TickToken(named, [16]byte{1}), TickToken(named+1, [16]byte{2})
	for _, e := range []Entry{publish("r", 5, twice, epoch), publish("r", named, twice, epoch), publish("r", 7, elsewhere, epoch)} {
		if _, err := c.Commit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	whole, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		tick  int64 // the whole state's answer
	}{{twice, named}, {elsewhere, 7}} {
		if tk, ok := whole.TickByToken("r", c.token); !ok || tk.Tick != c.tick {
			t.Fatalf("the whole state answers token %s with %+v, %v; want tick %d", c.token, tk, ok, c.tick)
		}
		if r, ok := OwnView(whole, "r").Token(c.token); !ok || r.Tick.Tick != c.tick {
			t.Fatalf("the whole state's view answers token %s with %+v, %v; want tick %d", c.token, r, ok, c.tick)
		}
		p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0, Token: c.token})
		if err != nil {
			t.Fatal(err)
		}
		// One the tick it names does not carry is found through the
		// run's token filters (tokenfilter.go).
		if tk, ok, err := p.TickByToken("r", c.token); err != nil || !ok || tk.Tick != c.tick {
			t.Fatalf("loaded for token %s: %+v, %v, %v; want tick %d", c.token, tk, ok, err, c.tick)
		}
	}
}
