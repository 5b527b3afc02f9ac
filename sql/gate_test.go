package sql_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// flippedViews is world "w" of verifyWorld with a byte of tick 5's
// particle fragment flipped in place (size and generation kept), and its
// views opened: the fragment's record, its file, and the database.
func flippedViews(t *testing.T) (index.Fragment, string, *sql.DB) {
	t.Helper()
	b, frag := verifyWorld(t)
	p, _ := b.Path(frag.Path)
	flipInPlace(t, p, frag.Bytes/2)
	_, db := roWorld{b: b, viewsDir: t.TempDir()}.open(t)
	return frag, p, db
}

// User SQL reads files only through the views, which verify what they
// read: every other way to a fragment (the views' own lists of files in
// their variables or in worldfs_fragments, a path given to a function
// that reads files, a file named as a table) is refused before DuckDB
// opens anything, with an error naming what was refused and why. The
// fragment read is damaged, so a read that got through would answer (or
// fail as a DuckDB error), not be refused.
func TestSQLReadsFilesOnlyThroughTheViews(t *testing.T) {
	_, frag, db := flippedViews(t)
	dir, lf := filepath.Dir(frag), wsql.ReadsAllowed
	q := func(s string) string { return strings.ReplaceAll(s, "FRAG", frag) }
	for _, c := range []struct{ query, names string }{
		{"SELECT count(*) FROM read_parquet(getvariable('worldfs_files_particle_0'))", "table function read_parquet"},
		{"SELECT count(*) FROM read_parquet([f['path'] FOR f IN getvariable('worldfs_files_particle_0_bounds')])", "table function read_parquet"},
		{"SELECT count(*) FROM read_parquet((SELECT list(path) FROM worldfs_fragments WHERE view = 'particle'))", "table function read_parquet"},
		{"SELECT count(*) FROM (SELECT path FROM worldfs_fragments WHERE view = 'particle') f, read_parquet(f.path)", "table function read_parquet"},
		{"SELECT count(*) FROM read_parquet('FRAG')", "table function read_parquet"},
		{"SELECT count(*) FROM system.main.READ_PARQUET('FRAG')", "table function read_parquet"},
		{`SELECT count(*) FROM "Parquet_Scan"('FRAG')`, "table function parquet_scan"},
		{"SELECT * FROM parquet_metadata('FRAG')", "table function parquet_metadata"},
		{"SELECT * FROM parquet_schema('FRAG')", "table function parquet_schema"},
		{"SELECT * FROM parquet_kv_metadata('FRAG')", "table function parquet_kv_metadata"},
		{"SELECT * FROM read_blob('FRAG')", "table function read_blob"},
		{"SELECT * FROM read_text(getvariable('worldfs_files_particle_0'))", "table function read_text"},
		{"SELECT * FROM read_csv('FRAG')", "table function read_csv"},
		{"SELECT * FROM glob('" + dir + "/*')", "table function glob"},
		{"SELECT count(*) FROM query_table('FRAG')", "table function query_table"},
		{"SELECT * FROM query('SELECT count(*) FROM read_parquet(''FRAG'')')", "table function query"},
		{"FROM histogram('FRAG', tick)", "table function histogram"},
		{"SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM read_parquet(''FRAG'')'))", "table function json_execute_serialized_sql"},
		// Through a CTE, a subquery, a join, a set operation, EXPLAIN.
		{"WITH l AS (SELECT getvariable('worldfs_files_particle_0') AS files) SELECT count(*) FROM read_parquet((SELECT files FROM l))", "table function read_parquet"},
		{"WITH x AS (FROM read_parquet('FRAG')) SELECT count(*) FROM x", "table function read_parquet"},
		{"SELECT (SELECT count(*) FROM read_parquet('FRAG')) AS n", "table function read_parquet"},
		{"SELECT count(*) FROM particle WHERE tick IN (SELECT tick FROM read_parquet('FRAG'))", "table function read_parquet"},
		{"SELECT count(*) FROM particle p JOIN read_parquet('FRAG') f USING (entity_id)", "table function read_parquet"},
		{"SELECT tick FROM particle UNION ALL SELECT tick FROM read_parquet('FRAG')", "table function read_parquet"},
		{"EXPLAIN ANALYZE SELECT count(*) FROM read_parquet('FRAG')", "table function read_parquet"},
		{"SELECT 1; SELECT count(*) FROM read_parquet('FRAG')", "table function read_parquet"},
		// A file named as a table.
		{"SELECT count(*) FROM 'FRAG'", `"FRAG"`},
		{`SELECT count(*) FROM "FRAG"`, `"FRAG"`},
		{"FROM 'FRAG' SELECT count(*)", `"FRAG"`},
		{"TABLE 'FRAG'", `"FRAG"`},
		{"DESCRIBE 'FRAG'", `"FRAG"`},
		{"SUMMARIZE 'FRAG'", `"FRAG"`},
		{"EXPLAIN SELECT * FROM 'FRAG'", `"FRAG"`},
		{"SELECT count(*) FROM (SELECT * FROM particle UNION ALL BY NAME FROM 'FRAG')", `"FRAG"`},
		{"SELECT count(*) FROM x.parquet", `"x.parquet"`},
	} {
		text := q(c.query)
		out, err := query(t, db, text)
		if !errors.Is(err, wsql.ErrNotReadOnly) || !strings.Contains(err.Error(), q(c.names)) || !strings.Contains(err.Error(), lf) {
			t.Errorf("%s: %q %v; want a refusal naming %s", text, out, err, q(c.names))
		}
	}
	// Nor may a statement point the views' lists elsewhere.
	for _, s := range []string{"SET VARIABLE worldfs_files_particle_0 = ['FRAG']", "SELECT 1; SET VARIABLE worldfs_files_particle_0_bounds = NULL",
		"RESET VARIABLE worldfs_files_particle_0"} {
		if _, err := query(t, db, q(s)); !errors.Is(err, wsql.ErrNotReadOnly) || !strings.Contains(err.Error(), "SET") && !strings.Contains(err.Error(), "RESET") {
			t.Errorf("%s: %v", q(s), err)
		}
	}
}

// What the views read, they verify: the damaged fragment fails every
// query that reads it through them (the views, the _at macro, in a join,
// a CTE, a subquery, EXPLAIN ANALYZE) with an error naming it; what reads
// neither it nor any file (the fragment list, the manifests, the views'
// variables, the catalog, generated rows) answers.
func TestSQLViewsAreTheWayToFiles(t *testing.T) {
	frag, _, db := flippedViews(t)
	for _, q := range []string{
		"SELECT count(*) FROM particle", "SELECT sum(position_x) FROM particle_raw", "SELECT count(*) FROM particle_at(5)",
		"SELECT count(*) FROM particle_at(4) a JOIN particle b USING (entity_id, tick)",
		"WITH x AS (SELECT * FROM particle WHERE tick >= 5) SELECT count(*) FROM x",
		"SELECT count(*) FROM worldfs_fragments WHERE tick IN (SELECT tick FROM particle_at(5))",
		"EXPLAIN ANALYZE SELECT count(*) FROM particle",
	} {
		_, err := query(t, db, q)
		var ce *cache.CorruptFragmentError
		if !errors.As(err, &ce) || ce.Name != frag.Path || ce.What != "sha256" {
			t.Errorf("%s: %v; want a corrupt fragment error naming %s", q, err, frag.Path)
		}
	}
	want := map[string]string{
		"SELECT count(*) > 0 AS ok FROM particle_at(4)":                                                    "ok\ntrue\n",
		"SELECT count(*) > 0 AS ok FROM worldfs_manifests WHERE tick = 5":                                  "ok\ntrue\n",
		"SELECT bool_and(path LIKE '%.parquet') AS ok FROM worldfs_fragments WHERE view = 'particle'":      "ok\ntrue\n",
		"SELECT len([p FOR p IN getvariable('worldfs_files_particle_0') IF p LIKE '%.parquet']) > 0 AS ok": "ok\ntrue\n",
		"SELECT count(*) AS n FROM range(3)":                                                               "n\n3\n",
		"SELECT sum(generate_series) AS n FROM generate_series(1, 3)":                                      "n\n6\n",
		"SELECT count(*) AS n FROM unnest([1, 2]) JOIN json_each('[1, 2]') ON true":                        "n\n4\n",
		"SELECT count(*) > 0 AS ok FROM duckdb_views() WHERE view_name = 'particle'":                       "ok\ntrue\n",
		"SELECT count(*) > 0 AS ok FROM pragma_table_info('worldfs_fragments')":                            "ok\ntrue\n",
		"SELECT count(*) > 0 AS ok FROM information_schema.tables":                                         "ok\ntrue\n",
		"SELECT count(*) > 0 AS ok FROM temp.main.particle_at(4) JOIN temp.worldfs_fragments USING (tick)": "ok\ntrue\n",
		`SELECT count(*) > 0 AS ok FROM "particle_at"(4)`:                                                  "ok\ntrue\n",
	}
	for q, w := range want {
		if got, err := query(t, db, q); err != nil || got != w {
			t.Errorf("%s: %q %v, want %q", q, got, err, w)
		}
	}
	// A misspelt view gets DuckDB's own error, with its suggestion.
	if _, err := query(t, db, "SELECT * FROM particel"); err == nil || errors.Is(err, wsql.ErrNotReadOnly) || !strings.Contains(err.Error(), "particle") {
		t.Fatalf("a misspelt view: %v", err)
	}
}
