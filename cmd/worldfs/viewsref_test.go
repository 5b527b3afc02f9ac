package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestViewsReferenceIsWhole holds the README's reference of the views to
// the views: every view and macro `worldfs sql` makes on the demo world is
// named in "Query: the views" (a table's by its pattern, `<table>_at`), and
// each worldfs_ view's row names every one of its columns. A view added,
// or a column, without its line in the reference fails it.
func TestViewsReferenceIsWhole(t *testing.T) {
	_, _, _, section := readmeSection(t, "## Query: the views")
	env, work, world := readmeDemo(t)
	sql := func(query string) []string {
		t.Helper()
		cmd := exec.Command(lookPath(t, env), "sql", "--bucket", filepath.Join(work, "worldfs-data"), "--world", world, "--format", "csv", query)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("worldfs sql %q: %v", query, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[1:] // the header
	}
	names := sql("SELECT table_name FROM information_schema.tables UNION ALL SELECT name FROM worldfs_table_macros")
	tables := map[string]bool{}
	for _, n := range names {
		if base, ok := strings.CutSuffix(n, "_raw"); ok {
			tables[base] = true
		}
	}
	if len(tables) == 0 {
		t.Fatalf("no <table>_raw view among %v", names)
	}
	rows := map[string]string{} // a worldfs_ view's name: its row in the reference
	for _, line := range strings.Split(section, "\n") {
		if m := regexp.MustCompile("^\\| `(worldfs_[a-z_]+)`").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, n := range names {
		form := n
		for table := range tables {
			if n == table {
				form = "<table>"
			} else if rest, ok := strings.CutPrefix(n, table+"_"); ok && (rest == "raw" || rest == "at" || rest == "diff" || rest == "changes" || rest == "as_of") {
				form = "<table>_" + rest
			}
		}
		if !strings.Contains(section, "`"+form) {
			t.Errorf("%s (%s) is a view of the demo world that the README's reference does not name", n, form)
		}
		if !strings.HasPrefix(n, "worldfs_") || n == "worldfs_tick_list" || n == "worldfs_table_macros" {
			continue
		}
		row, ok := rows[n]
		if !ok {
			t.Errorf("%s has no row of its own in the README's reference", n)
			continue
		}
		for _, col := range sql("SELECT column_name FROM information_schema.columns WHERE table_name = '" + n + "'") {
			if !strings.Contains(row, "`"+col+"`") {
				t.Errorf("the README's row of %s does not name its column %s", n, col)
			}
		}
	}
}

// lookPath finds worldfs on the PATH of env, as a shell run with it would.
func lookPath(t *testing.T, env []string) string {
	t.Helper()
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				if p := filepath.Join(dir, "worldfs"); isFile(p) {
					return p
				}
			}
		}
	}
	t.Fatal("worldfs is not on the test's PATH")
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
