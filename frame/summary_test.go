package frame_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"math/big"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A tick index summarizes each numeric component column per tick: min
// and max as DuckDB orders numbers (NaN above all), the sum in 128 bits
// for integers (no overflow at 64) and in entity order for floats; it
// summarizes no other column, and the summaries survive encoding; a
// summary that does not parse is index.ErrCorrupt even under a good
// checksum.
func TestTickIndexSummarizesNumericColumns(t *testing.T) {
	c, err := frame.NewComponent("v", frame.Field{Name: "f64", Type: frame.Float64}, frame.Field{Name: "f32", Type: frame.Float32},
		frame.Field{Name: "i64", Type: frame.Int64}, frame.Field{Name: "i32", Type: frame.Int32}, frame.Field{Name: "b", Type: frame.Bool}, frame.Field{Name: "s", Type: frame.String})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := frame.NewDeclaredTable("probe", c)
	if err != nil {
		t.Fatal(err)
	}
	// Ticks of 1, 3 and 2 rows: each tick's values, row by row.
	type row struct {
		f64 float64
		f32 float32
		i64 int64
		i32 int32
	}
	ticks := map[int64][]row{
		3: {{-0.5, 2.5, -7, 3}},
		4: {{1.25, float32(math.Inf(1)), math.MaxInt64, math.MinInt32}, {math.NaN(), -1.5, math.MaxInt64, 5}, {-3, 0.25, math.MaxInt64, math.MaxInt32}},
		9: {{math.Inf(-1), 1, math.MinInt64, 0}, {2, 1, math.MinInt64, -1}},
	}
	order := []int64{3, 4, 9}
	all := frame.NewFrame(tbl)
	var stamps []frame.Stamp
	var runs []frame.TickEntry
	for _, tick := range order {
		runs = append(runs, frame.TickEntry{Tick: tick, Row: int64(all.Len()), Rows: int64(len(ticks[tick]))})
		f := frame.NewFrame(tbl)
		for e, r := range ticks[tick] {
			if err := f.Append(int64(e), frame.Values{"v_f64": r.f64, "v_f32": r.f32, "v_i64": r.i64, "v_i32": r.i32, "v_b": true, "v_s": "x"}); err != nil {
				t.Fatal(err)
			}
			stamps = append(stamps, frame.Stamp{Tick: tick, CommitToken: "tok", WriterEpoch: 1})
		}
		all.AppendFrame(f)
	}
	data, err := frame.EncodeCompacted(all, func(i int) frame.Stamp { return stamps[i] })
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := frame.BuildTickIndex(tbl, data, runs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range x.Summaries {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"v_f64", "v_f32", "v_i64", "v_i32"}) {
		t.Fatalf("summarized columns %v; want the numeric component columns", names)
	}
	less := func(a, b float64) bool { return !math.IsNaN(a) && (math.IsNaN(b) || a < b) }
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for k, tick := range order {
		rows := ticks[tick]
		for _, col := range []string{"v_f64", "v_f32"} {
			s, _ := x.Summary(col)
			var want frame.FloatStat
			for i, r := range rows {
				v := r.f64
				if col == "v_f32" {
					v = float64(r.f32)
				}
				if i == 0 {
					want = frame.FloatStat{Min: v, Max: v, Sum: v}
					continue
				}
				if less(v, want.Min) {
					want.Min = v
				}
				if less(want.Max, v) {
					want.Max = v
				}
				want.Sum += v
			}
			got := s.Floats[k]
			if !same(got.Min, want.Min) || !same(got.Max, want.Max) || !same(got.Sum, want.Sum) {
				t.Errorf("tick %d %s: %+v, want %+v", tick, col, got, want)
			}
		}
		for _, col := range []string{"v_i64", "v_i32"} {
			s, _ := x.Summary(col)
			sum, lo, hi := new(big.Int), int64(math.MaxInt64), int64(math.MinInt64)
			for _, r := range rows {
				v := r.i64
				if col == "v_i32" {
					v = int64(r.i32)
				}
				sum.Add(sum, big.NewInt(v))
				lo, hi = min(lo, v), max(hi, v)
			}
			got := s.Ints[k]
			if got.Min != lo || got.Max != hi || got.Sum.Big().Cmp(sum) != 0 {
				t.Errorf("tick %d %s: min %d max %d sum %s, want %d %d %s", tick, col, got.Min, got.Max, got.Sum.Big(), lo, hi, sum)
			}
		}
	}
	if s, _ := x.Summary("v_i64"); s.Ints[1].Sum.Big().Cmp(new(big.Int).Mul(big.NewInt(math.MaxInt64), big.NewInt(3))) != 0 {
		t.Fatalf("tick 4's sum of i64 is %s: it overflowed 64 bits", s.Ints[1].Sum.Big())
	}

	// The same from the file's rows alone, column by column; a column
	// asked for under another type, or one the file lacks, is refused.
	var cols []frame.Column
	for _, want := range x.Summaries {
		cols = append(cols, frame.Column{Name: want.Name, Type: want.Type})
	}
	fticks, sums, err := frame.SummarizeFile(bytes.NewReader(data), int64(len(data)), cols)
	if err != nil || len(fticks) != len(runs) || len(sums) != len(x.Summaries) {
		t.Fatalf("SummarizeFile: %d ticks, %d summaries, %v", len(fticks), len(sums), err)
	}
	for i, want := range x.Summaries {
		got := sums[i]
		if !reflect.DeepEqual(got.Ints, want.Ints) || len(got.Floats) != len(want.Floats) {
			t.Fatalf("SummarizeFile of %s: %+v; the index's %+v", want.Name, got, want)
		}
		for k := range fticks {
			if g, w := fticks[k], runs[k]; g.Tick != w.Tick || g.Row != w.Row || g.Rows != w.Rows {
				t.Fatalf("SummarizeFile of %s: tick %+v, want %+v", want.Name, fticks[k], runs[k])
			}
			if a, b := got.Floats, want.Floats; len(a) > 0 && (!same(a[k].Min, b[k].Min) || !same(a[k].Max, b[k].Max) || !same(a[k].Sum, b[k].Sum)) {
				t.Fatalf("SummarizeFile of %s tick %d: %+v, the index's %+v", want.Name, fticks[k].Tick, a[k], b[k])
			}
		}
	}
	for _, bad := range []struct {
		col string
		typ frame.Type
	}{{"v_f64", frame.Int64}, {"v_i32", frame.Int64}, {"v_s", frame.String}, {"nope", frame.Float64}} {
		_, _, err := frame.SummarizeFile(bytes.NewReader(data), int64(len(data)), []frame.Column{{Name: bad.col, Type: bad.typ}})
		if err == nil || errors.Is(err, frame.ErrNoColumn) != (bad.col == "nope") || errors.Is(err, frame.ErrColumnType) != (bad.typ != frame.String && bad.col != "nope") {
			t.Errorf("SummarizeFile of column %s as %s: %v", bad.col, bad.typ, err)
		}
	}

	enc := x.Encode()
	y, err := frame.DecodeTickIndex(enc)
	if err != nil {
		t.Fatal(err)
	}
	if y.Version != 3 || len(y.Summaries) != 4 {
		t.Fatalf("decoded: version %d, %d summaries", y.Version, len(y.Summaries))
	}
	for i := range x.Summaries {
		a, b := x.Summaries[i], y.Summaries[i]
		if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Ints, b.Ints) || len(a.Floats) != len(b.Floats) {
			t.Fatalf("summary %d decoded as %+v, was %+v", i, b, a)
		}
		for j := range a.Floats {
			if !same(a.Floats[j].Min, b.Floats[j].Min) || !same(a.Floats[j].Max, b.Floats[j].Max) || !same(a.Floats[j].Sum, b.Floats[j].Sum) {
				t.Fatalf("summary %s tick %d decoded as %+v, was %+v", a.Name, j, b.Floats[j], a.Floats[j])
			}
		}
	}
	// Stats claiming their true length read; claiming more than the
	// columns' stats can hold (a crafted index asking for gigabytes), or
	// less or more than the frame holds: corrupt, never allocated.
	if y, err := frame.DecodeTickIndex(frame.EncodeClaimingStats(x, frame.StatsLength(x))); err != nil || len(y.Summaries) != len(x.Summaries) {
		t.Fatalf("stats claiming their own length: %v", err)
	}
	bound := uint64(0) // what the stats of the columns can hold at most
	for _, s := range x.Summaries {
		bound += uint64(len(s.Floats))*24 + uint64(len(s.Ints))*40
	}
	for _, n := range []uint64{bound + 1, 8 << 30, frame.StatsLength(x) - 1, frame.StatsLength(x) + 1} {
		if _, err := frame.DecodeTickIndex(frame.EncodeClaimingStats(x, n)); !errors.Is(err, index.ErrCorrupt) {
			t.Errorf("stats claiming %d bytes (they hold %d, their columns at most %d): %v", n, frame.StatsLength(x), bound, err)
		}
	}
	// A summary cut short, or of an unknown type, under a checksum that
	// matches: corrupt, not read.
	body := enc[:len(enc)-sha256.Size]
	for what, bad := range map[string][]byte{
		"cut short":                body[:len(body)-5],
		"unknown type":             replaceOnce(body, []byte("double"), []byte("doublx")),
		"followed by a stray byte": append(body[:len(body):len(body)], 0),
		"a damaged stats frame":    flipped(body, len(body)-3),
	} {
		sum := sha256.Sum256(bad)
		if _, err := frame.DecodeTickIndex(append(bad[:len(bad):len(bad)], sum[:]...)); !errors.Is(err, index.ErrCorrupt) {
			t.Errorf("a tick index whose summaries are %s: %v", what, err)
		}
	}
}

// replaceOnce returns b with the first old replaced by new (as long).
func replaceOnce(b, old, new []byte) []byte {
	out := append([]byte(nil), b...)
	for i := 0; i+len(old) <= len(out); i++ {
		if string(out[i:i+len(old)]) == string(old) {
			copy(out[i:], new)
			return out
		}
	}
	panic("not found")
}

// ParseInt128 reads what DuckDB prints of a HUGEINT, to the ends of its
// range and no further.
func TestParseInt128(t *testing.T) {
	for _, s := range []string{"0", "-1", "1", "18446744073709551616", "-27670116110564327421",
		"170141183460469231731687303715884105727", "-170141183460469231731687303715884105728"} {
		if v, err := frame.ParseInt128(s); err != nil || v.Big().String() != s {
			t.Errorf("ParseInt128(%s) = %s, %v", s, v.Big(), err)
		}
	}
	for _, s := range []string{"170141183460469231731687303715884105728", "-170141183460469231731687303715884105729", "1.5", ""} {
		if _, err := frame.ParseInt128(s); err == nil {
			t.Errorf("ParseInt128(%q) took it", s)
		}
	}
}

// flipped returns b with the bits of byte i flipped.
func flipped(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0xff
	return out
}

// SummarizeFile reads a column however its pages are encoded: one of a
// dictionary gives what a plain one gives.
func TestSummarizeFileOfADictionaryColumn(t *testing.T) {
	type plain struct {
		Tick int64   `parquet:"tick"`
		V    float64 `parquet:"v"`
		N    int32   `parquet:"n"`
	}
	type dict struct {
		Tick int64   `parquet:"tick"`
		V    float64 `parquet:"v,dict"`
		N    int32   `parquet:"n,dict"`
	}
	var ps []plain
	var ds []dict
	for i := range 300 {
		r := plain{Tick: int64(i / 7), V: float64(i%5) - 1.5, N: int32(i%3 - 1)}
		ps, ds = append(ps, r), append(ds, dict(r))
	}
	encode := func(rows any) []byte {
		var buf bytes.Buffer
		var err error
		switch r := rows.(type) {
		case []plain:
			err = parquet.Write(&buf, r)
		case []dict:
			err = parquet.Write(&buf, r)
		}
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b := encode(ps), encode(ds)
	for _, c := range []struct {
		col string
		typ frame.Type
	}{{"v", frame.Float64}, {"n", frame.Int32}} {
		col := []frame.Column{{Name: c.col, Type: c.typ}}
		ta, sa, err1 := frame.SummarizeFile(bytes.NewReader(a), int64(len(a)), col)
		tb, sb, err2 := frame.SummarizeFile(bytes.NewReader(b), int64(len(b)), col)
		if err1 != nil || err2 != nil || len(ta) != 43 || !reflect.DeepEqual(ta, tb) || !reflect.DeepEqual(sa, sb) {
			t.Fatalf("column %s: plain %d ticks %v, dictionary %d ticks %v; summaries equal: %v", c.col, len(ta), err1, len(tb), err2, reflect.DeepEqual(sa, sb))
		}
	}
}
