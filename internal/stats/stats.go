// Package stats records operation latencies and summarizes them, for
// benchmarks (go test -bench and worldfs bench) alike.
package stats

import (
	"slices"
	"sync"
	"time"
)

// Recorder collects latencies; safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	ds []time.Duration
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
}

// Count returns how many latencies were recorded.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ds)
}

// Summary is a latency distribution over a run of elapsed wall time.
type Summary struct {
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// Summarize returns the distribution of what was recorded over elapsed.
func (r *Recorder) Summarize(elapsed time.Duration) Summary {
	r.mu.Lock()
	ds := slices.Clone(r.ds)
	r.mu.Unlock()
	s := Summary{Ops: len(ds), Seconds: elapsed.Seconds()}
	if len(ds) == 0 {
		return s
	}
	l := Distribution(ds)
	s.P50ms, s.P90ms, s.P99ms, s.MaxMs = l.P50ms, l.P90ms, l.P99ms, l.MaxMs
	if elapsed > 0 {
		s.OpsPerSec = float64(len(ds)) / elapsed.Seconds()
	}
	return s
}

// Latencies are the percentiles of a latency distribution, in
// milliseconds.
type Latencies struct {
	P50ms, P90ms, P99ms, MaxMs float64
}

// Distribution sorts ds in place and returns its percentiles (zero for
// no latencies). The q-th percentile is the latency at rank q·n.
func Distribution(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	slices.Sort(ds)
	ms := func(q float64) float64 { return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / 1e6 }
	return Latencies{P50ms: ms(0.50), P90ms: ms(0.90), P99ms: ms(0.99), MaxMs: float64(ds[len(ds)-1]) / 1e6}
}
