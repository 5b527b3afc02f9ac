// Package sql builds DuckDB views over a world that show only visible rows
// (docs/ARCHITECTURE.md, "Visibility"): for a pinned catalog snapshot, one view per table
// with the component projection, a raw view with the commit columns, views
// of manifests and lineage, and table macros for time travel: <table>_at(t),
// <table>_diff(a, b) and <table>_changes(from, to) (changes in DuckLake's
// change_type vocabulary, read through the same file lists as _at), and
// <table>_as_of(instant) over worldfs_ticks (each visible tick with its
// publish time, listed from the catalog only when a query reads it:
// ticks.go). The file list
// comes from the catalog, never from listing the bucket (except for
// uncoordinated and legacy history, which no manifest names).
//
// The file list and the published (tick, token) of each file go to a
// content-addressed Parquet file (Options.Dir) that the script reads, so
// the script stays small at any catalog size. Local buckets are read in
// place; any other bucket through the disk cache (package cache). Facts
// and evaluation receipts have views too (worldfs_facts, worldfs_receipts
// and one view per fact table): the facts a run's lineage makes visible,
// each at the tick it landed on.
//
// The DuckDB that runs user SQL is confined to reading the files the
// views read, with its configuration locked (readonly.go), and runs only
// statements that read (gate.go); results go to files only through
// Export, which worldfs writes.
package sql
