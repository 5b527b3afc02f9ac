package frame

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkEncodeCSVSize is what measuring a fragment's CSV size (as
// every writer does, unless engine.Options.NoCSVSizes) adds to encoding
// it: 10,000 rows of three random doubles and an id. Run with
//
//	go test -run '^$' -bench EncodeCSVSize ./frame/
func BenchmarkEncodeCSVSize(b *testing.B) {
	pos, _ := NewComponent("position", Field{Name: "x", Type: Float64}, Field{Name: "y", Type: Float64}, Field{Name: "z", Type: Float64})
	kind, _ := NewComponent("kind0", Field{Name: "id", Type: Int64})
	t, _ := NewTable("a0", pos, kind)
	f := NewFrame(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		if err := f.Append(int64(i), Values{"position_x": r.Float64() * 100, "position_y": r.NormFloat64(), "position_z": r.Float64(), "kind0_id": int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	stamp := func(int) Stamp {
		return Stamp{Tick: 7, CommitToken: "0123456789abcdef0123456789abcdef", WriterEpoch: 1}
	}
	for _, m := range []CSVMode{CSVNone, CSVCount} {
		b.Run(fmt.Sprintf("csv=%v", map[CSVMode]string{CSVNone: "none", CSVCount: "count"}[m]), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Encode(f, stamp, m, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCSVFloat64Len is measuring a double's CSV length against
// writing it, over the values a simulation writes:
//
//	go test -run '^$' -bench CSVFloat64 ./frame/
func BenchmarkCSVFloat64Len(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = r.NormFloat64() * 100
	}
	var n int
	b.Run("measure", func(b *testing.B) {
		for b.Loop() {
			for _, x := range xs {
				n += csvFloat64Len(x)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/value")
	})
	b.Run("write", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			for _, x := range xs {
				buf = appendCSVFloat(buf[:0], x, 64)
				n += len(buf)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/value")
	})
}
