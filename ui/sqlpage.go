package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/worldfs/worldfs/sql"
)

// The SQL page's schema browser and downloads.

// SchemaSQL lists what a query on the views may name: every view with
// its columns and their types (views and worldfs's own tables: ticks,
// facts, receipts, tags, worlds), then every macro with its parameters,
// as kind, name, column (or parameters), type.
const SchemaSQL = `SELECT 'view' AS kind, table_name AS name, column_name AS detail, data_type AS type, column_index AS n
FROM duckdb_columns() WHERE NOT internal AND database_name <> 'system'
UNION ALL
SELECT DISTINCT 'macro', function_name, array_to_string(parameters, ', '), function_type, 0
FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') AND NOT internal
ORDER BY kind DESC, name, n`

func (s *Server) schema(ctx context.Context, world, run string) (*Result, error) {
	return s.memoQuery(ctx, world, run, SchemaSQL)
}

// Download formats: csv is worldfs sql --format csv's output, streamed
// as sql.Run writes it; parquet is what worldfs sql --out FILE.parquet
// writes (sql.Export), sent once written.
var downloadTypes = map[string]string{
	"csv":     "text/csv; charset=utf-8",
	"parquet": "application/vnd.apache.parquet",
}

// download answers ?q= in ?format= (csv or parquet) as a file, through
// the gate of worldfs sql (one statement that only reads).
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	world, run, q, format := r.PathValue("world"), runOf(r), r.URL.Query().Get("q"), r.URL.Query().Get("format")
	fail := func(err error) { writeJSON(w, nil, err) }
	ctype, ok := downloadTypes[format]
	switch {
	case strings.TrimSpace(q) == "":
		fail(badRequest(fmt.Errorf("q (the query) is empty")))
		return
	case !ok:
		fail(badRequest(fmt.Errorf("format=%q: a download is csv or parquet", format)))
		return
	}
	v, err := s.viewsOf(r.Context(), world, run)
	if err != nil {
		fail(err)
		return
	}
	name := fmt.Sprintf("%s-%s.%s", world, run, format)
	start := func() {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
		w.Header().Set("Cache-Control", "no-store")
	}
	if format == "csv" {
		db, err := v.Acquire(r.Context())
		if err != nil {
			fail(err)
			return
		}
		out := &firstWrite{w: w, start: start}
		err = sql.Run(r.Context(), db, q, sql.FormatCSV, out, nil)
		v.Release(db, r.Context().Err() == nil)
		if err != nil && !out.started {
			fail(s.queryFailed(r.Context(), err))
		}
		// An error once rows were sent cuts the file short: the client
		// sees a download that did not end well.
		return
	}
	// The file is written outside the bucket and its cache (worldfs sql
	// refuses an output path there), removed once sent.
	dir, err := os.MkdirTemp("", "worldfs-download-")
	if err != nil {
		fail(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, name)
	if err := sql.Export(r.Context(), v.Script, q, path, nil, io.Discard); err != nil {
		fail(s.queryFailed(r.Context(), err))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		fail(err)
		return
	}
	defer f.Close()
	start()
	_, _ = io.Copy(w, f)
}

// queryFailed maps a query's error as queryOn does.
func (s *Server) queryFailed(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, sql.ErrNotReadOnly):
		return badRequest(err)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return queryError{err}
}

// firstWrite sets a response's headers at its first byte, so an error
// before any row can still be answered as an error.
type firstWrite struct {
	w       http.ResponseWriter
	start   func()
	started bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		f.start()
	}
	return f.w.Write(p)
}
