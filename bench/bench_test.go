package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
)

// testEnv opens buckets by URL as the command line does, without its
// timeout flag.
var testEnv = Env{
	BucketFlag:   func(fs *flag.FlagSet) *string { return fs.String("bucket", "", "bucket URL") },
	OpenBucket:   bucketurl.Open,
	OpenExisting: bucketurl.Open,
	RequireWorld: func(context.Context, bucket.Bucket, string) error { return nil },
}

// cli runs "bench <name> [flags]" as worldfs does: the exit status (0
// done, 2 a usage error, 1 any other), the output, and the error's text.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if len(args) < 2 || args[0] != "bench" {
		t.Fatalf("cli %q: want bench NAME [flags]", args)
	}
	for _, b := range All(testEnv) {
		if b.Name != args[1] {
			continue
		}
		fs := flag.NewFlagSet("bench "+b.Name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		run := b.Flags(fs)
		if err := fs.Parse(args[2:]); err != nil {
			return 2, "", err.Error()
		}
		var out bytes.Buffer
		err := run(context.Background(), fs.Args(), &out)
		switch {
		case err == nil:
			return 0, out.String(), ""
		case errors.As(err, new(UsageError)):
			return 2, out.String(), err.Error()
		}
		return 1, out.String(), err.Error()
	}
	t.Fatalf("no bench %q", args[1])
	return 0, "", ""
}

// The list holds every benchmark once, each with a summary and an
// example of its own command line.
func TestAllListsEachBenchOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range All(testEnv) {
		if b.Name == "" || seen[b.Name] || b.Summary == "" || b.Flags == nil || !bytes.Contains([]byte(b.Example), []byte("worldfs bench "+b.Name+" ")) {
			t.Errorf("bench %q: listed twice, or without a summary, flags or an example of itself (%q)", b.Name, b.Example)
		}
		seen[b.Name] = true
	}
	if len(seen) != 16 {
		t.Errorf("%d benchmarks listed, want 16", len(seen))
	}
}

// A flag value a benchmark refuses is a UsageError (exit 2 at the command).
func TestBadFlagIsUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "commit", "--writers", "0"}, {"bench", "coldstart", "--ticks", "0"}, {"bench", "ticks", "--depth", "65"},
		{"bench", "bucket", "--ops", "0"}, {"bench", "query", "extra"},
		{"bench", "soak", "--windows", "64,48"}, {"bench", "soak", "--retentions", "1s,0s"}, {"bench", "soak", "--duration", "0s"}, {"bench", "soak", "--bucket", "mem://b"},
		{"bench", "sweep", "--forks", "100"}, {"bench", "sweep", "--dir", "x", "--late", "1000"},
		{"bench", "raw"}, {"bench", "raw", "--file", "q.sql", "extra"},
	} {
		if code, _, msg := cli(t, args...); code != 2 || msg == "" {
			t.Errorf("%q: exit %d (%s), want a usage error", args, code, msg)
		}
	}
}

// bench raw runs the query of its file and reads every row of it.
func TestBenchRaw(t *testing.T) {
	file := filepath.Join(t.TempDir(), "q.sql")
	if err := os.WriteFile(file, []byte("SELECT i, i * 2 AS j FROM range(1234) t(i)"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "bench", "raw", "--file", file, "--json")
	var res rawBench
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench raw: %d\n%s\n%s", code, out, stderr)
	}
	if res.Rows != 1234 || res.Columns != 2 || res.Seconds <= 0 {
		t.Fatalf("bench raw: %+v", res)
	}
	if code, _, msg := cli(t, "bench", "raw", "--file", file+".missing"); code != 1 || !strings.Contains(msg, "q.sql.missing") {
		t.Errorf("a missing file: exit %d (%s)", code, msg)
	}
}

func TestBenchBucket(t *testing.T) {
	code, out, stderr := cli(t, "bench", "bucket", "--bucket", t.TempDir(), "--ops", "200", "--callers", "4", "--json")
	var res bucketBench
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench: %d\n%s\n%s", code, out, stderr)
	}
	if res.Create.Ops != 200 || res.Get.Ops != 200 || res.DirectRead == nil || res.Get.P50ms <= 0 {
		t.Fatalf("bench result %+v", res)
	}
}

// bench ticks with a pipeline: every tick is committed and measured.
func TestBenchTicksPipelined(t *testing.T) {
	code, out, stderr := cli(t, "bench", "ticks", "--bucket", "mem://cli-ticks", "--entities", "10", "--ticks", "30", "--depth", "4", "--json")
	var res ticksBench
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench ticks: %d\n%s\n%s", code, out, stderr)
	}
	if res.Ticks != 30 || res.Depth != 4 || res.TicksPerSec <= 0 || res.P50ms <= 0 || res.P99ms < res.P50ms || res.PeakHeapMiB <= 0 || res.BytesPerTick <= 0 {
		t.Fatalf("bench ticks result %+v", res)
	}
}

func TestBenchCommitAndColdStart(t *testing.T) {
	code, out, stderr := cli(t, "bench", "commit", "--bucket", "mem://cli-bench", "--writers", "2", "--duration", "300ms", "--json")
	var res commitBench
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench commit: %d\n%s\n%s", code, out, stderr)
	}
	if res.Writes == 0 || res.WritesPerSec <= 0 || res.Slots == 0 || len(res.PerWriter) != 2 || res.Errors != 0 || res.P99ms < res.P50ms || res.Light != nil {
		t.Fatalf("bench commit result %+v", res)
	}
	// A light neighbour is one more store, reported apart from the writers.
	code, out, stderr = cli(t, "bench", "commit", "--bucket", "mem://cli-bench-light", "--light", "20ms", "--duration", "300ms", "--json")
	res = commitBench{}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench commit --light: %d\n%s\n%s", code, out, stderr)
	}
	if l := res.Light; len(res.PerWriter) != 1 || l == nil || l.EveryMs != 20 || l.Writes == 0 || l.Slots == 0 || l.Errors != 0 || res.Errors != 0 {
		t.Fatalf("bench commit --light result %+v, light %+v", res, res.Light)
	}
	code, out, stderr = cli(t, "bench", "coldstart", "--bucket", t.TempDir(), "--ticks", "2000", "--tail", "20", "--json")
	var cold coldStartBench
	if code != 0 || json.Unmarshal([]byte(out), &cold) != nil {
		t.Fatalf("bench coldstart: %d\n%s\n%s", code, out, stderr)
	}
	if cold.Ticks != 2020 || cold.CheckpointSeq == 0 || cold.SlotsReplayed != 20 || cold.ColdStartSeconds <= 0 || cold.PeakHeapBytes == 0 {
		t.Fatalf("bench coldstart result %+v", cold)
	}
}

func TestBenchQuery(t *testing.T) {
	code, out, stderr := cli(t, "bench", "query", "--bucket", t.TempDir(), "--fragments", "20", "--rows", "50",
		"--catalog-ticks", "300", "--runs", "1", "--views-dir", t.TempDir(), "--json")
	var res queryBench
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("bench query: %d\n%s\n%s", code, out, stderr)
	}
	if res.VisibleRows != 1000 || res.ViewsSeconds <= 0 || res.RawSeconds <= 0 || res.Ratio <= 0 || res.PeakRSSBytes == 0 ||
		res.Catalog == nil || res.Catalog.BuildSeconds <= 0 || res.Catalog.LoadSeconds <= 0 || res.Catalog.FragmentListBytes == 0 {
		t.Fatalf("bench query result %+v %+v", res, res.Catalog)
	}
}

// The views' count(*) and its raw read_parquet are timed in alternating
// rounds until both enough rounds and enough time have passed, not for a
// fixed few rounds whose median a busy machine moves.
func TestAlternateTimesRoundsForTheTimeGiven(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const minTime = 30 * time.Millisecond
	start := time.Now()
	first, times, err := alternate(context.Background(), db, []string{"SELECT 1", "SELECT 2"}, 3, minTime)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < minTime {
		t.Errorf("the rounds took %s; want at least %s", took, minTime)
	}
	if len(first) != 2 || first[0] != 1 || first[1] != 2 {
		t.Errorf("first answers %v; want [1 2]", first)
	}
	if len(times) != 2 || len(times[0]) < 3 || len(times[1]) != len(times[0]) {
		t.Errorf("%d and %d times; want the same number, at least 3", len(times[0]), len(times[1]))
	}
}
