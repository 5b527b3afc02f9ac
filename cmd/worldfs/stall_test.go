package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// cliWithin runs a command line and fails the test if it has not exited
// after a generous bound: a command stuck on a bucket that does not answer
// fails here instead of hanging the run.
func cliWithin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, err := cli(t, args...)
		done <- result{code, out, err}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("%q still running after 60s against a bucket that does not answer", args)
		return 0, "", ""
	}
}

// A GCS endpoint that accepts connections and never answers: every command
// exits within a bounded time with status 3 and one line that names the
// bucket, the wait and the call, and says truthfully whether a write is in
// doubt.
func TestBucketNotAnswering(t *testing.T) {
	gcstest.Unresponsive(t)
	const prefix = "worldfs: bucket gs://b/p/ is not answering (no reply within 300ms to "
	src := filepath.Join(t.TempDir(), "note")
	os.WriteFile(src, []byte("hello"), 0o644)
	for _, tc := range []struct {
		args  []string
		doubt bool
	}{
		{[]string{"bucket", "put", "--bucket", "gs://b/p", "--bucket-timeout", "300ms", "notes/a", src}, true},
		{[]string{"demo", "--bucket", "gs://b/p", "--bucket-timeout", "300ms", "--ticks", "10", "--world", "w"}, true},
		{[]string{"sql", "--bucket", "gs://b/p", "--bucket-timeout", "300ms", "--cache-dir", t.TempDir(), "--world", "w", "SELECT 1"}, false},
		{[]string{"bucket", "ls", "--bucket", "gs://b/p", "--bucket-timeout", "300ms"}, false},
	} {
		code, _, stderr := cliWithin(t, tc.args...)
		inDoubt := strings.Contains(stderr, "whether this command's last write was committed is unknown")
		if code != 3 || !strings.HasPrefix(stderr, prefix) || strings.Count(stderr, "\n") != 1 || inDoubt != tc.doubt {
			t.Errorf("%s %s: exit %d, stderr %q; want exit 3 and one line saying the bucket is not answering (write in doubt: %v)",
				tc.args[0], tc.args[1], code, stderr, tc.doubt)
		}
	}
	// The environment sets the timeout too; a bad value is a bad command line.
	t.Setenv("WORLDFS_BUCKET_TIMEOUT", "300ms")
	if code, _, stderr := cliWithin(t, "bucket", "stat", "--bucket", "gs://b/p", "x"); code != 3 || !strings.HasPrefix(stderr, prefix+"stat x)") {
		t.Errorf("WORLDFS_BUCKET_TIMEOUT=300ms: exit %d, %q", code, stderr)
	}
	t.Setenv("WORLDFS_BUCKET_TIMEOUT", "soon")
	if code, _, stderr := cli(t, "bucket", "stat", "--bucket", "gs://b/p", "x"); code != 2 || !strings.Contains(stderr, `WORLDFS_BUCKET_TIMEOUT: "soon" is not a positive duration`) {
		t.Errorf("WORLDFS_BUCKET_TIMEOUT=soon: exit %d, %q", code, stderr)
	}
	if code, _, stderr := cli(t, "bucket", "stat", "--bucket", "gs://b/p", "--bucket-timeout", "0s", "x"); code != 2 || !strings.Contains(stderr, `"0s" is not a positive duration`) {
		t.Errorf("--bucket-timeout 0s: exit %d, %q", code, stderr)
	}
}

// A tick whose publish could not be reconciled (the engine's ErrFrozen) is
// a write in doubt even when the call that got no reply was a read.
func TestNotAnsweringLineAfterAFrozenPublish(t *testing.T) {
	noReply := &bucket.NotAnsweringError{Bucket: "gs://b/", Op: "get", Name: index.SlotName("w", 9), After: time.Second}
	frozen := fmt.Errorf("%w (tick 9, token t): %w", engine.ErrFrozen, noReply)
	if line := notAnsweringLine(frozen, noReply); !strings.Contains(line, "unknown") {
		t.Errorf("after a frozen publish: %q, want it to say the write is in doubt", line)
	}
	if line := notAnsweringLine(noReply, noReply); strings.Contains(line, "unknown") {
		t.Errorf("after a read: %q, want no write in doubt", line)
	}
}
