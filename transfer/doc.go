// Package transfer copies worlds between buckets of any kind (local, GCS,
// memory): a world's catalog (worlds/<w>/…), its directory entry, its
// table data (data/<w>/…: fragments, table descriptions, lineage) and the
// assets its receipts reference, and for a fork the worlds whose history
// it reads.
//
// A copy reads as the original (README "Copying a world"): every fragment
// the catalog records is checked against the catalog's size and sha256 as
// it is read from the source (cache.Record, the readers' one rule), so a
// copy never carries damage across, and the destination's new
// generations are decided by those bytes when the copy is read.
//
// A copy is resumable. Bucket Create is create-if-absent and atomic, so no
// object is ever half written; a copy run again skips every object the
// destination already holds with the same bytes (checked, not assumed)
// and refuses one that holds other bytes. A world's data is copied before
// its catalog, and its marker and directory entry last, so that a copy
// cut short never shows the destination a world whose catalog names
// fragments it lacks. The source is only read.
package transfer
