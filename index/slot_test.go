package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
)

func testSlot() *Slot {
	return &Slot{Format: SlotFormat, World: "w", FirstSeq: 5, Prev: "abc", Store: "s1",
		Entries: []Entry{publish("r", 1, "tok1", 1), fence("h")}}
}

func TestSlotRoundTripAndDeterminism(t *testing.T) {
	data, hash, err := EncodeSlot(testSlot())
	if err != nil {
		t.Fatal(err)
	}
	again, hash2, _ := EncodeSlot(testSlot())
	if !bytes.Equal(data, again) || hash != hash2 {
		t.Fatal("equal slots encoded differently")
	}
	s, h, err := DecodeSlot("w", SlotName("w", 5), data)
	if err != nil || h != hash || s.LastSeq() != 6 || s.Entries[0].TickPublish.CommitToken != "tok1" {
		t.Fatalf("decode: %+v %v", s, err)
	}
}

func TestCorruptSlotsFailClosed(t *testing.T) {
	good, _, _ := EncodeSlot(testSlot())
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0xff
	plain := func(json string) []byte { return encoder.EncodeAll([]byte(json), nil) }
	other := testSlot()
	other.World = "v"
	otherData, _, _ := EncodeSlot(other)
	for name, tc := range map[string]struct {
		data []byte
		slot string
	}{
		"flipped byte":  {flipped, SlotName("w", 5)},
		"truncated":     {good[:len(good)-3], SlotName("w", 5)},
		"not zstd":      {[]byte(`{"format":1}`), SlotName("w", 5)},
		"unknown field": {plain(`{"format":1,"world":"w","first_seq":1,"prev":"","store":"s","entries":[],"extra":1}`), SlotName("w", 1)},
		"future format": {plain(`{"format":2,"world":"w","first_seq":1,"prev":"","store":"s","entries":[{"op":"o","kind":"fence.acquire","fence_acquire":{"holder":"h"}}]}`), SlotName("w", 1)},
		"no entries":    {plain(`{"format":1,"world":"w","first_seq":1,"prev":"","store":"s","entries":[]}`), SlotName("w", 1)},
		"unknown kind":  {plain(`{"format":1,"world":"w","first_seq":1,"prev":"","store":"s","entries":[{"op":"o","kind":"tick.delete"}]}`), SlotName("w", 1)},
		"other world":   {otherData, SlotName("w", 5)},
		"name mismatch": {good, SlotName("w", 6)},
		"trailing json": {plain(`{"format":1,"world":"w","first_seq":1,"prev":"","store":"s","entries":[{"op":"o","kind":"fence.acquire","fence_acquire":{"holder":"h"}}]} {}`), SlotName("w", 1)},
		"missing prev":  {plain(`{"format":1,"world":"w","first_seq":3,"prev":"","store":"s","entries":[{"op":"o","kind":"fence.acquire","fence_acquire":{"holder":"h"}}]}`), SlotName("w", 3)},
	} {
		if _, _, err := DecodeSlot("w", tc.slot, tc.data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeSlot = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestSlotNames(t *testing.T) {
	if got := SlotName("w1", 0x2a); got != "worlds/w1/log/000000000000002a" {
		t.Fatalf("SlotName = %s", got)
	}
	if seq, err := ParseSlotName("w1", "worlds/w1/log/000000000000002a"); err != nil || seq != 42 {
		t.Fatalf("ParseSlotName = %d, %v", seq, err)
	}
	for _, bad := range []string{"worlds/w1/log/2a", "worlds/w2/log/000000000000002a", "worlds/w1/log/000000000000002A", "worlds/w1/log/00000000000000zz"} {
		if _, err := ParseSlotName("w1", bad); err == nil {
			t.Errorf("ParseSlotName(%s) accepted", bad)
		}
	}
	for _, bad := range []string{"", "W", "a/b", ".x", "-x", "a b", string(make([]byte, 200))} {
		if ValidateWorldID(bad) == nil {
			t.Errorf("ValidateWorldID(%q) accepted", bad)
		}
	}
}

// A slot encoded from its entries' JSON in parts (as a committer rebuilds
// one on a new base) is exactly json.Marshal of the slot: the bytes, and
// so the hash, do not depend on how the entries were grouped.
func TestSlotEncodedFromPartsIsCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		s := randomSlot(r)
		var parts [][]byte
		for i := 0; i < len(s.Entries); {
			j := i + 1 + r.IntN(len(s.Entries)-i)
			p, err := marshalEntries(s.Entries[i:j])
			if err != nil {
				t.Fatal(err)
			}
			parts, i = append(parts, p), j
		}
		data, hash, err := encodeSlot(s, parts)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		got, err := decoder.DecodeAll(data, nil)
		if err != nil || !bytes.Equal(got, want) || hash != hashOf(want) {
			t.Fatalf("encoded from %d parts:\n%s\njson.Marshal:\n%s", len(parts), got, want)
		}
	}
}
