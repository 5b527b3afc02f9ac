package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/internal/stats"
)

func init() {
	var url *string
	var entities, archetypes, ticks, depth *int
	registerBench(benchSpec[*ticksBench]{
		name:    "ticks",
		summary: "measure tick commits: ticks/s, per-tick latency, bytes, and the ratio to writing the same Parquet bytes with fsync",
		example: "worldfs bench ticks --bucket ./bench-data --entities 10000 --archetypes 4 --ticks 200 --depth 4 --json",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			entities = fs.Int("entities", 10000, "entities per archetype")
			archetypes = fs.Int("archetypes", 4, "archetypes (one table and one fragment per tick each)")
			ticks = fs.Int("ticks", 200, "ticks to commit")
			depth = fs.Int("depth", engine.DefaultDepth, fmt.Sprintf("ticks in flight: tick k+1 computes and appends while tick k publishes (1 = serial, at most %d)", engine.MaxDepth))
		},
		check: func(args []string) error {
			if len(args) != 0 || *entities < 1 || *archetypes < 1 || *ticks < 1 {
				return usagef("bench ticks takes no arguments and positive --entities, --archetypes and --ticks")
			}
			if *depth < 1 || *depth > engine.MaxDepth {
				return usagef("bench ticks: --depth %d (want 1 to %d)", *depth, engine.MaxDepth)
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return openBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*ticksBench, error) {
			return benchTicks(ctx, b, *url, *entities, *archetypes, *ticks, *depth)
		},
		table: func(out io.Writer, res *ticksBench) error {
			fmt.Fprintf(out, "%d ticks of %d archetypes × %d entities, depth %d: %.1f ticks/s, p50 %.2f ms, p99 %.2f ms, %.1f MiB/tick, peak heap %.1f MiB\n",
				res.Ticks, res.Archetypes, res.Entities, res.Depth, res.TicksPerSec, res.P50ms, res.P99ms, float64(res.BytesPerTick)/(1<<20), res.PeakHeapMiB)
			if res.FloorMs > 0 {
				fmt.Fprintf(out, "floor (the same Parquet bytes written with fsync): %.2f ms/tick; encode+write floor %.2f ms/tick; tick / floor = %.2f, tick / encode+write floor = %.2f\n",
					res.FloorMs, res.EncodeFloorMs, res.RatioToFloor, res.RatioToEncodeFloor)
			}
			return nil
		},
	})
}

type ticksBench struct {
	Bucket       string  `json:"bucket"`
	World        string  `json:"world"`
	Entities     int     `json:"entities_per_archetype"`
	Archetypes   int     `json:"archetypes"`
	Ticks        int     `json:"ticks"`
	Depth        int     `json:"depth"`
	TicksPerSec  float64 `json:"ticks_per_sec"`
	MeanMs       float64 `json:"mean_ms"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	PeakHeapMiB  float64 `json:"peak_heap_mib"`
	BytesPerTick int64   `json:"bytes_per_tick"`
	BytesTotal   int64   `json:"bytes_total"`
	// FloorMs: writing the tick's Parquet bytes (already encoded) to
	// files with fsync, one file per archetype; EncodeFloorMs adds
	// encoding them. Local buckets only.
	FloorMs            float64 `json:"floor_ms,omitempty"`
	EncodeFloorMs      float64 `json:"encode_floor_ms,omitempty"`
	RatioToFloor       float64 `json:"ratio_to_floor,omitempty"`
	RatioToEncodeFloor float64 `json:"ratio_to_encode_floor,omitempty"`
}

func benchTables(k int) []*engine.Table {
	var out []*engine.Table
	for i := range k {
		pos, _ := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
		vel, _ := engine.NewComponent("velocity", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
		kind, _ := engine.NewComponent(fmt.Sprintf("kind%d", i), engine.Field{Name: "id", Type: engine.Int64})
		t, _ := engine.NewTable(fmt.Sprintf("archetype%d", i), pos, vel, kind)
		out = append(out, t)
	}
	return out
}

func benchTicks(ctx context.Context, b bucket.Bucket, url string, entities, archetypes, ticks, depth int) (*ticksBench, error) {
	id := fmt.Sprintf("bench-ticks-%d", time.Now().UnixNano())
	tables := benchTables(archetypes)
	w, err := engine.CreateWorld(ctx, b, id, tables, engine.Options{Depth: depth})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	for _, t := range tables {
		for i := range entities {
			if _, err := w.Spawn(t.Name, engine.Values{"position_x": float64(i), "velocity_y": 1.0, t.Components[0].Name + "_id": int64(i)}); err != nil {
				return nil, err
			}
		}
	}
	err = w.AddProcessor(func(tc *engine.TickContext) error {
		for _, t := range tables {
			f := tc.Frame(t.Name)
			x, y, z := f.Float64("position_x"), f.Float64("position_y"), f.Float64("position_z")
			vx, vy, vz := f.Float64("velocity_x"), f.Float64("velocity_y"), f.Float64("velocity_z")
			for i := range x {
				x[i] += vx[i] * 0.01
				y[i] += vy[i] * 0.01
				z[i] += vz[i] * 0.01
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := &ticksBench{Bucket: url, World: id, Entities: entities, Archetypes: archetypes, Ticks: ticks, Depth: depth}
	// A tick's latency runs from the start of its compute (its PreTick
	// hook) to its receipt (its PostTick hook), both in this goroutine.
	var rec stats.Recorder
	var ms runtime.MemStats
	began := map[int64]time.Time{}
	w.OnPreTick(func(_ context.Context, tick int64) error { began[tick] = time.Now(); return nil })
	w.OnPostTick(func(_ context.Context, tick int64) error {
		rec.Add(time.Since(began[tick]))
		delete(began, tick)
		return nil
	})
	receive := func(rs []engine.CommittedTickReceipt) {
		for _, r := range rs {
			for _, a := range r.Appends {
				res.BytesTotal += a.Bytes
			}
			if r.Tick%50 == 0 {
				fmt.Fprintf(os.Stderr, "bench: tick %d/%d\n", r.Tick, ticks)
			}
		}
		runtime.ReadMemStats(&ms)
		res.PeakHeapMiB = max(res.PeakHeapMiB, float64(ms.HeapInuse)/(1<<20))
	}
	start := time.Now()
	for range ticks {
		rs, err := w.Submit(ctx)
		if err != nil {
			return nil, err
		}
		receive(rs)
	}
	rs, err := w.Flush(ctx)
	if err != nil {
		return nil, err
	}
	receive(rs)
	sum := rec.Summarize(time.Since(start))
	res.TicksPerSec, res.P50ms, res.P99ms = sum.OpsPerSec, sum.P50ms, sum.P99ms
	res.MeanMs = 1000 / sum.OpsPerSec
	res.BytesPerTick = res.BytesTotal / int64(ticks)
	if lb, ok := bucket.As[bucket.Local](b); ok {
		if err := benchFloor(lb.Root(), w, res, min(ticks, 50)); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// benchFloor measures what a tick cannot go below: the same frames'
// Parquet bytes written to new files with fsync, with and without encoding.
func benchFloor(root string, w *engine.World, res *ticksBench, n int) error {
	dir, err := os.MkdirTemp(root, ".floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var encoded [][]byte
	var write, encode time.Duration
	for i := range n {
		t0 := time.Now()
		encoded = encoded[:0]
		for _, t := range w.Tables() {
			data, err := engine.EncodeFragment(w.Frame(t.Name), engine.Stamp{Tick: int64(i), CommitToken: "floor", WriterEpoch: 1})
			if err != nil {
				return err
			}
			encoded = append(encoded, data)
		}
		encode += time.Since(t0)
		t1 := time.Now()
		for j, data := range encoded {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d.parquet", i, j)))
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			f.Close()
		}
		write += time.Since(t1)
	}
	res.FloorMs = float64(write.Microseconds()) / 1000 / float64(n)
	res.EncodeFloorMs = res.FloorMs + float64(encode.Microseconds())/1000/float64(n)
	res.RatioToFloor = res.MeanMs / res.FloorMs
	res.RatioToEncodeFloor = res.MeanMs / res.EncodeFloorMs
	return nil
}
