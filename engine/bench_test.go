package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// BenchmarkTick commits ticks of 4 archetypes × 10,000 entities on the
// local backend (worldfs bench ticks reports the same with its floor).
//
//	go test -run '^$' -bench Tick -benchmem ./engine/
func BenchmarkTick(b *testing.B) {
	bk, _ := local.Open(b.TempDir())
	var tables []*engine.Table
	for i := range 4 {
		pos, _ := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
		kind, _ := engine.NewComponent(fmt.Sprintf("kind%d", i), engine.Field{Name: "id", Type: engine.Int64})
		t, _ := engine.NewTable(fmt.Sprintf("a%d", i), pos, kind)
		tables = append(tables, t)
	}
	ctx := context.Background()
	w, err := engine.CreateWorld(ctx, bk, "bench", tables, engine.Options{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for _, t := range tables {
		for i := range 10000 {
			w.Spawn(t.Name, engine.Values{"position_x": float64(i)})
		}
	}
	err = w.AddProcessor(func(tc *engine.TickContext) error {
		for _, t := range tables {
			x := tc.Frame(t.Name).Float64("position_x")
			for i := range x {
				x[i] += 0.5
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := w.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngest ingests distinct facts from 64 concurrent producers on
// the local backend (worldfs bench ingest reports latencies and
// duplicates too).
//
//	go test -run '^$' -bench Ingest -benchmem ./engine/
func BenchmarkIngest(b *testing.B) {
	bk, _ := local.Open(b.TempDir())
	ctx := context.Background()
	w, err := engine.CreateWorld(ctx, bk, "bench", particles.Tables(), engine.Options{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var n atomic.Int64
	b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := w.Ingest(ctx, reading("p", fmt.Sprint(i), float64(i))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "facts/s")
}
