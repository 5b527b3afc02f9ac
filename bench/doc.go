// Package bench is worldfs's benchmark harness: each benchmark builds (or
// reuses) a world in a bucket, measures one path through the library
// (bucket calls, commits, cold start, ingest, the SQL views, the mount,
// diff and history queries, export, the web interface) and reports its
// numbers as a table or as one JSON object.
//
// All lists every benchmark; the command "worldfs bench <name>" parses a
// benchmark's flags, runs it and maps its errors. The harness sits beside
// cmd: it may import every layer, and nothing but cmd imports it.
// Performance is measured here, never asserted in tests.
package bench
