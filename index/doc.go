// Package index is a world's control catalog: a create-only log of slots in
// the bucket, and the pure, deterministic fold of that log into catalog
// state.
//
// A slot is one batch of entries (world creation, fence acquisition, tick
// publication, …) created with create-if-absent under
// worlds/<world>/log/<first sequence as 16 hex digits>. The successful
// create is the commit; sequences run contiguously across slots and each
// slot names its predecessor's hash, so the log is a verifiable chain.
// State is the fold: state(seq) = Apply(Apply(checkpoint, slot), slot)….
//
// Catalog is the per-process committer (group commit, pipelining, rebase on
// a lost slot, read-back of unknown outcomes) and the reader of snapshots
// (Exact probes the next slot; Fresh serves one confirmed within a second).
// The compactor writes deterministic, incremental checkpoints; Load is the
// cold start (newest checkpoint plus the slots listed after it), and
// LoadFor the cold start of a reader of one tick, a range or the head: it
// decodes only the checkpoint shards that hold them (a Partial, which
// refuses questions about the rest with ErrNotLoaded; LoadSummarized's
// holds compacted stretches as summaries); Changes is the change feed
// over slots; Allowlist and Lineage are the visibility rules, and View is
// the one planner that applies them (docs/ARCHITECTURE.md, "Visibility"):
// over whole states, and as a Plan over states loaded in part, which
// asks them only what they answer or refuse with an error. A State, a
// View and an Allowlist are whole: their tick questions return no error. The row-visibility rule itself is RowRule (rule.go), one
// expression that Go evaluates and the views render as SQL. Every bucket
// name is built in names.go, each builder beside its parser, with the
// default run (DefaultRun). Corrupt data fails closed with ErrCorrupt, a
// marked bucket.ErrCorruption.
package index
