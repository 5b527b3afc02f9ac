package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bench"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/race"
	"github.com/worldfs/worldfs/internal/realpart"
)

// WORLDFS_TEST_SOAK_SABOTAGE=<file> makes the test binary act as a
// worldfs whose gc, once it has collected, deletes a compacted file the
// catalog names (what a collector without invariant 16 did), and appends
// its name to <file>.
func init() {
	record := os.Getenv("WORLDFS_TEST_SOAK_SABOTAGE")
	if record == "" {
		return
	}
	code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if code == 0 && len(os.Args) > 1 && os.Args[1] == "gc" {
		if err := sabotage(os.Args[2:], record); err != nil {
			os.Stderr.WriteString("sabotage: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// sabotage deletes the first compacted file the catalog of the world that
// args name (--bucket, --world) names, if there is one.
func sabotage(args []string, record string) error {
	var url, world string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--bucket":
			url = args[i+1]
		case "--world":
			world = args[i+1]
		}
	}
	ctx := context.Background()
	b, err := bucketurl.Open(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	st, _, err := index.Load(ctx, b, world)
	if err != nil {
		return err
	}
	var victim string
	st.Fragments(index.DefaultRun, func(r index.FragmentRef) bool {
		if n, ok := index.ParseFragmentPath(world, r.Path); ok && index.IsCompactedToken(n.Token) {
			victim = r.Path
			return false
		}
		return true
	})
	if victim == "" {
		return nil
	}
	a, err := b.Stat(ctx, victim)
	if err != nil {
		return err
	}
	if err := b.Delete(ctx, victim, a.Generation); err != nil {
		return err
	}
	f, err := os.OpenFile(record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(victim + "\n")
	return err
}

// soakArgs are a short soak's: windows of 64, 16 and 4 ticks, so that
// three merge levels are crossed in seconds, and every process often.
func soakArgs(t *testing.T, self string, more ...string) []string {
	return append([]string{"bench", "soak", "--dir", t.TempDir(), "--worldfs", self, "--windows", "64,16,4", "--recent", "4",
		"--readers", "2", "--optimize-every", "1s", "--gc-every", "1s", "--check-every", "4s", "--sql-every", "3s", "--json"}, more...)
}

// A short soak (what CI runs of it) writes, compacts at three levels,
// collects at a tiny retention in the writer and in gc processes, checks,
// queries and reads a mount, and finds every visible tick as committed.
func TestBenchSoak(t *testing.T) {
	realpart.FUSE(t, true)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WORLDFS_TEST_AS_CLI", "1")
	duration := "15s"
	if race.Enabled {
		duration = "45s" // a 24 s soak under the detector had not yet seen the writer's own collection delete
	}
	code, out, stderr := cli(t, soakArgs(t, self, "--duration", duration)...)
	var r bench.SoakReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Failures) != 0 {
		t.Fatalf("bench soak: exit %d, %v, failures %q\n%s", code, err, r.Failures, stderr)
	}
	for _, w := range []string{"64", "16", "4"} {
		if r.Compactions[w] == 0 {
			t.Errorf("no compaction of %s ticks: %v", w, r.Compactions)
		}
	}
	if r.Ticks < 200 || r.IntentsClosed == 0 || r.GCs == 0 || r.Deleted == 0 || r.WriterDeleted == 0 || r.Optimizes == 0 || r.Checks < 2 || r.SQLs < 2 || len(r.Samples) == 0 {
		t.Errorf("the soak did not exercise everything: %+v", r)
	}
	for _, k := range []string{"parquet", "csv", "manifest", "facts"} {
		if r.Reads[k] == 0 {
			t.Errorf("no %s read through the mount: %v", k, r.Reads)
		}
	}
}

// A soak whose gc deletes a compacted file the catalog names fails, naming
// the file; the bucket is kept.
func TestBenchSoakFailsOnAnAbsentFragment(t *testing.T) {
	realpart.FUSE(t, true)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "deleted")
	t.Setenv("WORLDFS_TEST_SOAK_SABOTAGE", record)
	code, out, stderr := cli(t, soakArgs(t, self, "--duration", "40s")...)
	deleted, _ := os.ReadFile(record)
	victims := strings.Fields(string(deleted))
	var r bench.SoakReport
	if err := json.Unmarshal([]byte(out), &r); code != 1 || err != nil || len(victims) == 0 || !strings.Contains(stderr, "bench soak failed") {
		t.Fatalf("bench soak with a sabotaging gc: exit %d, %v, deleted %q\n%s\n%s", code, err, victims, out, stderr)
	}
	// Each gc run deletes the first compacted file the catalog names then;
	// a compaction may replace one before the soak reads it, so the
	// failures name one of them, not always the first.
	named := false
	for _, f := range r.Failures {
		for _, v := range victims {
			named = named || strings.Contains(f, v)
		}
	}
	if !named || r.Seconds >= 40 {
		t.Fatalf("the failures after %.0f s name none of the files gc deleted (%q): %q", r.Seconds, victims, r.Failures)
	}
	if _, err := os.Stat(r.Dir); err != nil {
		t.Fatalf("the failed soak's work directory: %v", err)
	}
}
