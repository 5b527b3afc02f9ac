// Package frame is the schema and format of a world's data: every byte
// layout worldfs writes and reads, with its encoder and decoder. It sits
// below the world runtime (package engine) and its maintenance (package
// maintenance), which write it, and below every reader (sql, fs, ui,
// export), which read it through here, never through a job:
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
//   - Compacted files (compacted.go, tickindex.go): a file of many ticks'
//     rows ordered by (tick, entity) as compaction writes it, and beside
//     it its tick index (TickIndex: per tick its rows and the size and
//     sha256 of its canonical file; BuildTickIndex, WriteTickIndex,
//     ReadTickIndex), from which a reader rebuilds a tick's canonical
//     file, the fragment its writer published (TickFile; CompactedFile
//     for many ticks of one file, decoding neighbouring ticks together;
//     a Prefetcher source told the byte ranges first).
//   - CSV (csv.go): a Parquet file's rows as CSV (WriteCSV), the size of
//     that rendering a tick fragment's writer records in its footer
//     (CSVSizeKey, measured by Encode) and its ranged read (ReadCSVSize).
//   - What exports reference (exportrefs.go): the export registry's
//     records (ExportRegistration) and each exported table version's
//     reference list (ExportRefs), which an export writes and collection
//     reads, so that every collector keeps what an export names.
//
// It knows the catalog (package index) only for the paths and errors it
// names; it knows no worlds, ticks in flight, DuckDB or FUSE.
package frame
