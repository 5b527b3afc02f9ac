// Package engine is the world runtime: components and archetypes whose
// tables are identified by their full schema, Parquet fragments in the
// bucket, and the tick commit protocol of seed 000 §3 on top of the control
// catalog (package index).
//
// A World holds its last visible state as columnar frames and commits one
// tick per Step, in the protocol's order, with a named failpoint after each
// step. CreateWorld, ForkWorld, ResumeWorld, Uncoordinated and
// ContinueLegacyWorld are the lifecycle; package particles is the reference
// simulation.
package engine
