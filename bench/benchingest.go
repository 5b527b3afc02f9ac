package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
)

func ingestSpec(env Env) Bench {
	var url, world *string
	var producers *int
	var dupRate, rate float64
	var duration *time.Duration
	return benchSpec[*ingestBench]{
		name:    "ingest",
		summary: "measure fact ingestion: facts/s, latency percentiles, duplicates suppressed, against one writer's commit rate",
		example: "worldfs bench ingest --bucket 'mem://b?profile=gcs' --producers 64 --duration 10s --json\n" +
			"  worldfs bench ingest --bucket 'mem://b?profile=gcs' --rate 1000 --duration 10s",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to ingest into (default: a new bench-ingest-<time> world)")
			producers = fs.Int("producers", 64, "concurrent producers, each sending facts back to back")
			fs.Float64Var(&dupRate, "dup-rate", 0.2, "fraction of sends that resend a fact already acknowledged")
			fs.Float64Var(&rate, "rate", 0, "offer this many sends per second on a fixed schedule, each on its own (open loop; latency counts from its scheduled time); 0: producers send back to back")
			duration = fs.Duration("duration", 10*time.Second, "how long to send facts")
		},
		check: func(args []string) error {
			if len(args) != 0 {
				return usagef("bench ingest takes no arguments")
			}
			if *producers < 1 || dupRate < 0 || dupRate >= 1 || *duration <= 0 || rate < 0 {
				return usagef("--producers must be positive, --dup-rate in [0, 1), --duration positive, --rate not negative")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*ingestBench, error) {
			return benchIngest(ctx, b, *url, *world, *producers, dupRate, rate, *duration)
		},
		table: func(out io.Writer, res *ingestBench) error {
			fmt.Fprintf(out, "bucket %s, world %s, %d producers, %.0f s", res.Bucket, res.World, res.Producers, res.Seconds)
			if res.Rate > 0 {
				fmt.Fprintf(out, ", %.0f sends/s offered", res.Rate)
			}
			fmt.Fprintln(out)
			fmt.Fprintf(out, "  %.0f facts/s (new)  p50 %.1f ms  p99 %.1f ms  max %.1f ms\n", res.FactsPerSec, res.P50ms, res.P99ms, res.MaxMs)
			fmt.Fprintf(out, "  %d facts, %d duplicates suppressed (p50 %.1f ms), %d errors; %d slots, %.1f entries/slot\n",
				res.Facts, res.Duplicates, res.DupP50ms, res.Errors, res.Slots, res.EntriesPerSlot)
			return nil
		},
	}.bench()
}

type ingestBench struct {
	Bucket      string  `json:"bucket"`
	World       string  `json:"world"`
	Producers   int     `json:"producers"`
	DupRate     float64 `json:"dup_rate"`
	Rate        float64 `json:"rate,omitempty"`
	Seconds     float64 `json:"seconds"`
	Facts       int     `json:"facts"`
	FactsPerSec float64 `json:"facts_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	// Duplicates: resends answered with the original receipt.
	Duplicates     int     `json:"duplicates_suppressed"`
	DupP50ms       float64 `json:"duplicate_p50_ms"`
	DupP99ms       float64 `json:"duplicate_p99_ms"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	Slots          int64   `json:"slots"`
	EntriesPerSlot float64 `json:"entries_per_slot"`
	PeakHeapMiB    float64 `json:"peak_heap_mib"`
}

// benchIngest runs producers that each send new facts back to back, and
// resend an acknowledged one at dupRate; every resend must come back
// deduplicated under the original token. With rate > 0 the sends are
// offered on a fixed schedule instead, each in its own goroutine, from
// producers in turn.
func benchIngest(ctx context.Context, b bucket.Bucket, url, world string, producers int, dupRate, rate float64, d time.Duration) (*ingestBench, error) {
	if world == "" {
		world = fmt.Sprintf("bench-ingest-%d", time.Now().UnixNano())
	}
	cat, _, err := index.CreateWorld(ctx, b, world, index.WorldCreate{}, "bench", index.Options{})
	if errors.Is(err, index.ErrWorldExists) {
		cat, err = index.Open(ctx, b, world, index.Options{})
	}
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	svc := engine.NewIngestionService(b, cat, engine.IngestOptions{})
	comp, _ := engine.NewComponent("reading", engine.Field{Name: "sensor", Type: engine.String}, engine.Field{Name: "value", Type: engine.Float64})
	table, _ := engine.NewFactTable("reading", comp)
	fact := func(p, n int) engine.Fact {
		producer := "sensor-" + strconv.Itoa(p)
		return engine.Fact{Producer: producer, ExternalID: "evt-" + strconv.Itoa(n), Table: table,
			Values: engine.Values{"reading_sensor": producer, "reading_value": float64(n) / 10}}
	}
	var fresh, dups stats.Recorder
	var errs atomic.Int64
	var firstErr atomic.Value
	res := &ingestBench{Bucket: url, World: world, Producers: producers, DupRate: dupRate, Rate: rate}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	go showCount(runCtx, "facts", func() int { return fresh.Count() })
	// send ingests fact i of producer p (a resend if dup) and records its
	// latency from t0; it reports whether the fact was acknowledged.
	var mu sync.Mutex
	tokens := map[[2]int]string{}
	// Every send ends by 30 s after the run: one deadline for them all,
	// not a timer per send (the bench's own CPU is part of what it
	// measures).
	sendCtx, stopSends := context.WithTimeout(ctx, d+30*time.Second)
	defer stopSends()
	send := func(p, i int, dup bool, t0 time.Time) bool {
		rec, err := svc.Ingest(sendCtx, fact(p, i))
		mu.Lock()
		want := tokens[[2]int{p, i}]
		mu.Unlock()
		switch {
		case err != nil:
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err)
			return false
		case dup && (!rec.Deduplicated || rec.CommitToken != want):
			errs.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Errorf("resend of %s/%s: receipt %+v, want the original under %s", rec.Producer, rec.ExternalID, rec, want))
			return false
		case dup:
			dups.Add(time.Since(t0))
		default:
			fresh.Add(time.Since(t0))
			mu.Lock()
			tokens[[2]int{p, i}] = rec.CommitToken
			mu.Unlock()
		}
		return true
	}
	start := time.Now()
	res.PeakHeapMiB = float64(peakHeap(func() {
		if rate > 0 {
			openLoopSends(runCtx, start, rate, producers, dupRate, send)
			return
		}
		saturatedSends(runCtx, producers, dupRate, send)
	})) / (1 << 20)
	elapsed := time.Since(start)
	ingestFigures(res, fresh.Summarize(elapsed), dups.Summarize(elapsed), errs.Load(), cat.Stats())
	if err, _ := firstErr.Load().(error); err != nil {
		if res.Facts == 0 {
			return nil, err
		}
		res.FirstError = err.Error()
	}
	return res, nil
}

// ingestFigures fills res from the latencies of new facts (sum) and of
// resends (ds), the errors, and the catalog's counters.
func ingestFigures(res *ingestBench, sum, ds stats.Summary, errs int64, st index.Stats) {
	res.Seconds, res.Facts, res.FactsPerSec = sum.Seconds, sum.Ops, sum.OpsPerSec
	res.P50ms, res.P90ms, res.P99ms, res.MaxMs = sum.P50ms, sum.P90ms, sum.P99ms, sum.MaxMs
	res.Duplicates, res.DupP50ms, res.DupP99ms = ds.Ops, ds.P50ms, ds.P99ms
	res.Errors = errs
	res.Slots = st.Slots
	if st.Slots > 0 {
		res.EntriesPerSlot = float64(st.Entries) / float64(st.Slots)
	}
}

// openLoopSends calls send on a schedule: send n is due at start +
// n/rate, whatever the earlier ones are doing; producers take turns, and a
// share dupRate of sends resends an acknowledged fact.
func openLoopSends(runCtx context.Context, start time.Time, rate float64, producers int, dupRate float64, send func(p, i int, dup bool, t0 time.Time) bool) {
	var wg sync.WaitGroup
	r := rand.New(rand.NewPCG(1, 1))
	sent := make([]int, producers)    // new facts each producer sent
	acked := make([][]int, producers) // of which acknowledged
	var ackMu sync.Mutex
	for n := 0; ; n++ {
		at := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
		if bucket.Sleep(runCtx, time.Until(at)) != nil {
			break
		}
		p := n % producers
		ackMu.Lock()
		i, dup := sent[p], len(acked[p]) > 0 && r.Float64() < dupRate
		if dup {
			i = acked[p][r.IntN(len(acked[p]))]
		} else {
			sent[p]++
		}
		ackMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if send(p, i, dup, at) && !dup {
				ackMu.Lock()
				acked[p] = append(acked[p], i)
				ackMu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// saturatedSends runs one goroutine per producer, each sending back to
// back until runCtx ends, a share dupRate of them resends.
func saturatedSends(runCtx context.Context, producers int, dupRate float64, send func(p, i int, dup bool, t0 time.Time) bool) {
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for n := 0; runCtx.Err() == nil; {
				i, dup := n, n > 0 && r.Float64() < dupRate
				if dup {
					i = r.IntN(n)
				}
				if send(p, i, dup, time.Now()) && !dup {
					n++
				}
			}
		}()
	}
	wg.Wait()
}
