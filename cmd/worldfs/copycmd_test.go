package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
	"github.com/worldfs/worldfs/transfer"
)

// cliChild runs a worldfs command line in a process of its own, for a
// test to kill it.
func cliChild(args []string) int {
	return run(context.Background(), args, os.Stdout, os.Stderr)
}

// sqlOf is worldfs sql's answer to copiedQuery over world in the bucket at
// url.
func sqlOf(t *testing.T, url, world string) string {
	t.Helper()
	code, out, stderr := cli(t, "sql", "--bucket", url, "--world", world, "--cache-dir", t.TempDir(), "--format", "csv", copiedQuery)
	if code != 0 || strings.Count(out, "\n") < 10 {
		t.Fatalf("sql over %s in %s: exit %d\n%s%s", world, url, code, out, stderr)
	}
	return out
}

// sourceGenerations returns every object of the local bucket in dir, name
// to generation.
func sourceGenerations(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out := map[string]int64{}
	for a, err := range b.List(context.Background(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = a.Generation
	}
	return out
}

func sameGenerations(t *testing.T, before, after map[string]int64) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("the source changed: %d objects, then %d", len(before), len(after))
	}
	for name, g := range before {
		if after[name] != g {
			t.Fatalf("the source's %s changed", name)
		}
	}
}

// worldfs world copy: a fork alone is refused (exit 2, saying why and
// what to pass), --with-lineage copies it with its parent from a local
// bucket into GCS (fake-gcs-server), where both read as the original and
// check clean; --all copies every world from GCS back to a local bucket.
func TestWorldCopyCommand(t *testing.T) {
	gcstest.Start(t, "dst")
	src := filepath.Join(t.TempDir(), "src")
	checkWorld(t, src)
	if code, out, stderr := cli(t, "world", "fork", "wf", "--parent", "w", "--tick", "3", "--bucket", src); code != 0 {
		t.Fatalf("fork: exit %d\n%s%s", code, out, stderr)
	}
	before := sourceGenerations(t, src)
	code, out, stderr := cli(t, "world", "copy", "wf", "--from", src, "--to", "gs://dst/copy")
	if code != exitUsage || !strings.Contains(stderr, "world wf is a fork of w and reads its history") || !strings.Contains(stderr, "--with-lineage") {
		t.Fatalf("copy of a fork alone: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = cli(t, "world", "copy", "wf", "--from", src, "--to", "gs://dst/copy", "--with-lineage")
	if code != 0 || !strings.Contains(out, "copied w, wf from "+src+" to gs://dst/copy") {
		t.Fatalf("copy with lineage: exit %d\n%s%s", code, out, stderr)
	}
	for _, w := range []string{"w", "wf"} {
		if got, want := sqlOf(t, "gs://dst/copy", w), sqlOf(t, src, w); got != want {
			t.Fatalf("%s in the copy reads\n%s\nwant\n%s", w, got, want)
		}
		if code, out, _ := cli(t, "check", "--bucket", "gs://dst/copy", "--world", w, "--cache-dir", t.TempDir()); code != 0 ||
			!strings.Contains(out, "no errors were found") {
			t.Fatalf("check of %s in the copy: exit %d\n%s", w, code, out)
		}
	}
	back := filepath.Join(t.TempDir(), "back")
	code, out, stderr = cli(t, "world", "copy", "--all", "--from", "gs://dst/copy", "--to", back, "--json")
	var res struct{ Worlds []string }
	if json.Unmarshal([]byte(out), &res) != nil || code != 0 || strings.Join(res.Worlds, ",") != "w,wf" {
		t.Fatalf("copy --all: exit %d\n%s%s", code, out, stderr)
	}
	if got, want := sqlOf(t, back, "wf"), sqlOf(t, src, "wf"); got != want {
		t.Fatalf("wf copied back reads\n%s\nwant\n%s", got, want)
	}
	sameGenerations(t, before, sourceGenerations(t, src))
}

// A copy killed (SIGKILL) after its 20th object shows the destination no
// world (the directory entry is written last), and run again it skips
// what is there and completes: the copy reads as the original, checks
// clean, and the source is unchanged.
//
// Mutation: plan putting the directory entry in the first phase (with the
// data) lists the half-copied world after the kill; same() failing on an
// object already there (no resume) fails the rerun.
func TestWorldCopyResumesAfterACrash(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	checkWorld(t, src)
	before := sourceGenerations(t, src)
	// How many objects a whole copy creates, so that every kill point
	// falls inside the run it kills.
	whole := filepath.Join(t.TempDir(), "whole")
	if code, _, stderr := cli(t, "world", "copy", "w", "--from", src, "--to", whole); code != 0 {
		t.Fatalf("a whole copy: exit %d %s", code, stderr)
	}
	total := len(sourceGenerations(t, whole))
	// Killed at points chosen at random (the seed is logged), each run
	// after the first resuming the one before it (a run creates up to 8
	// objects at once, so it may leave a few more than it was killed at).
	seed := time.Now().UnixNano()
	t.Logf("kill points seeded with %d (%d objects in a whole copy)", seed, total)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	left := 0
	for i := range 3 {
		at := 1 + rng.IntN(max(1, (total-left)/4))
		crashtest.KilledAt(t, fmt.Sprintf("%s@%d", transfer.FailpointCopied, at), "cli", "world", "copy", "w", "--from", src, "--to", dst)
		n := len(sourceGenerations(t, dst))
		if n < left+at {
			t.Fatalf("run %d, killed after its object %d, left %d objects (%d before it)", i, at, n, left)
		}
		left = n
		if _, err := os.Stat(filepath.Join(dst, filepath.FromSlash(index.DirectoryPrefix+"w"))); !os.IsNotExist(err) {
			t.Fatalf("a killed copy listed the world in the destination: %v", err)
		}
	}
	code, out, stderr := cli(t, "world", "copy", "w", "--from", src, "--to", dst, "--json")
	var res struct{ Copied, Skipped int64 }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Skipped < int64(left) || res.Copied == 0 {
		t.Fatalf("the copy run again: exit %d\n%s%s", code, out, stderr)
	}
	if got, want := sqlOf(t, dst, "w"), sqlOf(t, src, "w"); got != want {
		t.Fatalf("the resumed copy reads\n%s\nwant\n%s", got, want)
	}
	if code, out, _ := cli(t, "check", "--bucket", dst, "--world", "w", "--read-data", "--cache-dir", t.TempDir()); code != 0 ||
		!strings.Contains(out, "no errors were found") {
		t.Fatalf("check of the resumed copy: exit %d\n%s", code, out)
	}
	sameGenerations(t, before, sourceGenerations(t, src))
}

// world copy takes the source as --bucket, as every command does (--from,
// its older name, still works; both at once is refused); a fork whose
// parent the destination already holds copies alone, and reads there as
// in the source.
func TestWorldCopyTakesBucketAndAForkOntoItsParent(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	checkWorld(t, src)
	if code, out, stderr := cli(t, "world", "fork", "wf", "--parent", "w", "--tick", "3", "--bucket", src); code != 0 {
		t.Fatalf("fork: exit %d\n%s%s", code, out, stderr)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	code, out, stderr := cli(t, "world", "copy", "w", "--bucket", src, "--to", dst)
	if code != 0 || !strings.Contains(out, "copied w from "+src+" to "+dst) {
		t.Fatalf("copy --bucket: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = cli(t, "world", "copy", "wf", "--from", src, "--to", dst)
	if code != 0 || !strings.Contains(out, "copied wf from "+src+" to "+dst) || !strings.Contains(out, "; the history it reads of w was there already\n") {
		t.Fatalf("copy of a fork whose parent is there: exit %d\n%s%s", code, out, stderr)
	}
	if got, want := sqlOf(t, dst, "wf"), sqlOf(t, src, "wf"); got != want {
		t.Fatalf("wf in the copy reads\n%s\nwant\n%s", got, want)
	}
	code, _, stderr = cli(t, "world", "copy", "w", "--bucket", src, "--from", src, "--to", dst)
	if code != exitUsage || !strings.Contains(stderr, "--bucket and --from both name the bucket to copy from (--from is --bucket's older name): give one") {
		t.Fatalf("--bucket and --from: exit %d %q", code, stderr)
	}
}
