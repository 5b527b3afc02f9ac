package main

import (
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
