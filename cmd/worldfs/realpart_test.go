package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRealPartRsync runs the rsync the copied-bucket tests copy with, and
// says which: make test runs it verbosely and prints its line. Without
// rsync it fails under CI=true, as those tests do.
func TestRealPartRsync(t *testing.T) {
	out, err := exec.Command(tool(t, "rsync"), "--version").Output()
	if err != nil {
		t.Fatalf("rsync --version: %v", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	t.Logf("real part: rsync: %s", strings.TrimSpace(first))
}
