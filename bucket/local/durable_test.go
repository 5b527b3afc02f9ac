package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket"
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
	synced := watchSyncs(t, b, final) // path → the object was linked when it was synced
	if _, err := b.Create(context.Background(), name, []byte("data")); err != nil {
		t.Fatal(err)
	}
	first := synced()
	linked, ok := first["temp"]
	if !ok || linked {
		t.Errorf("the temporary file was not fsynced before its link (synced %v, after the link %v)", ok, linked)
	}
	if !first[filepath.Dir(final)] {
		t.Errorf("the object's directory was not fsynced after the link: %v", first)
	}
	for _, dir := range []string{b.Root(), filepath.Join(b.Root(), "a"), filepath.Join(b.Root(), "a", "b")} {
		if _, ok := first[dir]; !ok {
			t.Errorf("%s, the parent of a directory the create made, was not fsynced: %v", dir, first)
		}
	}
	// A second object in the same directories syncs only itself: its
	// file and its directory.
	if _, err := b.Create(context.Background(), "a/b/c/obj2", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if second := synced(); len(second) != 2 {
		t.Errorf("a create into known directories synced %v, want the file and its directory", second)
	}
}

// watchSyncs watches every fsync of b from now on; the function it
// returns takes the syncs seen since it was last called: each path synced
// ("temp" for a temporary file), with whether probe's path existed right
// after the sync.
func watchSyncs(t *testing.T, b *Bucket, probe string) func() map[string]bool {
	var mu sync.Mutex
	synced := map[string]bool{}
	b.syncs.fsync = func(f *os.File) error {
		err := f.Sync()
		_, lerr := os.Lstat(probe)
		mu.Lock()
		defer mu.Unlock()
		path := f.Name()
		if strings.HasPrefix(path, b.tmp) {
			path = "temp"
		}
		synced[path] = synced[path] || lerr == nil
		return err
	}
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		taken := synced
		synced = map[string]bool{}
		return taken
	}
}

// A name found taken is made durable before Create says so: the winner
// may have linked it and crashed (or not yet synced) before syncing its
// directory, and ErrExist must never be reported for an object a power
// loss can still take away.
func TestTakenNameSyncedBeforeErrExist(t *testing.T) {
	ctx := context.Background()
	b, dir := bucketWithDir(t)
	// Another writer linked d/taken and has not synced its directory.
	if err := os.WriteFile(filepath.Join(dir, "taken"), []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	synced := watchSyncs(t, b, filepath.Join(dir, "taken"))
	if _, err := b.Create(ctx, "d/taken", []byte("mine")); !errors.Is(err, bucket.ErrExist) {
		t.Fatalf("create of a taken name = %v, want ErrExist", err)
	}
	if seen := synced(); !seen[dir] {
		t.Errorf("ErrExist was reported before the taken name's directory was fsynced: %v", seen)
	}
}

// bucketWithDir opens a bucket in a new directory and creates d/first in
// it; it returns the bucket and d's directory.
func bucketWithDir(t *testing.T) (*Bucket, string) {
	t.Helper()
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(context.Background(), "d/first", []byte("x")); err != nil {
		t.Fatal(err)
	}
	return b, filepath.Join(b.Root(), "d")
}

// Delete returning means the object is durably gone: its directory is
// fsynced after the unlink.
func TestDeleteSyncsDirectory(t *testing.T) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := b.Create(ctx, "d/obj", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.Root(), "d")
	synced := watchSyncs(t, b, filepath.Join(dir, "obj"))
	if err := b.Delete(ctx, "d/obj", a.Generation); err != nil {
		t.Fatal(err)
	}
	if present, ok := synced()[dir]; !ok || present {
		t.Errorf("the directory was not fsynced after the unlink (synced %v, object still there %v)", ok, present)
	}
}

// A directory this process did not make (another process may have made
// it and crashed before syncing its entry) is synced into its parent
// before an object in it is called durable.
func TestDirectoriesOfOthersSynced(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	synced := watchSyncs(t, b, filepath.Join(root, "a", "b", "obj"))
	if _, err := b.Create(context.Background(), "a/b/obj", []byte("x")); err != nil {
		t.Fatal(err)
	}
	seen := synced()
	for _, dir := range []string{b.Root(), filepath.Join(b.Root(), "a")} {
		if _, ok := seen[dir]; !ok {
			t.Errorf("%s, the parent of a directory another process made, was not fsynced: %v", dir, seen)
		}
	}
}

// Creates in one directory at the same time share its fsyncs, and each
// still returns only after an fsync of the directory that began after its
// link: a sync already running when an object is linked may have missed
// it. Staged: A's directory sync is held while B, C and D link and find it
// running; they must wait for the next sync, which they share. When that
// shared sync fails, each of them is told.
func TestConcurrentCreatesShareDirectorySyncs(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared sync fails %v", fail), func(t *testing.T) {
			ctx := context.Background()
			b, dir := bucketWithDir(t)
			var mu sync.Mutex
			covered := map[string]bool{} // names a directory sync began after and has ended
			syncs := 0
			entered, gate := make(chan struct{}), make(chan struct{})
			b.syncs.fsync = func(f *os.File) error {
				if f.Name() != dir {
					return f.Sync()
				}
				des, err := os.ReadDir(dir)
				if err != nil {
					return err
				}
				mu.Lock()
				syncs++
				n := syncs
				mu.Unlock()
				if n == 1 {
					close(entered)
					<-gate
				}
				err = f.Sync()
				mu.Lock()
				defer mu.Unlock()
				for _, de := range des {
					covered[de.Name()] = true
				}
				if fail && n == 2 {
					return errors.New("injected fsync failure")
				}
				return err
			}
			waiting := make(chan string, 8)
			b.syncs.onWait = func(string) { waiting <- "" }
			type result struct {
				name    string
				covered bool
				err     error
			}
			results := make(chan result, 4)
			create := func(name string) {
				_, err := b.Create(ctx, "d/"+name, []byte(name))
				mu.Lock()
				defer mu.Unlock()
				results <- result{name, covered[name], err}
			}
			go create("a")
			select {
			case <-entered: // a's directory sync is running, before b, c and d exist
			case r := <-results:
				t.Fatalf("create of a returned (%v) without syncing its directory", r.err)
			}
			for _, name := range []string{"b", "c", "d"} {
				go create(name)
			}
			for range 3 {
				select {
				case <-waiting:
				case r := <-results:
					t.Fatalf("create of %s returned (%v) while the directory sync begun before its link was held: it did not wait for the next", r.name, r.err)
				}
			}
			close(gate)
			for range 4 {
				r := <-results
				if !r.covered {
					t.Errorf("create of %s returned before any directory sync that began after its link had ended", r.name)
				}
				switch {
				case r.name == "a" && r.err != nil:
					t.Errorf("create of a = %v, its own sync succeeded", r.err)
				case r.name != "a" && fail && !errors.Is(r.err, bucket.ErrAmbiguous):
					t.Errorf("create of %s = %v after the sync it shared failed, want ErrAmbiguous", r.name, r.err)
				case r.name != "a" && !fail && r.err != nil:
					t.Errorf("create of %s = %v", r.name, r.err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if syncs != 2 {
				t.Errorf("%d directory syncs for 4 creates, want 2: a's, and one that b, c and d share", syncs)
			}
		})
	}
}
