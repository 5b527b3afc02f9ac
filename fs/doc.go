// Package fs is the worldfs mount: a go-fuse tree in which every world of a
// bucket appears as read-only snapshot directories, one per published tick
// and one per commit token, and in which writes go through ctl files to the
// engine.
//
//	<mount>/ctl                              create, fork, resume worlds
//	<mount>/<world>/world.json               identity, lineage, fence, heads
//	<mount>/<world>/ctl                      commit_tick, ingest, evaluate (one JSON command a write)
//	<mount>/<world>/runs/<run>/head          -> ticks/<newest visible tick>
//	<mount>/<world>/runs/<run>/ticks/<N>/    <table>.parquet, <table>.csv, manifest.json
//	<mount>/<world>/runs/<run>/tables/<t>/   <N>.parquet for every visible tick
//	<mount>/<world>/tokens/<token>/          what that commit published
//	<mount>/<world>/facts/                   receipts.parquet, receipts.csv: the evaluation receipts
//	<mount>/<world>/facts/<run>/             <table>.parquet, <table>.csv: the run's visible facts
//	<mount>/.worldfs/stats                   cache hits, bytes, op latencies
//
// <N> is the tick zero-padded to 12 digits in both places (TickName), so
// names sort as ticks; ticks/<plain N> is a link to ticks/<N>.
//
// Every listing and lookup comes from catalog snapshots (index), never from
// listing the bucket's data; which rows a tick shows follows the allowlist
// and lineage exactly as package sql does (a file no fragment holds as it
// is, a split tick's or a facts/ file, is derived from its fragments'
// rows by index.RowRule, the rule the views render: see rowSet). A fragment that already is
// exactly a tick's visible rows is served as it is: on a local bucket by
// kernel passthrough of the fragment file (a bucket is local when
// bucket.As finds bucket.Local in it, through any wrappers). Snapshot entries never change,
// so the kernel keeps them long; ticks/, tokens/, tables/ and head are
// revalidated within a second of a publish. Inode numbers are a hash of
// the path, so they are stable across lookups and mounts.
//
// A file keeps its tick's identity, not a plan: every open resolves the
// tick against the catalog as it is now (see snapFile), so compaction and
// collection never make a visible tick unreadable.
//
// A compacted tick's Parquet file is the fragment its writer published:
// the tick's rows, read from the compacted file that holds them, encoded
// again (frame.TickFile), its size and sha256 read at lookup from the
// compacted file's tick index (see canonical).
//
// Semantics of sizes and times. Every file's size is exact at lookup: a
// fragment served as is has the size its catalog record gives, a
// compacted tick's Parquet file the size its tick index gives, a tick's
// .csv the size of its rendering as its writer recorded it in the
// fragment's footer (unless engine.Options.NoCSVSizes) or compaction in the tick
// index (no row read; a fresh tick without it is rendered into the cache
// at lookup; a compacted file without a tick index: the tick's file
// derived from its rows there, through the file kept open), a split
// tick's file (its rows in several fragments) the size of the file its
// lookup derives from that tick's rows, and a facts/ file the size of its
// current version (derived by its first stat; a column its table's
// schemas give several types has the views' type: frame.UnionType), both
// in Go: no stat runs DuckDB. mtime is the commit time: a tick's entries carry
// Tick.PublishedUnixMs. Every read of the mount's own paths is bounded by
// Options.ReadTimeout (EIO past it).
package fs
