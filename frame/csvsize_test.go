package frame

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// decimalLen counts what strconv writes, at every boundary of a digit and
// a sign.
func TestDecimalLen(t *testing.T) {
	xs := []int64{0, 1, -1, 9, -9, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(10); p > 0 && p <= math.MaxInt64/10*10; p *= 10 {
		xs = append(xs, p-1, p, p+1, -p+1, -p, -p-1)
		if p > math.MaxInt64/10 {
			break
		}
	}
	for _, x := range xs {
		if got, want := decimalLen(x), len(strconv.FormatInt(x, 10)); got != want {
			t.Errorf("decimalLen(%d) = %d, strconv writes %d bytes", x, got, want)
		}
	}
}

// csvFloat64Len and csvFloat32Len measure what appendCSVFloat writes for
// every kind of value: each binade's ends and their neighbours
// (subnormals, the irregular first value of a binade), each power of ten
// and its neighbours (where the form switches between 1e-5, 1e-4, 1e5 and
// 1e6), whole numbers, the special values, and random values both of
// every bit pattern and of the ranges simulations write. (Every one of the
// 2^32 float32 values, and 10^9 doubles of random bits, were also checked
// once: a ten-minute run.)
func TestCSVFloatLenIsWhatIsWritten(t *testing.T) {
	var buf []byte
	check := func(x float64) {
		for _, v := range []float64{x, -x} {
			buf = appendCSVFloat(buf[:0], v, 64)
			if got := csvFloat64Len(v); got != len(buf) {
				t.Fatalf("csvFloat64Len(%v) (bits %#x) = %d, appendCSVFloat writes %q (%d bytes)", v, math.Float64bits(v), got, buf, len(buf))
			}
			v32 := float32(v)
			buf = appendCSVFloat(buf[:0], float64(v32), 32)
			if got := csvFloat32Len(v32); got != len(buf) {
				t.Fatalf("csvFloat32Len(%v) (bits %#x) = %d, appendCSVFloat writes %q (%d bytes)", v32, math.Float32bits(v32), got, buf, len(buf))
			}
		}
	}
	check32 := func(x float32) { check(float64(x)) }
	around := func(x float64) {
		check(x)
		y, z := x, x
		for range 3 {
			y, z = math.Nextafter(y, math.Inf(-1)), math.Nextafter(z, math.Inf(1))
			check(y)
			check(z)
		}
		y32, z32 := float32(x), float32(x)
		for range 3 {
			y32, z32 = math.Nextafter32(y32, float32(math.Inf(-1))), math.Nextafter32(z32, float32(math.Inf(1)))
			check32(y32)
			check32(z32)
		}
	}
	for _, x := range []float64{0, math.Inf(1), math.NaN(), math.MaxFloat64, math.MaxFloat32, math.SmallestNonzeroFloat64, 2 * math.SmallestNonzeroFloat64, 3 * math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat32, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, math.Pi, math.E, 1 << 53, 1<<53 + 2, 1<<53 - 1, 1 << 24, 1<<24 + 2, 123456.5, 999999.5, 9999995} {
		around(x)
	}
	for e := -1074; e <= 1023; e++ {
		around(math.Ldexp(1, e))
		around(math.Ldexp(1.5, e))
	}
	for e := -324; e <= 308; e++ {
		around(math.Pow(10, float64(e)))
		around(5 * math.Pow(10, float64(e)))
	}
	for i := range 100_000 {
		check(float64(i))
		check(float64(i) / 8)
		check(float64(i) / 100)
	}
	r := rand.New(rand.NewPCG(3, 4))
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for range n {
		if x := math.Float64frombits(r.Uint64()); !math.IsNaN(x) {
			check(x)
		}
		if x := math.Float32frombits(r.Uint32()); !math.IsNaN(float64(x)) {
			check32(x)
		}
		check(r.Float64())
		check(r.NormFloat64() * 1000)
	}
}
