package frame

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// Type is a column type.
type Type string

const (
	Float64 Type = "double"
	Float32 Type = "float"
	Int64   Type = "int64"
	Int32   Type = "int32"
	Bool    Type = "boolean"
	String  Type = "string"
)

func (t Type) node() (parquet.Node, error) {
	switch t {
	case Float64:
		return parquet.Leaf(parquet.DoubleType), nil
	case Float32:
		return parquet.Leaf(parquet.FloatType), nil
	case Int64:
		return parquet.Int(64), nil
	case Int32:
		return parquet.Int(32), nil
	case Bool:
		return parquet.Leaf(parquet.BooleanType), nil
	case String:
		return parquet.String(), nil
	}
	return nil, fmt.Errorf("unknown column type %q%s: a column is one of %s", string(t), t.hint(), typeList())
}

// Types are the column types, in the order messages list them.
var Types = []Type{Float64, Float32, Int64, Int32, Bool, String}

func typeList() string {
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// typeAliases are names other schemas give the column types.
var typeAliases = map[string]Type{
	"float64": Float64, "f64": Float64, "real": Float32, "float32": Float32, "f32": Float32,
	"int": Int64, "bigint": Int64, "long": Int64, "integer": Int32, "int4": Int32, "int8": Int64,
	"bool": Bool, "str": String, "text": String, "varchar": String, "utf8": String,
}

// hint names the column type an unknown type t may mean.
func (t Type) hint() string {
	if m, ok := typeAliases[strings.ToLower(string(t))]; ok {
		return fmt.Sprintf(" (did you mean %q?)", string(m))
	}
	for _, m := range Types {
		if strings.EqualFold(string(t), string(m)) {
			return fmt.Sprintf(" (did you mean %q?)", string(m))
		}
	}
	return ""
}

// Field is one typed field of a component.
type Field struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

// Component is a named set of typed fields.
type Component struct {
	Name   string  `json:"name"`
	Fields []Field `json:"fields"`
}

// validName: lower-case letters, digits and underscores, starting with a
// letter; names become Parquet and SQL column names.
func validName(what, s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%s name %q: 1 to 64 characters", what, s)
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("%s name %q: use a-z, 0-9 and _, starting with a letter", what, s)
		}
	}
	return nil
}

// NewComponent declares a component from fields given in any order (the
// dynamic form, for data that arrives as JSON).
func NewComponent(name string, fields ...Field) (Component, error) {
	c := Component{Name: name, Fields: slices.Clone(fields)}
	if err := validName("component", name); err != nil {
		return c, err
	}
	if len(fields) == 0 {
		return c, fmt.Errorf("component %s has no fields", name)
	}
	slices.SortFunc(c.Fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range c.Fields {
		if err := validName("field", f.Name); err != nil {
			return c, fmt.Errorf("component %s: %w", name, err)
		}
		if _, err := f.Type.node(); err != nil {
			return c, fmt.Errorf("component %s field %s: %w", name, f.Name, err)
		}
		if i > 0 && c.Fields[i-1].Name == f.Name {
			return c, fmt.Errorf("component %s: field %s twice", name, f.Name)
		}
	}
	return c, nil
}

// ComponentOf declares a component from a plain Go struct: each exported
// field of type float64, float32, int64, int32, int, bool or string is a
// field, named by its `worldfs:"name"` tag or its lower-cased Go name.
func ComponentOf[T any](name string) (Component, error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Struct {
		return Component{}, fmt.Errorf("component %s: %v is not a struct", name, rt)
	}
	var fields []Field
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if !sf.IsExported() {
			continue
		}
		fname := sf.Tag.Get("worldfs")
		if fname == "-" {
			continue
		}
		if fname == "" {
			fname = strings.ToLower(sf.Name)
		}
		var t Type
		switch sf.Type.Kind() {
		case reflect.Float64:
			t = Float64
		case reflect.Float32:
			t = Float32
		case reflect.Int64, reflect.Int:
			t = Int64
		case reflect.Int32:
			t = Int32
		case reflect.Bool:
			t = Bool
		case reflect.String:
			t = String
		default:
			return Component{}, fmt.Errorf("component %s field %s: unsupported type %v", name, sf.Name, sf.Type)
		}
		fields = append(fields, Field{Name: fname, Type: t})
	}
	return NewComponent(name, fields...)
}

// Commit-identity and key columns every new-generation table starts with.
const (
	ColEntity      = "entity_id"
	ColTick        = "tick"
	ColCommitToken = "commit_token"
	ColWriterEpoch = "writer_epoch"
)

// Column is one column of a table.
type Column struct {
	Name      string `json:"name"`
	Type      Type   `json:"type"`
	Component string `json:"component,omitempty"` // "" for key and commit columns
	Field     string `json:"field,omitempty"`
}

// Table is an archetype's table: its schema is its identity.
type Table struct {
	// ID is a hash of the full schema: a changed schema is a new table.
	ID string
	// Name is the readable name (the archetype's).
	Name       string
	Components []Component
	// Columns in Parquet order (by name), commit columns included.
	Columns  []Column
	schema   *parquet.Schema
	index    map[string]int // column name → position
	encoders sync.Pool      // of *encoder
}

// NewTable builds the table of an archetype: a name and its set of
// components.
func NewTable(name string, components ...Component) (*Table, error) {
	return newTable(name, true, components)
}

// NewLegacyTable builds a pre-commit-identity (v0.2) table: entity id,
// tick and component columns, no commit columns, and an id of the old
// format. Legacy tables are read as always-visible epoch-0 history and
// never written again.
func NewLegacyTable(name string, components ...Component) (*Table, error) {
	return newTable(name, false, components)
}

// Legacy reports whether t is a pre-commit-identity table.
func (t *Table) Legacy() bool { return t.Column(ColCommitToken) < 0 }

func newTable(name string, commitColumns bool, components []Component) (*Table, error) {
	if err := validName("archetype", name); err != nil {
		return nil, err
	}
	if len(components) == 0 {
		return nil, fmt.Errorf("archetype %s has no components", name)
	}
	comps := slices.Clone(components)
	slices.SortFunc(comps, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
	cols := []Column{{Name: ColEntity, Type: Int64}, {Name: ColTick, Type: Int64}}
	if commitColumns {
		cols = append(cols, Column{Name: ColCommitToken, Type: String}, Column{Name: ColWriterEpoch, Type: Int64})
	}
	for i, c := range comps {
		if i > 0 && comps[i-1].Name == c.Name {
			return nil, fmt.Errorf("archetype %s: component %s twice", name, c.Name)
		}
		for _, f := range c.Fields {
			cols = append(cols, Column{Name: c.Name + "_" + f.Name, Type: f.Type, Component: c.Name, Field: f.Name})
		}
	}
	slices.SortFunc(cols, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	group := parquet.Group{}
	index := map[string]int{}
	for i, c := range cols {
		if _, dup := index[c.Name]; dup {
			return nil, fmt.Errorf("archetype %s: two columns named %s", name, c.Name)
		}
		index[c.Name] = i
		n, err := c.Type.node()
		if err != nil {
			return nil, err
		}
		group[c.Name] = n
	}
	format, prefix := 1, "t"
	if !commitColumns {
		format, prefix = 0, "l" // the v0.2 id format
	}
	canonical, _ := json.Marshal(struct {
		Format  int      `json:"format"`
		Columns []Column `json:"columns"`
	}{format, cols})
	sum := sha256.Sum256(canonical)
	return &Table{
		ID: prefix + hex.EncodeToString(sum[:8]), Name: name, Components: comps, Columns: cols,
		schema: parquet.NewSchema(name, group), index: index,
	}, nil
}

// Schema is t's Parquet schema: its columns in order, of their types.
func (t *Table) Schema() *parquet.Schema { return t.schema }

// Column returns the position of the named column, or -1.
func (t *Table) Column(name string) int {
	if i, ok := t.index[name]; ok {
		return i
	}
	return -1
}

// TableInfo is a table's description as the bucket keeps it, so readers
// (SQL views, the mount) can name and type its columns without the Go
// declarations.
type TableInfo struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// Info describes t.
func (t *Table) Info() TableInfo { return TableInfo{ID: t.ID, Name: t.Name, Columns: t.Columns} }

// TableIDs returns the ids of the tables world describes, in the order of
// their descriptions' names.
func TableIDs(ctx context.Context, b bucket.Bucket, world string) ([]string, error) {
	var ids []string
	for a, err := range b.List(ctx, index.TableInfoPrefix(world), "") {
		if err != nil {
			return nil, err
		}
		id, _ := index.ParseTableInfoPath(world, a.Name) // a name without .json reads as itself, and fails to read
		ids = append(ids, id)
	}
	return ids, nil
}

// ReadTableInfo reads a world's description of table id.
func ReadTableInfo(ctx context.Context, b bucket.Bucket, world, id string) (TableInfo, error) {
	var ti TableInfo
	data, _, err := b.Get(ctx, index.TableInfoPath(world, id))
	if err != nil {
		return ti, err
	}
	if err := json.Unmarshal(data, &ti); err != nil || ti.ID != id {
		return ti, fmt.Errorf("world %s: table description %s is corrupt: %w", world, id, index.ErrCorrupt)
	}
	return ti, nil
}

// TableFromInfo rebuilds a table from its description, checking that it
// rebuilds to the same id (a description that does not is ErrCorrupt).
func TableFromInfo(info TableInfo) (*Table, error) {
	byComp := map[string][]Field{}
	var names []string
	commitColumns := false
	for _, c := range info.Columns {
		if c.Name == ColCommitToken {
			commitColumns = true
		}
		if c.Component == "" {
			continue
		}
		if _, ok := byComp[c.Component]; !ok {
			names = append(names, c.Component)
		}
		byComp[c.Component] = append(byComp[c.Component], Field{Name: c.Field, Type: c.Type})
	}
	var comps []Component
	for _, n := range names {
		c, err := NewComponent(n, byComp[n]...)
		if err != nil {
			return nil, err
		}
		comps = append(comps, c)
	}
	t, err := newTable(info.Name, commitColumns, comps)
	if err != nil {
		return nil, err
	}
	if t.ID != info.ID {
		return nil, fmt.Errorf("table %s: its description rebuilds as %s, not %s: %w", info.Name, t.ID, info.ID, index.ErrCorrupt)
	}
	return t, nil
}
