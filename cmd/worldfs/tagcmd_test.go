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
	for range 2 { // the second reuses the views the first kept
		code, out, stderr := run("diff", "--json", "w@fig3", "@21")
		var d struct{ A, B struct{ Tick *int64 } }
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.A.Tick == nil || *d.A.Tick != 20 {
			t.Fatalf("diff w@fig3 @21: %d %s %s", code, out, stderr)
		}
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

// worldfs world create and fork take --meta KEY=VALUE: shown by worldfs
// world status --json and worlds; a fork's over its parent's; a bad key,
// a key given twice or a value over the bound is a usage error that
// writes nothing.
func TestRunParameterFlags(t *testing.T) {
	dir := t.TempDir()
	tables := `[{"name":"agent","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]}]`
	flags := []string{"--bucket", dir}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return cli(t, append(append(append([]string{}, args[:2]...), flags...), args[2:]...)...)
	}
	if code, _, stderr := run("world", "create", "base", "--tables", tables, "--meta", "seed=17", "--meta", "gravity=9.81"); code != 0 {
		t.Fatalf("create: %d %s", code, stderr)
	}
	meta := func(world string) map[string]string {
		t.Helper()
		code, out, stderr := run("world", "status", world, "--json")
		var info worldInfo
		if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
			t.Fatalf("status %s: %d %s %s", world, code, out, stderr)
		}
		return info.Meta
	}
	if m := meta("base"); m["seed"] != "17" || m["gravity"] != "9.81" || len(m) != 2 {
		t.Fatalf("base's metadata: %v", m)
	}
	// A fork forks a visible tick: give base one through the library.
	b, _ := local.Open(dir)
	c, err := index.Open(enginetest.Context(t), b, "base", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Tip()
	if _, err := c.Commit(enginetest.Context(t), index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: 0, CommitToken: "t0", WriterEpoch: s.World.Epoch}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if code, out, stderr := run("world", "fork", "base-18", "--parent", "base", "--tick", "0", "--meta", "seed=18"); code != 0 || !strings.Contains(out, "gravity=9.81,seed=18") {
		t.Fatalf("fork: %d %s %s", code, out, stderr)
	}
	if m := meta("base-18"); m["seed"] != "18" || m["gravity"] != "9.81" {
		t.Fatalf("the fork's metadata: %v", m)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--meta", "Seed=1"}, `metadata key "Seed"`},
		{[]string{"--meta", "seed"}, `"seed" is not KEY=VALUE`},
		{[]string{"--meta", "seed=1", "--meta", "seed=2"}, "key seed is given twice"},
		{[]string{"--meta", "seed=" + strings.Repeat("x", index.MaxMetaValueLen+1)}, "over the 1024"},
	} {
		code, _, stderr := run(append([]string{"world", "create", "bad", "--tables", tables}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.says) {
			t.Errorf("create %v: %d %q; want a usage error saying %q", c.args, code, stderr, c.says)
		}
	}
	if code, _, _ := run("world", "status", "bad"); code != exitNotFound {
		t.Fatalf("a refused create left world bad: status exit %d", code)
	}
}
