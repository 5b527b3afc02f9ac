package index

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchSlot is a slot of n tick publications shaped like bench commit's,
// committed after base.
func benchSlot(base *State, n int, store string) *Slot {
	s := &Slot{Format: SlotFormat, World: base.World.ID, FirstSeq: base.Seq + 1, Prev: base.Hash, Store: store}
	for i := range n {
		tick := int64(base.Seq) + int64(i)
		tok := fmt.Sprintf("tok-%s-%d", store, tick)
		s.Entries = append(s.Entries, Entry{Op: fmt.Sprintf("%s-%d", store, tick), Kind: KindTickPublish, TickPublish: &TickPublish{
			Run: "bench", Tick: tick, CommitToken: tok, WriterEpoch: base.World.Epoch,
			Tables: []TableFragments{{Table: "Position", Fragments: []Fragment{{
				Path: fmt.Sprintf("data/%s/bench/position/%s/0.parquet", base.World.ID, tok), Rows: 1000, Bytes: 64 << 10, Digest: "sha256:bench"}}}},
		}})
	}
	return s
}

func benchBase(b *testing.B) *State {
	s := Empty("w")
	first := &Slot{Format: SlotFormat, World: "w", FirstSeq: 1, Store: "x", Entries: []Entry{
		{Op: "x-1", Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: ModeResumable}},
		{Op: "x-2", Kind: KindFenceAcquire, FenceAcquire: &FenceAcquire{Holder: "bench"}}}}
	_, hash, err := EncodeSlot(first)
	if err != nil {
		b.Fatal(err)
	}
	if s, err = s.ApplySlot(first, hash); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDecodeSlot decodes a slot of 512 tick publications: what a
// loser of a slot race does to each winner's slot.
func BenchmarkDecodeSlot(b *testing.B) {
	base := benchBase(b)
	data, _, err := EncodeSlot(benchSlot(base, 512, "a"))
	if err != nil {
		b.Fatal(err)
	}
	name := SlotName("w", base.Seq+1)
	for b.Loop() {
		if _, _, err := DecodeSlot("w", name, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplySlot applies a decoded slot of 512 tick publications.
func BenchmarkApplySlot(b *testing.B) {
	base := benchBase(b)
	slot := benchSlot(base, 512, "a")
	_, hash, _ := EncodeSlot(slot)
	for b.Loop() {
		if _, err := base.ApplySlot(slot, hash); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeSlot encodes a slot of 512 tick publications.
func BenchmarkEncodeSlot(b *testing.B) {
	base := benchBase(b)
	slot := benchSlot(base, 512, "a")
	for b.Loop() {
		if _, _, err := EncodeSlot(slot); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSlotJSON compares the fast slot reader with
// encoding/json on the canonical JSON of a slot of 512 tick publications.
func BenchmarkDecodeSlotJSON(b *testing.B) {
	base := benchBase(b)
	slot := benchSlot(base, 512, "a")
	canonical, err := json.Marshal(slot)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeSlotFast(canonical); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeSlotStd(canonical); err != nil {
				b.Fatal(err)
			}
		}
	})
}
