package integration

import (
	"os"
	"slices"
	"testing"
)

// TestRealPartFUSE mounts an empty bucket and lists the mount's root, and
// says so: make test runs it verbosely and prints its line, so a test log
// names the FUSE the mount tests ran on. Without FUSE it fails under
// CI=true, as every mount test does (requireFUSE).
func TestRealPartFUSE(t *testing.T) {
	mt := testMount(t, localBucket(t))
	names := ls(t, mt.dir)
	if !slices.Contains(names, "ctl") {
		t.Fatalf("the mount's root lists %v, without ctl", names)
	}
	how := "through fusermount3"
	if os.Geteuid() == 0 {
		how = "directly, as root"
	}
	t.Logf("real part: FUSE: a mount (%s) listed its root", how)
}
