package bucket_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/internal/stats"
)

// Benchmarks of Create and Get, one caller and 16 concurrent callers, on the
// local backend and on memory with and without the GCS profile. Besides
// ns/op each reports p50-ms, p99-ms and ops/s.
//
//	go test -run '^$' -bench . -benchmem ./bucket/

var benchBackends = []struct {
	name string
	open func(b *testing.B) bucket.Bucket
}{
	{"local", func(b *testing.B) bucket.Bucket {
		bk, err := local.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return bk
	}},
	{"mem", func(b *testing.B) bucket.Bucket { return mem.New(mem.Options{}) }},
	{"mem-gcs", func(b *testing.B) bucket.Bucket { return mem.New(mem.Options{Profile: mem.Profiles["gcs"], Seed: 1}) }},
}

const benchObjectSize = 1 << 10 // a log slot's order of size

// run calls op b.N times from conc goroutines.
func run(b *testing.B, conc int, op func(i int) error) {
	var lat stats.Recorder
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				lat.Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sum := lat.Summarize(elapsed)
	b.ReportMetric(sum.P50ms, "p50-ms")
	b.ReportMetric(sum.P99ms, "p99-ms")
	b.ReportMetric(sum.OpsPerSec, "ops/s")
	b.SetBytes(benchObjectSize)
}

func BenchmarkCreate(b *testing.B) {
	data := make([]byte, benchObjectSize)
	ctx := context.Background()
	for _, be := range benchBackends {
		for _, conc := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", be.name, conc), func(b *testing.B) {
				bk := be.open(b)
				run(b, conc, func(i int) error {
					_, err := bk.Create(ctx, fmt.Sprintf("log/%016x", i), data)
					return err
				})
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	data := make([]byte, benchObjectSize)
	ctx := context.Background()
	const objects = 256
	for _, be := range benchBackends {
		for _, conc := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", be.name, conc), func(b *testing.B) {
				bk := be.open(b)
				for i := range objects {
					if _, err := bk.Create(ctx, fmt.Sprintf("log/%016x", i), data); err != nil {
						b.Fatal(err)
					}
				}
				run(b, conc, func(i int) error {
					_, _, err := bk.Get(ctx, fmt.Sprintf("log/%016x", i%objects))
					return err
				})
			})
		}
	}
}
