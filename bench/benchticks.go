package bench

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
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
	"golang.org/x/sync/errgroup"
)

func ticksSpec(env Env) Bench {
	var url *string
	var entities, archetypes, ticks, depth *int
	var noCSVSizes *bool
	return benchSpec[*ticksBench]{
		name:    "ticks",
		summary: "measure tick commits: ticks/s, per-tick latency, bytes, and the ratio to the least a crash-safe commit of the same rows costs",
		example: "worldfs bench ticks --bucket ./bench-data --entities 10000 --archetypes 4 --ticks 200 --depth 4 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			entities = fs.Int("entities", 10000, "entities per archetype")
			archetypes = fs.Int("archetypes", 4, "archetypes (one table and one fragment per tick each)")
			ticks = fs.Int("ticks", 200, "ticks to commit")
			depth = fs.Int("depth", engine.DefaultDepth, fmt.Sprintf("ticks in flight: tick k+1 computes and appends while tick k publishes (1 = serial, at most %d)", engine.MaxDepth))
			noCSVSizes = fs.Bool("no-csv-sizes", false, "the writer does not record each fragment's CSV size in its footer (engine.Options.NoCSVSizes), to measure what recording costs")
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
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*ticksBench, error) {
			return benchTicks(ctx, b, *url, *entities, *archetypes, *ticks, *depth, *noCSVSizes)
		},
		table: func(out io.Writer, res *ticksBench) error {
			fmt.Fprintf(out, "%d ticks of %d archetypes × %d entities, depth %d: %.1f ticks/s, p50 %.2f ms, p99 %.2f ms, %.1f MiB/tick, peak heap %.1f MiB, CPU %.2f ms/tick\n",
				res.Ticks, res.Archetypes, res.Entities, res.Depth, res.TicksPerSec, res.P50ms, res.P99ms, float64(res.BytesPerTick)/(1<<20), res.PeakHeapMiB, res.CPUms)
			if res.FloorMs > 0 {
				fmt.Fprintf(out, "floor %.2f ms/tick (encoded durable files %.2f + commit record %.2f, CPU %.2f); tick / floor = %.2f\n",
					res.FloorMs, res.FilesMs, res.CommitMs, res.FloorCPUms, res.RatioToFloor)
			}
			return nil
		},
	}.bench()
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
	// The floor is the least any crash-safe commit of the same rows costs
	// on this disk (local buckets only), in two steps, each with the
	// writer's own parallelism. FilesMs: each archetype's frame encoded and
	// written to a new file, fsynced, the archetypes side by side (one
	// file's fsync overlaps another's encoding, as in a tick), then their
	// directory fsynced, so files and names are durable. CommitMs: then a
	// commit record the size of the tick's log slot written, fsynced and
	// its directory fsynced (a tick is visible only after its data is
	// durable, so this step cannot overlap the first). FloorMs is their sum.
	FilesMs      float64 `json:"floor_files_ms,omitempty"`
	CommitMs     float64 `json:"floor_commit_ms,omitempty"`
	FloorMs      float64 `json:"floor_ms,omitempty"`
	RatioToFloor float64 `json:"ratio_to_floor,omitempty"`
	// CPUms is the process's CPU time (user and system) per tick while
	// committing, and FloorCPUms the floor's per tick: on a machine with
	// few cores a tick is bound by CPU as much as by fsync latency, so
	// their difference is what the engine costs beyond the floor.
	CPUms      float64 `json:"cpu_ms_per_tick"`
	FloorCPUms float64 `json:"floor_cpu_ms_per_tick,omitempty"`
}

func benchTables(k int) []*engine.Table {
	var out []*engine.Table
	for i := range k {
		pos, _ := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
		vel, _ := engine.NewComponent("velocity", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
		kind, _ := engine.NewComponent(fmt.Sprintf("kind%d", i), engine.Field{Name: "id", Type: engine.Int64})
		t, _ := engine.NewTable(fmt.Sprintf("archetype%d", i), kind, pos, vel) // the kind first: Components[0]
		out = append(out, t)
	}
	return out
}

func benchTicks(ctx context.Context, b bucket.Bucket, url string, entities, archetypes, ticks, depth int, noCSVSizes bool) (*ticksBench, error) {
	id := fmt.Sprintf("bench-ticks-%d", time.Now().UnixNano())
	tables := benchTables(archetypes)
	w, err := engine.CreateWorld(ctx, b, id, tables, engine.Options{Depth: depth, NoCSVSizes: noCSVSizes})
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
	start, cpu := time.Now(), cpuSeconds()
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
	res.CPUms = (cpuSeconds() - cpu) * 1000 / float64(ticks)
	res.TicksPerSec, res.P50ms, res.P99ms = sum.OpsPerSec, sum.P50ms, sum.P99ms
	res.MeanMs = 1000 / sum.OpsPerSec
	res.BytesPerTick = res.BytesTotal / int64(ticks)
	if lb, ok := bucket.As[bucket.Local](b); ok {
		slot, err := lastSlotSize(ctx, b, id)
		if err != nil {
			return nil, err
		}
		if err := benchFloor(lb.Root(), w, res, min(ticks, 50), slot); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// lastSlotSize is the size of world's newest log slot.
func lastSlotSize(ctx context.Context, b bucket.Bucket, world string) (int64, error) {
	var size int64
	for a, err := range b.List(ctx, index.LogPrefix(world), "") {
		if err != nil {
			return 0, err
		}
		size = a.Size
	}
	return size, nil
}

// benchFloor measures what a tick cannot go below (see ticksBench): the
// world's frames encoded, written durably, then committed by a record of
// slot bytes, n times.
func benchFloor(root string, w *engine.World, res *ticksBench, n int, slot int64) error {
	dir, err := os.MkdirTemp(root, ".floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data, log := filepath.Join(dir, "data"), filepath.Join(dir, "log")
	for _, d := range []string{data, log} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := syncPath(dir); err != nil {
		return err
	}
	tables := w.Tables()
	record := make([]byte, slot)
	var files, commit time.Duration
	cpu := cpuSeconds()
	for i := range n {
		t0 := time.Now()
		var g errgroup.Group
		for j, t := range tables {
			g.Go(func() error {
				enc, err := engine.EncodeFragment(w.Frame(t.Name), engine.Stamp{Tick: int64(i), CommitToken: "floor", WriterEpoch: 1})
				if err != nil {
					return err
				}
				return writeSynced(filepath.Join(data, fmt.Sprintf("%d-%d.parquet", i, j)), enc)
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if err := syncPath(data); err != nil {
			return err
		}
		t1 := time.Now()
		if err := writeSynced(filepath.Join(log, fmt.Sprint(i)), record); err != nil {
			return err
		}
		if err := syncPath(log); err != nil {
			return err
		}
		files, commit = files+t1.Sub(t0), commit+time.Since(t1)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	res.FilesMs, res.CommitMs = ms(files), ms(commit)
	res.FloorMs = res.FilesMs + res.CommitMs
	res.FloorCPUms = (cpuSeconds() - cpu) * 1000 / float64(n)
	res.RatioToFloor = res.MeanMs / res.FloorMs
	return nil
}

// writeSynced writes data to a new file at path and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncPath fsyncs a directory, making the entries in it durable.
func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
