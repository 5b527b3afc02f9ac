package sql

import (
	"database/sql"
	"sync/atomic"
)

// databases counts the DuckDB databases this process opened.
var databases atomic.Int64

// Databases returns how many DuckDB databases this process has opened
// (views, copies, reads of rows): a caller that must not run DuckDB (a
// mount's stat) is checked by it not moving.
func Databases() int64 { return databases.Load() }

// openDuckDB opens an in-memory DuckDB database of one connection (the
// views' temp tables live in one connection).
func openDuckDB() (*sql.DB, error) {
	databases.Add(1)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
