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
// Status of this package: the slot format and Apply for world creation,
// fencing, tick publication and world status are here. The committer (group
// commit, pipelining, rebase), checkpoints, cold start, the change feed,
// claims and the visibility allowlist are still to be built (issue 3).
package index
