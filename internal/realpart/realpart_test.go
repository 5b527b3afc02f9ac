package realpart

import (
	"path/filepath"
	"testing"
)

// run runs f as a test of its own and reports whether it passed and
// whether it was skipped.
func run(f func(t *testing.T)) (passed, skipped bool) {
	passed = testing.RunTests(func(pat, str string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: "needsFUSE",
		F: func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			f(t)
		},
	}})
	return passed, skipped
}

// Without a FUSE device a mount test fails under CI=true and is skipped
// elsewhere; with one it runs.
func TestMissingFUSEFailsUnderCI(t *testing.T) {
	old := FUSEDevice
	t.Cleanup(func() { FUSEDevice = old })
	FUSEDevice = filepath.Join(t.TempDir(), "no-fuse")
	needs := func(t *testing.T) { FUSE(t, false) }

	t.Setenv("CI", "true")
	if passed, _ := run(needs); passed {
		t.Error("under CI=true, a test without its FUSE device passed")
	}
	t.Setenv("CI", "")
	if passed, skipped := run(needs); !passed || !skipped {
		t.Errorf("without CI, a test without its FUSE device: passed %v, skipped %v; want a skip", passed, skipped)
	}
	FUSEDevice = t.TempDir() // exists
	t.Setenv("CI", "true")
	if passed, skipped := run(needs); !passed || skipped {
		t.Errorf("with a FUSE device: passed %v, skipped %v; want it to run", passed, skipped)
	}
}
