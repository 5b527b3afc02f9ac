package ui

import (
	"math"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
)

// A world's size on the worlds page is the bytes of the files its own
// catalog names: before compaction every fragment under its data prefix
// (a fork's own, not its parent's, nor its lineage rows), after it the compacted files once
// and the ticks left as written, each the size the bucket holds.
func TestWorldSizeIsItsLiveData(t *testing.T) {
	f := newFixture(t)
	compactedWorlds(t, f)
	ctx := enginetest.Context(t)
	var ws []WorldInfo
	if code := f.get(t, "/api/worlds", &ws); code != 200 {
		t.Fatalf("/api/worlds: %d", code)
	}
	sizes := map[string]int64{}
	for _, w := range ws {
		sizes[w.ID] = w.SizeBytes
	}
	// Every fragment the catalog names, by the bucket's size of it.
	named := func(world string) int64 {
		st, _, err := index.Load(ctx, f.b, world)
		if err != nil {
			t.Fatal(err)
		}
		runs := map[string]bool{}
		for _, r := range st.Runs() {
			runs[r.Name] = true
		}
		for _, r := range st.ClaimRuns() {
			runs[r] = true
		}
		paths := map[string]bool{}
		for run := range runs {
			err := index.OwnView(st, run).Files(math.MinInt64, math.MaxInt64, func(fl index.File) bool {
				paths[fl.Path] = true
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var n int64
		for p := range paths {
			a, err := f.b.Stat(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			n += a.Size
		}
		return n
	}
	// Every fragment stored under the world's data prefix (but a fork's
	// lineage rows, which are not in its catalog).
	stored := func(world string) int64 {
		var n int64
		for a, err := range f.b.List(ctx, index.DataPrefix(world), "") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(a.Name, ".parquet") && a.Name != index.LineagePath(world) {
				n += a.Size
			}
		}
		return n
	}
	for _, w := range []string{"w", "f", "c", "cf"} {
		exp := named(w)
		if w == "w" || w == "f" {
			if s := stored(w); s != exp {
				t.Fatalf("%s: the catalog names %d bytes, the bucket stores %d", w, exp, s)
			}
		}
		if sizes[w] != exp || exp == 0 {
			t.Errorf("%s: size %d, its live data %d bytes", w, sizes[w], exp)
		}
	}
}
