package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
)

// optimizedWorld is the directory of a local bucket holding world w of
// 140 ticks of the reference simulation, optimized with args.
func optimizedWorld(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 140).Close()
	b.Close()
	if code, out, stderr := cli(t, append([]string{"optimize", "--bucket", dir, "--world", "w"}, args...)...); code != 0 {
		t.Fatalf("optimize: exit %d\n%s%s", code, out, stderr)
	}
	return dir
}

// filesEnding returns the files under the local bucket dir whose names
// end with suffix.
func filesEnding(t *testing.T, dir, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// optimizeRefills removes world w's files ending with suffix from the
// local bucket dir and checks that optimize --dry-run counts them as
// <what>_missing and writes none, then that optimize writes them again
// (<what>_written), byte for byte. It returns them, by path.
func optimizeRefills(t *testing.T, dir, suffix, what string) map[string][]byte {
	t.Helper()
	written := map[string][]byte{}
	for _, p := range filesEnding(t, dir, suffix) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		written[p] = data
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(written) == 0 {
		t.Fatalf("no %s file to remove", suffix)
	}
	var res map[string]any
	count := func(key string) int {
		n, _ := res[key].(float64)
		return int(n)
	}
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || count(what+"_missing") != len(written) || len(filesEnding(t, dir, suffix)) != 0 {
		t.Fatalf("optimize --dry-run: exit %d, %v, %+v; want %d %s missing, none written\n%s%s", code, err, res, len(written), what, out, stderr)
	}
	code, out, stderr = cli(t, "optimize", "--bucket", dir, "--world", "w", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || count(what+"_written") != len(written) {
		t.Fatalf("optimize: exit %d, %v, %+v; want %d %s written\n%s%s", code, err, res, len(written), what, out, stderr)
	}
	for p, want := range written {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: not the %s written before (%v)", p, what, err)
		}
	}
	return written
}

// worldfs optimize gives each compacted file without a tick index the one
// compaction wrote (--dry-run counts them and writes none), and names a
// damaged index, leaves it as it is and exits 1.
func TestOptimizeWritesMissingTickIndexes(t *testing.T) {
	dir := optimizedWorld(t, "--recent", "8")
	written := optimizeRefills(t, dir, ".ticks3", "tick_indexes")
	var damaged string
	for p := range written {
		damaged = p
	}
	bad := bytes.Clone(written[damaged])
	bad[len(bad)/2] ^= 1
	if err := os.Chmod(damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, bad, 0o444); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w")
	if got, _ := os.ReadFile(damaged); code != exitFailed || !strings.Contains(stderr, filepath.Base(filepath.Dir(damaged))) || !bytes.Equal(got, bad) {
		t.Fatalf("optimize with a damaged index: exit %d, index left: %v\n%s%s", code, bytes.Equal(got, bad), out, stderr)
	}
}

// worldfs optimize writes the token filters a world's tick shards lack
// (--dry-run counts them and writes none).
func TestOptimizeWritesMissingTokenFilters(t *testing.T) {
	dir := optimizedWorld(t)
	optimizeRefills(t, dir, ".tok", "token_filters")
}

// optimize that compacts nothing says why, from the catalog and the
// windows it planned, and what would compact ticks; the --recent it
// names does. --recent 0 compacts every whole window up to the head.
func TestOptimizeSaysWhyItCompactedNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 140).Close()
	b.Close()
	base := []string{"optimize", "--bucket", dir, "--world", "w"}
	hint := regexp.MustCompile(`--recent ([0-9]+) would compact ticks ([0-9]+)\.\.([0-9]+)\n$`)
	steps := []struct {
		recent, says, compacted string
	}{
		{"256", "; nothing compacted: the ticks from 0 on are among the newest 256 (--recent 256: they stay as written), and compaction takes whole windows of 64 ticks; --recent 77 would compact ticks 0..63\n", "0 windows"},
		{"77", "", "1 windows"},
		{"77", "; the window of ticks 0..63 had nothing left to compact (compacted already: a writer compacts by itself); the ticks from 64 on are among the newest 77 (--recent 77: they stay as written), and compaction takes whole windows of 64 ticks; --recent 13 would compact ticks 64..127\n", "0 windows"},
		{"13", "", "1 windows"},
		{"1", "; the 2 windows of ticks 0..127 had nothing left to compact (compacted already: a writer compacts by itself); ticks 128..139, below the newest 1 (--recent 1: they stay as written), fill no whole window of 64 ticks; the head is tick 140: ticks 128..191 compact once it reaches tick 192 with --recent 1\n", "0 windows"},
	}
	for i, s := range steps {
		code, out, stderr := cli(t, append(slices.Clone(base), "--recent", s.recent)...)
		if code != 0 || !strings.HasSuffix(out, s.says) || !strings.Contains(out, ": "+s.compacted+" and 0 claim shards") {
			t.Fatalf("step %d, --recent %s: exit %d\n%s%s\nwant %s compacted, and %q", i, s.recent, code, out, stderr, s.compacted, s.says)
		}
		// The --recent a step names is the next step's, and compacts.
		if m := hint.FindStringSubmatch(out); m != nil && (i+1 >= len(steps) || steps[i+1].recent != m[1]) {
			t.Fatalf("step %d suggests --recent %s, which the next step does not take", i, m[1])
		}
	}
	// Ticks 128..191 are one whole window once the head is 191: with
	// --recent 0 nothing is left as written below it.
	b, err = local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.ResumeWorld(enginetest.Context(t), b, "w", particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.Drive(enginetest.Context(t), w, 191); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b.Close()
	code, out, stderr := cli(t, append(slices.Clone(base), "--recent", "0")...)
	if code != 0 || !strings.Contains(out, ": 1 windows") {
		t.Fatalf("--recent 0 with the head at tick 191: exit %d\n%s%s\nwant the window 128..191 compacted", code, out, stderr)
	}
	if code, _, stderr := cli(t, append(slices.Clone(base), "--recent", "-1")...); code != exitUsage || !strings.Contains(stderr, "--recent -1: give 0 or more") {
		t.Fatalf("--recent -1: exit %d, %q", code, stderr)
	}
}

// worldfs optimize writes the reference list an export's latest version
// lacks (written by a worldfs before reference lists; --dry-run counts
// them and writes none), byte for byte as the export wrote it. Without
// it, gc deletes nothing of the world and names the export and optimize.
func TestOptimizeWritesMissingExportReferenceLists(t *testing.T) {
	dir := optimizedWorld(t, "--recent", "8")
	if code, out, stderr := cli(t, "export", "iceberg", "--bucket", dir, "--world", "w"); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, stderr)
	}
	written := optimizeRefills(t, dir, ".refs", "export_reference_lists")
	for p := range written {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	gc := []string{"gc", "--bucket", dir, "--world", "w", "--retention", "1ms", "--unsafe-retention"}
	code, out, stderr := cli(t, gc...)
	if code != exitFailed || !strings.Contains(stderr, "has no reference list") || !strings.Contains(stderr, "worldfs optimize --world w") || strings.Contains(out, "deleted") {
		t.Fatalf("gc without the exports' reference lists: exit %d; want 1, nothing deleted, naming optimize\n%s%s", code, out, stderr)
	}
	if code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w"); code != 0 || !strings.Contains(out, "export reference lists written") {
		t.Fatalf("optimize: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := cli(t, gc...); code != 0 {
		t.Fatalf("gc once optimize wrote the lists: exit %d\n%s%s", code, out, stderr)
	}
}

// worldfs optimize --windows compacts with the windows given; windows that
// do not nest are refused with exit 2, writing nothing.
func TestOptimizeWindows(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 140).Close()
	b.Close()
	before := filesEnding(t, dir, "")
	for _, bad := range []string{"64,48", "8,64", "x", "64,0"} {
		code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--windows", bad)
		if code != 2 || !strings.Contains(stderr, "--windows") || out != "" {
			t.Errorf("optimize --windows %s: exit %d\n%s%s", bad, code, out, stderr)
		}
	}
	if after := filesEnding(t, dir, ""); len(after) != len(before) {
		t.Fatalf("refused optimizes wrote %d objects", len(after)-len(before))
	}
	// Ticks 0..131 are past the recent 8: eight windows of 16 ticks
	// (0..127); the default windows would compact two of 64.
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--recent", "8", "--windows", "16,8", "--json")
	var res struct{ Windows int }
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Windows != 8 {
		t.Fatalf("optimize --windows 16,8: exit %d, %v, %+v; want 8 windows\n%s%s", code, err, res, out, stderr)
	}
}

// worldfs optimize --worlds GLOB compacts each world the glob matches, one
// after another (a JSON line each), and no other; --lineage W compacts W
// and the forks below it; a malformed glob is a usage error, a glob that
// matches nothing is not found, and two ways of naming the worlds at once
// are refused.
func TestOptimizeSeveralWorlds(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"sw-a", "sw-b", "other"} {
		enginetest.World(t, b, w, 40).Close()
	}
	enginetest.Fork(t, b, "other", "other-f", 20, 60).Close()
	b.Close()
	compacted := func(args ...string) map[string]int {
		t.Helper()
		code, out, stderr := cli(t, append([]string{"optimize", "--bucket", dir, "--recent", "0", "--windows", "8", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("optimize %v: exit %d\n%s%s", args, code, out, stderr)
		}
		windows := map[string]int{}
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var res struct {
				World   string
				Windows int
			}
			if err := dec.Decode(&res); err != nil {
				t.Fatalf("optimize %v: %v\n%s", args, err, out)
			}
			windows[res.World] = res.Windows
		}
		return windows
	}
	if got := compacted("--worlds", "sw-*"); len(got) != 2 || got["sw-a"] == 0 || got["sw-b"] == 0 {
		t.Fatalf("optimize --worlds 'sw-*': %v; want windows of sw-a and sw-b, no other world", got)
	}
	if got := compacted("--lineage", "other"); len(got) != 2 || got["other"] == 0 || got["other-f"] == 0 {
		t.Fatalf("optimize --lineage other: %v; want windows of other and its fork other-f", got)
	}
	if got := compacted("--worlds", "sw-*"); len(got) != 2 || got["sw-a"] != 0 || got["sw-b"] != 0 {
		t.Fatalf("optimize --worlds 'sw-*' again: %v; want both worlds, nothing left to compact", got)
	}
	// A world that fails (it has no table particle) is named, with a JSON
	// line of its own, and the others go on; the command fails.
	b, err = local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := engine.NewComponent("pos", engine.Field{Name: "x", Type: frame.Float64})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := engine.NewTable("agent", pos)
	if err != nil {
		t.Fatal(err)
	}
	odd, err := engine.CreateWorld(enginetest.Context(t), b, "sw-0dd", []*engine.Table{agent}, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	odd.Close()
	b.Close()
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--worlds", "sw-*", "--table", "particle", "--json")
	if code != 1 || !strings.Contains(stderr, "1 of the 3 worlds failed, each named above with why (sw-0dd)") ||
		strings.Count(out, "\n") != 3 || !strings.Contains(out, `{"error":"--table particle: world sw-0dd has no table \"particle\".`) || !strings.Contains(out, `"world":"sw-a"`) || !strings.Contains(out, `"world":"sw-b"`) {
		t.Fatalf("optimize --worlds 'sw-*' --table particle, sw-0dd without it: exit %d; want 1, a JSON line each of sw-0dd's failure and sw-a's and sw-b's runs\n%s%s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--worlds", "sw-["}, 2, "syntax error in pattern"},
		{[]string{"--worlds", "none-*"}, 4, `no world matches "none-*"`},
		{[]string{"--world", "sw-a", "--lineage", "other"}, 2, "one of them"},
		{nil, 2, "one of them"},
	} {
		code, out, stderr := cli(t, append([]string{"optimize", "--bucket", dir}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("optimize %v: exit %d, %q; want exit %d saying %q\n%s", c.args, code, stderr, c.code, c.says, out)
		}
	}
}
