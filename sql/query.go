package sql

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver
)

// Open returns an in-memory DuckDB with the script's views defined.
func Open(ctx context.Context, s *Script) (*sql.DB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // the views' temp tables live in one connection
	if _, err := db.ExecContext(ctx, s.SQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("defining the views of world %s: %w", s.World, err)
	}
	return db, nil
}

// Formats of Run's output.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Run executes query and writes its result to out in format.
func Run(ctx context.Context, db *sql.DB, query, format string, out io.Writer) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
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
		return err
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
