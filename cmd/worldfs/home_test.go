package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// homes: each test's stand-in home directory.
var homes sync.Map // *testing.T -> string

// keepHome points HOME and XDG_CACHE_HOME of the commands a test runs at a
// directory under t.TempDir() (one per test), so that the defaults that
// name the user's cache (--cache-dir, the demo's views) write there and
// never into the real home. It returns that home.
func keepHome(t *testing.T) string {
	t.Helper()
	if h, ok := homes.Load(t); ok {
		return h.(string)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	homes.Store(t, home)
	t.Cleanup(func() { homes.Delete(t) })
	return home
}

// Commands run with their default cache directory write under the test's
// home, which keepHome put in a temporary directory: what a command
// writes by default lands in the user's cache, and nowhere else.
func TestDefaultsWriteOnlyUnderTheHome(t *testing.T) {
	home := keepHome(t)
	dir := t.TempDir()
	if code, _, stderr := cli(t, "demo", "--bucket", dir, "--ticks", "10", "--world", "d"); code != 0 {
		t.Fatalf("demo: %s", stderr)
	}
	if code, _, stderr := cli(t, "sql", "--bucket", dir, "--world", "d", "SELECT count(*) FROM particle"); code != 0 {
		t.Fatalf("sql: %s", stderr)
	}
	lists, _ := filepath.Glob(filepath.Join(home, ".cache", "worldfs", "views", "fragments-*.parquet"))
	if len(lists) == 0 {
		var found []string
		filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
			found = append(found, p)
			return nil
		})
		t.Fatalf("no fragment list under the test's cache home %s; found %v", home, found)
	}
}
