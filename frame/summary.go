package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
)

// A tick index (format 3) summarizes each numeric component column of
// its compacted file per tick: the least and greatest value and their
// sum (the count is the tick's rows: worldfs columns are not nullable).
// A reader of a column's per-tick aggregate over many ticks of many
// worlds (the web interface's sweep page) reads these instead of the
// rows: what a compacted file holds never changes, and it is summarized
// once, when compaction writes its index. Min and max order as DuckDB
// orders numbers: NaN above every other value.

// ColumnSummary is one column's summary in a tick index: a stat per
// entry of the index's Ticks, in their order, Ints for an integer
// column, Floats for a floating one.
type ColumnSummary struct {
	Name   string
	Type   Type
	Ints   []IntStat
	Floats []FloatStat
}

// IntStat is an integer column's summary of one tick.
type IntStat struct {
	Min, Max int64
	Sum      Int128
}

// FloatStat is a floating column's summary of one tick (a Float32
// column's values widened, exactly); Sum adds the tick's values in
// entity order.
type FloatStat struct{ Min, Max, Sum float64 }

// Int128 is a signed 128-bit integer: an integer column's sum, which
// DuckDB also keeps in 128 bits (HUGEINT), so that no sum overflows.
type Int128 struct {
	Hi int64
	Lo uint64
}

// Add returns s + v.
func (s Int128) Add(v Int128) Int128 {
	lo, carry := bits.Add64(s.Lo, v.Lo, 0)
	hi, _ := bits.Add64(uint64(s.Hi), uint64(v.Hi), carry)
	return Int128{Hi: int64(hi), Lo: lo}
}

// Int128Of returns v as an Int128.
func Int128Of(v int64) Int128 { return Int128{Hi: v >> 63, Lo: uint64(v)} }

// Big returns s as a big.Int.
func (s Int128) Big() *big.Int {
	b := new(big.Int).SetInt64(s.Hi)
	b.Lsh(b, 64)
	return b.Add(b, new(big.Int).SetUint64(s.Lo))
}

// Float returns s as the nearest float64.
func (s Int128) Float() float64 {
	f, _ := new(big.Float).SetInt(s.Big()).Float64()
	return f
}

// FloatLess orders floats as DuckDB orders numbers: NaN above all.
func FloatLess(a, b float64) bool {
	switch {
	case math.IsNaN(a):
		return false
	case math.IsNaN(b):
		return true
	}
	return a < b
}

// Summary returns the summary of column name, false if the index has
// none of it (not a numeric component column, or an index of an older
// format).
func (x *TickIndex) Summary(name string) (*ColumnSummary, bool) {
	for i := range x.Summaries {
		if x.Summaries[i].Name == name {
			return &x.Summaries[i], true
		}
	}
	return nil, false
}

// Summarized reports whether column c of a table is one a tick index
// summarizes: a numeric component column.
func Summarized(c Column) bool {
	switch c.Type {
	case Int32, Int64, Float32, Float64:
		return c.Component != ""
	}
	return false
}

// summarize returns the summaries of file's numeric component columns
// (Summarized), of each of ticks (runs of rows in file order from row 0).
func summarize(t *Table, file *parquet.File, ticks []TickEntry) ([]ColumnSummary, error) {
	var out []ColumnSummary
	for ci, c := range t.Columns {
		if !Summarized(c) {
			continue
		}
		s, err := summarizeColumn(file, ci, c.Name, c.Type, ticks)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// ErrNoColumn: a file has no column of the name asked for;
// ErrColumnType: it has one of another type.
var (
	ErrNoColumn   = errors.New("the file has no column")
	ErrColumnType = errors.New("a column of another type")
)

// SummarizeFile summarizes columns cols (each by its name and type) of a
// file of rows in tick order (a tick's own file, a compacted file) as a
// tick index does, from its rows: the file's ticks (each with its first
// row and rows) and each column's stats of each.
func SummarizeFile(src io.ReaderAt, size int64, cols []Column) ([]TickEntry, []ColumnSummary, error) {
	file, err := parquet.OpenFile(src, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, nil, err
	}
	leaf := func(name string) (int, error) {
		l, ok := file.Schema().Lookup(name)
		if !ok {
			return 0, fmt.Errorf("%w %s", ErrNoColumn, name)
		}
		return l.ColumnIndex, nil
	}
	tc, err := leaf(ColTick)
	if err != nil {
		return nil, nil, err
	}
	at := make([]int, len(cols))
	for i, c := range cols {
		if at[i], err = leaf(c.Name); err != nil {
			return nil, nil, err
		}
	}
	ticks, err := tickRuns(file, tc)
	if err != nil {
		return nil, nil, err
	}
	out := make([]ColumnSummary, len(cols))
	for i, c := range cols {
		if out[i], err = summarizeColumn(file, at[i], c.Name, c.Type, ticks); err != nil {
			return nil, nil, err
		}
	}
	return ticks, out, nil
}

// summarizeColumn summarizes column ci of file (called name, of type
// typ) per tick of ticks.
func summarizeColumn(file *parquet.File, ci int, name string, typ Type, ticks []TickEntry) (ColumnSummary, error) {
	s := ColumnSummary{Name: name, Type: typ}
	var kind parquet.Kind
	switch typ {
	case Int32:
		kind, s.Ints = parquet.Int32, make([]IntStat, len(ticks))
	case Int64:
		kind, s.Ints = parquet.Int64, make([]IntStat, len(ticks))
	case Float32:
		kind, s.Floats = parquet.Float, make([]FloatStat, len(ticks))
	case Float64:
		kind, s.Floats = parquet.Double, make([]FloatStat, len(ticks))
	default:
		return s, fmt.Errorf("column %s: %s is not a numeric type", name, typ)
	}
	if got := file.Schema().Columns(); ci >= len(got) {
		return s, fmt.Errorf("column %s: the file has %d columns", name, len(got))
	}
	k, row := 0, int64(0)
	next := func() (int, bool) { // the tick of row, whether it is the tick's first
		for k < len(ticks) && row >= ticks[k].Row+ticks[k].Rows {
			k++
		}
		return k, k < len(ticks) && row == ticks[k].Row
	}
	for _, rg := range file.RowGroups() {
		if t := rg.ColumnChunks()[ci].Type().Kind(); t != kind {
			return s, fmt.Errorf("column %s of type %s holds %s values: %w", name, typ, t, ErrColumnType)
		}
		err := numericPages(rg, ci, kind, func(ints []int64, floats []float64) error {
			for _, n := range ints {
				k, first := next()
				if k == len(ticks) {
					return fmt.Errorf("row %d is past the ticks' rows", row)
				}
				if st := &s.Ints[k]; first {
					*st = IntStat{Min: n, Max: n, Sum: Int128Of(n)}
				} else {
					st.Min, st.Max, st.Sum = min(st.Min, n), max(st.Max, n), st.Sum.Add(Int128Of(n))
				}
				row++
			}
			for _, f := range floats {
				k, first := next()
				if k == len(ticks) {
					return fmt.Errorf("row %d is past the ticks' rows", row)
				}
				st := &s.Floats[k]
				if first {
					*st = FloatStat{Min: f, Max: f, Sum: f}
				} else {
					if FloatLess(f, st.Min) {
						st.Min = f
					}
					if FloatLess(st.Max, f) {
						st.Max = f
					}
					st.Sum += f
				}
				row++
			}
			return nil
		})
		if err != nil {
			return s, fmt.Errorf("column %s: %w", name, err)
		}
	}
	if len(ticks) > 0 && k != len(ticks)-1 || row != file.NumRows() {
		return s, fmt.Errorf("column %s: %d rows of %d ticks, the file has %d", name, row, k+1, file.NumRows())
	}
	return s, nil
}

// numericPages calls fn with the values of each page of column ci of rg
// (of kind kind; a null is an error), widened: ints for INT32 and INT64,
// floats for FLOAT and DOUBLE. A page's values are taken as decoded
// (encoding.Values), or, for a page of a dictionary, read one by one.
func numericPages(rg parquet.RowGroup, ci int, kind parquet.Kind, fn func(ints []int64, floats []float64) error) error {
	pages := rg.ColumnChunks()[ci].Pages()
	defer pages.Close()
	var ints []int64
	var floats []float64
	var vals []parquet.Value
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n := int(p.NumValues())
		ints, floats = ints[:0], floats[:0]
		if p.NumNulls() != 0 {
			parquet.Release(p)
			return fmt.Errorf("a page of %d values holds %d nulls: worldfs columns are not nullable", n, p.NumNulls())
		}
		if p.Dictionary() == nil {
			d := p.Data()
			switch kind {
			case parquet.Int32:
				for _, v := range d.Int32() {
					ints = append(ints, int64(v))
				}
			case parquet.Int64:
				ints = append(ints, d.Int64()...)
			case parquet.Float:
				for _, v := range d.Float() {
					floats = append(floats, float64(v))
				}
			case parquet.Double:
				floats = append(floats, d.Double()...)
			}
		} else {
			vals = slices.Grow(vals[:0], n)[:n]
			got, err := p.Values().ReadValues(vals)
			if err != nil && !errors.Is(err, io.EOF) {
				parquet.Release(p)
				return err
			}
			for _, v := range vals[:got] {
				switch kind {
				case parquet.Int32:
					ints = append(ints, int64(v.Int32()))
				case parquet.Int64:
					ints = append(ints, v.Int64())
				case parquet.Float:
					floats = append(floats, float64(v.Float()))
				default:
					floats = append(floats, v.Double())
				}
			}
		}
		parquet.Release(p)
		if len(ints)+len(floats) != n {
			return fmt.Errorf("a page of %d values gave %d", n, len(ints)+len(floats))
		}
		if err := fn(ints, floats); err != nil {
			return err
		}
	}
}

// appendSummaries appends the summaries' bytes: their count, then per
// column its name and its type, then (if there are any) the stats of
// every column, column after column, in one zstd frame (preceded by the
// stats' length and the frame's): each stat of all ticks together, tick
// after tick, an integer column's mins, maxes (zigzag varints) and sums
// (each sum's high word a zigzag varint, its low word a uvarint), a
// floating column's mins, maxes and sums split into their bytes (the
// first byte of every value, then the second, …, little-endian):
// neighbouring ticks' stats share their high bytes, which zstd then
// stores once.
func appendSummaries(out []byte, sums []ColumnSummary) []byte {
	out = binary.AppendUvarint(out, uint64(len(sums)))
	if len(sums) == 0 {
		return out // no stats, no frame
	}
	for _, s := range sums {
		out = binary.AppendUvarint(out, uint64(len(s.Name)))
		out = append(out, s.Name...)
		out = binary.AppendUvarint(out, uint64(len(s.Type)))
		out = append(out, s.Type...)
	}
	block := statsBlock(sums)
	z := summaryZstd.enc.EncodeAll(block, nil)
	out = binary.AppendUvarint(out, uint64(len(block)))
	out = binary.AppendUvarint(out, uint64(len(z)))
	return append(out, z...)
}

// statsBlock is the stats of sums as appendSummaries compresses them.
func statsBlock(sums []ColumnSummary) []byte {
	var block []byte
	for _, s := range sums {
		for _, get := range []func(IntStat) int64{func(st IntStat) int64 { return st.Min }, func(st IntStat) int64 { return st.Max }, func(st IntStat) int64 { return st.Sum.Hi }} {
			for _, st := range s.Ints {
				block = binary.AppendVarint(block, get(st))
			}
		}
		for _, st := range s.Ints {
			block = binary.AppendUvarint(block, st.Sum.Lo)
		}
		for _, get := range []func(FloatStat) float64{func(st FloatStat) float64 { return st.Min }, func(st FloatStat) float64 { return st.Max }, func(st FloatStat) float64 { return st.Sum }} {
			for b := range 8 {
				for _, st := range s.Floats {
					block = append(block, byte(math.Float64bits(get(st))>>(8*b)))
				}
			}
		}
	}
	return block
}

// summaryZstd compresses the summaries' stats.
var summaryZstd = func() (z struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}) {
	z.enc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	// DecodeAll never writes past the capacity it is given: a frame
	// that claims more than the stats can hold is refused before any
	// allocation (decodeSummaries).
	z.dec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true))
	return z
}()

// decodeSummaries parses appendSummaries' bytes of an index of ticks
// entries, returning what follows them; false if they are not such
// bytes.
func decodeSummaries(p []byte, ticks int) ([]ColumnSummary, []byte, bool) {
	uvarint := func(p *[]byte) (uint64, bool) {
		v, k := binary.Uvarint(*p)
		if k <= 0 {
			return 0, false
		}
		*p = (*p)[k:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uvarint(&p)
		if !ok || n > uint64(len(p)) {
			return "", false
		}
		s := string(p[:n])
		p = p[n:]
		return s, true
	}
	n, ok := uvarint(&p)
	if !ok || n > uint64(len(p))/2 { // each column's name and type take a byte at least
		return nil, nil, false
	}
	if n == 0 {
		return nil, p, true
	}
	out := make([]ColumnSummary, n)
	size := uint64(0) // the stats' bytes, at most
	for i := range out {
		name, ok1 := str()
		typ, ok2 := str()
		if !ok1 || !ok2 {
			return nil, nil, false
		}
		out[i].Name, out[i].Type = name, Type(typ)
		switch out[i].Type {
		case Int32, Int64:
			size += uint64(ticks) * (3*binary.MaxVarintLen64 + binary.MaxVarintLen64)
		case Float32, Float64:
			size += uint64(ticks) * 24
		default:
			return nil, nil, false
		}
	}
	// The stats' length comes first: no more than the stats can take is
	// allocated, and no more is decoded.
	bn, ok1 := uvarint(&p)
	zn, ok2 := uvarint(&p)
	if !ok1 || !ok2 || bn > size || zn > uint64(len(p)) {
		return nil, nil, false
	}
	block, err := summaryZstd.dec.DecodeAll(p[:zn], make([]byte, 0, bn))
	if err != nil || uint64(len(block)) != bn {
		return nil, nil, false
	}
	p = p[zn:]
	for i := range out {
		s := &out[i]
		switch s.Type {
		case Int32, Int64:
			s.Ints = make([]IntStat, ticks)
			for j, set := range []func(*IntStat, int64){func(st *IntStat, v int64) { st.Min = v }, func(st *IntStat, v int64) { st.Max = v }, func(st *IntStat, v int64) { st.Sum.Hi = v }} {
				for k := range s.Ints {
					v, n := binary.Varint(block)
					if n <= 0 {
						return nil, nil, false
					}
					block = block[n:]
					set(&s.Ints[k], v)
					if j == 1 && s.Ints[k].Min > s.Ints[k].Max {
						return nil, nil, false
					}
				}
			}
			for k := range s.Ints {
				v, ok := uvarint(&block)
				if !ok {
					return nil, nil, false
				}
				s.Ints[k].Sum.Lo = v
			}
		default:
			if len(block) < ticks*24 {
				return nil, nil, false
			}
			s.Floats = make([]FloatStat, ticks)
			for _, set := range []func(*FloatStat, float64){func(st *FloatStat, v float64) { st.Min = v }, func(st *FloatStat, v float64) { st.Max = v }, func(st *FloatStat, v float64) { st.Sum = v }} {
				for k := range s.Floats {
					var bits uint64
					for b := range 8 {
						bits |= uint64(block[b*ticks+k]) << (8 * b)
					}
					set(&s.Floats[k], math.Float64frombits(bits))
				}
				block = block[8*ticks:]
			}
		}
	}
	if len(block) != 0 {
		return nil, nil, false
	}
	return out, p, true
}

// ParseInt128 parses a decimal integer within 128 bits (a HUGEINT as
// DuckDB prints it).
func ParseInt128(s string) (Int128, error) {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok || b.BitLen() > 127 && !(b.Sign() < 0 && b.BitLen() == 128 && b.TrailingZeroBits() == 127) {
		return Int128{}, fmt.Errorf("%q is not an integer of 128 bits", s)
	}
	lo := new(big.Int).And(b, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(b, 64).Int64()
	return Int128{Hi: hi, Lo: lo}, nil
}
