package frame

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// WriteCSV writes the rows of the Parquet file r (of size bytes) to w as
// CSV with a header line: what a tick's .csv file in the mount holds. It
// is a function of the Parquet file's rows alone, so the same rows give
// the same bytes wherever they were read from, and the CSV's size is known
// once rendered. Numbers are written as DuckDB's CSV writer writes them
// (integers in decimal; floating point values in the shortest form that
// reads back exactly, with ".0" on whole numbers so that readers keep the
// column floating point; nan, inf and -inf), booleans as true and false,
// strings quoted when they must be (or are empty), NULL as an empty field.
func WriteCSV(w io.Writer, r io.ReaderAt, size int64) error {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	fields := f.Schema().Fields()
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for i, fd := range fields {
		if !fd.Leaf() || fd.Repeated() {
			return fmt.Errorf("csv: column %s is not a plain value", fd.Name())
		}
		if i > 0 {
			line = append(line, ',')
		}
		line = appendCSVString(line, fd.Name())
	}
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return err
	}
	rows := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				line = line[:0]
				for _, v := range row {
					if c := v.Column(); c > 0 {
						line = append(line, ',')
					}
					line = appendCSVValue(line, v)
				}
				line = append(line, '\n')
				if _, err := bw.Write(line); err != nil {
					rr.Close()
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rr.Close()
				return fmt.Errorf("csv: %w", err)
			}
		}
		if err := rr.Close(); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	return bw.Flush()
}

// CSVSizeKey is the key in a tick fragment's Parquet footer (key/value
// metadata) under which its writer recorded the size, in decimal, of the
// fragment's CSV rendering (WriteCSV). Fragments without rows, and those
// written before sizes were recorded, have none.
const CSVSizeKey = "worldfs.csv_size"

// csvHeaderSize is the size of the header line WriteCSV writes for a file
// of t's columns, its line end included.
func csvHeaderSize(t *Table) int64 {
	var line []byte
	for _, c := range t.Columns {
		line = appendCSVString(append(line, ','), c.Name)
	}
	return int64(len(line)) // the first comma stands for the line end
}

// csvSize is the size of the CSV fields WriteCSV writes for rows lo..hi
// of column i (called name) of f, commas and line ends not included: each
// value measured as WriteCSV writes it, straight from the frame's typed
// values (floats by csvFloat64Len and csvFloat32Len, which count the
// shortest digits without writing them). A run of equal stamps (a
// fragment's stamp columns are one value) is measured once.
func (enc *encoder) csvSize(name string, f *Frame, i int, stamp func(int) Stamp, lo, hi int) int64 {
	var size int64
	switch name {
	case ColEntity:
		for _, x := range f.Entities[lo:hi] {
			size += int64(decimalLen(x))
		}
		return size
	case ColTick, ColWriterEpoch, ColCommitToken:
		var prev Stamp
		var n int64
		for k := lo; k < hi; k++ {
			s := stamp(k)
			if k == lo || s != prev {
				switch name {
				case ColTick:
					n = int64(decimalLen(s.Tick))
				case ColWriterEpoch:
					n = int64(decimalLen(s.WriterEpoch))
				default:
					n = int64(len(appendCSVString(enc.line[:0], s.CommitToken)))
				}
				prev = s
			}
			size += n
		}
		return size
	}
	switch v := f.cols[i].(type) {
	case []float64:
		for _, x := range v[lo:hi] {
			size += int64(csvFloat64Len(x))
		}
	case []float32:
		for _, x := range v[lo:hi] {
			size += int64(csvFloat32Len(x))
		}
	case []int64:
		for _, x := range v[lo:hi] {
			size += int64(decimalLen(x))
		}
	case []int32:
		for _, x := range v[lo:hi] {
			size += int64(decimalLen(int64(x)))
		}
	case []bool:
		for _, x := range v[lo:hi] {
			size += int64(len(strconv.AppendBool(enc.line[:0], x)))
		}
	case []string:
		for _, x := range v[lo:hi] {
			enc.line = appendCSVString(enc.line[:0], x)
			size += int64(len(enc.line))
		}
	}
	return size
}

// decimalLen is len(strconv.AppendInt(nil, x, 10)), without writing it.
func decimalLen(x int64) int {
	n, u := 0, uint64(x)
	if x < 0 {
		n, u = 1, -u
	}
	return n + digits(u)
}

// digits is the number of decimal digits of u (1 for 0): its bit length
// times log10(2) (1233/4096) is the count or one less.
func digits(u uint64) int {
	d := bits.Len64(u|1) * 1233 >> 12
	if d < len(powersOf10) && u >= powersOf10[d] {
		d++
	}
	return max(d, 1)
}

// powersOf10 is 10^0 .. 10^19.
var powersOf10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// appendCSVValue appends one value.
func appendCSVValue(dst []byte, v parquet.Value) []byte {
	if v.IsNull() {
		return dst
	}
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean())
	case parquet.Int32:
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Float:
		return appendCSVFloat(dst, float64(v.Float()), 32)
	case parquet.Double:
		return appendCSVFloat(dst, v.Double(), 64)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return appendCSVString(dst, string(v.ByteArray()))
	}
	return append(dst, v.String()...)
}

// appendCSVFloat appends f in the shortest form that reads back as f
// (bits 32 or 64), as DuckDB writes it.
func appendCSVFloat(dst []byte, f float64, bits int) []byte {
	if word := nonFinite(f, false); word != "" {
		return append(dst, word...)
	}
	at := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, bits)
	for _, c := range dst[at:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

// nonFinite is how DuckDB writes f if it is not a finite number: nan
// (-nan with its sign bit set, if signedNaN), inf or -inf; "" for a
// finite f.
func nonFinite(f float64, signedNaN bool) string {
	switch {
	case math.IsNaN(f) && signedNaN && math.Signbit(f):
		return "-nan"
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return ""
}

// appendCSVString appends s, quoted (with quotes doubled) if it is empty
// (so that it differs from NULL) or holds a comma, quote, line break or
// leading or trailing space.
func appendCSVString(dst []byte, s string) []byte {
	if s != "" && !strings.ContainsAny(s, ",\"\r\n") && strings.TrimSpace(s) == s {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	dst = append(dst, strings.ReplaceAll(s, `"`, `""`)...)
	return append(dst, '"')
}

// ReadCSVSize returns the size of the CSV rendering (WriteCSV) of the
// tick fragment f as its footer tells, reading only the footer: two ranged
// reads, the file's last 8 bytes and then the footer's metadata, never a
// row. It is the size its writer recorded (CSVSizeKey), or for a file
// without rows the size of its header line, from the footer's schema. ok
// is false for a fragment with rows whose writer recorded no size (written
// before sizes were recorded).
func ReadCSVSize(ctx context.Context, b bucket.Bucket, f index.Fragment) (size int64, ok bool, err error) {
	fail := func(what string, args ...any) (int64, bool, error) {
		return 0, false, fmt.Errorf("reading the footer of %s: %w", f.Path, fmt.Errorf(what, args...))
	}
	n := f.Bytes
	if n == 0 {
		attrs, err := b.Stat(ctx, f.Path)
		if err != nil {
			return fail("%w", err)
		}
		n = attrs.Size
	}
	if n < 12 {
		return fail("%d bytes is no Parquet file: %w", n, index.ErrCorrupt)
	}
	tail, err := b.GetRange(ctx, f.Path, n-8, 8)
	if err != nil {
		return fail("%w", err)
	}
	if len(tail) != 8 || string(tail[4:]) != "PAR1" {
		return fail("no Parquet magic at its end: %w", index.ErrCorrupt)
	}
	footer := int64(binary.LittleEndian.Uint32(tail))
	if footer > n-12 {
		return fail("a footer of %d bytes in a file of %d: %w", footer, n, index.ErrCorrupt)
	}
	data, err := b.GetRange(ctx, f.Path, n-8-footer, footer)
	if err != nil {
		return fail("%w", err)
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data, &md); err != nil {
		return fail("%v: %w", err, index.ErrCorrupt)
	}
	for _, kv := range md.KeyValueMetadata {
		if kv.Key != CSVSizeKey {
			continue
		}
		size, err := strconv.ParseInt(kv.Value, 10, 64)
		if err != nil || size <= 0 {
			return fail("%s is %q, not a size: %w", CSVSizeKey, kv.Value, index.ErrCorrupt)
		}
		return size, true, nil
	}
	if md.NumRows != 0 || len(md.Schema) == 0 {
		return 0, false, nil
	}
	// No rows: the header alone, the leaf columns' names in order.
	var line []byte
	for _, c := range md.Schema[1:] {
		if n, _ := c.NumChildren.Get(); n != 0 {
			return fail("column %s is not a plain value: %w", c.Name, index.ErrCorrupt)
		}
		line = appendCSVString(append(line, ','), c.Name)
	}
	return int64(len(line)), true, nil // the first comma stands for the line end
}

// EmptyCSVSize is the size of the CSV rendering of a tick without rows of
// t (EmptyTickFile's): its header line.
func EmptyCSVSize(t *Table) int64 { return csvHeaderSize(t) }
