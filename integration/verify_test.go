package integration

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// particleFragment returns the path in b of the particle fragment world
// published at tick.
func particleFragment(t *testing.T, b *local.Bucket, world string, tick int64) string {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", tick)
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID {
			p, _ := b.Path(tf.Fragments[0].Path)
			return p
		}
	}
	t.Fatalf("tick %d has no particle fragment", tick)
	return ""
}

func wantEIO(t *testing.T, path string) {
	t.Helper()
	if data, err := os.ReadFile(path); !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading %s: %d bytes, %v; want EIO", path, len(data), err)
	}
}

// A fragment whose bytes were flipped in place (size and modification time
// restored) is never served: reading the tick's parquet file, its
// tables/ entry or its materialized csv fails with EIO, while the
// neighbouring ticks read. A fragment served once and then replaced (the
// same bytes, written again: a new generation) fails at its next open.
func TestMountRefusesDamagedFragments(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 4)
	p := particleFragment(t, b, "w", 3)
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c [1]byte
	f.ReadAt(c[:], info.Size()/2)
	c[0] ^= 0x01
	f.WriteAt(c[:], info.Size()/2)
	f.Close()
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}

	mt := testMount(t, b)
	wantEIO(t, mt.path("w", "runs", "main", "ticks", "3", "particle.parquet"))
	wantEIO(t, mt.path("w", "runs", "main", "tables", "particle", "000000000003.parquet"))
	wantEIO(t, mt.path("w", "runs", "main", "ticks", "3", "particle.csv"))

	good := mt.path("w", "runs", "main", "ticks", "2", "particle.parquet")
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatalf("tick 2: %v", err)
	}
	p2 := particleFragment(t, b, "w", 2)
	tmp := p2 + ".new"
	if err := os.WriteFile(tmp, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p2); err != nil {
		t.Fatal(err)
	}
	wantEIO(t, good)
}
