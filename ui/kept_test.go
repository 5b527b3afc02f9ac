package ui

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
)

// A server visiting more worlds than it keeps closes the least recently
// used catalogs and views: their number stays bounded, the evicted views'
// databases are closed, and a world visited again is opened again.
func TestKeptCatalogsAndViewsAreBounded(t *testing.T) {
	f := newFixture(t)
	worlds := []string{"w", "f"}
	for i := range 3 {
		id := fmt.Sprintf("x%d", i)
		enginetest.World(t, f.b, id, 2)
		worlds = append(worlds, id)
	}
	g := serve(t, f.b, f.dir, func(o *Options) { o.MaxCatalogs, o.MaxViews = 2, 2 })
	var mu sync.Mutex
	var closed []string
	g.srv.catalogClosed = func(w string) {
		mu.Lock()
		defer mu.Unlock()
		closed = append(closed, w)
	}
	seen := map[*views]bool{}
	visit := func(world string) {
		t.Helper()
		var tp TickPage
		if code := g.get(t, "/api/w/"+world+"/tick?table=particle&tick=1", &tp); code != 200 || tp.Total == 0 {
			t.Fatalf("tick 1 of %s: %d, %d rows", world, code, tp.Total)
		}
		s := g.srv
		if n, m := s.catalogs.Len(), len(s.shelf.Values()); n > 2 || m > 2 {
			t.Fatalf("after %s: %d catalogs and %d views kept, at most 2 each", world, n, m)
		}
		s.mu.Lock()
		if n := len(s.mu.events); n > 2 {
			t.Errorf("after %s: the events of %d worlds kept, at most 2", world, n)
		}
		s.mu.Unlock()
		for _, v := range s.shelf.Values() {
			seen[v] = true
		}
	}
	for _, w := range worlds {
		visit(w)
	}
	visit("w") // evicted by now: opened again
	mu.Lock()
	for _, w := range []string{"w", "f", "x0"} {
		if !slices.Contains(closed, w) {
			t.Errorf("the catalog of %s was not closed: closed %v", w, closed)
		}
	}
	mu.Unlock()
	kept := map[*views]bool{}
	for _, v := range g.srv.shelf.Values() {
		kept[v] = true
	}
	if len(seen) < len(worlds) {
		t.Fatalf("%d views seen for %d worlds", len(seen), len(worlds))
	}
	for v := range seen {
		if kept[v] {
			continue
		}
		if retired, idle := v.Retired(); !retired || idle != 0 {
			t.Errorf("views of %s no longer kept: retired %v, %d databases open", v.Script.World, retired, idle)
		}
	}
}
