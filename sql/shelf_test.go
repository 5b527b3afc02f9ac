package sql_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	wsql "github.com/worldfs/worldfs/sql"
)

// A shelf builds a key's views once for all the callers asking at once,
// answers from them while the catalogs stay where they were, builds again
// when one moved on (retiring the old: its idle databases close), keeps
// the newer of two builds, reuses an idle database, retires the least
// recently used past Max, and keeps nothing once closed.
func TestShelfBuildsOnceAndRetires(t *testing.T) {
	rw := newROWorld(t)
	ctx := ctxT(t)
	shelf := wsql.NewShelf[string, int](wsql.ShelfOptions{Max: 2})
	var builds atomic.Int32
	gate := make(chan struct{})
	build := func(n int) func(context.Context) (*wsql.Script, int, error) {
		return func(ctx context.Context) (*wsql.Script, int, error) {
			builds.Add(1)
			<-gate
			s, err := wsql.Build(ctx, rw.b, "w", wsql.Options{Dir: rw.viewsDir})
			return s, n, err
		}
	}
	var wg sync.WaitGroup
	got := make([]*wsql.Kept[int], 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := shelf.Get(ctx, "a", []uint64{5}, build(1))
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}()
	}
	for builds.Load() == 0 {
		runtime.Gosched() // the first caller's build is under way; the others wait on it
	}
	close(gate)
	wg.Wait()
	for _, k := range got[1:] {
		if k != got[0] {
			t.Fatal("callers asking at once got different views")
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d builds for callers asking at once", n)
	}
	first := got[0]
	db, err := first.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first.Release(db, true)
	if again, _ := first.Acquire(ctx); again != db {
		t.Fatal("an idle database was not reused")
	} else {
		first.Release(again, true)
	}
	if k, err := shelf.Get(ctx, "a", []uint64{5}, build(2)); err != nil || k != first || builds.Load() != 1 {
		t.Fatalf("same sequences: built again (%d builds, %v)", builds.Load(), err)
	}
	newer, err := shelf.Get(ctx, "a", []uint64{6}, build(3))
	if err != nil || newer == first || newer.Extra != 3 {
		t.Fatalf("a catalog moved on: %v, extra %d", err, newer.Extra)
	}
	if retired, idle := first.Retired(); !retired || idle != 0 {
		t.Fatalf("the replaced views: retired %v, %d idle databases", retired, idle)
	}
	// A build from an older catalog, finished after a newer one was
	// kept, yields to it.
	if k, err := shelf.Get(ctx, "a", []uint64{4}, build(4)); err != nil || k != newer {
		t.Fatalf("an older build replaced newer views: %v", err)
	}
	shelf.Get(ctx, "b", []uint64{1}, build(5))
	shelf.Get(ctx, "c", []uint64{1}, build(6)) // past Max: a, the least recently used, retires
	if retired, _ := newer.Retired(); !retired || len(shelf.Values()) != 2 {
		t.Fatalf("past Max: a retired %v, %d kept", retired, len(shelf.Values()))
	}
	shelf.Close()
	if _, err := shelf.Get(ctx, "d", []uint64{1}, build(7)); !errors.Is(err, wsql.ErrShelfClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if n := shelf.Opened(); n != 1 {
		t.Fatalf("%d databases opened, want 1", n)
	}
}
