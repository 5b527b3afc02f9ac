package index_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/index"
)

// BenchmarkLoadWorld times a cold index.Load of an existing world:
// WORLDFS_BENCH_BUCKET (a bucket URL) and WORLDFS_BENCH_WORLD name it; it
// is skipped without them. With WORLDFS_BENCH_MODEL the world's catalog
// from its newest checkpoint on (the marker, the checkpoints and their
// shards, the slots after the newest) is first copied into another bucket,
// which the loads then read: "gcs" (or another mem.Profiles name) a memory
// bucket with that latency model, "fake-gcs" the real GCS client against
// an in-process fake GCS server (gcstest). WORLDFS_BENCH_LOAD=summarized
// times index.LoadSummarized instead (what the views plan from).
//
//	WORLDFS_BENCH_BUCKET=/dev/shm/copy WORLDFS_BENCH_WORLD=bench-history-100000x4x50 \
//	  go test ./index -run '^$' -bench LoadWorld -count 10
func BenchmarkLoadWorld(b *testing.B) {
	url, world := os.Getenv("WORLDFS_BENCH_BUCKET"), os.Getenv("WORLDFS_BENCH_WORLD")
	if url == "" || world == "" {
		b.Skip("WORLDFS_BENCH_BUCKET and WORLDFS_BENCH_WORLD name the world to load")
	}
	ctx := context.Background()
	bk, err := bucketurl.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	switch model := os.Getenv("WORLDFS_BENCH_MODEL"); model {
	case "":
	case "fake-gcs":
		gcstest.Start(b, "bench")
		to, err := gcs.Open(ctx, "bench", "", gcs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer to.Close()
		bk = copyCatalog(b, ctx, bk, world, to)
	default:
		profile, ok := mem.Profiles[model]
		if !ok {
			b.Fatalf("WORLDFS_BENCH_MODEL=%s: neither fake-gcs nor a memory bucket profile", model)
		}
		name := "bench-load-" + world
		defer mem.Forget(name)
		copyCatalog(b, ctx, bk, world, mem.Open(name, mem.Options{}))
		bk = mem.Open(name, mem.Options{Profile: profile})
	}
	load := func() error { _, _, err := index.Load(ctx, bk, world); return err }
	switch how := os.Getenv("WORLDFS_BENCH_LOAD"); how {
	case "":
	case "summarized":
		load = func() error { _, _, err := index.LoadSummarized(ctx, bk, world); return err }
	default:
		b.Fatalf("WORLDFS_BENCH_LOAD=%s: only summarized, or unset for a whole load", how)
	}
	for b.Loop() {
		if err := load(); err != nil {
			b.Fatal(err)
		}
	}
}

// copyCatalog copies what a load of world reads into to, and returns to.
func copyCatalog(b *testing.B, ctx context.Context, from bucket.Bucket, world string, to bucket.Bucket) bucket.Bucket {
	b.Helper()
	cps, err := bucket.Collect(from.List(ctx, index.CheckpointPrefix(world), ""))
	if err != nil || len(cps) == 0 {
		b.Fatalf("world %s: %d checkpoints, %v", world, len(cps), err)
	}
	newest := strings.TrimPrefix(cps[len(cps)-1].Name, index.CheckpointPrefix(world))
	for a, err := range from.List(ctx, index.WorldPrefix(world), "") {
		if err != nil {
			b.Fatal(err)
		}
		if slot, ok := strings.CutPrefix(a.Name, index.LogPrefix(world)); ok && slot <= newest {
			continue
		}
		data, _, err := from.Get(ctx, a.Name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := to.Create(ctx, a.Name, data); err != nil {
			b.Fatal(err)
		}
	}
	return to
}
