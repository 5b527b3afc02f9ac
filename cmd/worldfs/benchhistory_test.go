package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bench"
)

// WORLDFS_TEST_AS_CLI makes the test binary act as worldfs: bench history
// runs it as its fresh worldfs sql process.
func init() {
	if os.Getenv("WORLDFS_TEST_AS_CLI") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

// bench history keeps working at a tiny size: it builds the world,
// measures it before and after compaction and finds the same answers.
func TestBenchHistory(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WORLDFS_TEST_AS_CLI", "1")
	code, out, stderr := cli(t, "bench", "history", "--bucket", t.TempDir(), "--ticks", "600", "--archetypes", "2",
		"--entities", "3", "--runs", "1", "--worldfs", self, "--dir", t.TempDir(), "--json")
	var res bench.HistoryReport
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench history: %d\n%s\n%s", code, out, stderr)
	}
	for _, ph := range []*bench.HistoryPhase{res.Before, res.After} {
		if ph == nil || ph.Rows != 600*3 || ph.AtRows != 3 || ph.ViewsOpenSeconds <= 0 || ph.ViewsLoadSeconds <= 0 || ph.ViewsBuildSeconds < ph.ViewsLoadSeconds || ph.SQLFirst.Seconds <= 0 || ph.SQLBuiltWarm.Seconds <= 0 ||
			ph.SQLAgain.PeakRSSBytes <= 0 || ph.BucketObjects == 0 || len(ph.DataObjectsTable) != 2 || len(ph.FilesNamed) != 2 {
			t.Fatalf("bench history phase %+v", ph)
		}
		if ph.MountError == "" && (ph.LsEntries < 600 || ph.TickReadBytes == 0) {
			t.Fatalf("bench history mount %+v", ph)
		}
	}
	if !res.Generated || res.Compaction.Windows == 0 || res.Before.FilesNamed[0] != 600 || res.After.FilesNamed[0] >= 600 {
		t.Fatalf("bench history %+v\nbefore %+v\nafter %+v", res, res.Before, res.After)
	}
	if res.Before.ViewsReusedSeconds <= 0 || res.After.ViewsReusedSeconds <= 0 || len(res.Goals) != 8 {
		t.Fatalf("bench history: reused views %v, %v s; goals %+v", res.Before.ViewsReusedSeconds, res.After.ViewsReusedSeconds, res.Goals)
	}
}

// A world whose generation stopped short is continued, not refused; with
// --after-only only the compacted world is measured; --compare adds the
// ratio of the views open time to another run's.
func TestBenchHistoryContinuesAndCompares(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WORLDFS_TEST_AS_CLI", "1")
	bkt, work := t.TempDir(), t.TempDir()
	measure := func(ticks string, more ...string) bench.HistoryReport {
		t.Helper()
		args := append([]string{"bench", "history", "--bucket", bkt, "--world", "h", "--ticks", ticks, "--archetypes", "1", "--entities", "2",
			"--runs", "1", "--worldfs", self, "--dir", t.TempDir(), "--after-only", "--json"}, more...)
		code, out, stderr := cli(t, args...)
		var res bench.HistoryReport
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("bench history: %d\n%s\n%s", code, out, stderr)
		}
		return res
	}
	first := measure("200")
	base := filepath.Join(work, "base.json")
	data, _ := json.Marshal(first)
	if err := os.WriteFile(base, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res := measure("400", "--compare", base)
	if !res.Generated || res.Before != nil || res.After == nil || res.After.Rows != 400*2 || len(res.Goals) != 10 ||
		!strings.Contains(res.Goals[2].Goal, "ratio to N = 200") || res.Goals[2].Value <= 0 {
		t.Fatalf("bench history continued to 400 ticks: %+v\nafter %+v", res, res.After)
	}
}
