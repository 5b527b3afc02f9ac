package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Create returning means durable: by then the temporary file was fsynced
// before its link, the object's directory after it, and the parent of
// every directory the create made. The test watches every fsync (a power
// loss, which would show a missing one, cannot be staged in a test).
func TestCreateSyncsBeforeReturning(t *testing.T) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const name = "a/b/c/obj"
	final := filepath.Join(b.Root(), "a", "b", "c", "obj")
	var mu sync.Mutex
	synced := map[string]bool{} // path → the object was linked when it was synced
	orig := fsync
	t.Cleanup(func() { fsync = orig })
	fsync = func(f *os.File) error {
		err := orig(f)
		_, lerr := os.Lstat(final)
		mu.Lock()
		defer mu.Unlock()
		path := f.Name()
		if strings.HasPrefix(path, b.tmp) {
			path = "temp"
		}
		synced[path] = synced[path] || lerr == nil
		return err
	}
	if _, err := b.Create(context.Background(), name, []byte("data")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	linked, ok := synced["temp"]
	if !ok || linked {
		t.Errorf("the temporary file was not fsynced before its link (synced %v, after the link %v)", ok, linked)
	}
	if !synced[filepath.Dir(final)] {
		t.Errorf("the object's directory was not fsynced after the link: %v", synced)
	}
	for _, dir := range []string{b.Root(), filepath.Join(b.Root(), "a"), filepath.Join(b.Root(), "a", "b")} {
		if _, ok := synced[dir]; !ok {
			t.Errorf("%s, the parent of a directory the create made, was not fsynced: %v", dir, synced)
		}
	}
	// A second object in the same directories syncs only itself: its
	// file and its directory.
	for k := range synced {
		delete(synced, k)
	}
	mu.Unlock()
	_, err = b.Create(context.Background(), "a/b/c/obj2", []byte("data"))
	mu.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 {
		t.Errorf("a create into known directories synced %v, want the file and its directory", synced)
	}
}
