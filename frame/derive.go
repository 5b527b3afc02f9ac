package frame

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Source is one Parquet file of a table to gather rows from: its bytes
// through R, Size of them, Name for errors.
type Source struct {
	R    io.ReaderAt
	Size int64
	Name string
}

// Gathered is the rows of one table gathered from several files: a frame
// and each row's commit identity, in the frame's order.
type Gathered struct {
	Frame  *Frame
	Stamps []Stamp
}

// Selection says which rows Gather keeps and in which order.
type Selection struct {
	// Tick, if not nil, keeps only that tick's rows, and a file's pages
	// whose tick statistics (its page index) exclude it are not read: a
	// tick's rows in a compacted file of many ticks are read alone.
	Tick *int64
	// Keep decides, by a row's entity and stamp, whether it is kept (nil:
	// every row).
	Keep func(StampedRow) bool
	// Desc orders the rows by entity id descending, else ascending.
	Desc bool
}

// Gather reads the rows of table t's files srcs that sel selects and
// returns them ordered by entity id (rows of one entity id keep their
// files' order): what the SQL views show of a set of fragments, as a
// frame. A file must have every component column of t; a file without
// commit columns (legacy history) reads as stamped ""/0.
func Gather(t *Table, srcs []Source, sel Selection) (Gathered, error) {
	f := NewFrame(t)
	var stamps []Stamp
	for _, src := range srcs {
		var err error
		if stamps, err = gatherFile(t, src, sel, f, stamps); err != nil {
			return Gathered{}, fmt.Errorf("table %s: %s: %w", t.Name, src.Name, err)
		}
	}
	desc := sel.Desc
	perm := make([]int, f.Len())
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		x, y := f.Entities[a], f.Entities[b]
		if desc {
			x, y = y, x
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	out := Gathered{Frame: &Frame{Table: t, Entities: permute(f.Entities, perm), cols: make([]any, len(f.cols))}, Stamps: permute(stamps, perm)}
	for i, col := range f.cols {
		switch c := col.(type) {
		case []float64:
			out.Frame.cols[i] = permute(c, perm)
		case []float32:
			out.Frame.cols[i] = permute(c, perm)
		case []int64:
			out.Frame.cols[i] = permute(c, perm)
		case []int32:
			out.Frame.cols[i] = permute(c, perm)
		case []bool:
			out.Frame.cols[i] = permute(c, perm)
		case []string:
			out.Frame.cols[i] = permute(c, perm)
		}
	}
	return out, nil
}

func permute[T any](xs []T, perm []int) []T {
	out := make([]T, len(perm))
	for i, p := range perm {
		out[i] = xs[p]
	}
	return out
}

// gatherFile appends the rows of src that sel selects to f and their
// stamps to stamps.
func gatherFile(t *Table, src Source, sel Selection, f *Frame, stamps []Stamp) ([]Stamp, error) {
	file, err := parquet.OpenFile(src.R, src.Size)
	if err != nil {
		return stamps, err
	}
	pos, tickCol, err := columnsOf(t, file)
	if err != nil {
		return stamps, err
	}
	rows := make([]parquet.Row, 256)
	for _, rg := range file.RowGroups() {
		from, to := int64(0), rg.NumRows()
		if sel.Tick != nil && tickCol >= 0 {
			from, to = tickRows(rg, tickCol, *sel.Tick)
		}
		if from >= to {
			continue
		}
		rr := rg.Rows()
		if from > 0 {
			if err := rr.SeekToRow(from); err != nil {
				rr.Close()
				return stamps, err
			}
		}
		for left := to - from; left > 0; {
			n, err := rr.ReadRows(rows[:min(int64(len(rows)), left)])
			left -= int64(n)
			if err == nil && n == 0 {
				err = io.ErrNoProgress
			}
			for _, row := range rows[:n] {
				var sr StampedRow
				for _, v := range row {
					ci := v.Column()
					if ci < 0 || ci >= len(pos) || pos[ci] < 0 {
						continue
					}
					sr.set(t.Columns[pos[ci]].Name, v)
				}
				if sel.Tick != nil && sr.Tick != *sel.Tick || sel.Keep != nil && !sel.Keep(sr) {
					continue
				}
				for _, v := range row {
					if ci := v.Column(); ci >= 0 && ci < len(pos) && pos[ci] >= 0 && t.Columns[pos[ci]].Component != "" {
						f.cols[pos[ci]] = appendValue(f.cols[pos[ci]], v)
					}
				}
				f.Entities = append(f.Entities, sr.Entity)
				stamps = append(stamps, sr.Stamp)
			}
			if err == io.EOF && left == 0 {
				break
			}
			if err != nil {
				rr.Close()
				return stamps, err
			}
		}
		if err := rr.Close(); err != nil {
			return stamps, err
		}
	}
	return stamps, nil
}

// tickRows returns the rows [from, to) of row group rg that may hold
// tick's rows, by the page index of its tick column col: from the first
// page whose bounds hold tick to the end of the last (none: from == to);
// every row if the column has no page index.
func tickRows(rg parquet.RowGroup, col int, tick int64) (from, to int64) {
	chunk := rg.ColumnChunks()[col]
	ci, err := chunk.ColumnIndex()
	if err != nil {
		return 0, rg.NumRows()
	}
	oi, err := chunk.OffsetIndex()
	if err != nil || oi.NumPages() != ci.NumPages() {
		return 0, rg.NumRows()
	}
	from, to = -1, -1
	for p := range ci.NumPages() {
		if ci.NullPage(p) || ci.MinValue(p).Int64() > tick || ci.MaxValue(p).Int64() < tick {
			continue
		}
		if from < 0 {
			from = oi.FirstRowIndex(p)
		}
		to = rg.NumRows()
		if p+1 < oi.NumPages() {
			to = oi.FirstRowIndex(p + 1)
		}
	}
	if from < 0 {
		return 0, 0
	}
	return from, to
}

// ViewColumn is one column of a file of tables' rows under other names
// (a curated view's): Name as the file calls it, From the tables' column
// it holds (a commit column or a component column), JSON for a string
// column typed JSON (Parquet's JSON logical type).
type ViewColumn struct {
	Name, From string
	JSON       bool
}

// UnionColumns are the columns of the union of tables (a view of rows
// of several schemas, each column under its own name): every column of
// any of them, once, in the order the SQL views show a table's columns
// (entity_id, tick, ComponentColumns, commit_token, writer_epoch). A
// column the tables give several types has their UnionType, as the SQL
// views give it.
func UnionColumns(tables ...*Table) ([]ViewColumn, error) {
	seen := map[string]Type{}
	infos := make([]TableInfo, len(tables))
	for i, t := range tables {
		infos[i] = t.Info()
		for _, c := range t.Columns {
			typ, ok := seen[c.Name]
			if !ok {
				seen[c.Name] = c.Type
				continue
			}
			if _, err := UnionType(typ, c.Type); err != nil {
				return nil, fmt.Errorf("column %s of table %s: %w", c.Name, t.Name, err)
			}
		}
	}
	var out []ViewColumn
	add := func(name string) {
		if _, ok := seen[name]; ok {
			out = append(out, ViewColumn{Name: name, From: name})
		}
	}
	add(ColEntity)
	add(ColTick)
	for _, c := range ComponentColumns(infos...) {
		add(c.Name)
	}
	add(ColCommitToken)
	add(ColWriterEpoch)
	return out, nil
}

// ComponentColumns are the component columns of tables of one readable
// name (a changed schema is a new table, and a view shows them all), once
// each, in the order a view of them shows: the columns of the tables of
// declared order (FormatDeclared) first, in their order (of several such
// tables, by table id), then the columns only tables of the formats
// before it have, by name (their order as declared was never recorded).
// The order of the tables given does not matter.
func ComponentColumns(tables ...TableInfo) []Column {
	tables = slices.Clone(tables)
	slices.SortStableFunc(tables, func(a, b TableInfo) int { return strings.Compare(a.ID, b.ID) })
	var out, byName []Column
	seen := map[string]bool{}
	for _, declared := range []bool{true, false} {
		for _, t := range tables {
			if (t.Format == FormatDeclared) != declared {
				continue
			}
			for _, c := range t.Columns {
				if c.Component == "" || seen[c.Name] {
					continue
				}
				seen[c.Name] = true
				if declared {
					out = append(out, c)
				} else {
					byName = append(byName, c)
				}
			}
		}
	}
	slices.SortFunc(byName, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	return append(out, byName...)
}

// EncodeView writes the rows of parts (each of its own table, each in
// entity order: see Gather) as one Parquet file of cols, merged by entity
// id (descending if desc; a tie keeps the parts' order): each column its
// From column's values under its own name and type, NULL in the rows of a
// part whose table lacks it (the column is then optional); a column the
// tables give several types has their UnionType, each value cast to it as
// the SQL views cast it (castValue). Columns are in the order of cols
// (zstd, as every file of frame's is), and the same rows give the same
// bytes: a curated view's rows as a file.
func EncodeView(parts []Gathered, cols []ViewColumn, desc bool) ([]byte, error) {
	type source struct {
		typ      Type
		optional bool
		at       []int // by part, the table's column (-1: none)
	}
	names := make([]string, 0, len(cols))
	nodes := make([]parquet.Node, 0, len(cols))
	srcs := map[string]*source{}
	for _, c := range cols {
		if _, dup := srcs[c.Name]; dup {
			return nil, fmt.Errorf("column %s twice", c.Name)
		}
		src := &source{at: make([]int, len(parts))}
		found := false
		for k, g := range parts {
			t := g.Frame.Table
			i := t.Column(c.From)
			src.at[k] = i
			if i < 0 {
				src.optional = true
				continue
			}
			typ := t.Columns[i].Type
			if found {
				var err error
				if typ, err = UnionType(src.typ, typ); err != nil {
					return nil, fmt.Errorf("column %s of table %s: %w", c.From, t.Name, err)
				}
			}
			src.typ, found = typ, true
		}
		if !found {
			return nil, fmt.Errorf("no table has column %s (for %s)", c.From, c.Name)
		}
		node, err := src.typ.node()
		if err != nil {
			return nil, err
		}
		if c.JSON {
			if src.typ != String {
				return nil, fmt.Errorf("column %s is %s, not a string to type JSON", c.From, src.typ)
			}
			node = parquet.JSON()
		}
		if src.optional {
			node = parquet.Optional(node)
		}
		names, nodes, srcs[c.Name] = append(names, c.Name), append(nodes, node), src
	}
	// The rows in the file's order: each part's, merged by entity id.
	type at struct{ part, row int }
	var order []at
	for k, g := range parts {
		for r := range g.Frame.Len() {
			order = append(order, at{k, r})
		}
	}
	slices.SortStableFunc(order, func(a, b at) int {
		x, y := parts[a.part].Frame.Entities[a.row], parts[b.part].Frame.Entities[b.row]
		if desc {
			x, y = y, x
		}
		return cmp.Compare(x, y)
	})
	schema := parquet.NewSchema("view", newOrderedGroup(names, nodes))
	leaves := schema.Columns() // the file's column order: cols
	var out bytes.Buffer
	w := parquet.NewWriter(&out, schema, parquet.Compression(zstdCodec), parquet.PageBufferSize(pageBytes),
		parquet.MaxRowsPerRowGroup(RowGroupRows))
	row := make(parquet.Row, len(leaves))
	for _, o := range order {
		g := parts[o.part]
		f, r := g.Frame, o.row
		for k, path := range leaves {
			src := srcs[path[len(path)-1]]
			i := src.at[o.part]
			if i < 0 {
				row[k] = parquet.NullValue().Level(0, 0, k)
				continue
			}
			var v parquet.Value
			switch f.Table.Columns[i].Name {
			case ColEntity:
				v = parquet.Int64Value(f.Entities[r])
			case ColTick:
				v = parquet.Int64Value(g.Stamps[r].Tick)
			case ColWriterEpoch:
				v = parquet.Int64Value(g.Stamps[r].WriterEpoch)
			case ColCommitToken:
				v = parquet.ByteArrayValue([]byte(g.Stamps[r].CommitToken))
			default:
				switch c := f.cols[i].(type) {
				case []float64:
					v = parquet.DoubleValue(c[r])
				case []float32:
					v = parquet.FloatValue(c[r])
				case []int64:
					v = parquet.Int64Value(c[r])
				case []int32:
					v = parquet.Int32Value(c[r])
				case []bool:
					v = parquet.BooleanValue(c[r])
				case []string:
					v = parquet.ByteArrayValue([]byte(c[r]))
				}
			}
			v = castValue(v, f.Table.Columns[i].Type, src.typ)
			def := 0
			if src.optional {
				def = 1
			}
			row[k] = v.Level(0, def, k)
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// EncodeGathered writes g's rows, in g's order, as one Parquet file of
// g's table, each row under its own stamp (see Encode), and returns it
// with the size of its CSV rendering (WriteCSV), which, with record and
// rows, its footer records as a tick fragment's does (CSVSizeKey).
func EncodeGathered(g Gathered, record bool) ([]byte, int64, error) {
	mode := CSVCount
	if record {
		mode = CSVRecord
	}
	return Encode(g.Frame, func(i int) Stamp { return g.Stamps[i] }, mode, 0)
}
