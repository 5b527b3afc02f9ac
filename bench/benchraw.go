package bench

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// rawSpec is the baseline of the benches that compare worldfs in a fresh
// process (bench sweep): a query read from a file, run on a plain
// in-memory DuckDB of the same library (no views, no statement gate, no
// confinement) in a process of its own, every row of its result read.
func rawSpec(Env) Bench {
	var file *string
	return benchSpec[*rawBench]{
		name:    "raw",
		summary: "the baseline of fresh-process comparisons: one query from a file on a plain DuckDB (no views, gate or confinement), every row read",
		example: "worldfs bench raw --file /var/tmp/bench-sweep/raw-sweep.sql",
		flags: func(fs *flag.FlagSet) {
			file = fs.String("file", "", "the file holding the query (required)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *file == "" {
				return usagef("bench raw takes no arguments and a --file")
			}
			return nil
		},
		run: func(ctx context.Context, _ bucket.Bucket) (*rawBench, error) {
			return benchRaw(ctx, *file)
		},
		table: func(out io.Writer, r *rawBench) error {
			_, err := fmt.Fprintf(out, "%s: %d rows of %d columns in %.3f s on a plain DuckDB\n", r.File, r.Rows, r.Columns, r.Seconds)
			return err
		},
	}.bench()
}

// rawBench is the result of bench raw.
type rawBench struct {
	File    string  `json:"file"`
	Rows    int64   `json:"rows"`
	Columns int     `json:"columns"`
	Seconds float64 `json:"seconds"` // from the query's start to its last row
}

func benchRaw(ctx context.Context, file string) (*rawBench, error) {
	q, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	res := &rawBench{File: file}
	start := time.Now()
	rows, err := db.QueryContext(ctx, string(q))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	res.Columns = len(cols)
	vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		res.Rows++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
