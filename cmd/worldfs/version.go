package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// versionInfo is what `worldfs version` prints.
type versionInfo struct {
	Version  string `json:"version"`             // the module version ("(devel)" for a build from a checkout)
	Commit   string `json:"commit,omitempty"`    // vcs.revision, with "+dirty" for local changes
	Time     string `json:"time,omitempty"`      // vcs.time
	Go       string `json:"go"`                  // the Go release that built it
	DuckDB   string `json:"duckdb"`              // the DuckDB library linked in
	DuckDBGo string `json:"duckdb_go,omitempty"` // the duckdb-go driver module
}

func readVersion(ctx context.Context) versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version(), DuckDB: "(unknown)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version = bi.Main.Version
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && v.Commit != "" {
			v.Commit += "+dirty"
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/duckdb/duckdb-go/v2" {
				v.DuckDBGo = d.Version
			}
		}
	}
	if db, err := sql.Open("duckdb", ""); err == nil {
		_ = db.QueryRowContext(ctx, "SELECT library_version FROM pragma_version()").Scan(&v.DuckDB)
		db.Close()
	}
	return v
}

// versionCmd is "worldfs version".
func versionCmd() command {
	var asJSON *bool
	return command{
		name:    "version",
		summary: "print worldfs's version and commit, and the Go and DuckDB versions it was built with",
		example: "worldfs version --json",
		flags:   func(fs *flag.FlagSet) { asJSON = fs.Bool("json", false, "print one JSON object") },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("version takes no arguments")
			}
			v := readVersion(ctx)
			if *asJSON {
				return writeJSON(out, v)
			}
			commit := v.Commit
			if commit == "" {
				commit = "unknown (built without VCS information)"
			} else if v.Time != "" {
				commit += " (" + v.Time + ")"
			}
			_, err := fmt.Fprintf(out, "worldfs %s\ncommit:  %s\ngo:      %s\nduckdb:  %s (duckdb-go %s)\n", v.Version, commit, v.Go, v.DuckDB, v.DuckDBGo)
			return err
		},
	}
}
