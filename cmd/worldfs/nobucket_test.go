package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
)

// A GCS bucket that does not exist is reported as such, with the
// not-found status, by commands that read a world or list the bucket.
func TestMissingGCSBucket(t *testing.T) {
	gcstest.Start(t, "there")
	for _, args := range [][]string{
		{"sql", "--bucket", "gs://nosuch/p", "--cache-dir", t.TempDir(), "--world", "w", "SELECT 1"},
		{"check", "--bucket", "gs://nosuch/p", "--world", "w"},
	} {
		code, _, stderr := cli(t, args...)
		if code != exitNotFound || !strings.Contains(stderr, "bucket gs://nosuch/p/ does not exist") {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying bucket gs://nosuch/p/ does not exist", args[0], code, stderr, exitNotFound)
		}
	}
	// A listing hears it from the store itself.
	if code, _, stderr := cli(t, "worlds", "--bucket", "gs://nosuch/p"); code != exitNotFound || !strings.Contains(stderr, "bucket does not exist") {
		t.Errorf("worlds: exit %d, stderr %q; want exit %d saying the bucket does not exist", code, stderr, exitNotFound)
	}
	// The bucket that exists still says which world is missing.
	code, _, stderr := cli(t, "sql", "--bucket", "gs://there/p", "--cache-dir", t.TempDir(), "--world", "w", "SELECT 1")
	if code != exitNotFound || !strings.Contains(stderr, "world w does not exist in bucket gs://there/p/") {
		t.Errorf("existing bucket: exit %d, stderr %q; want exit %d saying world w does not exist", code, stderr, exitNotFound)
	}
}

// A command that reads, run where there is no bucket, says how a bucket
// is chosen (--bucket, WORLDFS_BUCKET and its value) and the directory it
// looked for, before it points at worldfs init; and exits 4.
func TestMissingLocalBucketSaysWhereItLooked(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, env := range []string{"", "elsewhere"} {
		t.Setenv("WORLDFS_BUCKET", env)
		url, setting := "./worldfs-data", "WORLDFS_BUCKET is not set"
		if env != "" {
			url, setting = env, "WORLDFS_BUCKET="+env
		}
		root, _ := filepath.Abs(url)
		for _, args := range [][]string{{"views", "--world", "w"}, {"sql", "--world", "w", "SELECT 1"}, {"worlds"}} {
			code, _, stderr := cli(t, args...)
			order := []string{"does not exist", "--bucket", "$WORLDFS_BUCKET", setting, root, "'worldfs init --bucket " + url + "'"}
			at := -1
			for _, s := range order {
				i := strings.Index(stderr, s)
				if i <= at {
					t.Errorf("%v (WORLDFS_BUCKET=%q): %q not after %q in %q", args, env, s, order[max(0, slices.Index(order, s)-1)], stderr)
					break
				}
				at = i
			}
			if code != exitNotFound {
				t.Errorf("%v: exit %d, want %d", args, code, exitNotFound)
			}
		}
	}
}
