package maintenance_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// tickFiles returns, for every published tick of run main of world w up to
// tick last, the bytes of each table's file as the catalog names it now: a
// tick's own fragment, or, for a compacted tick, the canonical file
// rebuilt from its compacted file through the tick index (every compacted
// tick has one: this test's worlds are compacted by this build).
func tickFiles(t *testing.T, b bucket.Bucket, last int64) map[int64]map[string][]byte {
	t.Helper()
	files, _ := tickFilesCSV(t, b, last)
	return files
}

// tickFilesCSV is tickFiles, and the size of each file's CSV as recorded
// beside its rows (a fragment's footer, a compacted tick's index entry, a
// tick without rows: its header), -1 where nothing records it; it fails
// the test where a recorded size is not the size of frame.WriteCSV of the
// file.
func tickFilesCSV(t *testing.T, b bucket.Bucket, last int64) (map[int64]map[string][]byte, map[int64]map[string]int64) {
	t.Helper()
	ctx := ctxT(t)
	csvs := map[int64]map[string]int64{}
	record := func(tick int64, table string, data []byte, size int64) {
		t.Helper()
		var out bytes.Buffer
		if err := frame.WriteCSV(&out, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if size >= 0 && size != int64(out.Len()) {
			t.Fatalf("tick %d table %s: CSV size %d recorded, WriteCSV writes %d bytes", tick, table, size, out.Len())
		}
		if csvs[tick] == nil {
			csvs[tick] = map[string]int64{}
		}
		csvs[tick][table] = size
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[string][]byte{}
	indexes := map[string]*frame.TickIndex{}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		if tk.Tick > last {
			return false
		}
		files := map[string][]byte{}
		for _, tf := range enginetest.Tables(t, tk) {
			if len(tf.Fragments) == 1 && tf.Fragments[0].Span == nil {
				data, _, err := b.Get(ctx, tf.Fragments[0].Path)
				if err != nil {
					t.Fatal(err)
				}
				files[tf.Table] = data
				size, ok, err := frame.ReadCSVSize(ctx, b, tf.Fragments[0])
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					size = -1
				}
				record(tk.Tick, tf.Table, data, size)
				continue
			}
			table := enginetest.StoredTable(t, b, "w", tf.Table)
			var holder *index.Fragment
			for i, f := range tf.Fragments {
				if f.Span == nil {
					t.Fatalf("tick %d table %s: a compacted file beside a fragment: %+v", tk.Tick, tf.Table, tf.Fragments)
				}
				if f.Span.From <= tk.Tick && tk.Tick <= f.Span.To {
					holder = &tf.Fragments[i]
				}
			}
			if holder == nil {
				if files[tf.Table], err = frame.EmptyTickFile(table); err != nil {
					t.Fatal(err)
				}
				record(tk.Tick, tf.Table, files[tf.Table], frame.EmptyCSVSize(table))
				continue
			}
			x, ok := indexes[holder.Path]
			if !ok {
				if x, err = frame.ReadTickIndex(ctx, b, *holder); err != nil {
					t.Fatalf("tick %d table %s: %v", tk.Tick, tf.Table, err)
				}
				indexes[holder.Path] = x
			}
			e, ok := x.Entry(tk.Tick)
			if !ok {
				if files[tf.Table], err = frame.EmptyTickFile(table); err != nil {
					t.Fatal(err)
				}
				record(tk.Tick, tf.Table, files[tf.Table], frame.EmptyCSVSize(table))
				continue
			}
			data, _, err := b.Get(ctx, holder.Path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := frame.TickFile(table, bytes.NewReader(data), int64(len(data)), e)
			if err != nil {
				t.Fatalf("tick %d table %s: %v", tk.Tick, tf.Table, err)
			}
			if int64(len(got)) != e.Size {
				t.Fatalf("tick %d table %s: %d bytes, the index says %d", tk.Tick, tf.Table, len(got), e.Size)
			}
			files[tf.Table] = got
			size := e.CSVSize
			if size == 0 {
				size = -1
			}
			record(tk.Tick, tf.Table, got, size)
		}
		out[tk.Tick] = files
		return true
	})
	return out, csvs
}

// A tick's file is canonical: encoding the rows of a published fragment
// again gives its bytes, whatever table value encodes them.
func TestCanonicalEncodingIsDeterministic(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "w", 40)
	checked := 0
	for tick, files := range tickFiles(t, b, 40) {
		s, _, err := index.Load(ctx, b, "w")
		if err != nil {
			t.Fatal(err)
		}
		tk, _ := s.Tick("main", tick)
		for id, data := range files {
			f, err := engine.DecodeFragment(enginetest.StoredTable(t, b, "w", id), data, nil) // not the writer's table value
			if err != nil {
				t.Fatal(err)
			}
			st := engine.Stamp{Tick: tick, CommitToken: tk.CommitToken, WriterEpoch: tk.WriterEpoch}
			for range 2 {
				again, err := engine.EncodeFragment(f, st)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, data) {
					t.Fatalf("tick %d table %s: encoding its rows again gives %d bytes, not the fragment's %d", tick, id, len(again), len(data))
				}
			}
			checked++
		}
		if tick > 8 {
			break
		}
	}
	if checked == 0 {
		t.Fatal("no fragment checked")
	}
}

// A compacted tick's file, rebuilt through its tick index, is byte for
// byte the fragment the writer published, at every level of compaction.
func TestCompactedTickFileIsTheFragment(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 599)
	before := tickFiles(t, b, 599)
	opts := maintenance.CompactOptions{Recent: 10}
	check := func(level string, compactedTo int64) maintenance.CompactResult {
		t.Helper()
		res, err := maintenance.Compact(ctx, b, w.Catalog(), opts)
		if err != nil || res.Windows == 0 {
			t.Fatalf("%s: %+v, %v", level, res, err)
		}
		if res.IndexBytes <= 0 || res.TicksEncoded == 0 {
			t.Fatalf("%s: no tick index written: %+v", level, res)
		}
		if all, compacted := files(t, b, "w", 0, compactedTo); compacted != all {
			t.Fatalf("%s: ticks 0..%d name %d files, %d compacted", level, compactedTo, all, compacted)
		}
		after, csvs := tickFilesCSV(t, b, 599)
		for tick, sizes := range csvs {
			for id, size := range sizes {
				if size < 0 {
					t.Fatalf("%s: tick %d table %s: no CSV size recorded", level, tick, id)
				}
			}
		}
		for tick, files := range before {
			for id, data := range files {
				if got := after[tick][id]; !bytes.Equal(got, data) {
					t.Fatalf("%s: tick %d table %s: %d bytes served, the fragment had %d", level, tick, id, len(got), len(data))
				}
			}
		}
		return res
	}
	// 64-tick windows first: below tick 599-136 no 512-tick window fits.
	opts.Recent = 136
	if res := check("the 64-tick level", 447); res.TicksReused != 0 {
		t.Fatalf("the 64-tick level reused %d ticks' entries; there were none", res.TicksReused)
	}
	// The 512-tick level takes the entries of ticks 0..447 from the 64-tick
	// files' indexes and encodes only 448..511 (and 512..575).
	opts.Recent = 10
	res := check("the 512-tick level", 575)
	if res.TicksReused == 0 || res.TicksReused < 3*res.TicksEncoded {
		t.Fatalf("the 512-tick level encoded %d ticks and reused %d", res.TicksEncoded, res.TicksReused)
	}
}

// A flipped byte in a compacted file or in its tick index fails closed:
// the index does not read, or the rebuilt file does not match it; never
// other bytes than the fragment's.
func TestTickFileFailsClosed(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 80)
	before := tickFiles(t, b, 63)
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 20)
	var tf index.TableFragments // the table of most rows
	for _, c := range enginetest.Tables(t, tk) {
		if len(tf.Fragments) == 0 || c.Fragments[0].Rows > tf.Fragments[0].Rows {
			tf = c
		}
	}
	holder := tf.Fragments[0]
	table, x, file := enginetest.CompactedFile(t, b, "w", tf.Table, holder)
	// Bytes across the whole file, each flipped in turn, and ticks across
	// the file rebuilt from it: each is refused (any error: it may no
	// longer read as Parquet) or is the fragment.
	refused := 0
	for k := range 200 {
		off := k * len(file) / 200
		bad := bytes.Clone(file)
		bad[off] ^= 0x5a
		for j := range 4 {
			e := x.Ticks[j*len(x.Ticks)/4]
			got, err := frame.TickFile(table, bytes.NewReader(bad), int64(len(bad)), e)
			if err != nil {
				refused++
				continue
			}
			if want := before[e.Tick][tf.Table]; !bytes.Equal(got, want) {
				t.Fatalf("byte %d flipped: tick %d served %d other bytes", off, e.Tick, len(got))
			}
		}
	}
	if refused == 0 {
		t.Fatal("no flipped byte was refused")
	}
	// A file that reads as Parquet but holds one other value (damage a
	// codec's checksum does not see, or a file replaced whole): the rows
	// decode, and the rebuilt file does not match the index.
	e := x.Ticks[len(x.Ticks)/2]
	other := changeValue(t, file, e.Row)
	if got, err := frame.TickFile(table, bytes.NewReader(other), int64(len(other)), e); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("a changed value in tick %d: %d bytes, %v; want ErrCorrupt", e.Tick, len(got), err)
	}
	for _, near := range []frame.TickEntry{x.Ticks[len(x.Ticks)/2-1], x.Ticks[len(x.Ticks)/2+1]} {
		if got, err := frame.TickFile(table, bytes.NewReader(other), int64(len(other)), near); err != nil || !bytes.Equal(got, before[near.Tick][tf.Table]) {
			t.Fatalf("tick %d beside the changed one: %d bytes, %v", near.Tick, len(got), err)
		}
	}
	// The index, flipped byte by byte: it never reads.
	name := index.TickIndexPath(holder.Path)
	data, _, err := b.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	m := mem.New(mem.Options{}) // each damaged index in turn, in memory
	if _, err := m.Create(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	for off := range data {
		bad := bytes.Clone(data)
		bad[off] ^= 0x01
		replace(t, m, name, bad)
		if _, err := frame.ReadTickIndex(ctx, m, holder); !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("index byte %d flipped: %v, want ErrCorrupt", off, err)
		}
	}
	// An index that is gone is no index: the reader derives the tick.
	replace(t, b, name, nil)
	if _, err := frame.ReadTickIndex(ctx, b, holder); !errors.Is(err, frame.ErrNoTickIndex) {
		t.Fatalf("no index: %v, want ErrNoTickIndex", err)
	}
}

// Collection deletes a compacted file's tick index with the file, never
// the index of a file a tick names, and an index whose file is gone once
// it is older than the retention.
func TestCollectTickIndexes(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 599)
	opts := maintenance.CompactOptions{Recent: 136} // 64-tick windows (as in TestCompactedTickFileIsTheFragment)
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), opts); err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{} // the 64-tick files' indexes
	for name := range objectSet(t, b, index.DataPrefix("w")) {
		if _, ok := index.TickIndexOf("w", name); ok {
			replaced[name] = true
		}
	}
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	s.Fragments("main", func(r index.FragmentRef) bool {
		if r.Span != nil {
			named[index.TickIndexPath(r.Path)] = true
		}
		return true
	})
	for name := range named {
		delete(replaced, name)
	}
	if len(replaced) == 0 || len(named) == 0 {
		t.Fatalf("%d replaced and %d named tick indexes", len(replaced), len(named))
	}
	// An index whose file is gone (its collection stopped between them).
	orphan := index.TickIndexPath(index.CompactedPath("w", "main", particles.Tables()[0].ID, "00000000000000000000000000000000", ""))
	if _, err := b.Create(ctx, orphan, []byte("an index of a file that is gone")); err != nil {
		t.Fatal(err)
	}
	res, _ := collect(t, b, time.Now(), false)
	objects := objectSet(t, b, index.DataPrefix("w"))
	if res.ByKind[maintenance.KindTickIndex] != 0 || !objects[orphan] {
		t.Fatalf("within the retention collection deleted %+v", res.ByKind)
	}
	res, seen := collect(t, b, time.Now().Add(maintenance.DefaultRetention+time.Hour), false)
	objects = objectSet(t, b, index.DataPrefix("w"))
	// An index goes with its file (a file without rows has no tick
	// statistics, so collection keeps it, and its index with it).
	gone := 0
	for name := range replaced {
		file, _ := index.TickIndexOf("w", name)
		if objects[name] != objects[file] || !objects[name] && seen[name].Kind != maintenance.KindTickIndex {
			t.Fatalf("replaced file %s (listed %v, reported %+v) and its index (listed %v, reported %+v)", file, objects[file], seen[file], objects[name], seen[name])
		}
		if !objects[name] {
			gone++
		}
	}
	if gone == 0 {
		t.Fatal("no replaced file's tick index was collected")
	}
	for name := range named {
		if !objects[name] {
			t.Fatalf("the tick index %s of a file ticks name was collected", name)
		}
	}
	if objects[orphan] || res.ByKind[maintenance.KindTickIndex] != gone+1 {
		t.Fatalf("collection deleted %+v; want the %d collected files' indexes and the orphan", res.ByKind, gone)
	}
	for tick, files := range tickFiles(t, b, 599) {
		if len(files) == 0 {
			t.Fatalf("tick %d has no files", tick)
		}
	}
}

// replace deletes the object name of b and, unless data is nil, stores
// data under it.
func replace(t *testing.T, b bucket.Bucket, name string, data []byte) {
	t.Helper()
	a, err := b.Stat(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctxT(t), name, a.Generation); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if _, err := b.Create(ctxT(t), name, data); err != nil {
			t.Fatal(err)
		}
	}
}

// changeValue returns the Parquet file data with the last column's value
// of row changed (the bits of a double flipped, or a number or string
// changed), written again whole.
func changeValue(t *testing.T, data []byte, row int64) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := parquet.NewWriter(&out, f.Schema())
	n := int64(0)
	for _, rg := range f.RowGroups() {
		rows := make([]parquet.Row, rg.NumRows())
		rr := rg.Rows()
		got, err := rr.ReadRows(rows)
		rr.Close()
		if int64(got) != rg.NumRows() || err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("%d of %d rows: %v", got, rg.NumRows(), err)
		}
		if row >= n && row < n+int64(got) {
			r := rows[row-n]
			v := r[len(r)-1]
			switch v.Kind() {
			case parquet.Double:
				r[len(r)-1] = parquet.DoubleValue(v.Double()+1).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
			case parquet.Int64:
				r[len(r)-1] = parquet.Int64Value(v.Int64()+1).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
			default:
				t.Fatalf("a value of kind %s", v.Kind())
			}
		}
		n += int64(got)
		if _, err := w.WriteRows(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// BenchmarkTickFile rebuilds the ticks of a compacted 64-tick file of the
// particle table from the file's bytes in memory.
func BenchmarkTickFile(b *testing.B) {
	ctx := ctxT(b)
	bk, _ := local.Open(b.TempDir())
	w := enginetest.World(b, bk, "w", 80)
	if _, err := maintenance.Compact(ctx, bk, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		b.Fatal(err)
	}
	s, _, err := index.Load(ctx, bk, "w")
	if err != nil {
		b.Fatal(err)
	}
	tk, _ := s.Tick("main", 20)
	var tf index.TableFragments
	for _, c := range enginetest.Tables(b, tk) {
		if len(tf.Fragments) == 0 || c.Fragments[0].Rows > tf.Fragments[0].Rows {
			tf = c
		}
	}
	info, _ := engine.ReadTableInfo(ctx, bk, "w", tf.Table)
	table, _ := engine.TableFromInfo(info)
	x, err := frame.ReadTickIndex(ctx, bk, tf.Fragments[0])
	if err != nil {
		b.Fatal(err)
	}
	file, _, _ := bk.Get(ctx, tf.Fragments[0].Path)
	b.ReportMetric(float64(len(file)), "file-bytes")
	b.ResetTimer()
	for i := range b.N {
		e := x.Ticks[i%len(x.Ticks)]
		if _, err := frame.TickFile(table, bytes.NewReader(file), int64(len(file)), e); err != nil {
			b.Fatal(err)
		}
	}
}

// A tick its writer published before CSV sizes were recorded (its
// fragment's footer has none) is rebuilt after compaction byte for byte
// as that fragment, without the size in its footer, while its tick index
// entry records its CSV size; ticks written since keep theirs in both.
func TestCompactionKeepsFragmentsWrittenBeforeCSVSizes(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	noSizes := enginetest.Quiet
	noSizes.NoCSVSizes = true // as writers did before sizes were recorded
	enginetest.World(t, b, "w", 99, noSizes).Close()
	w := enginetest.Resume(t, b, "w", 199) // a writer that records them
	before, csvs := tickFilesCSV(t, b, 199)
	for tick, sizes := range csvs {
		for id, size := range sizes {
			data := before[tick][id]
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if _, recorded := f.Lookup(frame.CSVSizeKey); tick <= 99 && recorded {
				t.Fatalf("tick %d table %s: a fragment written without CSV sizes records one (%d)", tick, id, size)
			}
			if tick > 99 && size < 0 {
				t.Fatalf("tick %d table %s: no CSV size recorded", tick, id)
			}
		}
	}
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if all, compacted := files(t, b, "w", 0, 127); compacted != all {
		t.Fatalf("ticks 0..127 name %d files, %d compacted", all, compacted)
	}
	after, csvs := tickFilesCSV(t, b, 199)
	for tick, files := range before {
		for id, data := range files {
			if got := after[tick][id]; !bytes.Equal(got, data) {
				t.Fatalf("tick %d table %s: %d bytes served after compaction, the fragment had %d", tick, id, len(got), len(data))
			}
			if tick <= 127 && csvs[tick][id] < 0 {
				t.Fatalf("tick %d table %s: compacted without a CSV size", tick, id)
			}
		}
	}
	// The indexes are under the new format's name, none under the first's
	// (which a build that reads only the first would fail on: it finds
	// none, and gathers those ticks another way). frame's tests read an
	// index of the first format.
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 5)
	held := false
	for _, tf := range enginetest.Tables(t, tk) {
		for _, f := range tf.Fragments {
			if f.Span == nil || f.Span.From > 5 || 5 > f.Span.To {
				continue
			}
			if _, err := b.Stat(ctx, index.TickIndexPaths(f.Path)[2]); !errors.Is(err, bucket.ErrNotExist) {
				t.Fatalf("an index under the first format's name: %v", err)
			}
			y, err := frame.ReadTickIndex(ctx, b, f)
			if err != nil || y.Version != 3 {
				t.Fatalf("the new index: %+v, %v", y, err)
			}
			_, ok := y.Entry(5)
			held = held || ok
		}
	}
	if !held {
		t.Fatal("no compacted file holds rows of tick 5")
	}

}
