// Package engine is the world runtime, on top of the control catalog
// (package index). It holds six jobs, each in its own files:
//
//   - Schema and format (schema.go, frame.go, fragment.go, documents.go):
//     components and archetypes whose tables are identified by their full
//     schema, columnar frames, and the Parquet fragments written to the
//     bucket; input rows and JSON documents checked exactly.
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
// Maintenance sits beside them: Compact rewrites a run's small fragments
// and Collect removes what no catalog names any more (compact.go,
// collect.go); an open world runs both by itself. Package particles is the
// reference simulation, and package enginetest the test kit of worlds.
package engine
