package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bench"
	"github.com/worldfs/worldfs/index"
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

// bench history --synthetic builds each world as a long-lived compacted
// world leaves it (every tick names a compacted file, a checkpoint of the
// tip), measures every N in one run with the goals named, and reuses the
// worlds the next time.
func TestBenchHistorySynthetic(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WORLDFS_TEST_AS_CLI", "1")
	bkt := t.TempDir()
	measure := func() bench.MillionReport {
		t.Helper()
		code, out, stderr := cli(t, "bench", "history", "--bucket", bkt, "--synthetic", "--ticks", "5000", "--compare-at", "1000",
			"--entities", "2", "--runs", "1", "--worldfs", self, "--dir", t.TempDir(), "--json")
		var res bench.MillionReport
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("bench history --synthetic: %d\n%s\n%s", code, out, stderr)
		}
		return res
	}
	res := measure()
	if len(res.Points) != 2 || res.Points[0].Ticks != 1000 || res.Points[1].Ticks != 5000 || res.Entities != 2 || res.Archetypes != 1 {
		t.Fatalf("bench history --synthetic: %+v", res)
	}
	for _, p := range res.Points {
		if !p.Generated || p.Rows != int64(p.Ticks)*2 || p.AtRows != 2 || p.LoadSeconds <= 0 || p.TickLoadSeconds <= 0 ||
			p.ViewsOpenSeconds <= 0 || p.SQLAt.Seconds <= 0 || p.SQLToken.Seconds <= 0 || !p.TokenNamesTick || p.SQLAtReused.Seconds <= 0 || p.LogLimitSeconds <= 0 || (p.MountError == "" && p.LsHeadSeconds <= 0) {
			t.Fatalf("N = %d: %+v", p.Ticks, p)
		}
		b, err := openBucket(t.Context(), bkt)
		if err != nil {
			t.Fatal(err)
		}
		s, info, err := index.Load(t.Context(), b, p.World)
		if err != nil {
			t.Fatal(err)
		}
		if info.CheckpointSeq != s.Seq {
			t.Fatalf("N = %d: the checkpoint is at %d, the tip at %d", p.Ticks, info.CheckpointSeq, s.Seq)
		}
		n := 0
		s.Ticks("main", 0, func(tk *index.Tick) bool {
			tables, err := tk.Tables()
			if err != nil || len(tables) != 1 || len(tables[0].Fragments) != 1 || tables[0].Fragments[0].Span == nil {
				t.Fatalf("N = %d: tick %d names %+v (%v), not one compacted file", p.Ticks, tk.Tick, tables, err)
			}
			n++
			return true
		})
		if n != p.Ticks {
			t.Fatalf("N = %d: %d ticks published", p.Ticks, n)
		}
	}
	for _, g := range res.Goals {
		if g.Name == "" || g.Bound <= 0 || g.Met != (g.Value <= g.Bound) {
			t.Fatalf("goal %+v", g)
		}
	}
	if len(res.Goals) < 6 {
		t.Fatalf("goals %+v", res.Goals)
	}
	if again := measure(); again.Points[0].Generated || again.Points[1].Generated || again.Points[1].Rows != 10000 {
		t.Fatalf("the worlds were not reused: %+v", again.Points)
	}
}
