package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// RowGroupRows is the most rows per Parquet row group, DuckDB's own row
// group size, so one row group is one unit of a parallel scan.
const RowGroupRows = 122880

// FragmentPath is where a fragment lives: under its commit token, so that
// claim recovery finds orphan rows by token with one prefix listing.
func FragmentPath(world, run, tableID, token string, part int) string {
	return fmt.Sprintf("data/%s/%s/%s/%s/%d.parquet", world, run, tableID, token, part)
}

// AppendReceipt describes one appended fragment.
type AppendReceipt struct {
	Table  string `json:"table"`
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"` // "sha256:<hex>" of the file's bytes
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
// stamped with the tick's commit identity.
func EncodeFragment(f *Frame, s Stamp) ([]byte, error) {
	var buf bytes.Buffer
	t := f.Table
	w := parquet.NewWriter(&buf, t.schema, parquet.Compression(&zstd.Codec{}), parquet.MaxRowsPerRowGroup(RowGroupRows))
	const batch = 1024
	rows := make([]parquet.Row, 0, batch)
	for r := 0; r < f.Len(); r++ {
		row := make(parquet.Row, len(t.Columns))
		for i, c := range t.Columns {
			var v parquet.Value
			switch c.Name {
			case ColEntity:
				v = parquet.Int64Value(f.Entities[r])
			case ColTick:
				v = parquet.Int64Value(s.Tick)
			case ColCommitToken:
				v = parquet.ByteArrayValue([]byte(s.CommitToken))
			case ColWriterEpoch:
				v = parquet.Int64Value(s.WriterEpoch)
			default:
				switch col := f.cols[i].(type) {
				case []float64:
					v = parquet.DoubleValue(col[r])
				case []float32:
					v = parquet.FloatValue(col[r])
				case []int64:
					v = parquet.Int64Value(col[r])
				case []int32:
					v = parquet.Int32Value(col[r])
				case []bool:
					v = parquet.BooleanValue(col[r])
				case []string:
					v = parquet.ByteArrayValue([]byte(col[r]))
				}
			}
			row[i] = v.Level(0, 0, i)
		}
		rows = append(rows, row)
		if len(rows) == batch {
			if _, err := w.WriteRows(rows); err != nil {
				return nil, fmt.Errorf("table %s: %w", t.Name, err)
			}
			rows = rows[:0]
		}
	}
	if _, err := w.WriteRows(rows); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return buf.Bytes(), nil
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
