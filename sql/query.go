package sql

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver
)

// Open returns an in-memory DuckDB with the script's views defined,
// confined to reading what the views read (lockDown): it can read no
// other file, install or load no extension, and its settings are locked.
// It can still write inside the directories the views read, so user SQL
// goes through Run or Export, which admit only statements that read.
func Open(ctx context.Context, s *Script) (*sql.DB, error) {
	db, _, err := open(ctx, s, nil)
	return db, err
}

// open is Open, with the files in writable (an internal COPY's output)
// also allowed; it returns the directories the database may read.
func open(ctx context.Context, s *Script, writable []string) (*sql.DB, []string, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1) // the views' temp tables live in one connection
	// The files the views read are verified as queries read them.
	r := &reader{c: s.checks, ok: map[string]bool{}}
	if err := r.register(ctx, db); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	if err := s.register(ctx, db); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	// The script is worldfs's own SQL: it runs first, then the database is
	// confined to the files the views it defined read.
	script := s.runText()
	r.defining.Store(true)
	sctx, sink := withSink(ctx)
	_, err = db.ExecContext(sctx, script)
	r.defining.Store(false)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("defining the views of world %s: %w", s.World, sink.or(err))
	}
	// The table macros the views defined, listed for the gate (reads):
	// asking DuckDB for them (duckdb_functions()) costs a query 30 ms.
	var macros []string
	for _, m := range s.Macros() {
		macros = append(macros, lit(strings.ToLower(m)))
	}
	_, err = db.ExecContext(ctx, "CREATE TEMP TABLE "+macroTable+" AS SELECT unnest(["+strings.Join(macros, ", ")+"]::VARCHAR[]) AS name")
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	dirs, paths, err := readDirs(ctx, db, s)
	if err == nil {
		err = lockDown(ctx, db, dirs, append(paths, writable...), filepath.Dir(s.FragmentList))
	}
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	return db, dirs, nil
}

// Formats of Run's output.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Run executes query, which may hold several statements, each of which
// must only read (gate: nothing runs unless all do), and writes the
// result of the last to out in format.
func Run(ctx context.Context, db *sql.DB, query, format string, out io.Writer) error {
	if format != FormatTable && format != FormatCSV && format != FormatJSON {
		return fmt.Errorf("unknown format %q (table, csv or json)", format)
	}
	ctx, sink := withSink(ctx)
	conn, stmts, err := gated(ctx, db, query)
	if err != nil {
		return sink.or(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, stmts[len(stmts)-1].text)
	if err != nil {
		return sink.or(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	var tw *tabwriter.Writer
	var cw *csv.Writer
	var records []map[string]any
	switch format {
	case FormatTable:
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	case FormatCSV:
		cw = csv.NewWriter(out)
		cw.Write(cols)
	case FormatJSON:
		records = []map[string]any{}
	default:
		return fmt.Errorf("unknown format %q (table, csv or json)", format)
	}
	err = scan(rows, len(cols), func(vals []any) {
		switch format {
		case FormatTable, FormatCSV:
			cells := make([]string, len(vals))
			for i, v := range vals {
				cells[i] = cell(v)
			}
			if tw != nil {
				fmt.Fprintln(tw, strings.Join(cells, "\t"))
			} else {
				cw.Write(cells)
			}
		case FormatJSON:
			rec := map[string]any{}
			for i, c := range cols {
				rec[c] = vals[i]
			}
			records = append(records, rec)
		}
	})
	if err != nil {
		return sink.or(err)
	}
	switch {
	case tw != nil:
		return tw.Flush()
	case cw != nil:
		cw.Flush()
		return cw.Error()
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(records)
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	// JSON, STRUCT, LIST and MAP values print as JSON in every format.
	k := reflect.ValueOf(v).Kind()
	_, marshals := v.(json.Marshaler)
	if k == reflect.Map || k == reflect.Slice || marshals || k == reflect.Struct {
		if b, err := json.Marshal(v); err == nil && len(b) > 0 && (b[0] == '{' || b[0] == '[') {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}

// scan calls fn with each row's n values (fn must not keep the slice) and
// returns the first error of the scan.
func scan(rows *sql.Rows, n int, fn func(vals []any)) error {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		fn(vals)
	}
	return rows.Err()
}
