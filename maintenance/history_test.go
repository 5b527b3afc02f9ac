package maintenance_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A history written at once (WriteCompactedTicks) is what compaction
// leaves: one compacted file whose tick index rebuilds each tick's
// canonical file, byte for byte the fragment that tick's writer would have
// published, and whose rows carry each tick's own commit stamp.
func TestWriteCompactedTicksIsACompactedFile(t *testing.T) {
	ctx := ctxT(t)
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
	fr, canon, err := maintenance.WriteCompactedTicks(ctx, b, "w", "main", f, 4, ticks, tokens)
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
	if _, _, err := maintenance.WriteCompactedTicks(ctx, b, "w", "main", f, 4, []int64{3, 3}, []string{"x", "y"}); err == nil {
		t.Fatal("ticks out of order were written")
	}
}
