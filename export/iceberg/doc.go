// Package iceberg exports a world's visible rows as Apache Iceberg tables,
// so that engines other than worldfs's own DuckDB (Spark, Trino, BigQuery,
// PyIceberg, DuckDB's iceberg extension) read exactly what the views show.
//
// Export writes, for every table of a pinned (world, run), one Iceberg
// snapshot whose data files are the table's visible files as the catalog
// plans them (index.View): a file that holds only visible rows is named in
// place; a file that also holds rows of another attempt is copied with its
// visible rows only, under the table's data/ (checked.go). The export
// writes only under its prefix (DefaultPrefix:
// export/iceberg/<world>/<run>/<table>/) and records each table under
// RegistryPrefix (export/registry/<world>/), so that collection finds every
// export of a world (and of each ancestor whose files a fork's export
// names). Each table commits alone by creating its next metadata version,
// create-only like a log slot, after the version's reference list (every
// object its live snapshots reference, which every collector reads from
// the bucket: frame/exportrefs.go): a crash or a race leaves the
// previous version current. An export in flight holds an intent on the
// catalogs it reads (see Export).
//
// An export after the first is incremental when the catalog's change feed
// shows only later ticks since the previous snapshot (incremental.go);
// Follow keeps an export trailing the head. Expire drops old snapshots so
// that collection may reclaim what only they named; WriteReferenceLists
// writes the lists versions an older worldfs wrote lack (worldfs
// optimize calls it), and Refs reads what the snapshots reference from
// their manifests.
//
// The bucket layout and the rule that no maintenance deletes what a live
// export names are in docs/ARCHITECTURE.md.
package iceberg
