// Package engine is the world runtime: components and archetypes whose
// tables are identified by their full schema, Parquet fragments in the
// bucket, and the tick commit protocol of seed 000 §3 on top of the control
// catalog (package index).
//
// Status: schemas, tables and the fragment writer and reader are here. The
// world runtime, the commit protocol, fork, resume and the reference
// simulation are still to be built (issue 4).
package engine
