package serve

import (
	"context"
	dbsql "database/sql"
	"fmt"
)

// A statement's result, batch by batch, within the memory DuckDB may
// hold. DuckDB's driver materializes a query's whole result before the
// first row is read, outside DuckDB's memory_limit; so the server puts a
// result in a temporary table of the session's database (CREATE TEMP
// TABLE … AS the projected statement the gate checked), which DuckDB
// holds within memory_limit, spilling the rest to the views directory,
// and reads it a batch of rows at a time as the client takes them. A
// client that reads nothing holds the table and one batch, never the
// whole result in memory (docs/INTERNALS.md, "serve").

// newResult returns the rows of q (with args), n columns: a result of at
// most a batch is read whole at once (one statement, as worldfs sql runs
// it: most results a dashboard asks for), a larger one goes through a
// result table (newCursor), q run again.
func newResult(ctx context.Context, conn *dbsql.Conn, table, q string, args []any, n int) (rowSource, error) {
	rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT * FROM (%s\n) AS worldfs_first LIMIT %d", q, batchRows+1), args...)
	if err != nil {
		return nil, err
	}
	b := &buffered{}
	for rows.Next() && len(b.rows) <= batchRows {
		vals := make([]any, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return nil, err
		}
		b.rows = append(b.rows, vals)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, err
	}
	if len(b.rows) <= batchRows {
		b.next = -1
		return b, nil
	}
	return newCursor(ctx, conn, table, q, args)
}

// buffered is a result read whole.
type buffered struct {
	rows [][]any
	next int
}

func (b *buffered) Next() bool {
	b.next++
	return b.next < len(b.rows)
}

func (b *buffered) Scan(dest ...any) error {
	for i, d := range dest {
		*(d.(*any)) = b.rows[b.next][i]
	}
	return nil
}

func (b *buffered) Err() error   { return nil }
func (b *buffered) Close() error { b.rows = nil; return nil }

// rowSource is a statement's rows (database/sql's Rows, or a cursor).
type rowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// resultPrefix names the result tables (hidden from the catalog).
const resultPrefix = "worldfs_result_"

// batchRows is how many rows of a result one read takes.
const batchRows = 16384

// cursor reads a result table a batch at a time.
type cursor struct {
	ctx         context.Context
	conn        *dbsql.Conn
	table       string
	total, next int64
	rows        *dbsql.Rows
	err         error
}

// newCursor runs q (with args) into the temporary table named table on
// conn and returns a cursor over its rows, in q's order.
func newCursor(ctx context.Context, conn *dbsql.Conn, table, q string, args []any) (*cursor, error) {
	if _, err := conn.ExecContext(ctx, "CREATE TEMP TABLE "+table+" AS "+q, args...); err != nil {
		return nil, err
	}
	c := &cursor{ctx: ctx, conn: conn, table: table}
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&c.total); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *cursor) Next() bool {
	for c.err == nil {
		if c.rows != nil {
			if c.rows.Next() {
				return true
			}
			c.err = c.rows.Err()
			c.rows.Close()
			c.rows = nil
			continue
		}
		if c.next >= c.total {
			return false
		}
		end := min(c.next+batchRows, c.total)
		// A scan keeps the table's order (DuckDB's preserve_insertion_order,
		// on by default and locked with the configuration).
		c.rows, c.err = c.conn.QueryContext(c.ctx, fmt.Sprintf("SELECT * FROM %s WHERE rowid >= %d AND rowid < %d", c.table, c.next, end))
		c.next = end
	}
	return false
}

func (c *cursor) Scan(dest ...any) error { return c.rows.Scan(dest...) }

func (c *cursor) Err() error { return c.err }

// Close drops the table (on a context of its own: the statement's may
// have ended).
func (c *cursor) Close() error {
	if c.rows != nil {
		c.rows.Close()
		c.rows = nil
	}
	_, err := c.conn.ExecContext(context.WithoutCancel(c.ctx), "DROP TABLE IF EXISTS "+c.table)
	return err
}
