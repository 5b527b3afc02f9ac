package frame

import (
	"math"
	"math/big"
	"math/bits"
	"sync"
)

// csvFloat64Len is len(appendCSVFloat(nil, x, 64)), computed without
// writing the digits: what a fragment's CSV size (csvSize) measures for
// every float64 value a writer commits, so it must cost far less than
// formatting.
//
// The shortest decimal that reads back as x, ties to the closer and then
// to the even one, is what strconv's 'g' with precision -1 writes; its
// digit count and decimal exponent give the length. They are found by
// Giulietti's Schubfach ("The Schubfach way to render doubles", 2020):
// three 64×128-bit products of x's scaled interval against one cached
// power of ten, and no digit loop. TestCSVFloat64LenIsWhatIsWritten holds
// it to strconv over every binade, every power of ten, their neighbours
// and millions of random values.
func csvFloat64Len(x float64) int {
	u := math.Float64bits(x)
	neg := int(u >> 63)
	t := u & (1<<52 - 1)
	bq := int(u>>52) & 0x7ff
	switch {
	case bq == 0x7ff:
		return len(nonFinite(x, false))
	case bq != 0:
		c, q := 1<<52|t, bq-1075
		if -q > 0 && -q < 53 && c>>-q<<-q == c { // a whole number below 2^53
			return neg + shortestLen(c>>-q, 0)
		}
		return neg + shortestLen(schubfach64(q, c))
	case t == 0:
		return neg + len("0.0")
	}
	return neg + shortestLen(schubfach64(-1074, t)) // subnormal
}

// csvFloat32Len is len(appendCSVFloat(nil, float64(x), 32)): the shortest
// decimal that reads back as the float32 x, measured as csvFloat64Len
// measures a double's.
func csvFloat32Len(x float32) int {
	u := math.Float32bits(x)
	neg := int(u >> 31)
	t := uint64(u & (1<<23 - 1))
	bq := int(u>>23) & 0xff
	switch {
	case bq == 0xff:
		return len(nonFinite(float64(x), false))
	case bq != 0:
		c, q := 1<<23|t, bq-150
		if -q > 0 && -q < 24 && c>>-q<<-q == c {
			return neg + shortestLen(c>>-q, 0)
		}
		return neg + shortestLen(schubfach32(q, c))
	case t == 0:
		return neg + len("0.0")
	}
	return neg + shortestLen(schubfach32(-149, t))
}

// shortestLen is the length of what appendCSVFloat writes for the
// positive decimal f×10^e, in strconv's 'g' form of the shortest digits:
// d[.ddd]e±XX if its first digit is below 1e-4 or from 1e6 on, else
// plain, with ".0" after a whole number.
func shortestLen(f uint64, e int) int {
	for f%10 == 0 {
		f /= 10
		e++
	}
	nd := digits(f)
	if exp := nd + e - 1; exp < -4 || exp >= 6 {
		n := 1 + len("e+00")
		if nd > 1 {
			n += nd // the point and the digits after the first
		}
		if exp <= -100 || exp >= 100 {
			n++
		}
		return n
	}
	n := max(nd+e, 1) // the whole part, "0" if none
	if e < 0 {
		return n + 1 + -e // the point, then the digits after it
	}
	return n + len(".0")
}

// schubfach64 returns the shortest decimal f×10^e in the rounding
// interval of the double c×2^q (c its significand, with the hidden bit),
// the closest such if several, ties to the even one; f may end in zeros.
// It is the skeleton of figure 7 of Giulietti's paper with the
// computations of its figure 9. (The paper scales the two least
// subnormals by ten, and tries one digit fewer only from s ≥ 100, to
// render at least two digits; strconv's shortest form has no such floor.)
func schubfach64(q int, c uint64) (f uint64, e int) {
	cb, cbl, k := interval(q, c, 1<<52, -1074)
	h := q + flog2pow10(-k) + 2
	g := pow10s()[k-minK]
	return pick(rop(g, cb<<h), rop(g, cbl<<h), rop(g, (cb+2)<<h), c&1, k)
}

// schubfach32 is schubfach64 for a float32's c×2^q: the same skeleton
// with the top 64 bits of the power of ten.
func schubfach32(q int, c uint64) (f uint64, e int) {
	cb, cbl, k := interval(q, c, 1<<23, -149)
	h := q + flog2pow10(-k) + 33
	g := pow10s()[k-minK][0] + 1
	return pick(rop32(g, cb<<h), rop32(g, cbl<<h), rop32(g, (cb+2)<<h), c&1, k)
}

// interval returns 4c, the low end of c's rounding interval in quarters
// of 2^q (cb-2, or cb-1 for the first value of a binade, whose lower
// neighbour is half as far), and k, the power of ten that scales it to
// the digits.
func interval(q int, c, cmin uint64, qmin int) (cb, cbl uint64, k int) {
	cb = c << 2
	if c != cmin || q == qmin {
		return cb, cb - 2, flog10pow2(q)
	}
	return cb, cb - 1, flog10threeQuartersPow2(q)
}

// pick chooses the digits from v×10^-k scaled by 4 (vb), and its
// interval's ends (vbl, vbr), each rounded to odd; out is 1 if the ends
// are excluded (an odd significand).
func pick(vb, vbl, vbr, out uint64, k int) (f uint64, e int) {
	s := vb >> 2
	// One digit fewer: the interval is narrower than ten units of 10^k,
	// so the multiples of ten around s are the only candidates.
	sp10 := 10 * (s / 10)
	if f, ok := alone(sp10, sp10+10, vbl, vbr, out); ok {
		return f, k
	}
	t := s + 1
	if f, ok := alone(s, t, vbl, vbr, out); ok {
		return f, k
	}
	// Both lie in the interval: the closer, ties to the even one.
	if cmp := int64(vb - (s+t)<<1); cmp < 0 || cmp == 0 && s&1 == 0 {
		return s, k
	}
	return t, k
}

// alone returns whichever of u and w lies in the interval from vbl to
// vbr (in quarters; its ends excluded if out is 1) when the other does
// not; ok false if both or neither do.
func alone(u, w, vbl, vbr, out uint64) (f uint64, ok bool) {
	uin := vbl+out <= u<<2
	win := w<<2+out <= vbr
	switch {
	case uin == win:
		return 0, false
	case uin:
		return u, true
	}
	return w, true
}

// rop is g×cp/2^127 rounded to odd, g = g[0]×2^63 + g[1].
func rop(g [2]uint64, cp uint64) uint64 {
	x1, _ := bits.Mul64(g[1], cp)
	y1, y0 := bits.Mul64(g[0], cp)
	z := y0>>1 + x1
	vbp := y1 + z>>63
	return vbp | (z&(1<<63-1)+(1<<63-1))>>63
}

// rop32 is g×cp/2^95 rounded to odd.
func rop32(g, cp uint64) uint64 {
	x1, _ := bits.Mul64(g, cp)
	return x1>>31 | (x1&(1<<31-1)+(1<<31-1))>>31
}

// flog10pow2 is ⌊log10(2^e)⌋, flog10threeQuartersPow2 ⌊log10(¾·2^e)⌋ and
// flog2pow10 ⌊log2(10^e)⌋, for the exponents of doubles.
func flog10pow2(e int) int { return int(int64(e) * 661_971_961_083 >> 41) }

func flog10threeQuartersPow2(e int) int {
	return int((int64(e)*661_971_961_083 - 274_743_187_321) >> 41)
}

func flog2pow10(e int) int { return int(int64(e) * 913_124_641_741 >> 38) }

// minK and maxK bound the powers of ten schubfach scales by:
// flog10pow2 of the least and greatest exponents of a double.
const (
	minK = -324
	maxK = 292
)

// pow10s holds, for each k of minK..maxK, g = ⌊β⌋+1 for 10^-k = β×2^r
// with 2^125 ≤ β < 2^126, split as g>>63 and g's low 63 bits. It is
// computed exactly, once, the first time a writer measures a float.
var pow10s = sync.OnceValue(func() [][2]uint64 {
	table := make([][2]uint64, maxK-minK+1)
	ten := big.NewInt(10)
	for k := minK; k <= maxK; k++ {
		var beta big.Int
		if k <= 0 { // 10^-k is a whole number: shift it to 126 bits
			beta.Exp(ten, big.NewInt(int64(-k)), nil)
			if s := 126 - beta.BitLen(); s >= 0 {
				beta.Lsh(&beta, uint(s))
			} else {
				beta.Rsh(&beta, uint(-s))
			}
		} else { // 2^s / 10^k, s chosen for 126 bits (10^k is no power of 2)
			var d big.Int
			d.Exp(ten, big.NewInt(int64(k)), nil)
			beta.Lsh(big.NewInt(1), uint(125+d.BitLen()))
			beta.Quo(&beta, &d)
		}
		beta.Add(&beta, big.NewInt(1))
		var lo big.Int
		lo.And(&beta, new(big.Int).SetUint64(1<<63-1))
		table[k-minK] = [2]uint64{new(big.Int).Rsh(&beta, 63).Uint64(), lo.Uint64()}
	}
	return table
})
