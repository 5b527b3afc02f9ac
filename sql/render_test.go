package sql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// The statement that renders a result is gated as a statement of its
// own: had a statement escaped the gate, its rendering would still not
// read a file or hold two statements.
func TestRenderedStatementIsGated(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TEMP TABLE " + macroTable + " (name VARCHAR)"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, text := range []string{
		"SELECT * FROM read_csv('/etc/passwd')",
		"SELECT 1 AS x) AS q; SELECT 2 FROM (SELECT 1",
	} {
		st := statement{text: text, keyword: "SELECT", cols: []resultCol{{name: "x"}}}
		for _, format := range []string{FormatCSV, FormatJSON} {
			if q, err := rendered(ctx, conn, st, format, 1); !errors.Is(err, ErrNotReadOnly) {
				t.Errorf("%s (%s): rendered as %q, %v", text, format, q, err)
			}
		}
	}
	st := statement{text: "SELECT 1.5 AS x", keyword: "SELECT", cols: []resultCol{{name: "x"}}}
	if q, err := rendered(ctx, conn, st, FormatCSV, 1); err != nil || q == "" {
		t.Fatalf("a query that reads: %q %v", q, err)
	}
}
