package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/worldfs/worldfs/index"
)

// RowGroupRows is the most rows per Parquet row group, DuckDB's own row
// group size, so one row group is one unit of a parallel scan.
const RowGroupRows = 122880

// zstdCodec is shared so its encoders are pooled across fragments.
var zstdCodec = &zstd.Codec{}

// FragmentPath is where a fragment lives (index.FragmentPath).
func FragmentPath(world, run, tableID, token string, part int) string {
	return index.FragmentPath(world, run, tableID, token, part)
}

// AppendReceipt describes one appended fragment.
type AppendReceipt struct {
	Table  string `json:"table"`
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"` // "sha256:<hex>" of the file's bytes
	// Generation is the bucket's generation of the created object, which
	// the manifest records so readers catch a replaced file at open.
	Generation int64 `json:"generation,omitempty"`
	// Durable: the bucket confirmed the create (staged fragments are not
	// durable and must never be published).
	Durable bool `json:"durable"`
}

// Stamp is the commit identity written on every row of a fragment.
type Stamp struct {
	Tick        int64
	CommitToken string
	WriterEpoch int64
}

// EncodeFragment writes f's rows as one Parquet file (zstd), every row
// stamped with the tick's commit identity. Columns are written whole,
// through parquet-go's typed column buffers, one row group per
// RowGroupRows rows.
func EncodeFragment(f *Frame, s Stamp) ([]byte, error) {
	return EncodeStamped(f, func(int) Stamp { return s })
}

// EncodeStamped is EncodeFragment with a stamp per row: stamp(i) is the
// commit identity of the frame's i-th row (in entity order). A batch of
// facts shares one fragment this way, each row under its own claim.
func EncodeStamped(f *Frame, stamp func(i int) Stamp) ([]byte, error) {
	t := f.Table
	enc, _ := t.encoders.Get().(*encoder)
	if enc == nil {
		enc = &encoder{buf: parquet.NewBuffer(t.schema)}
	}
	defer t.encoders.Put(enc)
	enc.out.Reset()
	// A fresh writer each time: Writer.Reset drops the column paths of the
	// file metadata (path_in_schema), which other readers rely on.
	enc.w = parquet.NewWriter(&enc.out, t.schema, parquet.Compression(zstdCodec), parquet.PageBufferSize(64<<10))
	for lo := 0; lo < f.Len() || lo == 0; lo += RowGroupRows {
		hi := min(f.Len(), lo+RowGroupRows)
		enc.buf.Reset()
		if err := fillColumns(enc.buf.ColumnBuffers(), f, stamp, lo, hi); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if _, err := enc.w.WriteRowGroup(enc.buf); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if f.Len() == 0 {
			break
		}
	}
	if err := enc.w.Close(); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return bytes.Clone(enc.out.Bytes()), nil
}

// encoder holds a table's row group buffer and output, reused across
// fragments (large to allocate and clear each time).
type encoder struct {
	w   *parquet.Writer
	buf *parquet.Buffer
	out bytes.Buffer
}

// fillColumns writes rows [lo, hi) of f into the column buffers, which are
// in the table's column order.
func fillColumns(cols []parquet.ColumnBuffer, f *Frame, stamp func(int) Stamp, lo, hi int) error {
	n := hi - lo
	repeat := func(v func(Stamp) int64) []int64 {
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = v(stamp(lo + i))
		}
		return xs
	}
	var err error
	for i, c := range f.Table.Columns {
		col := cols[i]
		switch c.Name {
		case ColEntity:
			_, err = col.(parquet.Int64Writer).WriteInt64s(f.Entities[lo:hi])
		case ColTick:
			_, err = col.(parquet.Int64Writer).WriteInt64s(repeat(func(s Stamp) int64 { return s.Tick }))
		case ColWriterEpoch:
			_, err = col.(parquet.Int64Writer).WriteInt64s(repeat(func(s Stamp) int64 { return s.WriterEpoch }))
		case ColCommitToken:
			_, err = col.(parquet.ByteArrayWriter).WriteByteArrays(plainStrings(n, func(j int) string { return stamp(lo + j).CommitToken }))
		default:
			switch v := f.cols[i].(type) {
			case []float64:
				_, err = col.(parquet.DoubleWriter).WriteDoubles(v[lo:hi])
			case []float32:
				_, err = col.(parquet.FloatWriter).WriteFloats(v[lo:hi])
			case []int64:
				_, err = col.(parquet.Int64Writer).WriteInt64s(v[lo:hi])
			case []int32:
				_, err = col.(parquet.Int32Writer).WriteInt32s(v[lo:hi])
			case []bool:
				_, err = col.(parquet.BooleanWriter).WriteBooleans(v[lo:hi])
			case []string:
				_, err = col.(parquet.ByteArrayWriter).WriteByteArrays(plainStrings(n, func(j int) string { return v[lo+j] }))
			}
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
	}
	return nil
}

// plainStrings lays out n strings in Parquet's PLAIN byte array encoding:
// each a 4-byte little-endian length, then its bytes.
func plainStrings(n int, at func(int) string) []byte {
	size := 0
	for j := range n {
		size += 4 + len(at(j))
	}
	out := make([]byte, 0, size)
	for j := range n {
		v := at(j)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
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

// DecodeFragment reads a fragment of table t. keep decides, from each
// row's entity and stamp, whether the row goes into the frame (nil keeps
// every row). A table without commit columns (legacy history) reads as
// stamped ""/0.
func DecodeFragment(t *Table, data []byte, keep func(StampedRow) bool) (*Frame, error) {
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	// Map the file's leaf columns to the table's, by name.
	leaves := file.Schema().Columns()
	pos := make([]int, len(leaves)) // file column → table column (-1: unknown)
	have := map[string]bool{}
	for i, path := range leaves {
		name := path[len(path)-1]
		pos[i] = t.Column(name)
		have[name] = true
	}
	for _, c := range t.Columns {
		if c.Component != "" && !have[c.Name] {
			return nil, fmt.Errorf("table %s: fragment has no column %s", t.Name, c.Name)
		}
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
					c := t.Columns[pos[ci]]
					switch c.Name {
					case ColEntity:
						sr.Entity = v.Int64()
					case ColTick:
						sr.Tick = v.Int64()
					case ColCommitToken:
						sr.CommitToken = string(v.ByteArray())
					case ColWriterEpoch:
						sr.WriterEpoch = v.Int64()
					default:
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
