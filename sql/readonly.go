package sql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The DuckDB that worldfs runs for SQL (Open, Export, CopyTick, CopyFacts,
// ReadRows) reads only what the views read and writes nothing but what
// worldfs itself asks for. lockDown confines it: external access limited
// to the directories the views read (the bucket's data directory, or
// the cache's copy of it, and the views directory with the fragment
// list and the empty witnesses) plus the files named, extension install
// and autoload off, then the configuration locked so that no statement
// can undo it. DuckDB permits writes inside the allowed directories too,
// so user SQL also passes the statement gate (gate.go) before it runs.

// lockDown confines db (one connection: the settings are the database's)
// to reading dirs and the files in paths (which it may also write: the
// output of an internal COPY), spilling to a private directory under
// spill (none: no spilling).
func lockDown(ctx context.Context, db *sql.DB, dirs, paths []string, spill string) error {
	var stmts []string
	if spill != "" {
		// A name of its own: DuckDB creates it when it first spills and
		// removes it when the database closes.
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		stmts = append(stmts, "SET temp_directory = "+lit(filepath.Join(spill, fmt.Sprintf("spill-%d-%s", os.Getpid(), hex.EncodeToString(rnd[:])))))
	} else {
		stmts = append(stmts, "SET temp_directory = ''") // not .tmp in the working directory
	}
	stmts = append(stmts,
		"SET autoinstall_known_extensions = false",
		"SET autoload_known_extensions = false",
		"SET allow_community_extensions = false",
		"SET allowed_directories = "+litList(dirs, true),
		"SET allowed_paths = "+litList(paths, false),
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	)
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("confining DuckDB (%s): %w", s, err)
		}
	}
	return nil
}

// litList is a SQL list of string literals; with dir, each ends in a
// separator (DuckDB matches allowed directories as prefixes: /a/b would
// admit /a/bc).
func litList(ss []string, dir bool) string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if dir && !strings.HasSuffix(s, string(filepath.Separator)) {
			s += string(filepath.Separator)
		}
		out = append(out, lit(s))
	}
	return "[" + strings.Join(out, ", ") + "]::VARCHAR[]"
}

// readDirs returns what the views of s read once they are defined: the
// data directory of the fragments they list (a fragment path that ends in
// its object name data/<world>/<run>/<table>/…, in the bucket or in the
// cache), any other fragment file by itself, and the views directory
// (fragment lists and empty witnesses). The views must be defined on db.
//
// One data directory, not each table's: DuckDB checks every file it opens
// against the whole list, and a sweep of 100 worlds reads 405 table
// directories (its aggregate 0.54-0.64 s confined to them, 0.41 s to
// one). What the list adds to the statement gate stays: no catalog, no
// file outside the bucket's data.
func readDirs(ctx context.Context, db *sql.DB, s *Script) (dirs, paths []string, err error) {
	tables, lists := s.fragmentTables()
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, `SELECT DISTINCT
  CASE WHEN starts_with(object, 'data/' || world || '/' || run || '/' || table_id || '/') AND ends_with(path, object)
    THEN left(path, length(path) - length(object)) || 'data/' END AS dir,
  CASE WHEN dir IS NULL THEN path END AS file
FROM `+table)
		if err != nil {
			return nil, nil, fmt.Errorf("the directories the views read: %w", err)
		}
		for rows.Next() {
			var dir, file sql.NullString
			if err := rows.Scan(&dir, &file); err != nil {
				rows.Close()
				return nil, nil, err
			}
			if d := filepath.FromSlash(dir.String); dir.Valid && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			} else if file.Valid {
				paths = append(paths, file.String)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return append(dirs, lists...), paths, nil
}

// limit sets l's bounds on db (before lockDown locks them).
func limit(ctx context.Context, db *sql.DB, l Limits) error {
	var stmts []string
	if l.Memory > 0 {
		stmts = append(stmts, fmt.Sprintf("SET memory_limit = '%dB'", l.Memory))
	}
	if l.Threads > 0 {
		stmts = append(stmts, fmt.Sprintf("SET threads = %d", l.Threads))
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("bounding DuckDB (%s): %w", s, err)
		}
	}
	return nil
}
