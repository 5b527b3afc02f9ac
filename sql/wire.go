package sql

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// What a server of the PostgreSQL protocol (package serve) runs: the
// gate's own checks (gate.go) and the query that gives a checked
// statement's result as the server renders it, checked again as a
// statement of its own, as Run renders its formats. A server runs nothing
// the gate did not check, on a database Open returned.

// Statement is one statement of a query the gate admitted.
type Statement struct {
	// Text is the statement as given.
	Text string
	// Keyword is its first keyword, upper case ("(" for a parenthesis).
	Keyword string
	// Columns are its result's columns, as DuckDB prepared it.
	Columns []Column
	// st is what the gate checked.
	st statement
}

// Column is a column of a statement's result.
type Column struct {
	Name string
	// Type is DuckDB's type of it; nil when the driver cannot describe it.
	Type duckdb.TypeInfo
}

// Check applies the gate to every statement of query on conn (a
// connection of a database Open returned) before any runs, and returns
// them in order: an error that is ErrNotReadOnly refuses the query whole.
// Unlike Run, it admits several statements, each with a result of its
// own (the protocol answers each).
func Check(ctx context.Context, conn *sql.Conn, query string) ([]Statement, error) {
	stmts, err := gate(ctx, conn, query)
	if err != nil {
		return nil, err
	}
	out := make([]Statement, len(stmts))
	for i, st := range stmts {
		cols := make([]Column, len(st.cols))
		for j, c := range st.cols {
			cols[j] = Column{Name: c.name, Type: c.info}
		}
		out[i] = Statement{Text: st.text, Keyword: st.keyword, Columns: cols, st: st}
	}
	return out, nil
}

// Projectable says whether st's result can be projected (Project): every
// statement but EXPLAIN and PRAGMA, whose results are text, numbers and
// booleans, and those without columns.
func (st Statement) Projectable() bool {
	return st.Keyword != "EXPLAIN" && st.Keyword != "PRAGMA" && len(st.Columns) > 0
}

// Project returns the query that gives st's result (st is the n-th
// statement of its query) with column i computed by exprs[i], an
// expression over #1 … #k, the columns of st by position (as bound: a
// statement whose columns depend on its parameters' values, a table
// macro's of a parameter, has them only once they are bound) (as Run renders
// its formats: FROM (st) SELECT exprs), checked by the gate as a
// statement of its own, so that wrapping st cannot make it do anything
// the gate would refuse.
func Project(ctx context.Context, conn *sql.Conn, st Statement, n int, exprs []string) (string, error) {
	if !st.Projectable() {
		return "", fmt.Errorf("statement %d (%s): its result cannot be projected", n, abbrev(st.Text))
	}
	return projected(ctx, conn, st.Text, n, exprs)
}

// Notes writes to notes the lines Run writes for stmts: each tick that a
// statement's <table>_at(t) names and that is not a visible tick of the
// run the views show.
func Notes(ctx context.Context, conn *sql.Conn, stmts []Statement, notes io.Writer) error {
	sts := make([]statement, len(stmts))
	for i, st := range stmts {
		sts[i] = st.st
	}
	return noteTicks(ctx, conn, sts, notes)
}

// WithErrors returns ctx for running checked statements, and a function
// that gives, for an error a statement run with it returned, the error
// behind it when a file the views read was found missing or damaged
// (LostFileError, cache.CorruptFragmentError) rather than DuckDB's text of
// it.
func WithErrors(ctx context.Context) (context.Context, func(error) error) {
	ctx, s := withSink(ctx)
	return ctx, s.or
}

// Split cuts query into its statements at the semicolons that end them
// (not those in strings, quoted names, dollar quotes or comments), leaving
// out those that are blank or only comments. It is the gate's first step;
// the gate does not rely on it for safety (DuckDB's parser counts the
// statements of each piece it checks).
func Split(query string) []string {
	var out []string
	for _, p := range split(query) {
		if skipSpace(p, 0) < len(p) {
			out = append(out, p)
		}
	}
	return out
}
