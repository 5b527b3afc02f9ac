package frame

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// RowGroupRows is the most rows per Parquet row group, DuckDB's own row
// group size, so one row group is one unit of a parallel scan.
const RowGroupRows = 122880

// zstdCodec is shared so its encoders are pooled across fragments. The
// fastest level: on tick frames it takes about half the CPU of the default
// level and, on their columns of steadily changing numbers, writes smaller
// files too (BenchmarkEncode10k reports both).
var zstdCodec = &zstd.Codec{Level: zstd.SpeedFastest}

// Stamp is the commit identity written on every row of a fragment.
type Stamp struct {
	Tick        int64
	CommitToken string
	WriterEpoch int64
}

// EncodeFragment writes f's rows as one Parquet file (zstd), every row
// stamped with the tick's commit identity: a tick's fragment. Columns are
// written whole, through parquet-go's typed column buffers, one row group
// per RowGroupRows rows. A fragment with rows records in its footer the
// size of its CSV rendering (CSVSizeKey), so that a reader knows the size
// of a tick's .csv from the footer alone, without a row read.
func EncodeFragment(f *Frame, s Stamp) ([]byte, error) {
	data, _, err := Encode(f, func(int) Stamp { return s }, CSVRecord, 0)
	return data, err
}

// EncodeStamped is EncodeFragment with a stamp per row and no CSV size:
// stamp(i) is the commit identity of the frame's i-th row (in entity
// order). A batch of facts shares one fragment this way, each row under
// its own claim.
func EncodeStamped(f *Frame, stamp func(i int) Stamp) ([]byte, error) {
	data, _, err := Encode(f, stamp, CSVNone, 0)
	return data, err
}

// CSVMode says what Encode does with the size of the rows' CSV rendering.
type CSVMode int

const (
	CSVNone   CSVMode = iota // nothing: not measured
	CSVCount                 // measure it and return it
	CSVRecord                // measure it, return it and, if the frame has rows, record it in the footer (CSVSizeKey)
)

// Encode writes f's rows as one Parquet file (see EncodeFragment) and,
// unless mode is CSVNone, returns the size of the file's CSV rendering
// (WriteCSV): measured from the very values written, through WriteCSV's
// own formatting of each (csvSize), so the two never disagree; known,
// if not 0, is that size already measured (a tick index's record of the
// file being rebuilt, whose bytes are then checked), and is not measured
// again.
func Encode(f *Frame, stamp func(i int) Stamp, mode CSVMode, known int64) ([]byte, int64, error) {
	return encode(f, f.Table.schema, stamp, mode, known)
}

// EncodeCompacted writes f's rows, stamp(i) the commit identity of the
// i-th, as one compacted file: Encode's bytes in CompactedSchema, the
// bytes NewWriter writes of the same rows (a history built at once,
// maintenancetest.WriteCompactedTicks, is what compaction writes).
func EncodeCompacted(f *Frame, stamp func(i int) Stamp) ([]byte, error) {
	data, _, err := encode(f, f.Table.compacted, stamp, CSVNone, 0)
	return data, err
}

// encode is Encode in schema (t.schema or t.compacted).
func encode(f *Frame, schema *parquet.Schema, stamp func(i int) Stamp, mode CSVMode, known int64) ([]byte, int64, error) {
	t := f.Table
	enc, _ := t.encoders.Get().(*encoder)
	if enc == nil {
		enc = &encoder{}
	}
	defer t.encoders.Put(enc)
	enc.out.Reset()
	enc.csv = -1
	if mode != CSVNone && known == 0 {
		enc.csv = csvHeaderSize(t)
	}
	// A fresh writer each time: Writer.Reset drops the column paths of the
	// file metadata (path_in_schema), which other readers rely on.
	w := parquet.NewWriter(&enc.out, schema, parquet.Compression(zstdCodec), parquet.PageBufferSize(pageBytes))
	cols := w.ColumnWriters()
	for lo := 0; lo < f.Len(); lo += RowGroupRows {
		hi := min(f.Len(), lo+RowGroupRows)
		if err := enc.writeColumns(cols, f, stamp, lo, hi); err != nil {
			return nil, 0, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if err := w.Flush(); err != nil { // one row group
			return nil, 0, fmt.Errorf("table %s: %w", t.Name, err)
		}
	}
	csv := enc.csv
	if known != 0 {
		csv = known
	}
	if mode == CSVRecord && f.Len() > 0 {
		w.SetKeyValueMetadata(CSVSizeKey, strconv.FormatInt(csv, 10))
	}
	if err := w.Close(); err != nil {
		return nil, 0, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return bytes.Clone(enc.out.Bytes()), csv, nil
}

// NewWriter returns a writer of one Parquet file of t into w in the
// encoding of compacted files (t.CompactedSchema, zstd at its fastest
// level, pages cut at pageBytes), at most RowGroupRows rows per row
// group: what compaction writes its files with.
func NewWriter(w io.Writer, t *Table) *parquet.Writer {
	return parquet.NewWriter(w, t.compacted, parquet.Compression(zstdCodec), parquet.PageBufferSize(pageBytes),
		parquet.MaxRowsPerRowGroup(RowGroupRows))
}

// pageBytes is the uncompressed size at which a column's page is cut.
const pageBytes = 64 << 10

// encoder holds a table's scratch values and output, reused across
// fragments.
type encoder struct {
	vals []parquet.Value
	out  bytes.Buffer
	csv  int64  // the CSV rendering's size so far; -1: not measured
	line []byte // scratch for csvSize
}

// writeColumns writes rows [lo, hi) of f straight into the writer's
// column writers (in the table's column order), a batch of values at a
// time: no row group buffer in between, so each value is copied once.
func (enc *encoder) writeColumns(cols []*parquet.ColumnWriter, f *Frame, stamp func(int) Stamp, lo, hi int) error {
	if enc.vals == nil {
		enc.vals = make([]parquet.Value, valueBatch)
	}
	defer clear(enc.vals) // drop references to the frame's strings
	if enc.csv >= 0 {
		enc.csv += int64(hi-lo) * int64(len(f.Table.Columns)) // a comma or the line's end after each value
	}
	for i, c := range f.Table.Columns {
		for b := lo; b < hi; b += valueBatch {
			vals := enc.vals[:min(valueBatch, hi-b)]
			switch c.Name {
			case ColEntity:
				box(vals, f.Entities[b:], parquet.Int64Value)
			case ColTick:
				for k := range vals {
					vals[k] = parquet.Int64Value(stamp(b + k).Tick)
				}
			case ColWriterEpoch:
				for k := range vals {
					vals[k] = parquet.Int64Value(stamp(b + k).WriterEpoch)
				}
			case ColCommitToken:
				for k := range vals {
					vals[k] = stringValue(stamp(b + k).CommitToken)
				}
			default:
				switch v := f.cols[i].(type) {
				case []float64:
					box(vals, v[b:], parquet.DoubleValue)
				case []float32:
					box(vals, v[b:], parquet.FloatValue)
				case []int64:
					box(vals, v[b:], parquet.Int64Value)
				case []int32:
					box(vals, v[b:], parquet.Int32Value)
				case []bool:
					box(vals, v[b:], parquet.BooleanValue)
				case []string:
					box(vals, v[b:], stringValue)
				default:
					return fmt.Errorf("column %s: no values", c.Name)
				}
			}
			if _, err := cols[i].WriteRowValues(vals); err != nil {
				return fmt.Errorf("column %s: %w", c.Name, err)
			}
			if enc.csv >= 0 {
				enc.csv += enc.csvSize(c.Name, f, i, stamp, b, b+len(vals))
			}
		}
	}
	return nil
}

// box fills vals with the first len(vals) of xs as Parquet values.
func box[T any](vals []parquet.Value, xs []T, value func(T) parquet.Value) {
	for k, x := range xs[:len(vals)] {
		vals[k] = value(x)
	}
}

// valueBatch is how many values go to a column writer at a time.
const valueBatch = 1024

// stringValue is s as a Parquet byte array value, without copying: the
// column writer copies the bytes into its page.
func stringValue(s string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Digest is the fragment digest recorded in manifests.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// StampedRow is one decoded row's commit identity.
type StampedRow struct {
	Entity int64
	Stamp
}

// set sets the field of r that the column called name holds (the entity
// or a stamp column) to v, and reports whether it is one of them.
func (r *StampedRow) set(name string, v parquet.Value) bool {
	switch name {
	case ColEntity:
		r.Entity = v.Int64()
	case ColTick:
		r.Tick = v.Int64()
	case ColCommitToken:
		r.CommitToken = string(v.ByteArray())
	case ColWriterEpoch:
		r.WriterEpoch = v.Int64()
	default:
		return false
	}
	return true
}

// columnsOf maps the leaf columns of file to t's columns by name: pos[i]
// is the table column of file column i (-1: not one of t's), tick the
// file column of the tick (-1: none). A component column of t the file
// lacks is an error ("no column …").
func columnsOf(t *Table, file *parquet.File) (pos []int, tick int, err error) {
	leaves := file.Schema().Columns()
	pos = make([]int, len(leaves))
	have := map[string]bool{}
	tick = -1
	for i, path := range leaves {
		name := path[len(path)-1]
		pos[i] = t.Column(name)
		have[name] = true
		if name == ColTick && len(path) == 1 {
			tick = i
		}
	}
	for _, c := range t.Columns {
		if c.Component != "" && !have[c.Name] {
			return nil, -1, fmt.Errorf("no column %s", c.Name)
		}
	}
	return pos, tick, nil
}

// DecodeFragment reads a fragment of table t. keep decides, from each
// row's entity and stamp, whether the row goes into the frame (nil keeps
// every row). A table without commit columns (legacy history) reads as
// stamped ""/0.
func DecodeFragment(t *Table, data []byte, keep func(StampedRow) bool) (*Frame, error) {
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	pos, _, err := columnsOf(t, file)
	if err != nil {
		return nil, fmt.Errorf("table %s: fragment has %w", t.Name, err)
	}
	f := NewFrame(t)
	rows := make([]parquet.Row, 256)
	for _, rg := range file.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				sr := StampedRow{}
				vals := Values{}
				for _, v := range row {
					ci := v.Column()
					if ci < 0 || ci >= len(pos) || pos[ci] < 0 {
						continue
					}
					if c := t.Columns[pos[ci]]; !sr.set(c.Name, v) {
						vals[c.Name] = valueOf(c.Type, v)
					}
				}
				if keep != nil && !keep(sr) {
					continue
				}
				if err := f.Insert(sr.Entity, vals); err != nil {
					rr.Close()
					return nil, err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rr.Close()
				return nil, fmt.Errorf("table %s: %w", t.Name, err)
			}
		}
		rr.Close()
	}
	return f, nil
}

func valueOf(t Type, v parquet.Value) any {
	switch t {
	case Float64:
		return v.Double()
	case Float32:
		return v.Float()
	case Int64:
		return v.Int64()
	case Int32:
		return v.Int32()
	case Bool:
		return v.Boolean()
	}
	return string(v.ByteArray())
}
