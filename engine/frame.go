package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Frame is one archetype's rows at one tick, by column: entity ids in
// ascending order and one slice per component column.
type Frame struct {
	Table    *Table
	Entities []int64
	// cols[i] holds column i's values ([]float64, []float32, []int64,
	// []int32, []bool or []string); nil for key and commit columns.
	cols []any
}

// NewFrame returns an empty frame of t.
func NewFrame(t *Table) *Frame {
	f := &Frame{Table: t, cols: make([]any, len(t.Columns))}
	for i, c := range t.Columns {
		if c.Component == "" {
			continue
		}
		switch c.Type {
		case Float64:
			f.cols[i] = []float64{}
		case Float32:
			f.cols[i] = []float32{}
		case Int64:
			f.cols[i] = []int64{}
		case Int32:
			f.cols[i] = []int32{}
		case Bool:
			f.cols[i] = []bool{}
		case String:
			f.cols[i] = []string{}
		}
	}
	return f
}

// Len is the number of rows.
func (f *Frame) Len() int { return len(f.Entities) }

// Clone returns a deep copy.
func (f *Frame) Clone() *Frame {
	c := &Frame{Table: f.Table, Entities: slices.Clone(f.Entities), cols: make([]any, len(f.cols))}
	for i, col := range f.cols {
		switch v := col.(type) {
		case []float64:
			c.cols[i] = slices.Clone(v)
		case []float32:
			c.cols[i] = slices.Clone(v)
		case []int64:
			c.cols[i] = slices.Clone(v)
		case []int32:
			c.cols[i] = slices.Clone(v)
		case []bool:
			c.cols[i] = slices.Clone(v)
		case []string:
			c.cols[i] = slices.Clone(v)
		}
	}
	return c
}

func column[T any](f *Frame, name string) []T {
	i := f.Table.Column(name)
	if i < 0 {
		panic(fmt.Sprintf("table %s has no column %s", f.Table.Name, name))
	}
	v, ok := f.cols[i].([]T)
	if !ok {
		panic(fmt.Sprintf("table %s column %s is %s, not %T", f.Table.Name, name, f.Table.Columns[i].Type, v))
	}
	return v
}

// Float64 returns the named column's values for in-place reads and
// updates; it panics on a wrong name or type (a programming error).
func (f *Frame) Float64(col string) []float64 { return column[float64](f, col) }
func (f *Frame) Float32(col string) []float32 { return column[float32](f, col) }
func (f *Frame) Int64(col string) []int64     { return column[int64](f, col) }
func (f *Frame) Int32(col string) []int32     { return column[int32](f, col) }
func (f *Frame) Bool(col string) []bool       { return column[bool](f, col) }
func (f *Frame) String(col string) []string   { return column[string](f, col) }

// Values are one row's component values by column name ("position_x").
// A missing column is its type's zero value.
type Values map[string]any

// Append adds entity with values. Entities must be appended in ascending
// id order (Insert keeps order for any id).
func (f *Frame) Append(entity int64, v Values) error {
	if n := len(f.Entities); n > 0 && f.Entities[n-1] >= entity {
		return f.Insert(entity, v)
	}
	return f.insertAt(len(f.Entities), entity, v)
}

// Insert adds entity with values at its place in id order.
func (f *Frame) Insert(entity int64, v Values) error {
	i, found := slices.BinarySearch(f.Entities, entity)
	if found {
		return fmt.Errorf("table %s: entity %d already present", f.Table.Name, entity)
	}
	return f.insertAt(i, entity, v)
}

func (f *Frame) insertAt(at int, entity int64, v Values) error {
	for name := range v {
		if i := f.Table.Column(name); i < 0 || f.Table.Columns[i].Component == "" {
			return fmt.Errorf("table %s has no component column %s", f.Table.Name, name)
		}
	}
	for i, c := range f.Table.Columns {
		if c.Component == "" {
			continue
		}
		val := v[c.Name]
		var ok bool
		switch col := f.cols[i].(type) {
		case []float64:
			var x float64
			x, ok = number[float64](val)
			f.cols[i] = slices.Insert(col, at, x)
		case []float32:
			var x float32
			x, ok = number[float32](val)
			f.cols[i] = slices.Insert(col, at, x)
		case []int64:
			var x int64
			x, ok = number[int64](val)
			f.cols[i] = slices.Insert(col, at, x)
		case []int32:
			var x int32
			x, ok = number[int32](val)
			f.cols[i] = slices.Insert(col, at, x)
		case []bool:
			var x bool
			x, ok = val.(bool)
			ok = ok || val == nil
			f.cols[i] = slices.Insert(col, at, x)
		case []string:
			var x string
			x, ok = val.(string)
			ok = ok || val == nil
			f.cols[i] = slices.Insert(col, at, x)
		}
		if !ok {
			f.removeAt(at, i+1) // undo the columns done so far, this one included
			return fmt.Errorf("table %s column %s: %v (%T) is not a %s", f.Table.Name, c.Name, val, val, c.Type)
		}
	}
	f.Entities = slices.Insert(f.Entities, at, entity)
	return nil
}

// number converts JSON-ish numbers (float64, int, …) to T; nil is zero.
func number[T float64 | float32 | int64 | int32](v any) (T, bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case float64: // JSON numbers; integer columns take only exact integers
		return T(x), isFloat[T]() || float64(T(x)) == x
	case float32:
		return T(x), isFloat[T]() || float32(T(x)) == x
	case int:
		return T(x), int(T(x)) == x
	case int64:
		return T(x), int64(T(x)) == x
	case int32:
		return T(x), true
	case json.Number: // decoded with UseNumber: integers keep every digit
		if !isFloat[T]() {
			n, err := strconv.ParseInt(string(x), 10, 64)
			return T(n), err == nil && int64(T(n)) == n
		}
		f, err := x.Float64()
		return T(f), err == nil
	}
	return 0, false
}

func isFloat[T float64 | float32 | int64 | int32]() bool {
	var z T
	switch any(z).(type) {
	case float64, float32:
		return true
	}
	return false
}

// Remove deletes entity's row; it reports whether the entity was there.
func (f *Frame) Remove(entity int64) bool {
	i, found := slices.BinarySearch(f.Entities, entity)
	if !found {
		return false
	}
	f.removeAt(i, len(f.cols))
	f.Entities = slices.Delete(f.Entities, i, i+1)
	return true
}

// removeAt deletes row i from the first n columns.
func (f *Frame) removeAt(i, n int) {
	for c := range n {
		switch col := f.cols[c].(type) {
		case []float64:
			f.cols[c] = slices.Delete(col, i, i+1)
		case []float32:
			f.cols[c] = slices.Delete(col, i, i+1)
		case []int64:
			f.cols[c] = slices.Delete(col, i, i+1)
		case []int32:
			f.cols[c] = slices.Delete(col, i, i+1)
		case []bool:
			f.cols[c] = slices.Delete(col, i, i+1)
		case []string:
			f.cols[c] = slices.Delete(col, i, i+1)
		}
	}
}

// Row returns entity's values (nil if absent).
func (f *Frame) Row(entity int64) Values {
	r, found := slices.BinarySearch(f.Entities, entity)
	if !found {
		return nil
	}
	v := Values{}
	for i, c := range f.Table.Columns {
		if c.Component == "" {
			continue
		}
		switch col := f.cols[i].(type) {
		case []float64:
			v[c.Name] = col[r]
		case []float32:
			v[c.Name] = col[r]
		case []int64:
			v[c.Name] = col[r]
		case []int32:
			v[c.Name] = col[r]
		case []bool:
			v[c.Name] = col[r]
		case []string:
			v[c.Name] = col[r]
		}
	}
	return v
}
