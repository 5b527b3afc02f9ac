package serve_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/worldfs/worldfs/engine/enginetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// listing is every file under dir with its size.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, p+" "+info.ModTime().String()+" "+string(rune(info.Size())))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestWritesAreRefusedWithTheGatesMessage sends what writes (a COPY, a
// file read, a CREATE TABLE, and a query whose middle statement writes)
// through the simple and the extended protocol: each is an error with
// SQLSTATE 42501 and the gate's own message, and nothing is written — no
// file, no table, and no statement of the query runs.
func TestWritesAreRefusedWithTheGatesMessage(t *testing.T) {
	f := newFixture(t, nil)
	ctx := enginetest.Context(t)
	out := filepath.Join(f.dir, "copied.csv") // inside a directory DuckDB may write
	bucketDir := f.b.(interface{ Root() string }).Root()
	before := listing(t, bucketDir)
	refused := []string{
		"COPY particle TO '" + out + "'",
		"SELECT * FROM read_parquet('/etc/passwd')",
		"SELECT * FROM read_csv('" + filepath.Join(f.dir, "*") + "')",
		"CREATE TABLE t AS SELECT 1 AS x",
		"CREATE TEMP VIEW v AS SELECT 1 AS x",
		"SELECT 1 AS first; COPY (SELECT 2) TO '" + out + "'; CREATE TABLE t AS SELECT 3 AS x",
		"INSERT INTO worldfs_fragments SELECT * FROM worldfs_fragments",
		"ATTACH '" + filepath.Join(f.dir, "x.db") + "' AS x",
		"SET enable_external_access = true",
	}
	// What the gate says of each, as worldfs sql runs it.
	s, err := wsql.Build(ctx, f.b, "w", wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	gate := map[string]string{}
	for _, q := range refused {
		err := wsql.Run(ctx, ref, q, wsql.FormatCSV, &strings.Builder{}, nil)
		if !errors.Is(err, wsql.ErrNotReadOnly) {
			t.Fatalf("worldfs sql %q: %v, not a refusal; the test proves little", q, err)
		}
		gate[q] = err.Error()
	}
	c := f.connect(t, "w")
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		for _, q := range refused {
			if strings.Count(q, ";") > 0 && mode != pgx.QueryExecModeSimpleProtocol {
				continue // several statements go by the simple protocol only
			}
			var results int
			var err error
			if mode == pgx.QueryExecModeSimpleProtocol {
				// Every statement's result, as psql reads a query of several.
				rr := c.PgConn().Exec(ctx, q)
				res, rerr := rr.ReadAll()
				for _, r := range res {
					if r.Err == nil {
						results++
					}
				}
				err = rerr
			} else {
				_, err = c.Exec(ctx, q, mode)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("%v %q: %v, want an error of the server", mode, q, err)
			}
			if pe.Code != "42501" || pe.Message != gate[q] {
				t.Errorf("%v %q: SQLSTATE %s %q, want 42501 and the gate's message %q", mode, q, pe.Code, pe.Message, gate[q])
			}
			if results != 0 {
				t.Errorf("%q: %d of its statements ran, want none", q, results)
			}
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v: a refused COPY wrote it", out, err)
	}
	if _, err := c.Exec(ctx, "SELECT * FROM t"); err == nil {
		t.Error("table t exists: a refused CREATE TABLE made it")
	}
	if after := listing(t, bucketDir); !slices.Equal(before, after) {
		t.Errorf("the bucket changed under refused statements:\n%v\n%v", before, after)
	}
	// The session goes on.
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM particle_at(3)").Scan(&n); err != nil || n == 0 {
		t.Fatalf("after the refusals: %d rows, %v", n, err)
	}
}
