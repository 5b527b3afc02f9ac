// Package maintenance keeps a world's bucket small and fast to read
// without changing what any reader sees: compaction rewrites many small
// fragments into few large files, and collection deletes what no catalog
// names any more.
//
//   - Compaction (compact.go): Compact rewrites a run's ticks, window by
//     window (64, 512, 4,096 ticks), and its completed facts, claim shard
//     by claim shard, into compacted files holding exactly the visible
//     rows, named by one fragments.rewrite entry each, so that readers
//     switch at once (invariant 9 of docs/ARCHITECTURE.md). Beside each
//     compacted file of ticks it writes a tick index (frame.BuildTickIndex,
//     frame.WriteTickIndex): where each tick's rows are and the size and
//     sha256 of the tick's canonical file, which readers rebuild with
//     frame.TickFile.
//   - Collection (collect.go): Collect deletes, each with
//     bucket.DeleteOnce, what the catalog proves dead: replaced fragments
//     and compacted files past the retention, dead attempts' fragments
//     (vacuum), old log slots, checkpoints and shards, and the views'
//     unused fragment lists.
//   - Optimize (optimize.go) is worldfs optimize as a Go program calls
//     it: the exports' reference lists an older worldfs left out (written
//     by a function the caller passes: maintenance imports no exporter),
//     then Compact, the tick shards' sidecars (index.WriteSidecars) and
//     the tick indexes compaction left out (WriteTickIndexes).
//
// Both are safe beside a live writer and beside each other, and a crash
// at any moment leaves the history as it was or as maintained. Options are
// checked at each start (EnsureDefaults, then Validate).
//
// An open World (package engine) runs both by itself; the worldfs optimize
// and gc commands run them by hand. The package reads and writes every byte
// layout (fragments, compacted files, tick indexes) through package frame,
// which readers import too, and the catalog through package index; it never imports engine, so the world runtime can own its
// background maintenance.
//
// Package maintenancetest writes what compaction leaves of a window of
// ticks at once, for tests and benchmarks: a million-tick world in
// minutes.
package maintenance
