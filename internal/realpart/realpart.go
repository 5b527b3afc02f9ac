// Package realpart decides what a test does when a real part it needs is
// missing: a FUSE device, root for a direct mount, a command such as rsync.
// Under CI=true the test fails, since a green CI run must mean the part was
// exercised; anywhere else it is skipped, saying what is missing and why.
package realpart

import (
	"os"
	"testing"
)

// Missing ends a test that cannot run without part: it fails under CI=true
// and is skipped otherwise; why says what was looked for. Its message
// starts "real part missing", which make test prints.
func Missing(t testing.TB, part, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("real part missing under CI=true: %s: %s", part, why)
	}
	t.Skipf("real part missing: %s: %s; this test does not run", part, why)
}

// FUSEDevice is the device a FUSE mount opens.
var FUSEDevice = "/dev/fuse"

// FUSE requires FUSE mounts: the device, and root where asRoot is set (a
// direct mount, without fusermount).
func FUSE(t testing.TB, asRoot bool) {
	t.Helper()
	if _, err := os.Stat(FUSEDevice); err != nil {
		Missing(t, "FUSE", err.Error()+" (load the fuse module; in a container, run with --device /dev/fuse --cap-add SYS_ADMIN)")
	}
	if asRoot && os.Geteuid() != 0 {
		Missing(t, "FUSE as root", "the test mounts directly, which needs root")
	}
}
