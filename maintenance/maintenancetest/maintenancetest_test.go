package maintenancetest_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	"github.com/worldfs/worldfs/maintenance/maintenancetest"
)

// WriteCompactedTicks writes byte for byte the compacted file and tick
// index that maintenance.Compact writes of the same ticks published as
// their writers publish them: a history built at once is one compaction
// left. The frame spans several pages of each column.
func TestWriteCompactedTicksIsWhatCompactionWrites(t *testing.T) {
	ctx := enginetest.Context(t)
	pos, err := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "name", Type: engine.String})
	if err != nil {
		t.Fatal(err)
	}
	table, err := engine.NewTable("body", pos)
	if err != nil {
		t.Fatal(err)
	}
	f := engine.NewFrame(table)
	for e := range int64(5000) {
		if err := f.Append(e*3, engine.Values{"position_x": float64(e*e) / 7, "position_name": fmt.Sprintf("body-%d", e*e)}); err != nil {
			t.Fatal(err)
		}
	}
	const window = 16
	b := mem.New(mem.Options{})
	w, err := engine.CreateWorld(ctx, b, "w", []*engine.Table{table}, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ticks []int64
	var tokens []string
	var entries []index.Entry
	for tk := range int64(window) {
		token := fmt.Sprintf("tok-%02d", tk)
		data, err := engine.EncodeFragment(f, engine.Stamp{Tick: tk, CommitToken: token, WriterEpoch: w.Epoch()})
		if err != nil {
			t.Fatal(err)
		}
		path := index.TickFragmentPath("w", index.DefaultRun, table.ID, token)
		a, err := b.Create(ctx, path, data)
		if err != nil {
			t.Fatal(err)
		}
		ticks, tokens = append(ticks, tk), append(tokens, token)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: index.DefaultRun, Tick: tk, CommitToken: token, WriterEpoch: w.Epoch(), NextEntity: 15000,
			Tables: []index.TableFragments{{Table: table.ID, Fragments: []index.Fragment{{
				Path: path, Rows: int64(f.Len()), Bytes: int64(len(data)), Digest: engine.Digest(data), Generation: a.Generation}}}}}})
	}
	if _, err := w.Catalog().CommitAll(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: maintenance.NoRecent, Windows: []int64{window}})
	if err != nil || res.Windows != 1 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick(index.DefaultRun, 0)
	compacted := enginetest.Tables(t, tk)[0].Fragments[0]
	if compacted.Span == nil {
		t.Fatalf("tick 0 is in %+v, not a compacted file", compacted)
	}
	fr, _, err := maintenancetest.WriteCompactedTicks(ctx, b, "w", index.DefaultRun, f, w.Epoch(), ticks, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Digest != compacted.Digest || fr.Bytes != compacted.Bytes || fr.Rows != compacted.Rows || *fr.Span != *compacted.Span {
		t.Fatalf("written at once: %+v; compaction wrote %+v", fr, compacted)
	}
	x, err := frame.ReadTickIndex(ctx, b, compacted)
	if err != nil {
		t.Fatal(err)
	}
	y, err := frame.ReadTickIndex(ctx, b, fr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x.Encode(), y.Encode()) {
		t.Fatalf("tick index written at once:\n%+v\ncompaction's:\n%+v", y, x)
	}
}

// A history written at once (WriteCompactedTicks) is what compaction
// leaves: one compacted file whose tick index rebuilds each tick's
// canonical file, byte for byte the fragment that tick's writer would have
// published, and whose rows carry each tick's own commit stamp.
func TestWriteCompactedTicksIsACompactedFile(t *testing.T) {
	ctx := enginetest.Context(t)
	b := mem.New(mem.Options{})
	pos, _ := frame.NewComponent("position", frame.Field{Name: "x", Type: frame.Float64})
	table, err := frame.NewTable("body", pos)
	if err != nil {
		t.Fatal(err)
	}
	f := frame.NewFrame(table)
	for i := range 3 {
		if err := f.Append(int64(i*2), frame.Values{"position_x": float64(i) / 2}); err != nil {
			t.Fatal(err)
		}
	}
	ticks := []int64{10, 11, 13}
	tokens := []string{"a0", "a1", "a3"}
	fr, canon, err := maintenancetest.WriteCompactedTicks(ctx, b, "w", "main", f, 4, ticks, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Span == nil || *fr.Span != (index.Span{From: 10, To: 13}) || fr.Rows != 9 || len(canon) != 3 {
		t.Fatalf("file %+v, %d ticks", fr, len(canon))
	}
	data, _, err := b.Get(ctx, fr.Path)
	if err != nil {
		t.Fatal(err)
	}
	if frame.Digest(data) != fr.Digest {
		t.Fatalf("the file's digest %s, its record %s", frame.Digest(data), fr.Digest)
	}
	x, err := frame.ReadTickIndex(ctx, b, fr)
	if err != nil {
		t.Fatal(err)
	}
	for i, tick := range ticks {
		want, err := frame.EncodeFragment(f, frame.Stamp{Tick: tick, CommitToken: tokens[i], WriterEpoch: 4})
		if err != nil {
			t.Fatal(err)
		}
		e, ok := x.Entry(tick)
		if !ok || e != canon[i] || e.Size != int64(len(want)) || e.Digest != sha256.Sum256(want) {
			t.Fatalf("tick %d: index entry %+v (%v), returned %+v, the fragment %d bytes", tick, e, ok, canon[i], len(want))
		}
		got, err := frame.TickFile(table, bytes.NewReader(data), int64(len(data)), e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tick %d: rebuilt %d bytes (%v), the fragment is %d", tick, len(got), err, len(want))
		}
	}
	var stamps []string
	if _, err := frame.DecodeFragment(table, data, func(r frame.StampedRow) bool {
		stamps = append(stamps, fmt.Sprintf("%d/%s/%d/%d", r.Tick, r.CommitToken, r.WriterEpoch, r.Entity))
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if want := "[10/a0/4/0 10/a0/4/2 10/a0/4/4 11/a1/4/0 11/a1/4/2 11/a1/4/4 13/a3/4/0 13/a3/4/2 13/a3/4/4]"; fmt.Sprint(stamps) != want {
		t.Fatalf("rows %v, want %s", stamps, want)
	}
	if _, _, err := maintenancetest.WriteCompactedTicks(ctx, b, "w", "main", f, 4, []int64{3, 3}, []string{"x", "y"}); err == nil {
		t.Fatal("ticks out of order were written")
	}
}
