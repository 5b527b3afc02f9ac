// Package frame is the schema and format of a world's data, below both
// the world runtime (package engine) and its maintenance (package
// maintenance), which both read and write it:
//
//   - Schema (schema.go): components and archetypes whose tables are
//     identified by their full schema (a changed schema is a new table),
//     and the tables' descriptions in the bucket (TableInfo).
//   - Frames (frame.go): one table's rows at one tick, by column; input
//     rows converted exactly to their column types (Convert, InputRow).
//   - Fragments (fragment.go, scan.go): the Parquet encoding of a frame
//     with its commit columns (EncodeFragment, EncodeStamped), its
//     decoding (DecodeFragment), and the reading of a file ordered by
//     (tick, entity) one tick at a time (ScanTicks).
//   - Derived files (derive.go): a table's rows gathered from several
//     files by a Selection (a tick, a row rule, an order: Gather, which
//     reads of a file only the pages that may hold the tick), encoded as a
//     fragment (EncodeGathered) or as a view's columns, several schemas
//     merged by column name (EncodeView; union.go: a column of several
//     types widened and cast as the SQL views' union does, UnionType):
//     what the mount derives for a split tick or a facts/ file.
//   - CSV (csv.go): a Parquet file's rows as CSV (WriteCSV), the size of
//     that rendering a tick fragment's writer records in its footer
//     (CSVSizeKey, measured by Encode) and its ranged read (ReadCSVSize).
//
// It knows the catalog (package index) only for the paths and errors it
// names; it knows no worlds, ticks in flight, DuckDB or FUSE.
package frame
