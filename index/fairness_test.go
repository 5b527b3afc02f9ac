package index

import (
	"testing"
	"time"
)

// The yield after a win waits out the lead a winner has over the losers,
// as the committer measured it on its own lost and won round trips, and
// its jitter grows with the slots won in a row. Times come from a
// controlled clock; nothing sleeps.
func TestYieldWaitsOutTheLosersRoundTrip(t *testing.T) {
	const jitter = 10 * time.Millisecond
	none := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	var f fairness
	now := time.Unix(1000, 0)
	race := func(rtt time.Duration, won bool, next time.Duration) {
		f.sending(now)
		now = now.Add(rtt)
		f.decided(now, won)
		now = now.Add(next)
	}
	if y := f.yield(jitter, most); y > jitter {
		t.Fatalf("with nothing measured the yield is %v, want the jitter (%v) at most", y, jitter)
	}
	// Won creates answer in 40 ms; a lost one answers in 20 ms and its
	// reading of the winners and rebase take 130 ms more before the next
	// create is sent: a loser's round trip is 150 ms, 110 ms longer.
	race(40*time.Millisecond, true, 0)
	race(20*time.Millisecond, false, 130*time.Millisecond)
	race(40*time.Millisecond, true, 0)
	if y := f.yield(jitter, none); y < 110*time.Millisecond {
		t.Fatalf("after losers' round trips of 150 ms and wins of 40 ms the yield is %v, want at least 110 ms", y)
	}
	// Winning on, the jitter doubles per further slot won, up to 8 times.
	var last time.Duration
	for i := range 6 {
		base := f.yield(jitter, none)
		spread := f.yield(jitter, most) - base
		want := jitter << min(i, 3)
		if spread != want-1 {
			t.Fatalf("after %d slots won in a row the jitter spans %v, want %v", i+1, spread+1, want)
		}
		if spread < last {
			t.Fatalf("the jitter shrank while winning: %v after %v", spread, last)
		}
		last = spread
		race(40*time.Millisecond, true, 0)
	}
	// A loss resets the streak.
	race(20*time.Millisecond, false, 130*time.Millisecond)
	race(40*time.Millisecond, true, 0)
	if spread := f.yield(jitter, most) - f.yield(jitter, none); spread != jitter-1 {
		t.Fatalf("after a loss and one win the jitter spans %v, want %v", spread+1, jitter)
	}
	// A freak round trip is waited out only up to the bound.
	race(20*time.Millisecond, false, time.Hour)
	race(40*time.Millisecond, true, 0)
	if y := f.yield(jitter, none); y > maxYieldOffset+1 {
		t.Fatalf("after an hour-long lost round trip the yield is %v, want at most %v", y, maxYieldOffset)
	}
}

// The committer feeds its fairness from its creates: a slot lost to
// another store and then won samples both round trips.
func TestCommitterMeasuresItsRoundTrips(t *testing.T) {
	b := memBucket()
	a, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	other, err := Open(ctxT(t), b, "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The other store takes the next slot; a, which has not read it, loses
	// its first create, rebases and wins the slot after it.
	if _, err := other.Commit(ctxT(t), publish("r", 0, "t0", epoch)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctxT(t), publish("r", 1, "t1", epoch)); err != nil {
		t.Fatal(err)
	}
	a.Close() // the committer is done: its fairness can be read
	if st := a.Stats(); st.LostSlots != 1 {
		t.Fatalf("a lost %d slots, want 1", st.LostSlots)
	}
	if f := a.fair; f.lost <= 0 || f.won <= 0 || f.streak != 1 {
		t.Fatalf("after a lost slot and a won one: lost round trip %v, won %v, streak %d; want both sampled and a streak of 1", f.lost, f.won, f.streak)
	}
	// Having seen the other store's slot, a yielded after its win, and
	// counts the wait.
	if y := a.Stats().Yielded; y <= 0 {
		t.Fatalf("a yielded %v after its win beside another store, want the wait counted", y)
	}
}
