package index

import (
	"testing"
	"time"
)

// fairRaces drives a committer's fairness on a controlled clock.
type fairRaces struct {
	f               fairness
	now             time.Time
	recency, jitter time.Duration
}

func newFairRaces(recency, jitter time.Duration) *fairRaces {
	return &fairRaces{now: time.Unix(1000, 0), recency: recency, jitter: jitter}
}

// race sends a create answered after rtt, won or lost, and moves the
// clock on by next (a lost create's reading of the winners and rebase).
func (r *fairRaces) race(rtt time.Duration, won bool, next time.Duration) {
	r.f.sending(r.now)
	r.now = r.now.Add(rtt)
	r.f.decided(r.now, won)
	r.now = r.now.Add(next)
}

// yields returns the least and the greatest wait after the last win.
func (r *fairRaces) yields() (lo, hi time.Duration) {
	lo = r.f.yield(r.now, r.recency, r.jitter, func(int64) int64 { return 0 })
	hi = r.f.yield(r.now, r.recency, r.jitter, func(n int64) int64 { return n - 1 })
	return lo, hi
}

// The yield after a win waits out the lead a winner has over the losers,
// as the committer measured it on its own lost and won round trips, and
// its jitter grows with the slots won in a row. Times come from a
// controlled clock; nothing sleeps.
func TestYieldWaitsOutTheLosersRoundTrip(t *testing.T) {
	const jitter = 10 * time.Millisecond
	// Every loss here is recent (the recency is left to
	// TestYieldIsContendedOnlyAfterALoss).
	r := newFairRaces(24*time.Hour, jitter)
	race := r.race
	if _, y := r.yields(); y > jitter {
		t.Fatalf("with nothing measured the yield is %v, want the jitter (%v) at most", y, jitter)
	}
	// Won creates answer in 40 ms; a lost one answers in 20 ms and its
	// reading of the winners and rebase take 130 ms more before the next
	// create is sent: a loser's round trip is 150 ms, 110 ms longer.
	race(40*time.Millisecond, true, 0)
	race(20*time.Millisecond, false, 130*time.Millisecond)
	race(40*time.Millisecond, true, 0)
	if y, _ := r.yields(); y < 110*time.Millisecond {
		t.Fatalf("after losers' round trips of 150 ms and wins of 40 ms the yield is %v, want at least 110 ms", y)
	}
	// Winning on, the jitter doubles per further slot won, up to 8 times
	// on the last of the contended wins after the loss.
	var last time.Duration
	for i := range contendedWins - 1 {
		base, most := r.yields()
		spread := most - base
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
	if lo, hi := r.yields(); hi-lo != 8*jitter-1 {
		t.Fatalf("after %d slots won in a row the jitter spans %v, want %v", contendedWins, hi-lo+1, 8*jitter)
	}
	// A loss resets the streak.
	race(20*time.Millisecond, false, 130*time.Millisecond)
	race(40*time.Millisecond, true, 0)
	if lo, hi := r.yields(); hi-lo != jitter-1 {
		t.Fatalf("after a loss and one win the jitter spans %v, want %v", hi-lo+1, jitter)
	}
	// A freak round trip is waited out only up to the bound.
	race(20*time.Millisecond, false, time.Hour)
	race(40*time.Millisecond, true, 0)
	if y, _ := r.yields(); y > maxYieldOffset+1 {
		t.Fatalf("after an hour-long lost round trip the yield is %v, want at most %v", y, maxYieldOffset)
	}
}

// The contended yield (the losers' round trip waited out, the jitter
// doubling per slot won in a row) is paid only while this store loses
// slots: beside an idle store a winner keeps the base jitter and no
// offset; beside a light one, which makes it lose a slot now and then,
// the jitter doubles only in the first wins after a loss and on a probe
// every probeEvery wins, while the offset stays until the loss is older
// than the recency. Under real contention the streak still grows. Times
// come from a controlled clock; nothing sleeps.
func TestYieldIsContendedOnlyAfterALoss(t *testing.T) {
	const jitter, recency = 10 * time.Millisecond, 3 * time.Second
	r := newFairRaces(recency, jitter)
	race, yields := r.race, r.yields
	base := func(what string, win int) {
		t.Helper()
		if lo, hi := yields(); lo != 1 || hi != jitter {
			t.Fatalf("%s, win %d: the yield spans %v to %v, want the base jitter (up to %v) and no offset", what, win, lo, hi, jitter)
		}
	}
	// A store that never lost a slot (beside an idle store) keeps the
	// base jitter however long it wins.
	for i := range 3 * probeEvery {
		race(40*time.Millisecond, true, 0)
		base("never lost", i+1)
	}
	// Beside a light store: one lost slot, whose round trip (150 ms)
	// outlasts a won one (40 ms) by 110 ms, then a run of wins (a second
	// long, within the recency).
	race(20*time.Millisecond, false, 130*time.Millisecond)
	for i := 1; i <= contendedWins+3*probeEvery; i++ {
		race(40*time.Millisecond, true, 0)
		lo, hi := yields()
		if lo < 100*time.Millisecond || lo > 120*time.Millisecond {
			t.Fatalf("win %d after a recent loss: the yield is at least %v, want the offset (about 110 ms)", i, lo)
		}
		want := jitter // between the probes
		if i <= contendedWins {
			want = jitter << (i - 1) // real contention: the jitter grows with the streak
		} else if (i-contendedWins)%probeEvery == 0 {
			want = 8 * jitter // a probe
		}
		if hi-lo != want-1 {
			t.Fatalf("win %d after a recent loss: the jitter spans %v, want %v", i, hi-lo+1, want)
		}
	}
	// Once the loss is older than the recency, the store yields as beside
	// an idle store.
	r.now = r.now.Add(recency)
	race(40*time.Millisecond, true, 0)
	base("a loss older than the recency", contendedWins+3*probeEvery+1)
	// Losing again (a contender took a slot) starts the contended yields
	// over.
	race(20*time.Millisecond, false, 130*time.Millisecond)
	race(40*time.Millisecond, true, 0)
	race(40*time.Millisecond, true, 0)
	if lo, hi := yields(); lo < 100*time.Millisecond || hi-lo != 2*jitter-1 {
		t.Fatalf("the second win after a new loss: the yield spans %v to %v, want the offset and a jitter of %v", lo, hi, 2*jitter)
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
