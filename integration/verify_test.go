package integration

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
// neighbouring ticks read. A fragment served once and then written again
// with the same bytes (a new generation, as a copied bucket has) reads as
// before: its bytes decide; written again with one byte flipped, it fails
// at its next open.
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
	replace := func(data []byte) {
		tmp := p2 + ".new"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p2); err != nil {
			t.Fatal(err)
		}
	}
	replace(orig)
	if again, err := os.ReadFile(good); err != nil || !bytes.Equal(again, orig) {
		t.Fatalf("tick 2 written again with the same bytes: %d bytes, %v; want it read as before", len(again), err)
	}
	flipped := append([]byte(nil), orig...)
	flipped[len(flipped)/2] ^= 0x01
	replace(flipped)
	wantEIO(t, good)
}

// A bucket copied file by file (new modification times, as cp -r gives)
// mounts and reads as the original: each fragment is hashed on its first
// read and found whole. Mutation: cache.Record.checkStat failing on a
// different generation whatever the digest makes every read EIO.
func TestMountOfACopiedBucketReadsAsTheOriginal(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 4)
	dst := t.TempDir()
	err := filepath.WalkDir(b.Root(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.Root(), p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := local.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cb.Close() })
	orig, cp := testMount(t, b), testMount(t, cb)
	for _, name := range []string{"particle.parquet", "particle.csv"} {
		want, err := os.ReadFile(orig.path("w", "runs", "main", "ticks", "3", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(cp.path("w", "runs", "main", "ticks", "3", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s of the copy: %d bytes, %v; want the original's %d bytes", name, len(got), err, len(want))
		}
	}
}
