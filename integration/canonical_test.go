package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// tickParquet returns the Parquet files of tick n of w through mount mt,
// by table name: ticks/<n>/<table>.parquet.
func tickParquet(t *testing.T, mt *mounted, n int64) map[string]string {
	t.Helper()
	dir := mt.path("w", "runs", "main", "ticks", fmt.Sprintf("%012d", n))
	out := map[string]string{}
	for _, name := range ls(t, dir) {
		if table, ok := strings.CutSuffix(name, ".parquet"); ok {
			out[table] = filepath.Join(dir, name)
		}
	}
	if len(out) == 0 {
		t.Fatalf("tick %d has no Parquet files", n)
	}
	return out
}

// A compacted tick's Parquet file is, through the mount, byte for byte the
// fragment its writer published: its st_size is exact at lookup, before
// any open (and derives nothing), the same after the first open, and the
// bytes a full read returns are the fragment's, through ticks/ and
// tables/, in a new mount and in the mount that read the fragment before.
func TestMountServesCompactedTicksAsPublished(t *testing.T) {
	for _, bk := range maintenanceBuckets {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.open(t)
			w := particleWorld(t, b, "w", 140)
			before := testMount(t, b)
			want := map[string][]byte{} // by "<tick> <table>"
			for n := int64(0); n <= 127; n++ {
				for table, p := range tickParquet(t, before, n) {
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					want[fmt.Sprintf("%d %s", n, table)] = data
				}
			}
			res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10})
			if err != nil || res.Windows != 2 || res.IndexBytes == 0 {
				t.Fatalf("compaction: %+v, %v", res, err)
			}
			if fragmentOf(t, b, 100).Span == nil {
				t.Fatal("tick 100 is not compacted; the test proves nothing")
			}
			after := testMount(t, b)
			for _, m := range []struct {
				name string
				mt   *mounted
			}{{"a new mount", after}, {"the mount that read the fragments", before}} {
				sizes := map[string]int64{}
				for n := int64(0); n <= 127; n++ {
					for table, p := range tickParquet(t, m.mt, n) {
						info, err := os.Stat(p)
						if err != nil {
							t.Fatal(err)
						}
						sizes[p] = info.Size()
						if w := want[fmt.Sprintf("%d %s", n, table)]; info.Size() != int64(len(w)) {
							t.Fatalf("%s: %s: st_size %d at lookup, the fragment had %d bytes", m.name, p, info.Size(), len(w))
						}
					}
				}
				if m.mt == after {
					if st := mountStats(t, m.mt); st.DuckDBRuns != 0 {
						t.Fatalf("%s: stat of %d compacted ticks' files made %d files; a stat makes none", m.name, len(sizes), st.DuckDBRuns)
					}
				}
				for n := int64(0); n <= 127; n++ {
					for table, p := range tickParquet(t, m.mt, n) {
						data, err := os.ReadFile(p)
						if err != nil {
							t.Fatal(err)
						}
						if w := want[fmt.Sprintf("%d %s", n, table)]; !bytes.Equal(data, w) {
							t.Fatalf("%s: %s: read %d bytes, not the %d of the fragment the writer published", m.name, p, len(data), len(w))
						}
						if info, err := os.Stat(p); err != nil || info.Size() != int64(len(data)) {
							t.Fatalf("%s: %s: st_size %d after the open (%v), a read returns %d", m.name, p, info.Size(), err, len(data))
						}
					}
				}
				for _, n := range []int64{0, 64, 100, 127} {
					p := m.mt.path("w", "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", n))
					checkSize(t, p)
					if data, err := os.ReadFile(p); err != nil || !bytes.Equal(data, want[fmt.Sprintf("%d particle", n)]) {
						t.Fatalf("%s: %s: %d bytes (%v), not the fragment's", m.name, p, len(data), err)
					}
				}
			}
		})
	}
}

// A damaged tick index or compacted file fails closed: the lookup or open
// of a tick it serves is EIO, never other bytes than the fragment's.
func TestMountFailsClosedOnDamagedTickIndex(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 80)
	want := map[int64][]byte{}
	{
		mt := testMount(t, b)
		for n := int64(0); n <= 63; n++ {
			data, err := os.ReadFile(tickParquet(t, mt, n)["particle"])
			if err != nil {
				t.Fatal(err)
			}
			want[n] = data
		}
	}
	if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	file := fragmentOf(t, b, 10)
	if file.Span == nil {
		t.Fatal("tick 10 is not compacted; the test proves nothing")
	}
	flip := func(name string, off int) (undo func()) {
		p, err := b.Path(name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(data)
		bad[off] ^= 0x20
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := func(mt *mounted, n int64) string {
		return mt.path("w", "runs", "main", "ticks", fmt.Sprintf("%012d", n), "particle.parquet")
	}

	// The index: the tick's lookup is EIO.
	undo := flip(index.TickIndexPath(file.Path), 100)
	mt := testMount(t, b)
	if _, err := os.Stat(p(mt, 10)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a damaged tick index: stat %v, want EIO", err)
	}
	if _, err := os.ReadFile(p(mt, 10)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a damaged tick index: read %v, want EIO", err)
	}
	undo()

	// The compacted file, amid its entity ids: every tick of it reads as
	// the fragment or is EIO.
	flip(file.Path, midColumn(t, b, file.Path, engine.ColEntity))
	mt = testMount(t, b)
	refused := 0
	for n := int64(0); n <= 63; n++ {
		data, err := os.ReadFile(p(mt, n))
		switch {
		case errors.Is(err, syscall.EIO):
			refused++
		case err != nil:
			t.Fatalf("tick %d: %v", n, err)
		case !bytes.Equal(data, want[n]):
			t.Fatalf("tick %d: %d other bytes than the fragment's %d", n, len(data), len(want[n]))
		}
	}
	if refused == 0 {
		t.Fatal("no tick of the damaged file was refused")
	}
}

// midColumn returns the offset of the middle of the first column chunk
// of column col in the Parquet file name of b.
func midColumn(t *testing.T, b *local.Bucket, name, col string) int {
	t.Helper()
	data, _, err := b.Get(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for i, path := range f.Schema().Columns() {
		if path[len(path)-1] == col {
			md := f.Metadata().RowGroups[0].Columns[i].MetaData
			return int(md.DataPageOffset + md.TotalCompressedSize/2)
		}
	}
	t.Fatalf("%s has no column %s", name, col)
	return 0
}

// A glob over tables/<t>/ of a compacted table (a listing, then every
// file) has the mount decode blocks of pages at once and rebuild the
// ticks after the one opened ahead of the reader, an open of a tick kept
// rebuilt needing no plan: each file read is still the fragment its
// writer published, read forward (each twice), backward, far apart (none
// rebuilt ahead), or by several readers at once in their own orders,
// each through a new mount.
func TestMountServesASweptCompactedTableAsPublished(t *testing.T) {
	for _, bk := range maintenanceBuckets {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.open(t)
			w := particleWorld(t, b, "w", 140)
			before := testMount(t, b)
			want := map[string][]byte{} // by file name in tables/particle/
			for n := int64(0); n <= 127; n++ {
				data, err := os.ReadFile(tickParquet(t, before, n)["particle"])
				if err != nil {
					t.Fatal(err)
				}
				want[fmt.Sprintf("%012d.parquet", n)] = data
			}
			if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
				t.Fatal(err)
			}
			if fragmentOf(t, b, 100).Span == nil {
				t.Fatal("tick 100 is not compacted; the test proves nothing")
			}
			read := func(mt *mounted, name string) error {
				data, err := os.ReadFile(mt.path("w", "runs", "main", "tables", "particle", name))
				if err != nil {
					return err
				}
				if !bytes.Equal(data, want[name]) {
					return fmt.Errorf("%s: read %d bytes, not the %d of the fragment the writer published", name, len(data), len(want[name]))
				}
				return nil
			}
			names := func(mt *mounted) []string {
				var out []string
				for _, name := range ls(t, mt.path("w", "runs", "main", "tables", "particle")) {
					if _, ok := want[name]; ok {
						out = append(out, name)
					}
				}
				if len(out) != len(want) {
					t.Fatalf("tables/particle/ lists %d of the %d compacted ticks", len(out), len(want))
				}
				return out
			}
			forward := testMount(t, b)
			for _, name := range names(forward) {
				for range 2 { // as DuckDB does: the second open is of the bytes kept
					if err := read(forward, name); err != nil {
						t.Fatal("forward: ", err)
					}
				}
			}
			if st := mountStats(t, forward); st.RebuiltAhead == 0 {
				t.Fatalf("a sweep of %d ticks rebuilt none ahead: %+v", len(want), st)
			}
			backward := testMount(t, b)
			all := names(backward)
			for i := len(all) - 1; i >= 0; i-- {
				if err := read(backward, all[i]); err != nil {
					t.Fatal("backward: ", err)
				}
			}
			// Ticks far apart (as cp -r opens them, in inode order) are
			// rebuilt one by one, none ahead.
			scattered := testMount(t, b)
			all = names(scattered)
			for k := range all {
				if err := read(scattered, all[k*37%len(all)]); err != nil {
					t.Fatal("scattered: ", err)
				}
			}
			if st := mountStats(t, scattered); st.RebuiltAhead != 0 {
				t.Fatalf("ticks read far apart rebuilt %d ahead; want none", st.RebuiltAhead)
			}
			several := testMount(t, b)
			all = names(several)
			errs := make(chan error, 4)
			for r := range 4 {
				go func() {
					for k := range all {
						if err := read(several, all[(k*(2*r+3)+r)%len(all)]); err != nil {
							errs <- fmt.Errorf("reader %d: %w", r, err)
							return
						}
					}
					errs <- nil
				}()
			}
			for range 4 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
