package maintenance_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A world compacted before tick indexes (its indexes removed) gets, from
// WriteTickIndexes, exactly the missing indexes, each byte for byte the
// one compaction wrote for its file; a dry run counts them and writes
// nothing; a second run finds none missing; a damaged index is reported
// and left as it is, never replaced; and a compacted file without an
// index, opened, derives each tick's entry as the written index records
// it.
func TestWriteTickIndexesAsCompactionDoes(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 599)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	compacted := map[string][]byte{} // each compacted file's tick index, as compaction wrote it
	tables := map[string]string{}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				if f.Span == nil || compacted[f.Path] != nil {
					continue
				}
				data, _, err := b.Get(ctx, index.TickIndexPath(f.Path))
				if err != nil {
					t.Fatal(err)
				}
				compacted[f.Path], tables[f.Path] = data, tf.Table
			}
		}
		return true
	})
	if len(compacted) < 4 {
		t.Fatalf("only %d compacted files", len(compacted))
	}
	before := tickFiles(t, b, 599)
	var kept string // one file keeps its index
	for p := range compacted {
		if kept == "" {
			kept = p
			continue
		}
		replace(t, b, index.TickIndexPath(p), nil)
	}
	missing := len(compacted) - 1

	res, err := maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{DryRun: true})
	if err != nil || res.Files != len(compacted) || res.Missing != missing || res.Written != 0 {
		t.Fatalf("dry run: %+v, %v; want %d files, %d missing, none written", res, err, len(compacted), missing)
	}
	for p := range compacted {
		if _, err := b.Stat(ctx, index.TickIndexPath(p)); p != kept && !errors.Is(err, bucket.ErrNotExist) {
			t.Fatalf("a dry run wrote %s: %v", index.TickIndexPath(p), err)
		}
	}

	// Opened without its index, a file derives each tick's entry as the
	// index compaction wrote records it.
	p := ""
	for q := range compacted {
		if q != kept {
			p = q
			break
		}
	}
	table := enginetest.StoredTable(t, b, "w", tables[p])
	data, _, err := b.Get(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := frame.OpenCompactedFile(table, bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := frame.DecodeTickIndex(compacted[p])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range x.Ticks {
		e, file, ok, err := cf.Entry(want.Tick)
		if err != nil || !ok || e != want || int64(len(file)) != want.Size {
			t.Fatalf("%s tick %d derived without its index: %+v (%d bytes), %v; the index records %+v", p, want.Tick, e, len(file), err, want)
		}
		if got, err := cf.TickFile(e); err != nil || !bytes.Equal(got, file) {
			t.Fatalf("%s tick %d: rebuilt from the derived entry: %v", p, want.Tick, err)
		}
	}
	// Tick after tick, blocks of neighbouring ticks are decoded together
	// (frame's TestCompactedFileDecodesEachBlockOnce bounds them).
	if len(x.Ticks) > 8 && (cf.BlocksDecoded() == 0 || cf.BlocksDecoded() >= int64(len(x.Ticks))) {
		t.Fatalf("%s: %d ticks of %d rows derived in turn decoded %d blocks; want blocks of several ticks", p, len(x.Ticks), x.Rows, cf.BlocksDecoded())
	}

	res, err = maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{})
	if err != nil || res.Missing != missing || res.Written != missing || res.Bytes == 0 {
		t.Fatalf("writing: %+v, %v; want %d written", res, err, missing)
	}
	for p, want := range compacted {
		got, _, err := b.Get(ctx, index.TickIndexPath(p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the tick index written (%d bytes) is not compaction's (%d bytes)", p, len(got), len(want))
		}
	}
	after := tickFiles(t, b, 599)
	for tick, files := range before {
		for id, data := range files {
			if !bytes.Equal(after[tick][id], data) {
				t.Fatalf("tick %d table %s: %d bytes through the written index, %d through compaction's", tick, id, len(after[tick][id]), len(data))
			}
		}
	}
	if res, err := maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{}); err != nil || res.Missing != 0 || res.Written != 0 {
		t.Fatalf("a second run: %+v, %v; want none missing", res, err)
	}

	// A damaged index is reported and left: never replaced, damaged or not.
	name := index.TickIndexPath(kept)
	damaged := bytes.Clone(compacted[kept])
	damaged[len(damaged)/2] ^= 0xff
	replace(t, b, name, damaged)
	res, err = maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{})
	if !errors.Is(err, index.ErrCorrupt) || len(res.Damaged) != 1 || res.Written != 0 {
		t.Fatalf("a damaged index: %+v, %v; want it reported (ErrCorrupt), nothing written", res, err)
	}
	if got, _, err := b.Get(ctx, name); err != nil || !bytes.Equal(got, damaged) {
		t.Fatalf("the damaged index was replaced: %v", err)
	}
}

// A compacted file whose tick index is of the second format (before
// column summaries) gets one of the current format beside it: byte for
// byte the one compaction writes for the file (each tick's entry kept,
// its columns summarized), the older left as it is; the mount serves
// each tick as before; a second run finds nothing to do.
func TestWriteTickIndexesGivesOlderOnesTheCurrentFormat(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 299)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	current := map[string][]byte{} // each compacted file's tick index, as compaction wrote it
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				if f.Span == nil || current[f.Path] != nil {
					continue
				}
				x, err := frame.ReadTickIndex(ctx, b, f)
				if err != nil || x.Version != frame.TickIndexVersion || len(x.Summaries) == 0 {
					t.Fatalf("%s: %+v, %v", f.Path, x, err)
				}
				current[f.Path] = x.Encode()
				replace(t, b, index.TickIndexPath(f.Path), nil)
				if _, err := b.Create(ctx, index.TickIndexPaths(f.Path)[1], enginetest.TickIndexV2(x)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return true
	})
	before := tickFiles(t, b, 299)
	res, err := maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{DryRun: true})
	if err != nil || res.Files != len(current) || res.Older != len(current) || res.Missing != 0 || res.Written != 0 {
		t.Fatalf("dry run: %+v, %v; want %d of an older format, none written", res, err, len(current))
	}
	res, err = maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{})
	if err != nil || res.Older != len(current) || res.Written != len(current) || res.Missing != 0 {
		t.Fatalf("writing: %+v, %v; want %d written", res, err, len(current))
	}
	for p, want := range current {
		got, _, err := b.Get(ctx, index.TickIndexPath(p))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the tick index written (%d bytes, %v) is not compaction's (%d bytes)", p, len(got), err, len(want))
		}
		if _, err := b.Stat(ctx, index.TickIndexPaths(p)[1]); err != nil {
			t.Fatalf("%s: the older index: %v", p, err)
		}
	}
	after := tickFiles(t, b, 299)
	for tick, files := range before {
		for id, data := range files {
			if !bytes.Equal(after[tick][id], data) {
				t.Fatalf("tick %d table %s: %d bytes through the new index, %d through the older", tick, id, len(after[tick][id]), len(data))
			}
		}
	}
	if res, err := maintenance.WriteTickIndexes(ctx, b, w.Catalog(), maintenance.TickIndexOptions{}); err != nil || res.Older+res.Missing+res.Written != 0 {
		t.Fatalf("a second run: %+v, %v; want nothing to do", res, err)
	}
}
