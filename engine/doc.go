// Package engine is the world runtime, on top of the control catalog
// (package index). It holds six jobs, each in its own files:
//
//   - Schema and format (tables.go, documents.go): the tables, frames and
//     Parquet fragments of package frame under their engine names, so that
//     a program of the runtime needs one import; JSON documents of facts
//     and evaluations checked exactly.
//   - Ticks (world.go, pipeline.go, lifecycle.go, legacy.go): a World
//     holds its state as frames and commits one tick per Step by the
//     protocol of docs/ARCHITECTURE.md ("A tick write"), with a named
//     failpoint after each step;
//     Submit keeps up to Options.Depth ticks in flight, published in tick
//     order (pipeline.go says what may overlap).
//     CreateWorld, ForkWorld, ResumeWorld, Uncoordinated and
//     ContinueLegacyWorld are the lifecycle; Options are checked at each
//     (EnsureDefaults, then Validate).
//   - Facts (facts.go): the IngestionService claims, appends and completes
//     each fact exactly once (invariant 4).
//   - Receipts (evaluate.go): evaluations graded once, their receipts kept
//     in the reserved run _evaluations.
//   - Assets (assets.go): immutable content-addressed blobs that facts
//     and receipts refer to.
//   - The gate (gate.go): who may write facts and receipts (roles).
//
// Maintenance lives in package maintenance (Compact rewrites a run's small
// fragments, Collect removes what no catalog names any more), which engine
// imports and which never imports engine: an open world runs both by
// itself (maintain.go), so a program that forgets to wire them loses
// nothing. Package particles is the reference simulation, and package
// enginetest the test kit of worlds.
package engine
