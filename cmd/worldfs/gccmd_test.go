package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// worldfs gc --dry-run prints what it would delete and why and deletes
// nothing; gc deletes it (a dead attempt, a stale view list), and the
// world still checks clean.
func TestGCCommand(t *testing.T) {
	dir := t.TempDir()
	checkWorld(t, dir)
	b, _ := local.Open(dir)
	t.Cleanup(func() { b.Close() })
	w, err := engine.ResumeWorld(context.Background(), b, "w", particles.Tables(), engine.Options{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := engine.EncodeFragment(w.Frame("particle"), engine.Stamp{Tick: 3, CommitToken: "crashed", WriterEpoch: 1})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	crashed := index.FragmentPath("w", "main", particles.Tables()[0].ID, "crashed", 0)
	if _, err := b.Create(context.Background(), crashed, data); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	views := filepath.Join(cache, "views")
	os.MkdirAll(views, 0o755)
	stale, fresh := filepath.Join(views, "fragments-0a.parquet"), filepath.Join(views, "fragments-0b.parquet")
	os.WriteFile(stale, []byte("x"), 0o644)
	os.WriteFile(fresh, []byte("x"), 0o644)
	old := time.Now().Add(-maintenance.DefaultRetention - 24*time.Hour) // unused for longer than the retention
	os.Chtimes(stale, old, old)

	code, out, stderr := cli(t, "gc", "--bucket", dir, "--world", "w", "--cache-dir", cache, "--dry-run")
	if code != 0 || !strings.Contains(out, "would delete "+crashed+" (attempt): dead attempt: tick 3 is published under another token") ||
		!strings.Contains(out, "would delete "+stale) || strings.Contains(out, fresh) {
		t.Fatalf("gc --dry-run exited %d:\n%s%s", code, out, stderr)
	}
	if _, err := b.Stat(context.Background(), crashed); err != nil {
		t.Fatalf("the dry run deleted %s: %v", crashed, err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the dry run deleted %s: %v", stale, err)
	}

	code, out, stderr = cli(t, "gc", "--bucket", dir, "--world", "w", "--cache-dir", cache, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum struct {
		Deleted int            `json:"deleted"`
		ByKind  map[string]int `json:"by_kind"`
	}
	if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &sum) != nil || sum.Deleted != 2 || sum.ByKind["attempt"] != 1 {
		t.Fatalf("gc --json exited %d:\n%s%s", code, out, stderr)
	}
	if _, err := b.Stat(context.Background(), crashed); err == nil {
		t.Fatal("gc left the dead attempt")
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("gc left the stale view list")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatal("gc removed a view list in use")
	}
	if code, out, _ := cli(t, "check", "--bucket", dir, "--world", "w", "--read-data"); code != 0 {
		t.Fatalf("check after gc exited %d:\n%s", code, out)
	}
	if code, _, stderr := cli(t, "gc", "--bucket", dir, "--world", "w", "--retention", "0s"); code != 2 || !strings.Contains(stderr, "--retention") {
		t.Fatalf("gc --retention 0s exited %d: %s", code, stderr)
	}
}

// A retention under the floor is refused, saying what it risks and how to
// take the risk, and deletes nothing; --unsafe-retention takes it.
func TestGCRefusesAnUnsafeRetention(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	t.Cleanup(func() { b.Close() })
	w := enginetest.World(t, b, "w", 300)
	if _, err := maintenance.Compact(context.Background(), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	before, err := bucket.Collect(b.List(context.Background(), "", ""))
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "gc", "--bucket", dir, "--world", "w", "--retention", "1s")
	for _, want := range []string{"--retention", "1s is under the floor of 24h", "views", "the catalog itself stays whole", "--unsafe-retention"} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Fatalf("gc --retention 1s exited %d, want 2 and a message with %q:\n%s", code, want, stderr)
		}
	}
	if after, _ := bucket.Collect(b.List(context.Background(), "", "")); len(after) != len(before) {
		t.Fatalf("a refused gc changed the bucket: %d objects became %d", len(before), len(after))
	}
	code, out, stderr := cli(t, "gc", "--bucket", dir, "--world", "w", "--retention", "1ms", "--unsafe-retention")
	if code != 0 || !strings.Contains(out, "replaced") {
		t.Fatalf("gc --retention 1ms --unsafe-retention exited %d, want 0 and replaced fragments deleted:\n%s%s", code, out, stderr)
	}
	if code, out, _ := cli(t, "check", "--bucket", dir, "--world", "w", "--read-data"); code != 0 {
		t.Fatalf("check after gc exited %d:\n%s", code, out)
	}
}

// A maintainer leaves a world at rest with a checkpoint at its tip
// (optimize, gc), but gc --dry-run writes nothing at all: the bucket
// holds the same objects, generation for generation, after it.
func TestDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	t.Cleanup(func() { b.Close() })
	w := enginetest.World(t, b, "w", index.RestCheckpointSlots+10) // Quiet: a slot a tick, no checkpoint
	w.Close()
	objects := func() map[string]int64 {
		all, err := bucket.Collect(b.List(context.Background(), "", ""))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, a := range all {
			out[a.Name] = a.Generation
		}
		return out
	}
	before := objects()
	if code, out, stderr := cli(t, "gc", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--dry-run"); code != 0 {
		t.Fatalf("gc --dry-run exited %d:\n%s%s", code, out, stderr)
	}
	if after := objects(); !maps.Equal(before, after) {
		t.Fatalf("gc --dry-run changed the bucket: %d objects before, %d after", len(before), len(after))
	}
	if code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w"); code != 0 {
		t.Fatalf("optimize exited %d:\n%s%s", code, out, stderr)
	}
	s, info, err := index.Load(context.Background(), b, "w")
	if err != nil || info.SlotsReplayed != 0 || info.CheckpointSeq != s.Seq {
		t.Fatalf("after optimize a load replays %d slots from checkpoint %d of %d (%v), want none: a checkpoint at the tip",
			info.SlotsReplayed, info.CheckpointSeq, s.Seq, err)
	}
}

// gc and check take several worlds as optimize does (--worlds GLOB,
// --lineage W), one after another: gc --worlds collects each world the
// glob matches (a JSON summary each) and no other; check --lineage checks
// W and its forks; a damaged file in one world of several fails check
// (exit 1) naming that world, after the others are checked clean.
func TestGCAndCheckSeveralWorlds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, w := range []string{"sw-a", "sw-b", "other"} {
		enginetest.World(t, b, w, 40).Close()
	}
	enginetest.Fork(t, b, "other", "other-f", 20, 60).Close()
	if code, out, stderr := cli(t, "optimize", "--bucket", dir, "--worlds", "*", "--recent", "0", "--windows", "8"); code != 0 {
		t.Fatalf("optimize: exit %d\n%s%s", code, out, stderr)
	}
	// replacedBy reads gc --json's summary lines: the replaced fragments
	// deleted (or, dry, to delete) by world.
	replacedBy := func(out string) map[string]int {
		by := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var sum struct {
				World    string         `json:"world"`
				ByKind   map[string]int `json:"by_kind"`
				Examined *int           `json:"examined"`
			}
			if json.Unmarshal([]byte(l), &sum) == nil && sum.Examined != nil {
				by[sum.World] = sum.ByKind[maintenance.KindReplaced]
			}
		}
		return by
	}
	replaced := func(world string) int {
		t.Helper()
		code, out, stderr := cli(t, "gc", "--bucket", dir, "--world", world, "--retention", "1ms", "--unsafe-retention", "--dry-run", "--json")
		by := replacedBy(out)
		if _, ok := by[world]; code != 0 || !ok || len(by) != 1 {
			t.Fatalf("gc --world %s --dry-run: exit %d\n%s%s", world, code, out, stderr)
		}
		return by[world]
	}
	for _, w := range []string{"sw-a", "sw-b", "other"} {
		if replaced(w) == 0 {
			t.Fatalf("world %s: no replaced fragment to collect after optimize", w)
		}
	}
	code, out, stderr := cli(t, "gc", "--bucket", dir, "--worlds", "sw-*", "--retention", "1ms", "--unsafe-retention", "--json")
	summaries := replacedBy(out)
	if code != 0 || len(summaries) != 2 || summaries["sw-a"] == 0 || summaries["sw-b"] == 0 {
		t.Fatalf("gc --worlds 'sw-*': exit %d, replaced fragments deleted by world %v; want sw-a's and sw-b's\n%s%s", code, summaries, out, stderr)
	}
	if replaced("sw-a") != 0 || replaced("sw-b") != 0 || replaced("other") == 0 {
		t.Fatal("gc --worlds 'sw-*' left replaced fragments of sw-a or sw-b, or collected other's")
	}

	code, out, stderr = cli(t, "check", "--bucket", dir, "--lineage", "other", "--read-data", "--json")
	checked := map[string]int{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var res struct {
			World     string
			Fragments int
			Errors    []any
		}
		if err := dec.Decode(&res); err != nil || len(res.Errors) != 0 {
			t.Fatalf("check --lineage other: %v, %+v\n%s", err, res, out)
		}
		checked[res.World] = res.Fragments
	}
	if code != 0 || len(checked) != 2 || checked["other"] == 0 || checked["other-f"] == 0 {
		t.Fatalf("check --lineage other: exit %d, fragments checked by world %v; want other and other-f\n%s%s", code, checked, out, stderr)
	}
	s, _, err := index.Load(ctx, b, "sw-b")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick(index.DefaultRun, 10)
	damaged := enginetest.Tables(t, tk)[0].Fragments[0].Path
	p, _ := b.Path(damaged)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = cli(t, "check", "--bucket", dir, "--worlds", "sw-*", "--read-data")
	if code != 1 || !strings.Contains(stderr, "1 of the 2 worlds failed, each named above with why (sw-b)") ||
		!strings.Contains(out, "world sw-a: ") || !strings.Contains(out, damaged) {
		t.Fatalf("check --worlds 'sw-*', a file of sw-b damaged: exit %d; want 1, sw-a checked, sw-b failing on %s\n%s%s", code, damaged, out, stderr)
	}
	for _, c := range []struct {
		cmd  string
		args []string
		code int
		says string
	}{
		{"gc", []string{"--worlds", "none-*"}, 4, `no world matches "none-*"`},
		{"gc", []string{"--world", "sw-a", "--worlds", "sw-*"}, 2, "give the worlds to collect"},
		{"check", nil, 2, "give the worlds to check"},
		{"check", []string{"--lineage", "nope"}, 4, "nope"},
	} {
		code, out, stderr := cli(t, append([]string{c.cmd, "--bucket", dir}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("%s %v: exit %d, %q; want exit %d saying %q\n%s", c.cmd, c.args, code, stderr, c.code, c.says, out)
		}
	}
}
