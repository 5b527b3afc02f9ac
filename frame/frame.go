package frame

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
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

// Values are one row's component values by column name ("position_x"),
// converted by Convert. For Go callers a missing or nil column is its
// type's zero value; input from outside (InputRow) must give every column.
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
	// Convert every value before inserting any: a refusal leaves the frame
	// as it was.
	var buf [16]any
	vals, err := ConvertRow(f.Table, v, buf[:0])
	if err != nil {
		return err
	}
	for i, col := range f.cols {
		switch col := col.(type) {
		case []float64:
			x, _ := vals[i].(float64)
			f.cols[i] = slices.Insert(col, at, x)
		case []float32:
			x, _ := vals[i].(float32)
			f.cols[i] = slices.Insert(col, at, x)
		case []int64:
			x, _ := vals[i].(int64)
			f.cols[i] = slices.Insert(col, at, x)
		case []int32:
			x, _ := vals[i].(int32)
			f.cols[i] = slices.Insert(col, at, x)
		case []bool:
			x, _ := vals[i].(bool)
			f.cols[i] = slices.Insert(col, at, x)
		case []string:
			x, _ := vals[i].(string)
			f.cols[i] = slices.Insert(col, at, x)
		}
	}
	f.Entities = slices.Insert(f.Entities, at, entity)
	return nil
}

// ConvertRow checks that every name in v is a component column of t and
// returns, appended to vals[:0], each column's value converted to its type
// (Convert); nil where v has none or the column is no component.
func ConvertRow(t *Table, v Values, vals []any) ([]any, error) {
	for name := range v {
		if i := t.Column(name); i < 0 || t.Columns[i].Component == "" {
			return nil, fmt.Errorf("table %s has no component column %s", t.Name, name)
		}
	}
	vals = append(vals[:0], make([]any, len(t.Columns))...)
	for i, c := range t.Columns {
		if c.Component == "" {
			continue
		}
		if val, ok := v[c.Name]; ok && val != nil {
			x, err := Convert(c.Type, val)
			if err != nil {
				return nil, fmt.Errorf("table %s column %s: %w", t.Name, c.Name, err)
			}
			vals[i] = x
		}
	}
	return vals, nil
}

// Convert returns v as the value a column of type t holds (float64,
// float32, int64, int32, bool or string), exactly, or an error saying why
// it cannot be one. It is the one conversion every input path uses: ctl
// rows and JSONL files (JSON numbers decoded as json.Number, never
// float64), rows read from Parquet (any Go integer width and sign,
// *big.Int for DuckDB's HUGEINT), fact documents and Go callers.
//
//   - An integer column takes integers only (2, 2.0 and 2e0 alike), within
//     its type's range, with every digit kept: 9007199254740993 stays
//     9007199254740993, and 9223372036854775808 is out of the int64 range.
//   - A float column takes any number within its range; a JSON literal is
//     parsed as written, at the column's precision.
//   - Booleans and strings take only booleans and strings.
//
// nil is refused: whether an absent value means zero is the caller's
// decision.
func Convert(t Type, v any) (any, error) {
	// The Go value a column holds passes as is (the common case: rows
	// read back from fragments, Go callers).
	switch v.(type) {
	case float64:
		if t == Float64 {
			return v, nil
		}
	case float32:
		if t == Float32 {
			return v, nil
		}
	case int64:
		if t == Int64 {
			return v, nil
		}
	case int32:
		if t == Int32 {
			return v, nil
		}
	case bool:
		if t == Bool {
			return v, nil
		}
	case string:
		if t == String {
			return v, nil
		}
	}
	switch t {
	case Int64, Int32:
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if t == Int32 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		x, fits := int64Of(v)
		if !fits {
			n, err := integer(v)
			if err != nil {
				return nil, err
			}
			if !n.IsInt64() {
				return nil, fmt.Errorf("%s is out of the %s range [%d, %d]", n, t, lo, hi)
			}
			x = n.Int64()
		}
		if x < lo || x > hi {
			return nil, fmt.Errorf("%d is out of the %s range [%d, %d]", x, t, lo, hi)
		}
		if t == Int32 {
			return int32(x), nil
		}
		return x, nil
	case Float64, Float32:
		return floating(t, v)
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s is not a %s", describe(v), t)
}

// int64Of returns v as an int64 when v is an integer that plainly is one
// (no big arithmetic needed).
func int64Of(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}

// maxIntLiteral bounds the length of a non-plain integer literal ("1.0",
// "2e3") Convert evaluates exactly; no int64 needs more.
const maxIntLiteral = 64

// integer returns v's exact integer value.
func integer(v any) (*big.Int, error) {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return big.NewInt(n), nil
		}
		if n, ok := new(big.Int).SetString(s, 10); ok {
			return n, nil // a plain integer beyond int64: the range check names it
		}
		// A decimal or exponent literal: evaluated exactly when it is short
		// and its exponent small (big.Rat would expand 1e999999999).
		if len(s) > maxIntLiteral {
			return nil, fmt.Errorf("%.24s… (%d characters) is not an integer literal worldfs evaluates", s, len(s))
		}
		if _, exp, ok := strings.Cut(strings.ToLower(s), "e"); ok {
			if e, err := strconv.Atoi(exp); err != nil || e > 100 || e < -100 {
				if _, err := strconv.ParseFloat(s, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
					return nil, fmt.Errorf("%s is not a number", s)
				}
				return nil, fmt.Errorf("%s is not an integer within the range of any integer column", s)
			}
		}
		r, ok := new(big.Rat).SetString(s)
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is not a number", s)
		case !r.IsInt():
			return nil, fmt.Errorf("%s is not an integer", s)
		}
		return new(big.Int).Set(r.Num()), nil
	case float64:
		return floatInteger(x)
	case float32:
		return floatInteger(float64(x))
	case *big.Int:
		return x, nil
	case int:
		return big.NewInt(int64(x)), nil
	case int8:
		return big.NewInt(int64(x)), nil
	case int16:
		return big.NewInt(int64(x)), nil
	case int32:
		return big.NewInt(int64(x)), nil
	case int64:
		return big.NewInt(x), nil
	case uint:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint8:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint16:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint32:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint64:
		return new(big.Int).SetUint64(x), nil
	}
	return nil, fmt.Errorf("%s is not an integer", describe(v))
}

func floatInteger(f float64) (*big.Int, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return nil, fmt.Errorf("%v is not an integer", f)
	}
	n, _ := big.NewFloat(f).Int(nil)
	return n, nil
}

// floating returns v as a float of column type t (Float64 or Float32).
func floating(t Type, v any) (any, error) {
	bits := 64
	if t == Float32 {
		bits = 32
	}
	var f float64
	switch x := v.(type) {
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(x), bits); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Errorf("%s is out of the %s range", x, t)
			}
			return nil, fmt.Errorf("%s is not a number", x)
		}
	case float64:
		f = x
	case float32:
		f = float64(x)
	case *big.Int:
		f, _ = new(big.Float).SetInt(x).Float64()
	default:
		n, err := integer(v)
		if err != nil {
			return nil, fmt.Errorf("%s is not a %s", describe(v), t)
		}
		f, _ = new(big.Float).SetInt(n).Float64()
	}
	if t == Float64 {
		return f, nil
	}
	if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
		return nil, fmt.Errorf("%v is out of the %s range", f, t)
	}
	return float32(f), nil
}

// describe renders an input value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return string(x)
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// MaxInputDocument bounds one JSON document of input: a ctl command with
// its inline frames, a line of a JSONL rows file, a line of facts given to
// the CLI. Larger inputs go in a file (Parquet, or JSONL a row a line).
const MaxInputDocument = 64 << 20

// InputRow checks and converts one row given as input (a ctl command's
// inline row, a line of a JSONL file, a row read from a Parquet file) for
// a frame of t: entity_id, a non-negative integer, and every component
// column are required, non-null and exactly of their column's type
// (Convert); the commit columns (tick, commit_token, writer_epoch) are
// ignored, as the tick being committed stamps its own; any other column is
// refused. Errors name the column.
func InputRow(t *Table, row map[string]any) (int64, Values, error) {
	ev, ok := row[ColEntity]
	if !ok || ev == nil {
		return 0, nil, fmt.Errorf("column %s is required", ColEntity)
	}
	e, err := Convert(Int64, ev)
	if err != nil {
		return 0, nil, fmt.Errorf("column %s: %w", ColEntity, err)
	}
	entity := e.(int64)
	if entity < 0 {
		return 0, nil, fmt.Errorf("column %s: %d is negative (entities have ids ≥ 0)", ColEntity, entity)
	}
	for name := range row {
		switch name {
		case ColEntity, ColTick, ColCommitToken, ColWriterEpoch:
			continue
		}
		if i := t.Column(name); i < 0 || t.Columns[i].Component == "" {
			return 0, nil, fmt.Errorf("table %s has no component column %s", t.Name, name)
		}
	}
	v := make(Values, len(t.Columns))
	for _, c := range t.Columns {
		if c.Component == "" {
			continue
		}
		val, ok := row[c.Name]
		switch {
		case !ok:
			return 0, nil, fmt.Errorf("column %s (%s) is missing; every column needs a value", c.Name, c.Type)
		case val == nil:
			return 0, nil, fmt.Errorf("column %s (%s) is null; worldfs columns are not nullable", c.Name, c.Type)
		}
		x, err := Convert(c.Type, val)
		if err != nil {
			return 0, nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		v[c.Name] = x
	}
	return entity, v, nil
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

// AppendFrame appends the rows of g (a frame of the same table) to f.
func (f *Frame) AppendFrame(g *Frame) {
	f.Entities = append(f.Entities, g.Entities...)
	for i, col := range g.cols {
		switch v := col.(type) {
		case []float64:
			f.cols[i] = append(f.cols[i].([]float64), v...)
		case []float32:
			f.cols[i] = append(f.cols[i].([]float32), v...)
		case []int64:
			f.cols[i] = append(f.cols[i].([]int64), v...)
		case []int32:
			f.cols[i] = append(f.cols[i].([]int32), v...)
		case []bool:
			f.cols[i] = append(f.cols[i].([]bool), v...)
		case []string:
			f.cols[i] = append(f.cols[i].([]string), v...)
		}
	}
}

// Slice returns a frame of f's rows [i, j), sharing f's storage: only to
// read.
func (f *Frame) Slice(i, j int) *Frame {
	g := &Frame{Table: f.Table, Entities: f.Entities[i:j:j], cols: make([]any, len(f.cols))}
	for k, col := range f.cols {
		switch v := col.(type) {
		case []float64:
			g.cols[k] = v[i:j:j]
		case []float32:
			g.cols[k] = v[i:j:j]
		case []int64:
			g.cols[k] = v[i:j:j]
		case []int32:
			g.cols[k] = v[i:j:j]
		case []bool:
			g.cols[k] = v[i:j:j]
		case []string:
			g.cols[k] = v[i:j:j]
		}
	}
	return g
}
