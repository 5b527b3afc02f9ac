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
		if n, ok := TokenTick(TickToken(tick, r)); ok {
			t.Fatalf("a token minted for tick %d names tick %d", tick, n)
		}
	}
	for _, tok := range []string{"", "t5", "0123456789abcdef0200000000000005", "0123456789abcdef01000000000000zz", "0123456789abcdef010000000000000"} {
		if n, ok := TokenTick(tok); ok {
			t.Fatalf("token %q names tick %d", tok, n)
		}
	}
}

// A publish whose token names another tick is refused: what a lookup
// finds at the tick a token names is every tick it published.
func TestPublishOfATokenNamingAnotherTickIsRefused(t *testing.T) {
	ctx := ctxT(t)
	c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true})
	if _, err := c.Commit(ctx, publish("r", 5, TickToken(6, [16]byte{}), epoch)); err == nil || !strings.Contains(err.Error(), "names tick 6") {
		t.Fatalf("publish of tick 5 under a token naming tick 6: %v", err)
	}
	if _, err := c.Commit(ctx, publish("r", 6, TickToken(6, [16]byte{}), epoch)); err != nil {
		t.Fatal(err)
	}
}
