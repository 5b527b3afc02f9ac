package fs

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
)

// A local bucket behind wrappers (a memory cache, a fault injector) is
// still local: the mount needs no cache identity for it and serves its
// fragments in place, from the bucket's own files.
func TestWrappedLocalBucketIsReadInPlace(t *testing.T) {
	ctx := enginetest.Context(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 2).Close()
	mc, err := cache.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	wrapped := faulty.Wrap(mc.Wrap(b), faulty.NewScript())
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(wrapped, Options{Cache: c, Writer: enginetest.Quiet}) // no BucketID: local
	if err != nil {
		t.Fatalf("a wrapped local bucket was taken for a remote one: %v", err)
	}
	defer m.Close()
	tr, ok, err := m.tick(ctx, "w", "main", 2)
	if err != nil || !ok {
		t.Fatalf("tick 2: %v %v", ok, err)
	}
	var served int
	for _, tf := range enginetest.Tables(t, tr.Tick) {
		for _, f := range tf.Fragments {
			p, err := m.fragmentPath(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(p, b.Root()+string(filepath.Separator)) {
				t.Fatalf("fragment %s served from %s, not in place under %s", f.Path, p, b.Root())
			}
			served++
		}
	}
	if served == 0 {
		t.Fatal("tick 2 names no fragments")
	}
}
