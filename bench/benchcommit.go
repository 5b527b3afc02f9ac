package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/internal/stats"
)

func commitSpec(env Env) Bench {
	var url, world *string
	var writers, callers *int
	var rate *float64
	var duration, light *time.Duration
	return benchSpec[*commitBench]{
		name:    "commit",
		summary: "measure catalog commits: throughput, latency percentiles, slots, lost slots, per writer",
		example: "worldfs bench commit --bucket 'mem://b?profile=gcs' --writers 3 --duration 10s --json\n" +
			"  worldfs bench commit --bucket 'mem://b?profile=gcs' --rate 200 --light 1s   # a tick writer beside a fact ingester",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to commit to (default: a new bench-<time> world)")
			writers = fs.Int("writers", 1, "committers, each with its own store id (as separate processes would be)")
			callers = fs.Int("callers", 1024, "concurrent callers per writer when --rate is 0 (saturation: enough to fill slots of hundreds of entries)")
			rate = fs.Float64("rate", 0, "offered writes per second in all (open loop); 0 saturates")
			duration = fs.Duration("duration", 10*time.Second, "how long to offer writes")
			light = fs.Duration("light", 0, "add a light neighbour: one more store committing one entry every this long (as a fact ingester beside a tick writer), reported apart from the writers (0: none)")
		},
		check: func(args []string) error {
			if len(args) != 0 {
				return usagef("bench commit takes no arguments")
			}
			if *writers < 1 || *callers < 1 || *rate < 0 || *duration <= 0 || *light < 0 {
				return usagef("--writers and --callers must be positive, --rate and --light not negative, --duration positive")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*commitBench, error) {
			return benchCommit(ctx, b, *url, *world, *writers, *callers, *rate, *duration, *light)
		},
		table: func(out io.Writer, res *commitBench) error {
			fmt.Fprintf(out, "bucket %s, world %s, %d writer(s), %s\n", res.Bucket, res.World, res.Writers, res.Mode)
			fmt.Fprintf(out, "  %.0f writes/s  p50 %.1f ms  p99 %.1f ms  slots %d  lost slots %d  errors %d  entries/slot %.1f\n",
				res.WritesPerSec, res.P50ms, res.P99ms, res.Slots, res.LostSlots, res.Errors, res.EntriesPerSlot)
			for _, w := range res.PerWriter {
				fmt.Fprintf(out, "  writer %d: %.0f writes/s (%.0f%%)  p50 %.1f ms  p99 %.1f ms  slots %d  lost %d  yielded %.0f ms\n",
					w.Writer, w.WritesPerSec, 100*w.Share, w.P50ms, w.P99ms, w.Slots, w.LostSlots, w.YieldedMs)
			}
			if l := res.Light; l != nil {
				fmt.Fprintf(out, "  light neighbour, one entry every %s: %d writes  p50 %.1f ms  p99 %.1f ms  slots %d  lost %d  errors %d\n",
					time.Duration(l.EveryMs*float64(time.Millisecond)), l.Writes, l.P50ms, l.P99ms, l.Slots, l.LostSlots, l.Errors)
			}
			return nil
		},
	}.bench()
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type writerResult struct {
	Writer       int     `json:"writer"`
	Writes       int     `json:"writes"`
	WritesPerSec float64 `json:"writes_per_sec"`
	Share        float64 `json:"share"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	Slots        int64   `json:"slots"`
	LostSlots    int64   `json:"lost_slots"`
	Errors       int64   `json:"errors"`
	// YieldedMs is the time the writer waited after its wins (the yield
	// rule for several writers).
	YieldedMs float64 `json:"yielded_ms"`
}

// lightResult is the light neighbour's side of a run (--light).
type lightResult struct {
	EveryMs   float64 `json:"every_ms"`
	Writes    int     `json:"writes"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	Slots     int64   `json:"slots"`
	LostSlots int64   `json:"lost_slots"`
	Errors    int64   `json:"errors"`
}

type commitBench struct {
	Bucket         string         `json:"bucket"`
	World          string         `json:"world"`
	Writers        int            `json:"writers"`
	Mode           string         `json:"mode"`
	OfferedRate    float64        `json:"offered_rate,omitempty"`
	Seconds        float64        `json:"seconds"`
	Writes         int            `json:"writes"`
	WritesPerSec   float64        `json:"writes_per_sec"`
	P50ms          float64        `json:"p50_ms"`
	P90ms          float64        `json:"p90_ms"`
	P99ms          float64        `json:"p99_ms"`
	MaxMs          float64        `json:"max_ms"`
	Slots          int64          `json:"slots"`
	LostSlots      int64          `json:"lost_slots"`
	Errors         int64          `json:"errors"`
	EntriesPerSlot float64        `json:"entries_per_slot"`
	PerWriter      []writerResult `json:"per_writer"`
	Light          *lightResult   `json:"light,omitempty"`
}

// benchCommit offers tick publications to writers catalogs on one world:
// saturating (callers per writer, each committing back to back) or open
// loop at rate writes per second in all. With light > 0 one more catalog,
// the light neighbour, commits one entry of its own run every light; the
// writers' figures leave it out.
func benchCommit(ctx context.Context, b bucket.Bucket, url, world string, writers, callers int, rate float64, d, light time.Duration) (*commitBench, error) {
	if world == "" {
		world = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	stores := writers
	if light > 0 {
		stores++ // the neighbour is the last catalog
	}
	cats, epoch, err := commitCatalogs(ctx, b, world, stores)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range cats {
			c.Close()
		}
	}()
	recs := make([]stats.Recorder, writers)
	var all stats.Recorder
	errs := make([]atomic.Int64, writers)
	var seq, lightSeq atomic.Int64
	// publish commits tick i of run on c and returns its latency.
	publish := func(c *index.Catalog, run string, i int64) (time.Duration, error) {
		return publishTick(ctx, c, world, run, i, epoch)
	}
	commit := func(w int) {
		lat, err := publish(cats[w], "bench", seq.Add(1))
		if err != nil {
			errs[w].Add(1)
			return
		}
		recs[w].Add(lat)
		all.Add(lat)
	}
	res := &commitBench{Bucket: url, World: world, Writers: writers}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	go showCount(runCtx, "commit", func() int { return all.Count() })
	start := time.Now()
	var wg sync.WaitGroup
	var lightRec stats.Recorder
	var lightErrs atomic.Int64
	if light > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := time.Now().Add(light); bucket.Sleep(runCtx, time.Until(next)) == nil; next = next.Add(light) {
				lat, err := publish(cats[writers], "light", lightSeq.Add(1))
				if err != nil {
					lightErrs.Add(1)
					continue
				}
				lightRec.Add(lat)
			}
		}()
	}
	if rate != 0 {
		res.OfferedRate = rate
	}
	res.Mode = driveCommits(runCtx, &wg, writers, callers, rate, commit)
	wg.Wait()
	elapsed := time.Since(start)
	sum := all.Summarize(elapsed)
	res.Seconds, res.Writes, res.WritesPerSec = sum.Seconds, sum.Ops, sum.OpsPerSec
	res.P50ms, res.P90ms, res.P99ms, res.MaxMs = sum.P50ms, sum.P90ms, sum.P99ms, sum.MaxMs
	perWriter(res, cats[:writers], recs, errs, sum.Ops, elapsed)
	if light > 0 {
		st, ls := cats[writers].Stats(), lightRec.Summarize(elapsed)
		res.Light = &lightResult{EveryMs: ms(light), Writes: ls.Ops, P50ms: ls.P50ms, P99ms: ls.P99ms,
			Slots: st.Slots, LostSlots: st.LostSlots, Errors: lightErrs.Load()}
	}
	return res, nil
}

// driveCommits calls commit(writer) on wg's goroutines until runCtx
// ends: callers goroutines per writer, back to back (rate 0), or one call
// every 1/rate seconds, the writers in turn (an open loop, which returns
// only when runCtx ends). It returns the mode, for the report.
func driveCommits(runCtx context.Context, wg *sync.WaitGroup, writers, callers int, rate float64, commit func(w int)) string {
	if rate == 0 {
		for w := range writers {
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for runCtx.Err() == nil {
						commit(w)
					}
				}()
			}
		}
		return fmt.Sprintf("saturated, %d callers per writer", callers)
	}
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for n := 0; runCtx.Err() == nil; n++ {
		wg.Add(1)
		go func() { defer wg.Done(); commit(n % writers) }()
		next = next.Add(interval)
		if err := bucket.Sleep(runCtx, time.Until(next)); err != nil {
			break
		}
	}
	return fmt.Sprintf("open loop at %.0f writes/s", rate)
}

// commitCatalogs creates world (or opens it, if it exists) and opens n
// catalogs on it, one per writer; epoch is the world's fence epoch.
func commitCatalogs(ctx context.Context, b bucket.Bucket, world string, n int) (cats []*index.Catalog, epoch int64, err error) {
	first, epoch, err := index.CreateWorld(ctx, b, world, index.WorldCreate{}, "bench", index.Options{})
	if errors.Is(err, index.ErrWorldExists) {
		first, err = index.Open(ctx, b, world, index.Options{})
		if err == nil {
			epoch = first.Tip().World.Epoch
		}
	}
	if err != nil {
		return nil, 0, err
	}
	cats = []*index.Catalog{first}
	for range n - 1 {
		c, err := index.Open(ctx, b, world, index.Options{})
		if err != nil {
			return nil, 0, err
		}
		cats = append(cats, c)
	}
	return cats, epoch, nil
}

// publishTick commits tick i of run on c (one made-up fragment) and
// returns its latency.
func publishTick(ctx context.Context, c *index.Catalog, world, run string, i, epoch int64) (time.Duration, error) {
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e := index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
		Run: run, Tick: i, CommitToken: fmt.Sprintf("%s-tok-%d", run, i), WriterEpoch: epoch,
		Tables: []index.TableFragments{{Table: "Position", Fragments: []index.Fragment{{
			Path: index.TickFragmentPath(world, run, "position", fmt.Sprintf("tok-%d", i)), Rows: 1000, Bytes: 64 << 10, Digest: "sha256:bench"}}}},
	}}
	_, err := c.Commit(cctx, e)
	return time.Since(t0), err
}

// perWriter adds to res each writer's figures (its catalog's counters,
// its latencies recs[w], its errors) and their totals; ops is the writes
// of all writers.
func perWriter(res *commitBench, cats []*index.Catalog, recs []stats.Recorder, errs []atomic.Int64, ops int, elapsed time.Duration) {
	var entries int64
	for w, c := range cats {
		st := c.Stats()
		ws := recs[w].Summarize(elapsed)
		r := writerResult{Writer: w, Writes: ws.Ops, WritesPerSec: ws.OpsPerSec, P50ms: ws.P50ms, P99ms: ws.P99ms,
			Slots: st.Slots, LostSlots: st.LostSlots, Errors: errs[w].Load(), YieldedMs: ms(st.Yielded)}
		if ops > 0 {
			r.Share = float64(ws.Ops) / float64(ops)
		}
		res.PerWriter = append(res.PerWriter, r)
		res.Slots += st.Slots
		res.LostSlots += st.LostSlots
		res.Errors += r.Errors
		entries += st.Entries
	}
	if res.Slots > 0 {
		res.EntriesPerSlot = float64(entries) / float64(res.Slots)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// showCount shows a count on a terminal, redrawn every second until ctx
// ends (nothing in a pipe).
func showCount(ctx context.Context, what string, count func() int) {
	p := progress.New(os.Stderr)
	defer p.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Step("bench: "+what, int64(count()), -1)
		}
	}
}

func runtimeGC() { runtime.GC() }

// peakHeap samples the live heap every 5 ms while fn runs and returns the
// peak in bytes.
func peakHeap(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	runtime.GC()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	fn()
	read()
	close(done)
	return peak.Load()
}
