package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// lsSizes returns the size at lookup of each file of dir (ls -l).
func lsSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	sizes := map[string]int64{}
	for _, name := range ls(t, dir) {
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = info.Size()
	}
	return sizes
}

// The ticks of compacted files without a tick index (written before tick
// indexes: their indexes removed) are sized exactly at lookup, as their
// indexes size them, from each compacted file opened once for all its
// ticks listed (ls -l of tables/particle/: the mount's stats count one
// open per compacted file, one derivation per tick); once optimize's
// WriteTickIndexes wrote the indexes, a mount sizes the same ticks the
// same from them, deriving none and opening no compacted file.
func TestCompactedTicksWithoutIndexesAreSizedFromOneOpenFile(t *testing.T) {
	ctx := ctxT(t)
	b := localBucket(t)
	w := particleWorld(t, b, "w", 599)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 8}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	particle := ""
	for _, tb := range w.Tables() {
		if tb.Name == "particle" {
			particle = tb.ID
		}
	}
	compacted := map[string]bool{} // the compacted files of particle's ticks
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		tables, err := tk.Tables()
		if err != nil {
			t.Fatal(err)
		}
		for _, tf := range tables {
			for _, f := range tf.Fragments {
				if f.Span != nil && tf.Table == particle {
					compacted[f.Path] = true
				}
			}
		}
		return true
	})
	if len(compacted) < 2 {
		t.Fatalf("%d compacted files of particle", len(compacted))
	}
	dir := func(mt *mounted) string { return mt.path("w", "runs", "main", "tables", "particle") }
	want := lsSizes(t, dir(testMount(t, b)))

	var all []string
	for _, name := range objectNames(t, b) {
		if _, ok := index.TickIndexOf("w", name); ok {
			all = append(all, name)
		}
	}
	for _, name := range all {
		p, err := b.Path(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	mt := testMount(t, b)
	got := lsSizes(t, dir(mt))
	st := mountStats(t, mt)
	ticks := 0
	for name, size := range got {
		if size != want[name] {
			t.Errorf("%s: %d bytes at lookup without its tick index, %d with it", name, size, want[name])
		}
		data, err := os.ReadFile(filepath.Join(dir(mt), name))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != size {
			t.Errorf("%s: st_size %d at lookup, a read returns %d bytes", name, size, len(data))
		}
		ticks++
	}
	if st.CompactedOpened > int64(len(compacted)) || st.Gathered < 500 || st.DuckDBRuns != 0 {
		t.Errorf("ls -l of %d ticks, %d compacted files of them without tick indexes: %d compacted files opened, %d ticks derived, %d DuckDB runs; want at most one open per file, a derivation per compacted tick, no DuckDB",
			ticks, len(compacted), st.CompactedOpened, st.Gathered, st.DuckDBRuns)
	}

	res, err := maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{})
	if err != nil || res.Written == 0 || res.Written != res.Missing {
		t.Fatalf("writing the missing tick indexes: %+v, %v", res, err)
	}
	mt = testMount(t, b)
	again := lsSizes(t, dir(mt))
	if st := mountStats(t, mt); st.Gathered != 0 || st.CompactedOpened != 0 || st.DuckDBRuns != 0 {
		t.Errorf("ls -l once the tick indexes are written: %d ticks derived, %d compacted files opened, %d DuckDB runs; want none", st.Gathered, st.CompactedOpened, st.DuckDBRuns)
	}
	for name, size := range got {
		if again[name] != size {
			t.Errorf("%s: %d bytes at lookup through the written index, %d derived without one", name, again[name], size)
		}
	}
}
