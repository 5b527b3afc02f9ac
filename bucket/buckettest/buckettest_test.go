package buckettest

import (
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
)

// A backend whose factory skips must fail the suite, not pass it silently.
func TestSkippedBackendFails(t *testing.T) {
	ok := testing.RunTests(func(pat, str string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: "skipping",
		F: func(t *testing.T) {
			Run(t, func(t *testing.T) bucket.Bucket { t.Skip("no backend here"); return mem.New(mem.Options{}) })
		},
	}})
	if ok {
		t.Fatal("a suite whose every case skipped passed")
	}
}
