package mem

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

func TestLatencyModelMatchesProfile(t *testing.T) {
	p := Profiles["gcs"]
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name string
		d    Dist
	}{{"create", p.Create}, {"read", p.Read}} {
		xs := make([]time.Duration, 20000)
		for i := range xs {
			xs[i] = tc.d.sample(r)
		}
		slices.Sort(xs)
		p50, p99 := xs[len(xs)/2], xs[len(xs)*99/100]
		near := func(got, want time.Duration) bool {
			return got > want*95/100 && got < want*105/100
		}
		if !near(p50, tc.d.P50) || !near(p99, tc.d.P99) {
			t.Errorf("%s: sampled p50 %v p99 %v, profile p50 %v p99 %v", tc.name, p50, p99, tc.d.P50, tc.d.P99)
		}
	}
}

func TestSeedReplaysLatencies(t *testing.T) {
	a, b := New(Options{Profile: Profiles["gcs"], Seed: 42}), New(Options{Profile: Profiles["gcs"], Seed: 42})
	for range 100 {
		if x, y := a.latency(a.profile.Create), b.latency(b.profile.Create); x != y {
			t.Fatalf("same seed, different latencies: %v vs %v", x, y)
		}
	}
}

// The gcs profile charges a create for its size: with the same sampled
// base latency, 256 KiB costs 10 ms more than nothing at 25 MiB/s, and a
// larger object more still.
func TestCreateLatencyGrowsWithSize(t *testing.T) {
	p := Profiles["gcs"]
	at := func(n int) time.Duration { return p.createLatency(rand.New(rand.NewPCG(5, 5)), n) }
	base := at(0)
	if got, want := at(256<<10)-base, 10*time.Millisecond; got < want*99/100 || got > want*101/100 {
		t.Errorf("a 256 KiB create costs %v more than an empty one, want %v", got, want)
	}
	if small, big := at(1<<10), at(8<<20); small-base > time.Millisecond || big-base < 300*time.Millisecond {
		t.Errorf("size term: 1 KiB +%v, 8 MiB +%v", small-base, big-base)
	}
}

func TestCreateTakesModeledTime(t *testing.T) {
	b := New(Options{Profile: Profiles["gcs"], Seed: 1})
	start := time.Now()
	if _, err := b.Create(context.Background(), "x", nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("a gcs-profile create took %v, want about 40 ms", d)
	}
}

// In a synctest bubble, so that waiting out the interval takes no real
// time: the model's clock is the bubble's.
func TestPerNameMutationLimit(t *testing.T) {
	synctest.Test(t, testPerNameMutationLimit)
}

func testPerNameMutationLimit(t *testing.T) {
	b := New(Options{Profile: Profile{Name: "t", MutationInterval: 200 * time.Millisecond}})
	ctx := context.Background()
	a, err := b.Create(ctx, "x", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Delete(ctx, "x", a.Generation)
	var te *ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("delete right after create = %v, want a 429 that reads as ambiguous", err)
	}
	if _, err := b.Stat(ctx, "x"); err != nil {
		t.Fatalf("a throttled delete applied: %v", err)
	}
	// A taken name answers ErrExist at once, whatever the rate: nothing
	// would be mutated.
	if _, err := b.Create(ctx, "x", []byte("2")); !errors.Is(err, bucket.ErrExist) {
		t.Fatalf("create of a taken name = %v, want ErrExist", err)
	}
	// Other names are not limited.
	if _, err := b.Create(ctx, "y", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := b.Delete(ctx, "x", a.Generation); err != nil {
		t.Fatalf("delete after the interval = %v", err)
	}
}

func TestOpenSharesStoreByName(t *testing.T) {
	defer Forget("shared-test")
	a, b := Open("shared-test", Options{}), Open("shared-test", Options{})
	if _, err := a.Create(context.Background(), "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(context.Background(), "x", []byte("2")); !errors.Is(err, bucket.ErrExist) {
		t.Fatalf("second client of one store: %v, want ErrExist", err)
	}
	c := New(Options{})
	if _, err := c.Stat(context.Background(), "x"); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("a bucket of its own sees another's object: %v", err)
	}
}

// A modeled latency past the bucket's timeout is a call without a reply:
// NotAnsweringError after the timeout. A create whose request half fits in
// the timeout lands (ambiguous); one whose request half does not, does not
// (unapplied). Reads are unavailable.
func TestLatencyPastTheTimeout(t *testing.T) {
	ctx := context.Background()
	var noReply *bucket.NotAnsweringError
	for _, tc := range []struct {
		create time.Duration
		lands  bool
	}{{80 * time.Millisecond, true}, {time.Hour, false}} {
		b := New(Options{Timeout: 50 * time.Millisecond, Profile: Profile{Name: "slow", Create: Dist{P50: tc.create}}})
		_, err := b.Create(ctx, "x", []byte("x"))
		if !errors.As(err, &noReply) || errors.Is(err, bucket.ErrAmbiguous) != tc.lands {
			t.Fatalf("create of latency %v: %v, want NotAnsweringError, ambiguous %v", tc.create, err, tc.lands)
		}
		if _, err := b.Stat(ctx, "x"); (err == nil) != tc.lands {
			t.Fatalf("create of latency %v: Stat after = %v, landed should be %v", tc.create, err, tc.lands)
		}
	}
	b := New(Options{Timeout: 50 * time.Millisecond, Profile: Profile{Name: "slow", Read: Dist{P50: time.Hour}}})
	if _, _, err := b.Get(ctx, "x"); !errors.As(err, &noReply) || !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("Get of latency 1h = %v, want an unavailable NotAnsweringError", err)
	}
}
