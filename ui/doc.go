// Package ui is worldfs's web interface (worldfs ui): pages that show a
// bucket's worlds, a run's timeline with a scrubber over its ticks, a
// tick's rows, two ticks or two worlds compared (<table>_diff,
// worldfs_diff), the facts and evaluation receipts, and a SQL box. It is
// one more reader over the same views and read-only gate as worldfs sql:
// every question a page asks of the rows runs through sql.Cells on views
// built by sql.Build from the catalog's one planner (index.View), so a
// page shows what worldfs sql answers. What the catalog itself records
// (worlds, lineage, tick publish times, the commit log, the bytes of a
// world's files) comes from the catalog, opened read-only; so do the rows
// per tick of the timeline's chart where the catalog and the compacted
// files' tick indexes record them, answering what CountsSQL would
// (BinnedCountsSQL, tested against worldfs sql), else through sql.Cells.
//
// The server answers only loopback names unless it has a token
// (Options.Token); each request runs in its own context, on a database of
// its own, so a slow query holds up no other page, and a page that aborts
// its fetch cancels its query. Pages are html/template files and one
// script, embedded; the charts are uPlot, vendored with its license in
// assets/vendor/uplot (no build step: go build embeds them).
package ui
