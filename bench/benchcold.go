package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

func coldStartSpec(env Env) Bench {
	var url, world *string
	var ticks, tail *int
	return benchSpec[*coldStartBench]{
		name:    "coldstart",
		summary: "build a world of N published ticks, checkpoint it, then time a cold start and its peak memory",
		example: "worldfs bench coldstart --bucket ./bench-data --ticks 1000000 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to build (default: a new cold-<time> world); an existing one is only loaded")
			ticks = fs.Int("ticks", 100000, "published ticks to build the world with")
			tail = fs.Int("tail", 1000, "ticks published one slot each after the checkpoint, which a cold start replays")
		},
		check: func(args []string) error {
			if len(args) != 0 || *ticks < 1 || *tail < 0 {
				return usagef("bench coldstart takes no arguments and a positive --ticks")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) {
			if *world != "" { // an existing world is only loaded
				return env.OpenExisting(ctx, *url)
			}
			return env.OpenBucket(ctx, *url)
		},
		run: func(ctx context.Context, b bucket.Bucket) (*coldStartBench, error) {
			if *world != "" {
				if err := env.RequireWorld(ctx, b, *world); err != nil {
					return nil, err
				}
			}
			return benchColdStart(ctx, b, *url, *world, *ticks, *tail)
		},
		table: func(out io.Writer, res *coldStartBench) error {
			if res.BuildSeconds > 0 {
				fmt.Fprintf(out, "world %s: %d ticks in %d slots, built in %.1f s (%.0f ticks/s); checkpoint at %d written in %.2f s\n",
					res.World, res.Ticks, res.Slots, res.BuildSeconds, float64(res.Ticks)/res.BuildSeconds, res.CheckpointSeq, res.CheckpointSeconds)
			} else {
				fmt.Fprintf(out, "world %s: %d ticks in %d slots, newest checkpoint at %d\n", res.World, res.Ticks, res.Slots, res.CheckpointSeq)
			}
			fmt.Fprintf(out, "cold start: %.3f s (checkpoint + %d slots replayed), peak heap %.0f MiB\n",
				res.ColdStartSeconds, res.SlotsReplayed, float64(res.PeakHeapBytes)/(1<<20))
			return nil
		},
	}.bench()
}

type coldStartBench struct {
	Bucket            string  `json:"bucket"`
	World             string  `json:"world"`
	Ticks             int     `json:"ticks"`
	Slots             uint64  `json:"slots"`
	BuildSeconds      float64 `json:"build_seconds,omitempty"`
	CheckpointSeq     uint64  `json:"checkpoint_seq"`
	CheckpointSeconds float64 `json:"checkpoint_seconds,omitempty"`
	SlotsReplayed     uint64  `json:"slots_replayed"`
	ColdStartSeconds  float64 `json:"cold_start_seconds"`
	PeakHeapBytes     uint64  `json:"peak_heap_bytes"`
}

func benchColdStart(ctx context.Context, b bucket.Bucket, url, world string, ticks, tail int) (*coldStartBench, error) {
	res := &coldStartBench{Bucket: url, World: world, Ticks: ticks}
	if world == "" {
		res.World = fmt.Sprintf("cold-%d", time.Now().UnixNano())
		if err := buildWorld(ctx, b, res, ticks, tail); err != nil {
			return nil, err
		}
	}
	runtimeGC()
	var state *index.State
	var info index.LoadInfo
	var loadErr error
	start := time.Now()
	res.PeakHeapBytes = peakHeap(func() { state, info, loadErr = index.Load(ctx, b, res.World) })
	res.ColdStartSeconds = time.Since(start).Seconds()
	if loadErr != nil {
		return nil, loadErr
	}
	res.Slots = state.Slots
	res.Ticks = 0
	for _, r := range state.Runs() {
		res.Ticks += int(r.Published)
	}
	res.CheckpointSeq, res.SlotsReplayed = info.CheckpointSeq, info.SlotsReplayed
	return res, nil
}

// buildWorld commits ticks publications, 32 to a request, from 64 callers,
// writes a checkpoint of the tip, then publishes tail more ticks one slot
// each.
func buildWorld(ctx context.Context, b bucket.Bucket, res *coldStartBench, ticks, tail int) error {
	c, epoch, err := index.CreateWorld(ctx, b, res.World, index.WorldCreate{}, "bench", index.Options{NoCompactor: true})
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	var next, done atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go showCount(pctx, "published ticks", func() int { return int(done.Load()) })
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := next.Add(32) - 32
				if from >= int64(ticks) || firstErr.Load() != nil {
					return
				}
				var entries []index.Entry
				for t := from; t < min(from+32, int64(ticks)); t++ {
					entries = append(entries, coldEntry(res.World, t, epoch))
				}
				if _, err := c.CommitAll(ctx, entries...); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(int64(len(entries)))
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	res.BuildSeconds = time.Since(start).Seconds()
	fmt.Fprintln(os.Stderr, "bench: writing a checkpoint")
	start = time.Now()
	seq, err := c.Checkpoint(ctx)
	if err != nil {
		return err
	}
	res.CheckpointSeq, res.CheckpointSeconds = seq, time.Since(start).Seconds()
	for t := range tail {
		if _, err := c.Commit(ctx, coldEntry(res.World, int64(ticks+t), epoch)); err != nil {
			return err
		}
	}
	return nil
}

func coldEntry(world string, t, epoch int64) index.Entry {
	return index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
		Run: "main", Tick: t, CommitToken: fmt.Sprintf("%016x%016x", t, t*7919), WriterEpoch: epoch,
		Tables: []index.TableFragments{{Table: "Position", Fragments: []index.Fragment{{
			Path: index.TickFragmentPath(world, "main", "position", fmt.Sprintf("%016x%016x", t, t*7919)),
			Rows: 1000, Bytes: 48 << 10, Digest: fmt.Sprintf("%064x", t)}}}},
	}}
}
