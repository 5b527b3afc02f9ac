// Package schema is what a table is, as the catalog keeps it: the column
// types (and each one's Parquet leaf), the commit and key columns every
// table starts with, and a table's description (TableInfo), written once
// per table at index.TableInfoPath and read back by id. The writer
// (engine) builds its tables from these types; the readers (sql, fs,
// export) read a world's tables through this package without the world
// runtime (docs/ARCHITECTURE.md, "The layers").
package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

// ParquetNode is the Parquet leaf of a column of type t.
func (t Type) ParquetNode() (parquet.Node, error) {
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

// TableInfo is a table's description as the bucket keeps it, so readers
// (SQL views, the mount) can name and type its columns without the Go
// declarations.
type TableInfo struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// WriteTableInfo records a world's description of a table, once: one
// already there (perhaps under another readable name, which is not
// identity) is left as it is.
func WriteTableInfo(ctx context.Context, b bucket.Bucket, world string, info TableInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := bucket.CreateOnce(ctx, b, index.TableInfoPath(world, info.ID), data); err != nil && !errors.Is(err, bucket.ErrExist) {
		return fmt.Errorf("world %s: describing table %s: %w", world, info.Name, err)
	}
	return nil
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
