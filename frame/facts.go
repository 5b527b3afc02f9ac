package frame

import "fmt"

// FactMeta columns ride on every fact row, so that recovery can identify an
// appended orphan by its embedded key.
const (
	FactComponent     = "fact" // the FactMeta component's name, reserved
	ColFactProducer   = "fact_producer"
	ColFactExternalID = "fact_external_id"
	ColFactDigest     = "fact_digest"
	ColFactCommit     = "fact_commit_id"
)

var factMeta = Component{Name: FactComponent, Fields: []Field{
	{Name: "producer", Type: String}, {Name: "external_id", Type: String}, {Name: "digest", Type: String}, {Name: "commit_id", Type: String}}}

// NewFactTable builds the table a kind of fact is stored in: commit
// columns, the FactMeta columns (fact_producer, fact_external_id,
// fact_digest, fact_commit_id) and the components, in name order
// (FormatByName: the evaluation receipts' table). A fact table is never an
// archetype of the simulation.
func NewFactTable(name string, components ...Component) (*Table, error) {
	return newFactTable(name, FormatByName, components)
}

// NewDeclaredFactTable is NewFactTable with its columns in the order
// declared (FormatDeclared): entity_id (the fact id), tick, the
// components' fields, the FactMeta columns, then the commit columns.
func NewDeclaredFactTable(name string, components ...Component) (*Table, error) {
	return newFactTable(name, FormatDeclared, components)
}

func newFactTable(name string, format int, components []Component) (*Table, error) {
	for _, c := range components {
		if c.Name == FactComponent {
			return nil, fmt.Errorf("fact table %s: the component name %q is reserved for FactMeta", name, FactComponent)
		}
	}
	return newTable(name, format, append(components[:len(components):len(components)], factMeta))
}

// IsFactTable reports whether t stores facts (it has the FactMeta columns).
func IsFactTable(t *Table) bool { return IsFactColumns(t.Columns) }

// IsFactColumns reports whether a table's columns include FactMeta, for
// readers that know a table only by its description.
func IsFactColumns(cols []Column) bool {
	for _, c := range cols {
		if c.Name == ColFactDigest && c.Component == FactComponent {
			return true
		}
	}
	return false
}

// ReceiptTableName is the name of the fact table evaluation receipts are
// stored in (SQL shows them curated as ReceiptsView).
const ReceiptTableName = "evaluation_receipt"

// ReceiptsView names the curated view of evaluation receipts (the SQL
// view, and the mount's file of them).
const ReceiptsView = "worldfs_receipts"

// ReceiptColumns are the columns of ReceiptsView, in its order: each a
// column of the receipts' table (ReceiptTableName) under the view's name,
// typed JSON where the view types it so. The SQL view and the mount's
// facts/receipts files are both made from this list.
var ReceiptColumns = []ViewColumn{
	{Name: "receipt_id", From: ColEntity},
	{Name: "tick", From: ColTick},
	{Name: "evaluation_id", From: "receipt_evaluation_id"},
	{Name: "grader_id", From: "receipt_grader_id"},
	{Name: "contract", From: "receipt_contract", JSON: true},
	{Name: "contract_digest", From: "receipt_contract_digest"},
	{Name: "subject", From: "receipt_subject", JSON: true},
	{Name: "subject_digest", From: "receipt_subject_digest"},
	{Name: "outcomes", From: "receipt_outcomes", JSON: true},
	{Name: "commit_token", From: ColCommitToken},
}

// The formats of a table's rows as a file: its Parquet file, and that
// file rendered as CSV (WriteCSV). They are the extensions of the mount's
// files and the formats of sql's copies.
const (
	FormatParquet = "parquet"
	FormatCSV     = "csv"
)
