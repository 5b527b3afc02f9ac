package stats

import (
	"testing"
	"time"
)

// One implementation of the percentiles serves the benchmarks and the
// mount's .worldfs/stats: rank q·n of the sorted latencies.
func TestDistribution(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := Distribution(ds)
	want := Latencies{P50ms: 51, P90ms: 91, P99ms: 100, MaxMs: 100}
	if got != want {
		t.Fatalf("Distribution(1..100 ms) = %+v, want %+v", got, want)
	}
	if (Distribution(nil) != Latencies{}) {
		t.Fatal("Distribution of nothing is not zero")
	}
}
