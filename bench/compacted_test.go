package bench

import (
	"encoding/json"
	"testing"

	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/internal/realpart"
	"github.com/worldfs/worldfs/maintenance"
)

// bench fs-compacted runs on a remote bucket (a fake GCS server): its
// mounts and views read through caches of their own, and it reports the
// compacted bytes the first opens fetched (two ticks' pages, far below
// the compacted file) and the glob's (the file whole).
func TestBenchCompactedOnGCS(t *testing.T) {
	realpart.FUSE(t, false)
	gcstest.Start(t, "worlds")
	b, err := bucketurl.Open(enginetest.Context(t), "gs://worlds/bench")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := enginetest.Wide(t, b, "w", 2000, 74)
	res, err := maintenance.Compact(enginetest.Context(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10})
	if err != nil || res.Windows != 1 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	code, out, stderr := cli(t, "bench", "fs-compacted", "--bucket", "gs://worlds/bench", "--world", "w", "--table", "particle",
		"--files", "2", "--runs", "1", "--dir", t.TempDir(), "--json")
	var got compactedBench
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("bench fs-compacted: %d\n%s\n%s", code, out, stderr)
	}
	if got.Files != 2 || got.Indexed != 2 || got.SizeMismatches != 0 || got.GlobRows != 75*2000 ||
		got.FirstOpenFetched == 0 || got.FirstOpenFetched >= got.GlobFetched/2 || got.GlobFetched < 2<<20 ||
		got.Copy.Files != 75 || got.Copy.Rows != 75*2000 || len(got.Copy.MountSeconds) != 1 || len(got.Copy.LocalSeconds) != 1 || got.Copy.Ratio <= 0 ||
		len(got.Copy.LoopbackSeconds) != 1 || got.Copy.LoopbackRatio <= 0 || got.Copy.FloorRatio <= 0 {
		t.Fatalf("bench fs-compacted on GCS: %+v", got)
	}
}
