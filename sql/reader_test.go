package sql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfs/worldfs/cache"
)

// A reader counts what is left to verify by files, not by the entries of
// the lists it checked: a list that names a file twice leaves the other
// files still to verify, and a damaged one still fails.
func TestReaderCountsAFileNamedTwiceOnce(t *testing.T) {
	dir := t.TempDir()
	c := &checks{v: VerifiedMemory(t.TempDir()), files: map[string]cache.Record{}}
	var paths []string
	for _, name := range []string{"a.parquet", "b.parquet"} {
		p := filepath.Join(dir, name)
		data := []byte("the bytes of " + name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		c.files[p] = cache.Record{Name: name, Size: int64(len(data)), Digest: "sha256:" + hex.EncodeToString(sum[:])}
		paths = append(paths, p)
	}
	r := newReader(&Script{checks: c})
	ctx := context.Background()
	if _, err := r.verify(ctx, []string{paths[0], paths[0]}, false); err != nil {
		t.Fatal(err)
	}
	damaged := []byte("the bytes of X.parquet")
	if err := os.WriteFile(paths[1], damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.verify(ctx, []string{paths[1]}, false); err == nil {
		t.Fatalf("a damaged file read as verified: %d files left to verify after a list that named one file twice", r.pending)
	}
}
