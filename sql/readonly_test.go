package sql_test

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// roWorld is a local bucket holding world "w": particles up to tick 6, a
// fact at tick 3 and a receipt.
type roWorld struct {
	b        *local.Bucket
	root     string
	viewsDir string
}

func newROWorld(t *testing.T) roWorld {
	t.Helper()
	ctx := ctxT(t)
	root := t.TempDir()
	b, _ := local.Open(root)
	w := enginetest.World(t, b, "w", 3)
	defer w.Close()
	if _, err := w.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, w, 6)
	return roWorld{b: b, root: root, viewsDir: t.TempDir()}
}

func (rw roWorld) open(t *testing.T) (*wsql.Script, *sql.DB) {
	t.Helper()
	s, err := wsql.Build(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatalf("%v\n%s", err, plain(s))
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}

func query(t *testing.T, db *sql.DB, q string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := wsql.Run(ctxT(t), db, q, wsql.FormatCSV, &out, nil)
	return out.String(), err
}

// snapshot returns every file under dir with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			files[p] = string(data)
		}
		return nil
	})
	return files
}

// Every statement that could write a file, attach a database, install or
// load an extension or change a setting is refused before it runs (even
// before DuckDB prepares it), with a message that says what runs and
// points at --out; the bucket, the views directory and a directory
// outside both are unchanged.
func TestSQLRefusesStatementsThatDoNotOnlyRead(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	elsewhere := t.TempDir()
	frag := fragmentPath(t, rw)
	listed := count(t, db, "SELECT count(*) FROM worldfs_fragments")
	for _, q := range []string{
		"COPY (SELECT 1) TO '" + elsewhere + "/out.csv'",
		"COPY particle TO '" + elsewhere + "/out.parquet' (FORMAT parquet)",
		"COPY (SELECT * FROM particle) TO '" + rw.viewsDir + "/out.csv'",
		"COPY particle_raw TO '" + frag + "' (FORMAT parquet)",
		"EXPORT DATABASE '" + elsewhere + "/export'",
		"EXPORT DATABASE '" + rw.viewsDir + "/export'", // DuckDB creates this directory when it merely prepares the statement
		"ATTACH '" + elsewhere + "/x.db' AS x",
		"ATTACH ':memory:' AS m",
		"SELECT 1; ATTACH '" + elsewhere + "/y.db' AS y; CREATE TABLE y.t AS SELECT * FROM particle",
		"INSTALL httpfs", "FORCE INSTALL httpfs", "LOAD httpfs", "UPDATE EXTENSIONS",
		"SET enable_external_access = true", "RESET enable_external_access", "SET lock_configuration = false",
		"SET threads = 1", "PRAGMA threads = 1", "PRAGMA enable_profiling", "PRAGMA import_database('" + elsewhere + "')",
		"SET VARIABLE worldfs_files_particle_0 = ['/etc/passwd']",
		"CREATE TABLE t AS SELECT * FROM particle", "CREATE TEMP VIEW v AS SELECT 1", "CREATE PERSISTENT SECRET s (TYPE s3)",
		"DROP VIEW particle", "DELETE FROM worldfs_fragments", "INSERT INTO worldfs_fragments SELECT * FROM worldfs_fragments",
		"WITH x AS (SELECT 1) INSERT INTO worldfs_fragments SELECT * FROM worldfs_fragments",
		"EXPLAIN ANALYZE COPY (SELECT 1) TO '" + rw.viewsDir + "/explained.csv'",
		"EXPLAIN (FORMAT json) COPY (SELECT 1) TO '" + rw.viewsDir + "/explained.csv'",
		"EXPLAIN ANALYZE WITH x AS (SELECT 1) DELETE FROM worldfs_fragments",
		"CALL pragma_version()", "CHECKPOINT", "BEGIN", "USE memory", "DETACH memory", "VACUUM", "ANALYZE",
		"SELECT 1; COPY (SELECT 2) TO '" + elsewhere + "/second.csv'",
		"SELECT 1; WITH x AS (SELECT 1) INSERT INTO worldfs_fragments SELECT * FROM worldfs_fragments",
		"SELECT ';' AS s; COPY (SELECT 2) TO '" + elsewhere + "/third.csv'",
		"-- SELECT\nCOPY (SELECT 3) TO '" + elsewhere + "/commented.csv'",
		"/* SELECT */ COPY (SELECT 3) TO '" + elsewhere + "/commented.csv'",
	} {
		before, views := snapshot(t, rw.root), snapshot(t, rw.viewsDir)
		out, err := query(t, db, q)
		if !errors.Is(err, wsql.ErrNotReadOnly) || !strings.Contains(err.Error(), "--out FILE") || !strings.Contains(err.Error(), "only reads") {
			t.Errorf("%s: %v (output %q); want a refusal that says what runs", q, err, out)
			continue
		}
		if after := snapshot(t, rw.root); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: the bucket changed", q)
		}
		if after := snapshot(t, rw.viewsDir); fmt.Sprint(after) != fmt.Sprint(views) {
			t.Errorf("%s: the views directory changed", q)
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Errorf("%s: wrote %s", q, ents[0].Name())
		}
		if _, err := os.Stat(filepath.Join(rw.viewsDir, "export")); err == nil {
			t.Fatalf("%s: EXPORT made its directory", q)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM worldfs_fragments"); n != listed {
		t.Fatalf("the fragment list went from %d to %d rows", listed, n)
	}
	// The views are intact, and the locked settings are as worldfs set them.
	if out, err := query(t, db, "SELECT count(*) AS n, current_setting('enable_external_access') AS ext, current_setting('lock_configuration') AS locked FROM particle"); err != nil ||
		!strings.HasSuffix(out, ",false,true\n") || strings.HasPrefix(out, "n,ext,locked\n0,") {
		t.Fatalf("after the refusals: %q %v", out, err)
	}
}

// The views' database reads the fragments and nothing else: no file
// outside the directories the views read, not the catalog, not the
// network.
func TestSQLReadsOnlyWhatTheViewsRead(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	outside := filepath.Join(t.TempDir(), "secret.csv")
	os.WriteFile(outside, []byte("a,b\n1,2\n"), 0o644)
	s, _, _ := index.Load(ctxT(t), rw.b, "w")
	slot, _ := rw.b.Path(index.SlotName("w", s.Seq))
	for _, q := range []string{
		"SELECT * FROM read_csv('/etc/passwd', sep = ':')",
		"SELECT * FROM read_csv('" + outside + "')",
		"SELECT * FROM read_text('" + outside + "')",
		"SELECT * FROM read_blob('" + slot + "')",
		"SELECT * FROM read_text('" + rw.root + "/data/../" + strings.TrimPrefix(slot, rw.root+"/") + "')",
		"SELECT * FROM glob('/etc/*')",
		"SELECT * FROM read_parquet('https://example.com/x.parquet')",
		"SELECT * FROM query('COPY (SELECT 1) TO ''" + outside + ".copy''')",
	} {
		if out, err := query(t, db, q); err == nil {
			t.Errorf("%s: read %q", q, out)
		}
	}
	if _, err := os.Stat(outside + ".copy"); err == nil {
		t.Fatal("query() ran a COPY")
	}
}

// fragmentPath is the file of a published fragment of particle at tick 2.
func fragmentPath(t *testing.T, rw roWorld) string {
	t.Helper()
	s, _, err := index.Load(ctxT(t), rw.b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 2)
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID && len(tf.Fragments) > 0 {
			p, _ := rw.b.Path(tf.Fragments[0].Path)
			return p
		}
	}
	t.Fatal("no particle fragment at tick 2")
	return ""
}

// The reproduction: a COPY over a published fragment's path (the
// local bucket is read in place) replaced it, and the views served the
// new values.
func TestSQLCannotReplaceAPublishedFragment(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	frag := fragmentPath(t, rw)
	before, _ := os.ReadFile(frag)
	want, err := query(t, db, "SELECT count(*), sum(position_x) FROM particle WHERE tick = 2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = query(t, db, "COPY (SELECT entity_id, tick, commit_token, writer_epoch, position_x + 1000 AS position_x FROM particle_raw WHERE tick = 2) TO '"+frag+"' (FORMAT parquet)")
	if !errors.Is(err, wsql.ErrNotReadOnly) {
		t.Fatalf("COPY over %s: %v", frag, err)
	}
	if after, _ := os.ReadFile(frag); !bytes.Equal(after, before) {
		t.Fatal("the fragment's bytes changed")
	}
	_, db2 := rw.open(t)
	if got, err := query(t, db2, "SELECT count(*), sum(position_x) FROM particle WHERE tick = 2"); err != nil || got != want {
		t.Fatalf("tick 2 now shows %q (%v), was %q", got, err, want)
	}
}

// The reproduction: a COPY of garbage to the next log slot's name
// made every later open of the world fail as a corrupt catalog.
func TestSQLCannotWriteTheCatalog(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	s, _, _ := index.Load(ctxT(t), rw.b, "w")
	next, _ := rw.b.Path(index.SlotName("w", s.Seq+1))
	for _, q := range []string{
		"COPY (SELECT 'garbage') TO '" + next + "' (FORMAT csv, HEADER false)",
		"SELECT 1; COPY (SELECT 'garbage') TO '" + next + "' (FORMAT csv, HEADER false)",
	} {
		if _, err := query(t, db, q); !errors.Is(err, wsql.ErrNotReadOnly) {
			t.Fatalf("%s: %v", q, err)
		}
		if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s made %s", q, next)
		}
	}
	_, db2 := rw.open(t)
	if out, err := query(t, db2, "SELECT max(tick) AS head FROM particle"); err != nil || out != "head\n6\n" {
		t.Fatalf("a later open: %q %v", out, err)
	}
	w, err := engine.ResumeWorld(ctxT(t), rw.b, "w", particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatalf("resuming after the refused COPY: %v", err)
	}
	w.Close()
}

// Queries of the views run as before under the restrictions: views, time
// travel, facts and receipts, the statements that describe, semicolons
// in strings and comments (which make no second statement).
func TestSQLReadsTheViews(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	want := map[string]string{
		"SELECT count(DISTINCT tick) AS n FROM particle":                                               "n\n6\n",
		"SELECT count(*) = (SELECT count(*) FROM particle WHERE tick = 4) AS same FROM particle_at(4)": "same\ntrue\n",
		"SELECT count(*) AS n FROM worldfs_facts WHERE external_id = 'a' AND tick = 3":                 "n\n1\n",
		"FROM reading SELECT count(*) AS n":                                                            "n\n1\n",
		"WITH t AS (SELECT DISTINCT tick FROM particle_raw) SELECT count(*) AS n FROM t":               "n\n6\n",
		"SELECT 'x;y' AS b -- ; COPY\n":                                                                "b\nx;y\n",
		"/* c */ SELECT $$a;b$$ AS c;":                                                                 "c\na;b\n",
		"(SELECT 2 AS n)":                                                                              "n\n2\n",
		"VALUES (3)":                                                                                   "col0\n3\n",
		"SELECT count(*) > 0 AS ok FROM (DESCRIBE particle)":                                           "ok\ntrue\n",
		"SELECT count(*) > 0 AS ok FROM (SUMMARIZE particle)":                                          "ok\ntrue\n",
		// The change macros pass the gate (listed with the views'
		// macros): with only _at listed, each is refused.
		"SELECT count(*) > 0 AS ok FROM particle_diff(1, 4)":                                                                                      "ok\ntrue\n",
		"SELECT count(DISTINCT tick) AS n FROM particle_changes(2, 4)":                                                                            "n\n3\n",
		"SELECT count(*) = (SELECT count(*) FROM particle WHERE tick = (SELECT max(tick) FROM worldfs_ticks)) AS same FROM particle_as_of(now())": "same\ntrue\n",
		"SELECT count(*) AS n, count(published_at) AS at FROM worldfs_ticks":                                                                      "n,at\n7,7\n",
	}
	for q, w := range want {
		if got, err := query(t, db, q); err != nil || got != w {
			t.Errorf("%s: %q %v, want %q", q, got, err, w)
		}
	}
	for _, q := range []string{"DESCRIBE particle", "SHOW TABLES", "SUMMARIZE particle_raw", "EXPLAIN SELECT count(*) FROM particle",
		"EXPLAIN ANALYZE SELECT count(*) FROM particle", "PRAGMA table_info('particle')", "PRAGMA show_tables", "PRAGMA version",
		"PIVOT (SELECT tick, entity_id FROM particle) ON tick IN (1, 2) USING count(*)",
		"SELECT * FROM worldfs_receipts", "SELECT * FROM worldfs_manifests", "SELECT * FROM worldfs_lineage"} {
		if out, err := query(t, db, q); err != nil || out == "" {
			t.Errorf("%s: %q %v", q, out, err)
		}
	}
	if _, err := query(t, db, "PIVOT (SELECT tick, entity_id FROM particle) ON tick USING count(*)"); !errors.Is(err, wsql.ErrNotReadOnly) || !strings.Contains(err.Error(), "IN list") {
		t.Fatalf("a PIVOT without IN list: %v", err)
	}
	// Several statements: each would have a result, and a run prints
	// one; refused whole, once each is checked (a write among them is
	// refused as a write).
	if out, err := query(t, db, "SELECT 1 AS a; SELECT 2 AS b"); !errors.Is(err, wsql.ErrSeveralStatements) ||
		!strings.Contains(err.Error(), "this query holds 2 (1: SELECT 1 AS a; 2: SELECT 2 AS b): run each as a query of its own") || out != "" {
		t.Fatalf("two statements: %q %v", out, err)
	}
	if _, err := query(t, db, "SELECT 1; COPY particle TO '/tmp/x.csv'"); !errors.Is(err, wsql.ErrNotReadOnly) {
		t.Fatalf("a write after a query: %v", err)
	}
	if _, err := query(t, db, "SELEC nonsense"); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("a syntax error: %v", err)
	}
}

// The mount's materializations still write their files, and read files
// in: the internal COPY may write its one output file.
func TestCopyTickAndFactsUnderTheRestrictions(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	dir := t.TempDir()
	tick := filepath.Join(dir, "tick4.parquet")
	if err := wsql.CopyTick(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir}, "particle", 4, wsql.FormatParquet, tick); err != nil {
		t.Fatal(err)
	}
	rows, err := wsql.ReadRows(ctxT(t), tick)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM particle_at(4)"); int64(len(rows)) != n || n == 0 {
		t.Fatalf("CopyTick wrote %d rows, the views show %d", len(rows), n)
	}
	facts := filepath.Join(dir, "reading.csv")
	if err := wsql.CopyFacts(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir}, "reading", wsql.FormatCSV, facts); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(facts)
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(recs) != 2 {
		t.Fatalf("CopyFacts wrote %d records (%v)", len(recs), err)
	}
	receipts := filepath.Join(dir, "receipts.csv")
	if err := wsql.CopyFacts(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir}, frame.ReceiptsView, wsql.FormatCSV, receipts); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Fatalf("%d files in the output directory, want the 3 written", len(ents))
	}
}

// ReadRows reads the one file it is given and nothing else: a glob that
// would read others (or any other file) is refused.
func TestReadRowsReadsOneFile(t *testing.T) {
	rw := newROWorld(t)
	dir := t.TempDir()
	for _, n := range []string{"a.parquet", "b.parquet"} {
		if err := wsql.CopyTick(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir}, "particle", 4, wsql.FormatParquet, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	one, err := wsql.ReadRows(ctxT(t), filepath.Join(dir, "a.parquet"))
	if err != nil || len(one) == 0 {
		t.Fatalf("%d rows, %v", len(one), err)
	}
	if rows, err := wsql.ReadRows(ctxT(t), filepath.Join(dir, "*.parquet")); err == nil {
		t.Fatalf("a glob read %d rows of two files", len(rows))
	}
}

// A file in a folder named like a hive partition ("date=2026-01-01")
// reads as its own columns: ReadRows (what ingest reads a user's file
// with) gains no "date" column, nor does worldfs_fragments of views whose
// directory sits under such a folder ("k=3").
func TestPartitionLikeFoldersAddNoColumns(t *testing.T) {
	rw := newROWorld(t)
	dir := filepath.Join(t.TempDir(), "date=2026-01-01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "a.parquet")
	if err := wsql.CopyTick(ctxT(t), rw.b, "w", wsql.Options{Dir: rw.viewsDir}, "particle", 4, wsql.FormatParquet, file); err != nil {
		t.Fatal(err)
	}
	rows, err := wsql.ReadRows(ctxT(t), file)
	if err != nil || len(rows) == 0 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if v, ok := rows[0]["date"]; ok {
		t.Errorf("ReadRows of %s gave a column date = %v, which the file does not hold", file, v)
	}
	db := views(t, rw.b, "w", wsql.Options{Dir: filepath.Join(t.TempDir(), "k=3", "views")})
	cols, err := column(db, "SELECT column_name FROM information_schema.columns WHERE table_name = 'worldfs_fragments'")
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 || slices.Contains(cols, "k") {
		t.Errorf("worldfs_fragments of views under k=3/: columns %v", cols)
	}
}

// Below the statement gate, DuckDB itself is confined: asked directly
// (as no user statement can), it reads the bucket's data directory, where
// the views' fragments are, and nothing beside it: not the catalog,
// whether named plainly or through data/.., not a file elsewhere.
func TestDuckDBIsConfinedToTheBucketsData(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	ctx := ctxT(t)
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet('"+fragmentPath(t, rw)+"')").Scan(&n); err != nil || n == 0 {
		t.Fatalf("a fragment under data/, read directly: %d rows, %v", n, err)
	}
	s, _, _ := index.Load(ctx, rw.b, "w")
	slot, _ := rw.b.Path(index.SlotName("w", s.Seq))
	outside := filepath.Join(t.TempDir(), "secret.csv")
	os.WriteFile(outside, []byte("a,b\n1,2\n"), 0o644)
	for _, p := range []string{slot, rw.root + "/data/../" + strings.TrimPrefix(slot, rw.root+"/"), outside, "/etc/passwd"} {
		var size int64
		if err := db.QueryRowContext(ctx, "SELECT size FROM read_blob('"+p+"')").Scan(&size); err == nil {
			t.Errorf("DuckDB read %s (%d bytes)", p, size)
		}
	}
}

// A view's list of files can come out empty (particle_at(NULL): no file's
// tick bounds hold the tick, not even the witness's): the query fails,
// and DuckDB opens nothing, not the working directory that an empty path
// names to it (where a file no catalog names may lie).
func TestAnEmptyListOfFilesReadsNothing(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	frags, err := filepath.Glob(filepath.Join(rw.root, "data", "w", "main", "*", "*.parquet"))
	if err != nil || len(frags) == 0 {
		t.Fatalf("no fragment under %s: %v", rw.root, err)
	}
	dir := filepath.Dir(frags[0])
	if err := os.WriteFile(filepath.Join(dir, "junk.parquet"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, q := range []string{"SELECT count(*) FROM particle_at(NULL)", "SELECT count(*) FROM particle_at(1e30)"} {
		out, err := query(t, db, q)
		if err == nil || strings.Contains(err.Error(), "junk") || !strings.Contains(err.Error(), "no file to read") {
			t.Errorf("%s: %q, %v", q, out, err)
		}
	}
}
