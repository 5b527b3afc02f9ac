package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// worldfs sql --worlds GLOB and --lineage W read a sweep as one: per
// world the rows its own session shows; worldfs views --worlds prints
// the same views for another DuckDB; a glob that matches nothing, a bad
// glob and a sweep beside --world are refused, saying why.
func TestSweepCommands(t *testing.T) {
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	enginetest.World(t, b, "base", 10).Close()
	enginetest.World(t, b, "other", 3).Close()
	for i, at := range []int64{2, 5, 8} {
		o := enginetest.Quiet
		o.Meta = map[string]string{"seed": fmt.Sprint(i)}
		f, err := engine.ForkWorld(ctx, b, "base", fmt.Sprintf("sweep-%d", i), index.DefaultRun, at, particles.Tables(), o)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Run(t, f, at+3)
		f.Close()
	}
	flags := []string{"--bucket", dir, "--cache-dir", t.TempDir()}
	sqlCSV := func(args ...string) []string {
		t.Helper()
		code, out, stderr := cli(t, append(append([]string{"sql", "--format", "csv"}, flags...), args...)...)
		if code != 0 {
			t.Fatalf("sql %v: %d %s", args, code, stderr)
		}
		rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
		slices.Sort(rows)
		return rows
	}
	const q = "SELECT world, tick, count(*), round(sum(position_x), 6) FROM particle GROUP BY ALL ORDER BY ALL"
	single := func(worlds ...string) []string {
		var out []string
		for _, w := range worlds {
			out = append(out, sqlCSV("--world", w, strings.Replace(q, "SELECT world,", "SELECT '"+w+"' AS world,", 1))...)
		}
		slices.Sort(out)
		return out
	}
	sweep := sqlCSV("--worlds", "sweep-*", q)
	if want := single("sweep-0", "sweep-1", "sweep-2"); len(sweep) == 0 || !slices.Equal(sweep, want) {
		t.Fatalf("--worlds sweep-*: %d rows; the three sessions %d", len(sweep), len(want))
	}
	lineage := sqlCSV("--lineage", "base", q)
	if want := single("base", "sweep-0", "sweep-1", "sweep-2"); !slices.Equal(lineage, want) {
		t.Fatalf("--lineage base: %d rows; the four sessions %d", len(lineage), len(want))
	}
	if got := sqlCSV("--lineage", "base", "SELECT world, meta['seed'], fork_tick FROM worldfs_worlds ORDER BY world"); strings.Join(got, "|") != "base,NULL,NULL|sweep-0,0,2|sweep-1,1,5|sweep-2,2,8" {
		t.Fatalf("worldfs_worlds of --lineage base: %q", got)
	}
	// The printed views, in a DuckDB of their own.
	code, script, stderr := cli(t, append(append([]string{"views"}, flags...), "--worlds", "sweep-*")...)
	if code != 0 {
		t.Fatalf("views --worlds: %d %s", code, stderr)
	}
	path := filepath.Join(t.TempDir(), "views.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(script); err != nil {
		t.Fatalf("the printed sweep in a DuckDB of its own: %v", err)
	}
	var n, worlds int64
	if err := db.QueryRow("SELECT count(*), count(DISTINCT world) FROM particle").Scan(&n, &worlds); err != nil {
		t.Fatal(err)
	}
	if want := sqlCSV("--worlds", "sweep-*", "SELECT count(*), count(DISTINCT world) FROM particle"); fmt.Sprintf("%d,%d", n, worlds) != want[0] {
		t.Fatalf("the printed sweep shows %d rows of %d worlds; worldfs sql %s", n, worlds, want[0])
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--worlds", "nothing-*", "SELECT 1"}, exitNotFound, `no world matches "nothing-*" (of the bucket's 5 worlds`},
		{[]string{"--worlds", "[", "SELECT 1"}, exitUsage, "syntax error in pattern"},
		{[]string{"--lineage", "nope", "SELECT 1"}, exitNotFound, "world nope does not exist"},
		{[]string{"--worlds", "sweep-*", "--world", "base", "SELECT 1"}, exitUsage, "give one of them"},
		{[]string{"--worlds", "sweep-*", "--lineage", "base", "SELECT 1"}, exitUsage, "give one"},
	} {
		code, _, stderr := cli(t, append(append([]string{"sql"}, flags...), c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("sql %v: %d %q; want %d saying %q", c.args, code, stderr, c.code, c.says)
		}
	}
}
