package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
)

// worldfs tag, tags and tag --delete: a tag names a visible tick (any
// point form), shows in worldfs tags, pins worldfs sql --at tag:NAME to
// that tick and is a side of worldfs diff (W@NAME); a name with a '/', a
// name taken, a tick that is not visible and a message over the limit
// are refused with a clear error and the exit status of their kind, and
// write nothing to the log.
func TestTagCommands(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	enginetest.World(t, b, "w", 30).Close()
	flags := []string{"--bucket", dir}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return cli(t, append(append([]string{args[0]}, flags...), args[1:]...)...)
	}
	logLen := func() int {
		t.Helper()
		code, out, stderr := run("log", "--world", "w", "--json")
		if code != 0 {
			t.Fatalf("log: %d %s", code, stderr)
		}
		return strings.Count(out, "\n")
	}
	if code, out, stderr := run("tag", "w@head~10", "fig3", "--message", "figure 3"); code != 0 || !strings.Contains(out, "tag fig3 names run main tick 20") {
		t.Fatalf("tag w@head~10 fig3: %d %q %q", code, out, stderr)
	}
	entries := logLen()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"tag", "w@3", "fig/3"}, exitUsage, `tag name "fig/3" has a '/'`},
		{[]string{"tag", "w@3", "fig3"}, exitConflict, "tag fig3 is taken: it names run main tick 20"},
		{[]string{"tag", "w@99", "late"}, exitNotFound, "tick 99 is not visible"},
		{[]string{"tag", "w@3", "big", "--message", strings.Repeat("m", index.MaxTagMessage+1)}, exitUsage, "over the 4096"},
		{[]string{"tag", "w@3", "head"}, exitUsage, `tag name "head" reads as a point`},
		{[]string{"tag", "w", "x"}, exitUsage, "W@POINT"},
		{[]string{"tag", "--delete", "w", "nope"}, exitNotFound, "tag nope: no such tag"},
		{[]string{"tag", "nowhere@3", "x"}, exitNotFound, "world nowhere does not exist"},
	} {
		code, _, stderr := run(c.args...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("%v: exit %d %q; want %d saying %q", c.args, code, stderr, c.code, c.says)
		}
	}
	if n := logLen(); n != entries {
		t.Fatalf("the refusals wrote %d entries", n-entries)
	}
	if code, out, _ := run("tags", "--json", "w"); code != 0 || !strings.Contains(out, `"name": "fig3"`) || !strings.Contains(out, `"tick": 20`) {
		t.Fatalf("tags w: %d %s", code, out)
	}
	sqlAt := func(point string) string {
		t.Helper()
		code, out, stderr := run("sql", "--world", "w", "--at", point, "--format", "csv", "SELECT min(tick), max(tick), count(*) FROM particle")
		if code != 0 {
			t.Fatalf("sql --at %s: %d %s", point, code, stderr)
		}
		return out
	}
	if a, b := sqlAt("tag:fig3"), sqlAt("20"); a != b || !strings.Contains(a, "20,20,") {
		t.Fatalf("sql --at tag:fig3 %q, --at 20 %q", a, b)
	}
	code, out, stderr := run("diff", "--json", "w@fig3", "@21")
	var d struct{ A, B struct{ Tick *int64 } }
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.A.Tick == nil || *d.A.Tick != 20 {
		t.Fatalf("diff w@fig3 @21: %d %s %s", code, out, stderr)
	}
	if code, out, stderr := run("tag", "--delete", "w", "fig3"); code != 0 || !strings.Contains(out, "tag fig3 (run main tick 20) deleted") {
		t.Fatalf("tag --delete: %d %q %q", code, out, stderr)
	}
	if code, out, _ := run("tags", "w"); code != 0 || strings.Contains(out, "fig3") {
		t.Fatalf("tags after the deletion: %d %s", code, out)
	}
	if code, _, stderr := run("sql", "--world", "w", "--at", "tag:fig3", "SELECT 1"); code != exitNotFound || !strings.Contains(stderr, "world w has no tag fig3") {
		t.Fatalf("sql at a deleted tag: %d %s", code, stderr)
	}
}
