package sql

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
)

// FormatParquet is a CopyTick output format (with FormatCSV): frame's.
const FormatParquet = frame.FormatParquet

// CopyTick writes the visible rows of the table called name at tick (of
// run opts.Run, through its lineage) to the file dst, in FormatParquet
// (zstd) or FormatCSV (with a header): every column of the raw view,
// commit columns included, in entity order. It is what the views show for
// that tick, written as a file by DuckDB (the mount derives its files in
// Go, with the same rows: see package fs).
func CopyTick(ctx context.Context, b bucket.Bucket, world string, opts Options, name string, tick int64, format, dst string) error {
	opts.AtTick, opts.Token, opts.Only, opts.Table = &tick, "", true, name
	return copyView(ctx, b, world, opts, name, fmt.Sprintf("SELECT * FROM %s WHERE tick = %d ORDER BY entity_id", ident(name+"_raw"), tick), format, dst)
}

// CopyFacts writes the visible facts of the fact table called name (of run
// opts.Run), or with name frame.ReceiptsView the world's visible evaluation
// receipts, to dst in format: what worldfs sql shows, as a file.
func CopyFacts(ctx context.Context, b bucket.Bucket, world string, opts Options, name, format, dst string) error {
	if name == frame.ReceiptsView {
		opts.Table = frame.ReceiptTableName
		return copyView(ctx, b, world, opts, "", "SELECT * FROM worldfs_receipts ORDER BY receipt_id DESC", format, dst)
	}
	opts.Table = name
	return copyView(ctx, b, world, opts, name, fmt.Sprintf("SELECT * FROM %s ORDER BY entity_id DESC", ident(name+"_raw")), format, dst)
}

// copyView builds the views of world and writes query's rows to dst in
// format; view, unless empty, must be one of the views.
func copyView(ctx context.Context, b bucket.Bucket, world string, opts Options, view, query, format, dst string) error {
	var with string
	switch format {
	case FormatParquet:
		with = "FORMAT parquet, COMPRESSION zstd"
	case FormatCSV:
		with = "FORMAT csv, HEADER"
	default:
		return fmt.Errorf("copy of %s: unknown format %q (parquet or csv)", view, format)
	}
	if opts.Dir == "" {
		// The list is needed only by this copy: beside the output (in a
		// cache, that is the cache's directory), gone when it ends.
		lists, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".lists-")
		if err != nil {
			return fmt.Errorf("copy of %s: %w", view, err)
		}
		defer os.RemoveAll(lists)
		opts.Dir = lists
	}
	s, err := Build(ctx, b, world, opts)
	if err != nil {
		return err
	}
	if view != "" && !slices.Contains(s.Views, view) {
		return fmt.Errorf("world %s run %s: table %q: %w", world, s.Run, view, ErrNotFound)
	}
	// The output file is the only one the confined database may write
	// besides the views' own directories, and the only statement it runs
	// is this COPY: no user SQL reaches it.
	db, _, err := open(ctx, s, []string{dst})
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, sink := withSink(ctx)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("COPY (%s) TO %s (%s)", query, lit(dst), with)); err != nil {
		return fmt.Errorf("world %s: writing %s as %s: %w", world, query, format, sink.or(err))
	}
	return nil
}

// ReadRows reads a Parquet (.parquet) or newline-delimited JSON (.jsonl,
// .ndjson) file into rows, by column name: Parquet as DuckDB types it (a
// DuckDB that can open that one file and nothing else), JSONL one object
// per non-empty line, decoded strictly with numbers kept as written
// (json.Number: no column type is inferred, no digit lost, a key absent
// from a line stays absent).
func ReadRows(ctx context.Context, path string) ([]map[string]any, error) {
	var from string
	switch {
	case strings.HasSuffix(path, ".parquet"):
		from = readOne(path)
	case strings.HasSuffix(path, ".jsonl"), strings.HasSuffix(path, ".ndjson"):
		return readJSONL(path)
	default:
		return nil, fmt.Errorf("%s: rows are read from .parquet, .jsonl or .ndjson files", path)
	}
	db, err := openDuckDB()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := lockDown(ctx, db, nil, []string{path}, ""); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+from)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer rows.Close()
	out, err := records(rows)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// readJSONL reads a JSONL file's rows (see ReadRows).
func readJSONL(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxJSONLLine)
	var out []map[string]any
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var row map[string]any
		if err := frame.DecodeStrict(line, &row); err != nil || row == nil {
			if err == nil {
				err = errors.New("null is not a row object")
			}
			return nil, fmt.Errorf("%s line %d: %v", path, n, err)
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// maxJSONLLine bounds one line of a JSONL file.
const maxJSONLLine = frame.MaxInputDocument
