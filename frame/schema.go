package frame

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
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

// NewComponent declares a component from its fields, in the order given:
// the order of its columns in a table of declared order (NewDeclaredTable).
func NewComponent(name string, fields ...Field) (Component, error) {
	c := Component{Name: name, Fields: slices.Clone(fields)}
	if err := validName("component", name); err != nil {
		return c, err
	}
	if len(fields) == 0 {
		return c, fmt.Errorf("component %s has no fields", name)
	}
	seen := map[string]bool{}
	for _, f := range c.Fields {
		if err := validName("field", f.Name); err != nil {
			return c, fmt.Errorf("component %s: %w", name, err)
		}
		if _, err := f.Type.node(); err != nil {
			return c, fmt.Errorf("component %s field %s: %w", name, f.Name, err)
		}
		if seen[f.Name] {
			return c, fmt.Errorf("component %s: field %s twice", name, f.Name)
		}
		seen[f.Name] = true
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
	// Columns in Parquet order, commit columns included: by name in the
	// formats before declared order (FormatByName, FormatLegacy); in
	// FormatDeclared, entity_id and tick, then each component's fields in
	// the order declared, then commit_token and writer_epoch.
	Columns []Column
	// Format is the column order's format, which the ID hashes.
	Format int
	schema *parquet.Schema
	// compacted is schema with each integer column delta-encoded: what
	// compaction writes (CompactedSchema).
	compacted *parquet.Schema
	index     map[string]int // column name → position
	encoders  sync.Pool      // of *encoder
}

// The formats of a table's schema: what orders its columns and how its ID
// is made. A table keeps the format it was described with for as long as
// it exists (its ID hashes it), so a world's tables read and are written
// as they always were; a table declared anew takes FormatDeclared.
const (
	// FormatLegacy: worldfs 0.2's tables, without commit columns; columns
	// by name. Never written again.
	FormatLegacy = 0
	// FormatByName: columns by name (parquet-go's Group orders them so),
	// commit columns among them: every table before declared order, and
	// worldfs's own tables (evaluation receipts, fork lineage), whose
	// files must stay the bytes they were.
	FormatByName = 1
	// FormatDeclared: entity_id and tick, then each component's fields in
	// the order declared, components in the order declared, then
	// commit_token and writer_epoch: the order a reader of a file (pandas,
	// polars, a spreadsheet) shows.
	FormatDeclared = 2
)

// NewTable builds the table of an archetype whose columns are in name
// order (FormatByName): the tables worldfs keeps for itself. An archetype a
// program or a user declares is NewDeclaredTable's.
func NewTable(name string, components ...Component) (*Table, error) {
	return newTable(name, FormatByName, components)
}

// NewDeclaredTable builds the table of an archetype with its columns in
// the order declared (FormatDeclared): entity_id, tick, each component's
// fields in the order given, then the commit columns commit_token and
// writer_epoch.
func NewDeclaredTable(name string, components ...Component) (*Table, error) {
	return newTable(name, FormatDeclared, components)
}

// NewLegacyTable builds a pre-commit-identity (v0.2) table: entity id,
// tick and component columns, no commit columns, and an id of the old
// format. Legacy tables are read as always-visible epoch-0 history and
// never written again.
func NewLegacyTable(name string, components ...Component) (*Table, error) {
	return newTable(name, FormatLegacy, components)
}

// Legacy reports whether t is a pre-commit-identity table.
func (t *Table) Legacy() bool { return t.Column(ColCommitToken) < 0 }

func newTable(name string, format int, components []Component) (*Table, error) {
	if err := validName("archetype", name); err != nil {
		return nil, err
	}
	if len(components) == 0 {
		return nil, fmt.Errorf("archetype %s has no components", name)
	}
	comps := slices.Clone(components)
	if format != FormatDeclared {
		slices.SortFunc(comps, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
	}
	cols := []Column{{Name: ColEntity, Type: Int64}, {Name: ColTick, Type: Int64}}
	if format == FormatByName {
		cols = append(cols, Column{Name: ColCommitToken, Type: String}, Column{Name: ColWriterEpoch, Type: Int64})
	}
	seen := map[string]bool{}
	for _, c := range comps {
		if seen[c.Name] {
			return nil, fmt.Errorf("archetype %s: component %s twice", name, c.Name)
		}
		seen[c.Name] = true
		for _, f := range c.Fields {
			cols = append(cols, Column{Name: c.Name + "_" + f.Name, Type: f.Type, Component: c.Name, Field: f.Name})
		}
	}
	if format == FormatDeclared {
		cols = append(cols, Column{Name: ColCommitToken, Type: String}, Column{Name: ColWriterEpoch, Type: Int64})
	} else {
		slices.SortFunc(cols, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	}
	index := map[string]int{}
	nodes := make([]parquet.Node, len(cols))
	for i, c := range cols {
		if _, dup := index[c.Name]; dup {
			return nil, fmt.Errorf("archetype %s: two columns named %s", name, c.Name)
		}
		index[c.Name] = i
		n, err := c.Type.node()
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	prefix := "t"
	if format == FormatLegacy {
		prefix = "l" // the v0.2 id format
	}
	canonical, _ := json.Marshal(struct {
		Format  int      `json:"format"`
		Columns []Column `json:"columns"`
	}{format, cols})
	sum := sha256.Sum256(canonical)
	return &Table{
		ID: prefix + hex.EncodeToString(sum[:8]), Name: name, Components: comps, Columns: cols, Format: format,
		schema:    parquet.NewSchema(name, groupOf(format, cols, nodes)),
		compacted: parquet.NewSchema(name, groupOf(format, cols, compactedNodes(cols, nodes))), index: index,
	}, nil
}

// groupOf is the Parquet group of a table's columns: before declared
// order parquet-go's Group (which orders fields by name, as the columns
// are), so that those tables' files stay the bytes they always were; in
// FormatDeclared a group of the columns in their order.
func groupOf(format int, cols []Column, nodes []parquet.Node) parquet.Node {
	if format != FormatDeclared {
		g := parquet.Group{}
		for i, c := range cols {
			g[c.Name] = nodes[i]
		}
		return g
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return newOrderedGroup(names, nodes)
}

// orderedGroup is a Parquet group whose fields are in the order given
// (parquet-go's Group orders its fields by name, and a file's columns
// follow its schema's fields). Each field is the one a Group of that field
// alone gives, so it behaves as a Group's field does.
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

var _ parquet.Node = orderedGroup{}

func newOrderedGroup(names []string, nodes []parquet.Node) orderedGroup {
	g := orderedGroup{Group: parquet.Group{}, fields: make([]parquet.Field, len(names))}
	for i, n := range names {
		g.Group[n] = nodes[i]
		g.fields[i] = parquet.Group{n: nodes[i]}.Fields()[0]
	}
	return g
}

// Fields are the group's fields in their order.
func (g orderedGroup) Fields() []parquet.Field { return g.fields }

func (g orderedGroup) String() string {
	var sb strings.Builder
	_ = parquet.PrintSchema(&sb, "", g)
	return sb.String()
}

// GoType is a struct of the fields in their order (parquet-go asks it of
// a schema, though frame writes and reads by column).
func (g orderedGroup) GoType() reflect.Type {
	fs := make([]reflect.StructField, len(g.fields))
	for i, f := range g.fields {
		fs[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: f.GoType(), Tag: reflect.StructTag(`parquet:` + strconv.Quote(f.Name()))}
	}
	return reflect.StructOf(fs)
}

// Schema is t's Parquet schema: its columns in order, of their types.
func (t *Table) Schema() *parquet.Schema { return t.schema }

// CompactedSchema is Schema with every integer column DELTA_BINARY_PACKED:
// the schema of compacted files (NewWriter). Their rows are in (tick,
// entity) order, so tick and entity_id are runs of small deltas, and
// those columns (and integer components that change little from row to
// row) shrink about tenfold before zstd: a reader scanning them
// decompresses a tenth of the bytes: DuckDB reads one entity's 100,000
// ticks of bench history's world in about 200 ms, not 260, and the files
// are 40% smaller. (Random integers stay about their PLAIN size, 1-2%
// more after zstd; a column of a few values in no order up to 15% more.)
// Tick fragments keep Schema (PLAIN): the bytes a tick's file is rebuilt
// to from a compacted file are those it was written with. Floats stay
// PLAIN: DuckDB reads BYTE_STREAM_SPLIT more slowly, and floats rarely
// repeat enough for a dictionary.
func (t *Table) CompactedSchema() *parquet.Schema { return t.compacted }

// compactedNodes returns nodes, each integer leaf of cols delta-encoded.
func compactedNodes(cols []Column, nodes []parquet.Node) []parquet.Node {
	out := slices.Clone(nodes)
	for i, c := range cols {
		if c.Type == Int64 || c.Type == Int32 {
			out[i] = parquet.Encoded(nodes[i], &parquet.DeltaBinaryPacked)
		}
	}
	return out
}

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
	// Format is the table's (FormatDeclared); absent in descriptions of
	// the formats before it, which their columns tell apart.
	Format int `json:"format,omitempty"`
}

// Info describes t.
func (t *Table) Info() TableInfo {
	ti := TableInfo{ID: t.ID, Name: t.Name, Columns: t.Columns}
	if t.Format == FormatDeclared {
		ti.Format = t.Format
	}
	return ti
}

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
// The components and their fields are in the order the description's
// columns give them.
func TableFromInfo(info TableInfo) (*Table, error) {
	byComp := map[string][]Field{}
	var names []string
	format := FormatLegacy
	for _, c := range info.Columns {
		if c.Name == ColCommitToken {
			format = FormatByName
		}
		if c.Component == "" {
			continue
		}
		if _, ok := byComp[c.Component]; !ok {
			names = append(names, c.Component)
		}
		byComp[c.Component] = append(byComp[c.Component], Field{Name: c.Field, Type: c.Type})
	}
	switch info.Format {
	case 0:
	case FormatDeclared:
		if format != FormatByName {
			return nil, fmt.Errorf("table %s: its description has format %d and no commit columns: %w", info.Name, info.Format, index.ErrCorrupt)
		}
		format = FormatDeclared
	default:
		return nil, fmt.Errorf("table %s: its description's format %d is not one this worldfs reads (a newer worldfs wrote it?): %w", info.Name, info.Format, index.ErrCorrupt)
	}
	var comps []Component
	for _, n := range names {
		c, err := NewComponent(n, byComp[n]...)
		if err != nil {
			return nil, err
		}
		comps = append(comps, c)
	}
	t, err := newTable(info.Name, format, comps)
	if err != nil {
		return nil, err
	}
	if t.ID != info.ID {
		return nil, fmt.Errorf("table %s: its description rebuilds as %s, not %s: %w", info.Name, t.ID, info.ID, index.ErrCorrupt)
	}
	return t, nil
}

// SameColumnSet reports whether a and b have the same columns (names, types,
// components and fields), in whatever order: one archetype in two formats.
func SameColumnSet(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(c Column) string {
		return c.Name + "\x00" + string(c.Type) + "\x00" + c.Component + "\x00" + c.Field
	}
	as := make([]string, len(a))
	bs := make([]string, len(b))
	for i := range a {
		as[i], bs[i] = key(a[i]), key(b[i])
	}
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}
