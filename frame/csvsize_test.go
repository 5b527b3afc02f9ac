package frame

import (
	"math"
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
