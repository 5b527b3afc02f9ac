package frame

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/index"
)

// ScanTicks reads rows [from, from+n) of file, a file of t ordered by
// (tick, entity), and calls emit with each tick's rows in turn: the row
// they start at, a frame of them (reused: emit must not keep it) and
// their stamps. Rows out of that order are index.ErrCorrupt.
func ScanTicks(t *Table, file *parquet.File, from, n int64, emit func(tick, row int64, f *Frame, stamps []Stamp) error) error {
	if len(file.Schema().Columns()) != len(t.Columns) {
		return fmt.Errorf("%d columns, table %s has %d", len(file.Schema().Columns()), t.Name, len(t.Columns))
	}
	f := NewFrame(t)
	var stamps []Stamp
	start, end := from, from+n
	flush := func() error {
		if f.Len() == 0 {
			return nil
		}
		if err := emit(stamps[0].Tick, start, f, stamps); err != nil {
			return err
		}
		f.Entities, stamps = f.Entities[:0], stamps[:0]
		for i, c := range f.cols {
			f.cols[i] = truncate(c)
		}
		return nil
	}
	// Each column's part in a row, decided once: its key, stamp or a
	// component's values.
	const (
		component = iota
		entityCol
		tickCol
		epochCol
		tokenCol
		otherCol
	)
	roles := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		switch {
		case c.Name == ColEntity:
			roles[i] = entityCol
		case c.Name == ColTick:
			roles[i] = tickCol
		case c.Name == ColWriterEpoch:
			roles[i] = epochCol
		case c.Name == ColCommitToken:
			roles[i] = tokenCol
		case c.Component != "":
			roles[i] = component
		default:
			roles[i] = otherCol
		}
	}
	// values appends the component values of rows to the frame, a column
	// at a time (one type switch per column, not per value).
	values := func(rows []parquet.Row) {
		if len(rows) == 0 {
			return
		}
		for ci, role := range roles {
			if role != component {
				continue
			}
			switch col := f.cols[ci].(type) {
			case []float64:
				f.cols[ci] = appendColumn(col, rows, ci, parquet.Value.Double)
			case []float32:
				f.cols[ci] = appendColumn(col, rows, ci, parquet.Value.Float)
			case []int64:
				f.cols[ci] = appendColumn(col, rows, ci, parquet.Value.Int64)
			case []int32:
				f.cols[ci] = appendColumn(col, rows, ci, parquet.Value.Int32)
			case []bool:
				f.cols[ci] = appendColumn(col, rows, ci, parquet.Value.Boolean)
			case []string:
				f.cols[ci] = appendColumn(col, rows, ci, func(v parquet.Value) string { return string(v.ByteArray()) })
			}
		}
	}
	row, base := from, int64(0)
	buf := make([]parquet.Row, 256)
	var token string
	for _, rg := range file.RowGroups() {
		nr := rg.NumRows()
		if base+nr <= row {
			base += nr
			continue
		}
		if row >= end {
			break
		}
		rr := rg.Rows()
		err := rr.SeekToRow(row - base)
		for err == nil && row < min(end, base+nr) {
			var got int
			got, err = rr.ReadRows(buf[:min(int64(len(buf)), min(end, base+nr)-row)])
			pending := 0 // the first row of buf whose values are not in the frame yet
			for k, r := range buf[:got] {
				if len(r) != len(t.Columns) {
					err = fmt.Errorf("row %d has %d values, table %s %d columns: %w", row, len(r), t.Name, len(t.Columns), index.ErrCorrupt)
					break
				}
				// The key and stamp first: a row of the next tick ends
				// this one before its values join the frame.
				var s Stamp
				var entity int64
				var bad error
				for ci, v := range r {
					if v.Column() != ci {
						bad = fmt.Errorf("row %d: value %d is of column %d: %w", row, ci, v.Column(), index.ErrCorrupt)
						break
					}
					switch roles[ci] {
					case entityCol:
						entity = v.Int64()
					case tickCol:
						s.Tick = v.Int64()
					case epochCol:
						s.WriterEpoch = v.Int64()
					case tokenCol:
						if b := v.ByteArray(); string(b) != token {
							token = string(b)
						}
						s.CommitToken = token
					}
				}
				if bad != nil {
					err = bad
					break
				}
				if k := len(stamps); k > 0 && (s.Tick < stamps[k-1].Tick || s.Tick == stamps[k-1].Tick && entity <= f.Entities[k-1]) {
					err = fmt.Errorf("row %d (tick %d, entity %d) out of (tick, entity) order: %w", row, s.Tick, entity, index.ErrCorrupt)
					break
				}
				if n := len(stamps); n > 0 && s.Tick != stamps[n-1].Tick {
					values(buf[pending:k])
					pending = k
					if err = flush(); err != nil {
						break
					}
					start = row
				}
				f.Entities = append(f.Entities, entity)
				stamps = append(stamps, s)
				row++
			}
			if err == nil || errors.Is(err, io.EOF) {
				values(buf[pending:got])
			}
			if errors.Is(err, io.EOF) && row == min(end, base+nr) {
				err = nil
			} else if err == nil && got == 0 {
				err = io.ErrNoProgress
			}
		}
		rr.Close()
		if err != nil {
			return fmt.Errorf("row %d: %w", row, err)
		}
		base += nr
	}
	if row != end {
		return fmt.Errorf("rows %d..%d: the file has %d: %w", from, end, base, index.ErrCorrupt)
	}
	return flush()
}

// appendValue appends v to a frame's column of component values.
func appendValue(col any, v parquet.Value) any {
	switch c := col.(type) {
	case []float64:
		return append(c, v.Double())
	case []float32:
		return append(c, v.Float())
	case []int64:
		return append(c, v.Int64())
	case []int32:
		return append(c, v.Int32())
	case []bool:
		return append(c, v.Boolean())
	case []string:
		return append(c, string(v.ByteArray()))
	}
	return col
}

// truncate empties a frame's column, keeping its storage.
func truncate(col any) any {
	switch c := col.(type) {
	case []float64:
		return c[:0]
	case []float32:
		return c[:0]
	case []int64:
		return c[:0]
	case []int32:
		return c[:0]
	case []bool:
		return c[:0]
	case []string:
		clear(c)
		return c[:0]
	}
	return col
}

// SameColumns checks that file has t's columns, in its order, of its
// types, one value per row.
func SameColumns(t *Table, file *parquet.File) error {
	leaves := file.Schema().Columns()
	if len(leaves) != len(t.Columns) {
		return fmt.Errorf("%d columns, table %s has %d", len(leaves), t.Name, len(t.Columns))
	}
	want := t.Schema().Columns()
	for i, path := range leaves {
		if path[len(path)-1] != t.Columns[i].Name {
			return fmt.Errorf("column %d is %s, table %s has %s", i, path[len(path)-1], t.Name, t.Columns[i].Name)
		}
		got, _ := file.Schema().Lookup(path...)
		leaf, _ := t.Schema().Lookup(want[i]...)
		if got.Node.Type().Kind() != leaf.Node.Type().Kind() || got.MaxRepetitionLevel != leaf.MaxRepetitionLevel ||
			got.MaxDefinitionLevel != leaf.MaxDefinitionLevel {
			return fmt.Errorf("column %s is %s, table %s has %s", t.Columns[i].Name, got.Node.Type(), t.Name, leaf.Node.Type())
		}
	}
	for _, rg := range file.RowGroups() {
		for i, cc := range rg.ColumnChunks() {
			if n := cc.NumValues(); n != rg.NumRows() {
				return fmt.Errorf("column %s holds %d values in %d rows", t.Columns[i].Name, n, rg.NumRows())
			}
		}
	}
	return nil
}

// ColumnValues appends the values of column col of rg to buf (byte arrays
// copied: they outlive the page they were read from).
func ColumnValues(rg parquet.RowGroup, col int, buf []parquet.Value) ([]parquet.Value, error) {
	pages := rg.ColumnChunks()[col].Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		n := int(p.NumValues())
		buf = slices.Grow(buf, n)
		vals := buf[len(buf) : len(buf)+n]
		got, err := p.Values().ReadValues(vals)
		for i := range vals[:got] {
			vals[i] = vals[i].Clone()
		}
		parquet.Release(p)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if got != n {
			return nil, fmt.Errorf("a page of %d values gave %d", n, got)
		}
		buf = buf[:len(buf)+n]
	}
}

// appendColumn appends column ci of rows to col, each value read by get.
func appendColumn[T any](col []T, rows []parquet.Row, ci int, get func(parquet.Value) T) []T {
	for _, r := range rows {
		col = append(col, get(r[ci]))
	}
	return col
}
