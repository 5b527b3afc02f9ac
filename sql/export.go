package sql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// ExportFormats are the output formats of Export, by file extension, as
// the options of DuckDB's COPY.
var ExportFormats = map[string]string{
	".csv":     "FORMAT csv, HEADER",
	".json":    "FORMAT json, ARRAY true",
	".jsonl":   "FORMAT json",
	".ndjson":  "FORMAT json",
	".parquet": "FORMAT parquet, COMPRESSION zstd",
}

// ErrOutputPath: Export was asked to write where it must not.
var ErrOutputPath = errors.New("not an output path")

// Export runs query like Run (one statement, which must only read) and
// writes its rows, which a query must give, to the file
// path, in the format its extension names (ExportFormats). The file is
// written beside path under a temporary name and renamed over it, so path
// holds the whole result or what it held before; a file already there is
// replaced (a directory is not). path must not lie in any directory of
// refuse (the bucket, the cache) nor in any the views read.
//
// Only worldfs writes the file: the views' database, confined like
// Open's, may write that one temporary file and nothing else new, and the
// statement that writes it is worldfs's COPY around the user's checked
// query. notes gets what Run's notes get.
func Export(ctx context.Context, s *Script, query, path string, refuse []string, notes io.Writer) error {
	ext := strings.ToLower(filepath.Ext(path))
	with, ok := ExportFormats[ext]
	if !ok {
		return fmt.Errorf("%s: the output format comes from the extension: .csv, .json, .jsonl (.ndjson) or .parquet: %w", path, ErrOutputPath)
	}
	dst, err := outputPath(path)
	if err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-"+hex.EncodeToString(rnd[:]))
	db, dirs, err := open(ctx, s, []string{tmp})
	if err != nil {
		return err
	}
	defer db.Close()
	for _, d := range append(refuse, dirs...) {
		if within(dst, d) {
			return fmt.Errorf("%s is inside %s: worldfs sql never writes into the bucket or its cache; name a file elsewhere: %w", path, d, ErrOutputPath)
		}
	}
	ctx, sink := withSink(ctx)
	conn, stmts, err := gated(ctx, db, query)
	if err != nil {
		return sink.or(err)
	}
	defer conn.Close()
	if err := noteTicks(ctx, conn, stmts, notes); err != nil {
		return err
	}
	last := stmts[len(stmts)-1]
	if last.keyword == "EXPLAIN" || last.keyword == "PRAGMA" {
		return refusedf("statement %d (%s) is refused: --out writes the rows of a query (SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE, PIVOT), not %s", len(stmts), abbrev(last.text), last.keyword)
	}
	// The checked statement is one complete query, so it closes every
	// parenthesis, string and quoted name it opens; the line breaks end a
	// trailing -- comment. DuckDB must still see one COPY.
	q := last.text
	switch last.keyword {
	case "DESCRIBE", "SHOW", "SUMMARIZE": // not a COPY's subquery, but a FROM's
		q = "FROM (\n" + q + "\n)"
	}
	cp := fmt.Sprintf("COPY (\n%s\n) TO %s (%s)", q, lit(tmp), with)
	if n, err := countStatements(cp); err != nil || n != 1 {
		return refusedf("statement %d (%s) cannot be written to a file (%v)", len(stmts), abbrev(last.text), err)
	}
	if t, err := stmtType(ctx, conn, cp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the result of statement %d to %s: %w", len(stmts), path, sink.or(err))
	} else if t != duckdb.STATEMENT_TYPE_COPY {
		return refusedf("statement %d (%s) cannot be written to a file", len(stmts), abbrev(last.text))
	}
	if _, err := conn.ExecContext(ctx, cp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the result to %s: %w", path, sink.or(err))
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the result to %s: %w", path, err)
	}
	return nil
}

// outputPath returns the file path names, its directory's symbolic links
// resolved (and its own, if it is one): the file Export would replace.
func outputPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", fmt.Errorf("%s: its directory: %w", path, err)
	}
	dst := filepath.Join(dir, filepath.Base(abs))
	if fi, err := os.Lstat(dst); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			if dst, err = filepath.EvalSymlinks(dst); err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
			fi, err = os.Stat(dst)
			if err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%s exists and is not a regular file: %w", path, ErrOutputPath)
		}
	}
	return dst, nil
}

// within says whether path is dir or lies under it (dir's symbolic links
// resolved when it exists).
func within(path, dir string) bool {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	} else if a, err := filepath.Abs(dir); err == nil {
		dir = a
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
