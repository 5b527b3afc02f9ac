// Package layers_test checks that the import rules of .golangci.yml (the
// depguard rules make lint runs) forbid what docs/ARCHITECTURE.md, "The
// layers", says each layer must not import: a file of the tree, with the
// import planted, is judged as depguard judges it (every rule whose files
// match the file, its negations and $test included, and a denied package
// by prefix), so that a rule dropped, narrowed or widened by mistake fails
// here and not only when someone plants the import for real.
package layers_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const module = "github.com/worldfs/worldfs/"

// rule is one depguard rule of .golangci.yml.
type rule struct {
	Files []string `yaml:"files"`
	Deny  []struct {
		Pkg string `yaml:"pkg"`
	} `yaml:"deny"`
}

func rules(t *testing.T) map[string]rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", ".golangci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Linters struct {
			Settings struct {
				Depguard struct {
					Rules map[string]rule `yaml:"rules"`
				} `yaml:"depguard"`
			} `yaml:"settings"`
		} `yaml:"linters"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	rs := cfg.Linters.Settings.Depguard.Rules
	if len(rs) == 0 {
		t.Fatal(".golangci.yml has no depguard rules")
	}
	return rs
}

// configPath is golangci-lint's placeholder for the directory of
// .golangci.yml, the repository's root, in a rule's file patterns.
const configPath = "${config-path}"

// glob turns a depguard file pattern into a regular expression over a
// file's absolute path ("**" any run of characters, "*" any within one
// path segment), with configPath standing for root.
func glob(t *testing.T, root, p string) *regexp.Regexp {
	p = strings.ReplaceAll(p, configPath, root)
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// matches reports whether a rule's files take file (an absolute path), as
// depguard decides it: some positive pattern matches ($all: any file,
// $test: a _test.go file) and no negated one does.
func matches(t *testing.T, r rule, root, file string) bool {
	in := false
	for _, p := range r.Files {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		var m bool
		switch p {
		case "$all":
			m = true
		case "$test":
			m = strings.HasSuffix(file, "_test.go")
		default:
			m = glob(t, root, p).MatchString(file)
		}
		if m && neg {
			return false
		}
		in = in || m && !neg
	}
	return in
}

// denied returns the rules that deny file an import of pkg.
func denied(t *testing.T, rs map[string]rule, root, file, pkg string) []string {
	var by []string
	for name, r := range rs {
		if !matches(t, r, root, file) {
			continue
		}
		for _, d := range r.Deny {
			if pkg == d.Pkg || strings.HasPrefix(pkg, d.Pkg+"/") {
				by = append(by, name)
			}
		}
	}
	return by
}

func TestLayerRules(t *testing.T) {
	rs := rules(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const duckdb = "github.com/duckdb/duckdb-go/v2"
	for _, c := range []struct {
		file, pkg string
		deny      bool
	}{
		// The mount and the web interface read byte layouts through
		// frame, never through a job.
		{"fs/nodes.go", module + "maintenance", true},
		{"fs/caller.go", module + "maintenance", true},
		{"ui/counts.go", module + "maintenance", true},
		{"ui/views.go", module + "maintenance", true},
		// The mount runs SQL only where it reads a .parquet file's rows
		// (caller.go) and reports DuckDB runs (stats.go).
		{"fs/nodes.go", module + "sql", true},
		{"fs/files.go", module + "sql", true},
		{"fs/facts.go", module + "sql", true},
		{"fs/nodes.go", duckdb, true},
		{"fs/nodes.go", "database/sql", true},
		{"fs/caller.go", module + "sql", false},
		{"fs/stats.go", module + "sql", false},
		// The web interface runs SQL in views.go, compare.go,
		// server.go, sqlpage.go and sweep.go only.
		{"ui/counts.go", module + "sql", true},
		{"ui/timeline.go", module + "sql", true},
		{"ui/counts.go", "database/sql", true},
		{"ui/views.go", module + "sql", false},
		{"ui/views.go", "database/sql", false},
		{"ui/compare.go", module + "sql", false},
		{"ui/server.go", module + "sql", false},
		{"ui/sqlpage.go", module + "sql", false},
		{"ui/sweep.go", module + "sql", false},
		{"ui/server.go", module + "fs", true},
		// An export writes what it references through frame; it
		// imports no job.
		{"export/iceberg/export.go", module + "maintenance", true},
		{"export/iceberg/export_test.go", module + "maintenance", false},
		// A copy moves objects.
		{"transfer/transfer.go", module + "maintenance", true},
		{"transfer/transfer.go", module + "sql", true},
		{"transfer/transfer.go", module + "fs", true},
		{"transfer/transfer.go", duckdb, true},
		// The format sits below every job and reader.
		{"frame/tickindex.go", module + "maintenance", true},
		{"frame/tickindex.go", module + "sql", true},
		{"frame/tickindex.go", module + "fs", true},
		{"frame/tickindex.go", module + "ui", true},
		{"frame/tickindex.go", duckdb, true},
		{"maintenance/compact.go", module + "sql", true},
		{"maintenance/compact.go", module + "fs", true},
		{"maintenance/compact.go", module + "ui", true},
		{"sql/views.go", module + "fs", true},
		// The PostgreSQL server reads through the views and the
		// catalog only.
		{"serve/session.go", module + "engine", true},
		{"serve/session.go", module + "frame", true},
		{"serve/session.go", module + "ui", true},
		{"serve/views.go", module + "sql", false},
		{"serve/views.go", module + "index", false},
		{"serve/server_test.go", module + "engine", false},
		// A check reads what jobs wrote; it runs no SQL and no job.
		{"check/check.go", module + "sql", true},
		{"check/check.go", duckdb, true},
		{"check/lost.go", module + "maintenance", true},
		{"check/check.go", module + "engine", true},
		{"check/check_test.go", module + "maintenance", false},
		{"index/verify.go", module + "check", true},
		{"cache/check.go", module + "check", true},
		// Tests may reach across.
		{"fs/ranged_test.go", module + "maintenance", false},
		{"ui/counts_test.go", module + "sql", false},
	} {
		by := denied(t, rs, root, filepath.Join(root, c.file), c.pkg)
		if c.deny && len(by) == 0 {
			t.Errorf("no rule of .golangci.yml denies %s an import of %s", c.file, c.pkg)
		}
		if !c.deny && len(by) > 0 {
			t.Errorf("%s may import %s, but rules %v deny it", c.file, c.pkg, by)
		}
	}
}

// TestLayerRulesAreAnchored holds every file pattern to the repository's
// root: depguard matches a pattern against a file's absolute path, so
// "**/check/**" takes every file of a clone that sits under a directory
// named check (a CI machine's checkout did, and the check package's rule
// then denied the views their DuckDB).
func TestLayerRulesAreAnchored(t *testing.T) {
	rs := rules(t)
	for name, r := range rs {
		for _, p := range r.Files {
			p = strings.TrimPrefix(p, "!")
			if p != "$all" && p != "$test" && !strings.HasPrefix(p, configPath+"/") {
				t.Errorf("rule %s: file pattern %q is not anchored at %s/", name, p, configPath)
			}
		}
	}
	// A clone under directories named as the layers judges the same.
	root := "/ci/check/sql/fs/bucket/ui/worldfs"
	for _, c := range []struct{ file, pkg string }{
		{"sql/gate.go", "github.com/duckdb/duckdb-go/v2"},
		{"serve/types.go", "github.com/duckdb/duckdb-go/v2"},
		{"transfer/assets.go", module + "engine"},
		{"engine/world.go", module + "maintenance"},
	} {
		if by := denied(t, rs, root, filepath.Join(root, c.file), c.pkg); len(by) > 0 {
			t.Errorf("in a clone at %s, %s may import %s, but rules %v deny it", root, c.file, c.pkg, by)
		}
	}
}
