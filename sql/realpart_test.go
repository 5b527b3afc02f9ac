package sql_test

import (
	"database/sql"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// TestRealPartDuckDB asks the DuckDB linked into the views for its
// version, and says so: make test runs it verbosely and prints its line.
func TestRealPartDuckDB(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT version()").Scan(&v); err != nil || v == "" {
		t.Fatalf("SELECT version() = %q, %v", v, err)
	}
	t.Logf("real part: DuckDB %s, linked", v)
}
