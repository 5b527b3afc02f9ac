package engine

import (
	"context"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
)

// The schema and format of a world's data live in package frame, below
// both the world runtime and its maintenance; these names are frame's,
// kept here so that a program of the runtime needs one import.

type (
	// Type is a column type (frame.Type).
	Type = frame.Type
	// Field is one typed field of a component (frame.Field).
	Field = frame.Field
	// Component is a named set of typed fields (frame.Component).
	Component = frame.Component
	// Column is one column of a table (frame.Column).
	Column = frame.Column
	// Table is an archetype's table: its schema is its identity
	// (frame.Table).
	Table = frame.Table
	// TableInfo is a table's description as the bucket keeps it
	// (frame.TableInfo).
	TableInfo = frame.TableInfo
	// Frame is one archetype's rows at one tick, by column (frame.Frame).
	Frame = frame.Frame
	// Values are one row's component values by column (frame.Values).
	Values = frame.Values
	// Stamp is the commit identity written on every row of a fragment
	// (frame.Stamp).
	Stamp = frame.Stamp
	// StampedRow is one decoded row's commit identity (frame.StampedRow).
	StampedRow = frame.StampedRow
)

// The column types (frame.Float64 ...).
const (
	Float64 = frame.Float64
	Float32 = frame.Float32
	Int64   = frame.Int64
	Int32   = frame.Int32
	Bool    = frame.Bool
	String  = frame.String
)

// Commit-identity and key columns every new-generation table starts with
// (frame.ColEntity ...).
const (
	ColEntity      = frame.ColEntity
	ColTick        = frame.ColTick
	ColCommitToken = frame.ColCommitToken
	ColWriterEpoch = frame.ColWriterEpoch
)

// RowGroupRows is the most rows per Parquet row group (frame.RowGroupRows).
const RowGroupRows = frame.RowGroupRows

// MaxInputDocument bounds one input document (frame.MaxInputDocument).
const MaxInputDocument = frame.MaxInputDocument

// Types are the column types, in the order messages list them.
var Types = frame.Types

// NewComponent declares a component from its fields, in the order of its
// columns (frame.NewComponent).
func NewComponent(name string, fields ...Field) (Component, error) {
	return frame.NewComponent(name, fields...)
}

// ComponentOf declares a component from a plain Go struct
// (frame.ComponentOf).
func ComponentOf[T any](name string) (Component, error) { return frame.ComponentOf[T](name) }

// NewTable builds the table of an archetype, its columns in the order
// declared: entity_id, tick, the components' fields in the order given,
// then the commit columns (frame.NewDeclaredTable). A world that already
// describes the archetype with the same columns in another order (a table
// of a worldfs before declared order) keeps that table: ResumeWorld and
// ForkWorld adopt it.
func NewTable(name string, components ...Component) (*Table, error) {
	return frame.NewDeclaredTable(name, components...)
}

// NewLegacyTable builds a pre-commit-identity (v0.2) table
// (frame.NewLegacyTable).
func NewLegacyTable(name string, components ...Component) (*Table, error) {
	return frame.NewLegacyTable(name, components...)
}

// NewFrame returns an empty frame of t (frame.NewFrame).
func NewFrame(t *Table) *Frame { return frame.NewFrame(t) }

// Convert returns v as the value a column of type t holds, exactly
// (frame.Convert).
func Convert(t Type, v any) (any, error) { return frame.Convert(t, v) }

// InputRow reads one input row of t (frame.InputRow).
func InputRow(t *Table, row map[string]any) (int64, Values, error) { return frame.InputRow(t, row) }

// EncodeFragment writes f's rows as one Parquet file, every row stamped
// with s (frame.EncodeFragment).
func EncodeFragment(f *Frame, s Stamp) ([]byte, error) { return frame.EncodeFragment(f, s) }

// EncodeStamped is EncodeFragment with a stamp per row
// (frame.EncodeStamped).
func EncodeStamped(f *Frame, stamp func(i int) Stamp) ([]byte, error) {
	return frame.EncodeStamped(f, stamp)
}

// DecodeFragment reads a fragment of table t (frame.DecodeFragment).
func DecodeFragment(t *Table, data []byte, keep func(StampedRow) bool) (*Frame, error) {
	return frame.DecodeFragment(t, data, keep)
}

// Digest is the fragment digest recorded in manifests (frame.Digest).
func Digest(data []byte) string { return frame.Digest(data) }

// TableIDs returns the ids of the tables world describes (frame.TableIDs).
func TableIDs(ctx context.Context, b bucket.Bucket, world string) ([]string, error) {
	return frame.TableIDs(ctx, b, world)
}

// ReadTableInfo reads a world's description of table id
// (frame.ReadTableInfo).
func ReadTableInfo(ctx context.Context, b bucket.Bucket, world, id string) (TableInfo, error) {
	return frame.ReadTableInfo(ctx, b, world, id)
}

// TableFromInfo rebuilds a table from its description (frame.TableFromInfo).
func TableFromInfo(info TableInfo) (*Table, error) { return frame.TableFromInfo(info) }

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
