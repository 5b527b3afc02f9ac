package index_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/index"
)

// BenchmarkLoadWorld times a cold index.Load of an existing world:
// WORLDFS_BENCH_BUCKET (a bucket URL) and WORLDFS_BENCH_WORLD name it; it
// is skipped without them. With WORLDFS_BENCH_MODEL=gcs the world's
// catalog from its newest checkpoint on (the marker, the checkpoints and
// their shards, the slots after the newest) is first copied into a memory
// bucket, which the loads then read with the latencies of the "gcs"
// model (mem.Profiles).
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
	if model := os.Getenv("WORLDFS_BENCH_MODEL"); model != "" {
		profile, ok := mem.Profiles[model]
		if !ok {
			b.Fatalf("WORLDFS_BENCH_MODEL=%s: no such memory bucket profile", model)
		}
		bk = copyCatalog(b, ctx, bk, world, profile)
	}
	for b.Loop() {
		if _, _, err := index.Load(ctx, bk, world); err != nil {
			b.Fatal(err)
		}
	}
}

// copyCatalog copies what a load of world reads into a memory bucket
// read with profile.
func copyCatalog(b *testing.B, ctx context.Context, from bucket.Bucket, world string, profile mem.Profile) bucket.Bucket {
	b.Helper()
	name := "bench-load-" + world
	defer mem.Forget(name)
	to := mem.Open(name, mem.Options{})
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
	return mem.Open(name, mem.Options{Profile: profile})
}
