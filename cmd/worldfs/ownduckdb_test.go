package main

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/internal/crashtest"
)

var (
	duckdbC      = regexp.MustCompile(`^duckdb -c (.*)$`)
	duckdbInit   = regexp.MustCompile(`^(.*) && duckdb -init (\S+)(\s+#.*)?$`)
	pyViews      = regexp.MustCompile(`subprocess\.check_output\(\["worldfs", "views", "--world", "([^"]+)"\]`)
	pyQuery      = regexp.MustCompile(`con\.sql\("([^"]+)"\)`)
	ownToolsHead = "## From your own DuckDB, Python or any program"
)

// The README's "From your own DuckDB, Python or any program" is not run as
// written: neither the duckdb shell nor Python's duckdb is installed where
// the tests run. Its DuckDB runs through DuckDB's Go driver instead, on the
// demo's bucket mounted at /mnt/worlds's stand-in: each `duckdb -c "SQL"`
// line's SQL (as bash expands it, with W the demo's world) must return
// rows; in `CMD && duckdb -init FILE` CMD runs in bash as written and FILE
// must run in a fresh DuckDB; the Python's views command runs in bash and
// its con.sql query must return rows over them. A line of another shape
// fails the test, which must then learn it.
func TestFromYourOwnDuckDB(t *testing.T) {
	needMount(t)
	bash := tool(t, "bash")
	lines, _, blocks, section := readmeSection(t, ownToolsHead)
	env, work, world := readmeDemo(t)
	mnt := realTempDir(t)
	p := crashtest.Start(t, crashtest.Command("mount", "--bucket", filepath.Join(work, "worldfs-data"), mnt))
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	select {
	case <-p.FirstLine():
	case <-exited:
		t.Fatal("the mount exited before mounting")
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		<-exited
	})

	subst := []string{"/mnt/worlds", mnt}
	if shown := worldName.FindString(section); shown != "" {
		subst = append(subst, shown, world)
	}
	// sh runs script in bash in the demo's directory, with W set and the
	// README's mountpoint and world name made the test's.
	sh := func(l quickLine, script string) string {
		t.Helper()
		script = strings.NewReplacer(subst...).Replace(script)
		cmd := exec.Command(bash, "-o", "pipefail", "-c", "W="+world+"\n"+script)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("README.md:%d: %s\nin bash: %v\n%s%s", l.at, l.text, err, out, stderr)
		}
		return string(out)
	}
	// rows runs query (after script, a views script, if any) in a fresh
	// DuckDB and returns how many rows it gave.
	rows := func(l quickLine, script, query string) int {
		t.Helper()
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if script != "" {
			if _, err := db.Exec(script); err != nil {
				t.Fatalf("README.md:%d: %s\nthe views script in DuckDB: %v", l.at, l.text, err)
			}
		}
		if query == "" {
			return 0
		}
		rs, err := db.Query(query)
		if err != nil {
			t.Fatalf("README.md:%d: %s\n%s in DuckDB: %v", l.at, l.text, query, err)
		}
		defer rs.Close()
		n := 0
		for rs.Next() {
			n++
		}
		if err := rs.Err(); err != nil {
			t.Fatalf("README.md:%d: %s\n%s in DuckDB: %v", l.at, l.text, query, err)
		}
		t.Logf("%s: %d rows", query, n)
		return n
	}

	queries := 0
	for _, l := range lines {
		if m := duckdbInit.FindStringSubmatch(l.text); m != nil {
			sh(l, m[1])
			script, err := os.ReadFile(filepath.Join(work, m[2]))
			if err != nil {
				t.Fatalf("README.md:%d: %s\n%v", l.at, l.text, err)
			}
			rows(l, string(script), "")
			queries++
			continue
		}
		m := duckdbC.FindStringSubmatch(l.text)
		if m == nil {
			t.Fatalf("README.md:%d: %s\nnot a line this test runs (duckdb -c \"SQL\", or CMD && duckdb -init FILE): teach it", l.at, l.text)
		}
		// bash parses the argument (its quotes, $W, a comment after it).
		query := sh(l, "set -- "+m[1]+"\nprintf '%s' \"$1\"")
		if n := rows(l, "", query); n == 0 {
			t.Errorf("README.md:%d: %s\nreturned no rows", l.at, l.text)
		}
		queries++
	}
	for _, b := range blocks {
		if b.lang != "python" {
			continue
		}
		l := quickLine{text: b.text}
		views, query := pyViews.FindStringSubmatch(b.text), pyQuery.FindStringSubmatch(b.text)
		if views == nil || query == nil {
			t.Fatalf("the README's Python is not of the shape this test runs (worldfs views through subprocess, then con.sql): teach it\n%s", b.text)
		}
		if n := rows(l, sh(l, "worldfs views --world "+views[1]), query[1]); n == 0 {
			t.Errorf("the README's Python query %s returned no rows", query[1])
		}
		queries++
	}
	if queries < 3 {
		t.Fatalf("ran %d of the section's DuckDB uses; the parse went wrong", queries)
	}
}
