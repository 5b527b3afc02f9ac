package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/index"
)

func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	keepHome(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every command answers --help with its usage and an example.
func TestEveryCommandHasHelpWithExample(t *testing.T) {
	for group, cs := range commands {
		for _, c := range cs {
			args := strings.Fields(group + " " + c.name + " --help")
			code, stdout, stderr := cli(t, args...)
			_, example, _ := strings.Cut(stdout, "Example:\n")
			if code != 0 || !strings.Contains(example, "worldfs "+strings.TrimSpace(group+" "+c.name)) || !strings.Contains(stdout, "Usage: worldfs") || stderr != "" {
				t.Errorf("%v: exit %d, help on stdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
			}
			if regexp.MustCompile(`\n  -[^-]`).MatchString(stdout) {
				t.Errorf("%v: a flag spelled with one dash in the help:\n%s", args, stdout)
			}
		}
	}
	if code, out, _ := cli(t, "--help"); code != 0 || !strings.Contains(out, "bench SUBCOMMAND") || strings.Count(out, "\n  bench") != 1 {
		t.Errorf("top-level --help: exit %d\n%s", code, out)
	}
	// Every group says what it is for.
	for group := range commands {
		if group == "" {
			continue
		}
		code, out, _ := cli(t, group, "--help")
		if code != 0 || groupSummaries[group] == "" || !strings.Contains(out, groupSummaries[group]+".\n") {
			t.Errorf("worldfs %s --help: exit %d, its summary %q\n%s", group, code, groupSummaries[group], out)
		}
	}
}

func TestBadCommandLinesExit2(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nonsense"}, {"bucket"}, {"bucket", "frob"}, {"bucket", "cat"},
		{"bucket", "ls", "--no-such-flag"}, {"bucket", "rm", "x"}, {"demo", "--ticks", "3"},
		{"bench", "commit", "--writers", "0"}, {"bench", "commit", "--light", "-1s"}, {"bench", "coldstart", "--ticks", "0"},
		{"bench", "ticks", "--depth", "0"}, {"bench", "ticks", "--depth", "65"},
		{"bench", "history", "--compare-at", "10"}, {"bench", "history", "--synthetic", "--ticks", "10", "--compare-at", "20"},
		{"bench", "history", "--synthetic", "--compare-at", "x"}, {"bench", "history", "--synthetic", "--world", "w"},
		{"mount", "--ctl-group", "nogroup", "bucket", "mnt"}, // a ctl group needs --allow-other
	} {
		// worldfs alone, or a group alone, prints what there is to run;
		// any other mistake is one line that names the command and points
		// to its --help.
		full := len(args) == 0 || len(args) == 1 && commands[args[0]] != nil
		code, stdout, stderr := cli(t, args...)
		name := "worldfs"
		named := func(cs []command, n string) bool {
			return slices.ContainsFunc(cs, func(c command) bool { return c.name == n })
		}
		switch {
		case len(args) > 1 && commands[args[0]] != nil && named(commands[args[0]], args[1]):
			name += " " + args[0] + " " + args[1]
		case len(args) > 0 && (commands[args[0]] != nil || named(commands[""], args[0])):
			name += " " + args[0]
		}
		switch {
		case code != 2 || stdout != "":
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing on stdout", args, code, stdout)
		case full && (!strings.HasPrefix(stderr, "worldfs: ") || !strings.Contains(stderr, "Usage:")):
			t.Errorf("%q: stderr %q; want the message and the usage", args, stderr)
		case !full && (strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, name+": ") || !strings.HasSuffix(stderr, "(see '"+name+" --help')\n")):
			t.Errorf("%q: stderr %q; want one line naming %s and pointing to its --help", args, stderr, name)
		}
	}
}

// A flag error is one line naming the flag, the value and what it takes;
// an unknown command, subcommand, flag or world gets the nearest as a
// suggestion.
func TestCommandLineErrorsTeach(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "world", "create", "lab", "--bucket", dir, "--tables", `[{"name":"agent","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]}]`); code != 0 {
		t.Fatal(stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"wrolds"}, 2, `worldfs: unknown command "wrolds"; did you mean "worlds"? (see 'worldfs --help')`},
		{[]string{"optimise"}, 2, `unknown command "optimise"; did you mean "optimize"?`},
		{[]string{"world", "frok"}, 2, `worldfs world: unknown subcommand "frok"; did you mean "fork"? (see 'worldfs world --help')`},
		{[]string{"sql", "--wrold", "lab", "SELECT 1"}, 2, "worldfs sql: unknown flag --wrold; did you mean --world? (see 'worldfs sql --help')"},
		{[]string{"log", "--bucket", dir, "--world", "lab", "--limit", "ten"}, 2, `worldfs log: --limit: "ten" is not a whole number (see 'worldfs log --help')`},
		{[]string{"log", "--bucket", dir, "--world", "lab", "--json=maybe"}, 2, `--json: "maybe" is not true or false`},
		{[]string{"watch", "--bucket", dir, "--world", "lab", "--poll", "often"}, 2, `--poll: "often" is not a duration (e.g. 30s, 2m, 1h30m)`},
		{[]string{"log", "--bucket", dir, "--world"}, 2, "worldfs log: --world needs a value (see 'worldfs log --help')"},
		{[]string{"mount", "--cache-size", "lots", "b", "m"}, 2, `--cache-size: "lots" is not a size (e.g. 10GiB, 512MiB, 4096)`},
		{[]string{"log", "--bucket", dir, "--world", "lbb"}, 4, `world lbb does not exist in bucket ` + dir + `; did you mean "lab"? ('worldfs worlds' lists them)`},
		{[]string{"log", "--bucket", dir, "--world", "zzzzzz"}, 4, "world zzzzzz does not exist in bucket " + dir + " ('worldfs worlds' lists them)"},
	} {
		code, stdout, stderr := cli(t, c.args...)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.says) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line saying %q", c.args, code, stderr, c.code, c.says)
		}
	}
}

// A fact's and a receipt's id read as the world's claim they are.
func TestClaimNumbers(t *testing.T) {
	for id, want := range map[int64]string{index.FactIDBase - 1: "#1", index.FactIDBase - 1234: "#1234", 7: "7", -3: "-3"} {
		if got := claimNumber(id); got != want {
			t.Errorf("claimNumber(%d) = %q, want %q", id, got, want)
		}
	}
}

// A subcommand given without its group is named with it.
func TestUnknownCommandNamesItsGroup(t *testing.T) {
	code, _, stderr := cli(t, "fork", "--help")
	if code != 2 || !strings.Contains(stderr, `unknown command "fork"; did you mean "world fork"?`) {
		t.Errorf("worldfs fork: exit %d, stderr %q", code, stderr)
	}
	if _, _, stderr := cli(t, "nonsense"); strings.Contains(stderr, "did you mean") {
		t.Errorf("worldfs nonsense: %q", stderr)
	}
}

func TestBucketCommands(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("0123456789"), 0o644)
	if code, out, stderr := cli(t, "bucket", "put", "--bucket", dir, "notes/a.txt", src); code != 0 || !strings.Contains(out, "created notes/a.txt (10 bytes") {
		t.Fatalf("put: %d %q %q", code, out, stderr)
	}
	// The name is taken: refused, and the object is unchanged.
	if code, _, stderr := cli(t, "bucket", "put", "--bucket", dir, "notes/a.txt", "/etc/hostname"); code != exitConflict || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second put: %d %q", code, stderr)
	}
	if code, out, _ := cli(t, "bucket", "cat", "--bucket", dir, "--offset", "2", "--length", "3", "notes/a.txt"); code != 0 || out != "234" {
		t.Fatalf("cat range: %d %q", code, out)
	}
	if code, out, _ := cli(t, "bucket", "ls", "notes/", "--bucket", dir); code != 0 || !strings.Contains(out, "notes/a.txt") {
		t.Fatalf("ls: %d %q", code, out)
	}
	if code, _, stderr := cli(t, "bucket", "cat", "--bucket", dir, "../etc/passwd"); code != 1 || !strings.Contains(stderr, `invalid object name "../etc/passwd"`) {
		t.Fatalf("cat of a bad name: %d %q", code, stderr)
	}
	if code, _, stderr := cli(t, "bucket", "stat", "--bucket", "s3://x", "a"); code != 1 || !strings.Contains(stderr, `unknown scheme "s3"`) {
		t.Fatalf("unknown scheme: %d %q", code, stderr)
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := cli(t, "demo", "--bucket", dir, "--ticks", "40")
	if code != 0 || !strings.Contains(out, "40 ticks committed") || !strings.Contains(out, "the old writer is stopped") || !strings.Contains(out, "2 facts, 1 receipt") ||
		!strings.Contains(out, "forked at tick 20") || !strings.Contains(out, "head tick 89, 90 ticks visible, fence epoch 2") {
		t.Fatalf("demo: %d\n%s\n%s", code, out, stderr)
	}
}

func TestSQLAndViews(t *testing.T) {
	dir := t.TempDir()
	if code, out, stderr := cli(t, "demo", "--bucket", dir, "--ticks", "20"); code != 0 {
		t.Fatalf("demo: %s %s", out, stderr)
	}
	worlds, _ := os.ReadDir(filepath.Join(dir, "directory"))
	world := worlds[0].Name()
	if strings.HasSuffix(world, "-fork") {
		world = worlds[1].Name()
	}
	code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", world, "--format", "csv", "SELECT count(DISTINCT tick) AS ticks FROM emitter")
	if code != 0 || out != "ticks\n70\n" {
		t.Fatalf("sql: %d %q %s", code, out, stderr)
	}
	code, out, _ = cli(t, "sql", "--bucket", dir, "--world", world, "--at", "5", "--format", "json", "SELECT max(tick) AS last FROM particle")
	if code != 0 || !strings.Contains(out, `"last": 5`) {
		t.Fatalf("sql --at: %d %q", code, out)
	}
	if code, _, stderr := cli(t, "sql", "--bucket", dir, "--world", world, "SELEC nonsense"); code != 1 || !strings.Contains(stderr, "syntax error") {
		t.Fatalf("bad SQL: %d %s", code, stderr)
	}
	if code, _, stderr := cli(t, "sql", "--bucket", dir, "--world", "nope", "SELECT 1"); code != exitNotFound || !strings.Contains(stderr, "world nope does not exist") {
		t.Fatalf("unknown world: %d %s", code, stderr)
	}
	if code, _, _ := cli(t, "sql", "--bucket", dir, "SELECT 1"); code != 2 {
		t.Fatalf("no --world: exit %d", code)
	}
	code, out, _ = cli(t, "views", "--bucket", dir, "--world", world, "--cache-dir", t.TempDir())
	if code != 0 || !strings.Contains(out, "CREATE OR REPLACE TEMP VIEW \"particle\"") || !strings.Contains(out, "particle_at") {
		t.Fatalf("views: %d\n%s", code, out)
	}
	// The printed script runs as is in a fresh DuckDB.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(out); err != nil {
		t.Fatalf("the views script: %v\n%s", err, out)
	}
	var ticks int64
	if err := db.QueryRow("SELECT count(DISTINCT tick) FROM emitter").Scan(&ticks); err != nil || ticks != 70 {
		t.Fatalf("the views script shows %d emitter ticks (%v), want 70", ticks, err)
	}
}

// A bucket that cannot be read in place is queried through the fragment
// cache.
func TestSQLThroughTheCache(t *testing.T) {
	url := "mem://cli-sql-cache"
	if code, out, stderr := cli(t, "demo", "--bucket", url, "--ticks", "10"); code != 0 {
		t.Fatalf("demo: %s %s", out, stderr)
	}
	b, _ := bucketurl.Open(context.Background(), url)
	worlds, err := index.ListWorlds(context.Background(), b)
	if err != nil || len(worlds) == 0 {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	code, out, stderr := cli(t, "sql", "--bucket", url, "--world", worlds[0].ID, "--cache-dir", cacheDir, "--format", "csv", "SELECT count(DISTINCT tick) AS n FROM emitter")
	if code != 0 || !strings.HasPrefix(out, "n\n") {
		t.Fatalf("sql through the cache: %d %q %s", code, out, stderr)
	}
	if files, _ := os.ReadDir(filepath.Join(cacheDir, "objects")); len(files) == 0 {
		t.Fatal("nothing went through the cache")
	}
}
