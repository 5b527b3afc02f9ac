package index

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// Catalogs keeps at most Max catalogs: one more opened evicts the least
// recently used, which is closed and reported to Evicted; a world never
// created is ErrNoWorld and not kept; after Close, Get fails with
// ErrClosed and every catalog kept is closed.
func TestCatalogsAreBoundedAndClosed(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	for _, w := range []string{"a", "b", "c"} {
		c, _ := newWorld(t, b, w, Options{})
		c.Close()
	}
	var mu sync.Mutex
	var evicted []string
	cs := NewCatalogs(b, CatalogsOptions{Max: 2, Evicted: func(w string) {
		mu.Lock()
		defer mu.Unlock()
		evicted = append(evicted, w)
	}})
	get := func(w string) *Catalog {
		t.Helper()
		c, err := cs.Get(ctx, w)
		if err != nil {
			t.Fatalf("Get(%s): %v", w, err)
		}
		return c
	}
	a := get("a")
	if again := get("a"); again != a {
		t.Fatal("a second Get of a kept world opened its catalog again")
	}
	get("b")
	get("a") // b is now the least recently used
	get("c")
	if n := cs.Len(); n != 2 || !cs.Contains("a") || !cs.Contains("c") || cs.Contains("b") {
		t.Fatalf("kept %d catalogs: a %v, b %v, c %v; want a and c", n, cs.Contains("a"), cs.Contains("b"), cs.Contains("c"))
	}
	mu.Lock()
	if !slices.Equal(evicted, []string{"b"}) {
		t.Errorf("evicted %v, want [b]", evicted)
	}
	mu.Unlock()
	if _, err := cs.Get(ctx, "nope"); !errors.Is(err, ErrNoWorld) || cs.Contains("nope") {
		t.Fatalf("a world never created: %v (kept %v)", err, cs.Contains("nope"))
	}
	if _, err := cs.Get(ctx, "../x"); err == nil {
		t.Fatal("a name that cannot be a world's was accepted")
	}
	cs.Close()
	if _, err := cs.Get(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if cs.Len() != 0 {
		t.Fatalf("%d catalogs kept after Close", cs.Len())
	}
}
