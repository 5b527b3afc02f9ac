package bucket_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/mem"
)

// TestConformance runs the whole suite on every backend: memory first, then
// memory with the GCS latency profile, the local directory, and GCS against
// an in-process fake server reached through a gs:// URL. Nothing here skips.
func TestConformance(t *testing.T) {
	open := func(t *testing.T, url string) bucket.Bucket {
		b, err := bucketurl.Open(context.Background(), url)
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		return b
	}
	var n int
	unique := func(base string) string { n++; return fmt.Sprintf("%s-%d", base, n) }

	t.Run("mem", func(t *testing.T) {
		buckettest.Run(t, func(t *testing.T) bucket.Bucket { return mem.New(mem.Options{}) })
	})
	t.Run("mem-gcs-profile", func(t *testing.T) {
		buckettest.Run(t, func(t *testing.T) bucket.Bucket {
			name := unique("conformance")
			t.Cleanup(func() { mem.Forget(name) })
			return open(t, "mem://"+name+"?profile=gcs&seed=1")
		})
	})
	t.Run("local", func(t *testing.T) {
		buckettest.Run(t, func(t *testing.T) bucket.Bucket { return open(t, t.TempDir()) })
	})
	t.Run("gcs", func(t *testing.T) {
		gcstest.Start(t, "worldfs-conformance")
		buckettest.Run(t, func(t *testing.T) bucket.Bucket {
			return open(t, "gs://worldfs-conformance/"+unique("case"))
		})
	})
}
