package bench

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// soakOf is a soak whose writer committed ticks 0 and 1 of three tables
// (debris, emitter, particle) and 3 facts.
func soakOf() *soak {
	s := &soak{o: soakOptions{factsEvery: 4, windows: []int64{64, 8}}, tables: []string{"debris", "emitter", "particle"}}
	s.rec.ticks = []tickRecord{
		{rows: [3]int32{0, 4, 7}, ents: [3]int64{0, 6, 70}},
		{rows: [3]int32{2, 4, 9}, ents: [3]int64{30, 6, 100}},
	}
	s.rec.facts = []uint32{1, 2, 3}
	return s
}

// The answer of a soak's sql that holds what the writer committed agrees;
// any row more, less or different, or facts not ingested, is named.
func TestSoakComparesSQLWithTheWriter(t *testing.T) {
	s := soakOf()
	good := []string{"t,tick,n,s,k",
		"debris,-1,2,30,1", "debris,1,2,30,1",
		"emitter,-1,8,12,2", "emitter,0,4,6,1", "emitter,1,4,6,1",
		"particle,-1,16,170,2", "particle,0,7,70,1", "particle,1,9,100,1",
		"reading,-1,3,6,0"}
	answer := func(lines []string) string { return strings.Join(lines, "\n") + "\n" }
	if msg := s.compareSQL(answer(good), 1, 0, 1, 2, 3); msg != "" {
		t.Fatalf("the committed rows: %s", msg)
	}
	for i, change := range []func([]string) []string{
		func(l []string) []string { return append(l[:8], l[9:]...) },               // particle's tick 1 missing
		func(l []string) []string { l[7] = "particle,0,6,70,1"; return l },         // a row less
		func(l []string) []string { l[7] = "particle,0,7,71,1"; return l },         // another entity
		func(l []string) []string { return append(l, "debris,0,1,5,1") },           // a row where none was
		func(l []string) []string { l[6] = "particle,-1,16,170,1"; return l },      // a tick missing from the total
		func(l []string) []string { l[9] = "reading,-1,1,1,0"; return l },          // facts lost
		func(l []string) []string { l[9] = "reading,-1,3,7,0"; return l },          // another fact
		func(l []string) []string { return l[:9] },                                 // no facts
		func(l []string) []string { l[2] = "debris,1,2"; return l },                // not the query's columns
		func(l []string) []string { l[3] = "emitter,-1,8,12,2,extra"; return l },   // nor these
		func(l []string) []string { l[4] = "emitter,zero,4,6,1"; return l },        // not a number
		func(l []string) []string { return append(l[:1], "particle,-1,16,170,2") }, // most rows gone
		func(l []string) []string { return l[1:] },                                 // no header: a row is taken for it
	} {
		lines := change(append([]string(nil), good...))
		if msg := s.compareSQL(answer(lines), 1, 0, 1, 2, 3); msg == "" {
			t.Errorf("change %d: %q agrees with the writer", i, lines)
		}
	}
}

// A mount file that is the writer's agrees; a byte, a row or a record
// other than the writer's is named.
func TestSoakComparesMountFilesWithTheWriter(t *testing.T) {
	s := soakOf()
	parquet := []byte("PAR1 the fragment PAR1")
	sum := sha256.Sum256(parquet)
	rec := s.rec.ticks[1]
	rec.bytes[2], rec.digest[2] = int32(len(parquet)), binary.BigEndian.Uint64(sum[:8])
	if msg := s.compareFile(0, 2, 1, rec, parquet); msg != "" {
		t.Fatalf("the writer's fragment: %s", msg)
	}
	flipped := append([]byte(nil), parquet...)
	flipped[5] ^= 1
	for _, data := range [][]byte{flipped, parquet[:len(parquet)-1]} {
		if s.compareFile(0, 2, 1, rec, data) == "" {
			t.Errorf("%q agrees with the writer's fragment", data)
		}
	}
	csv := "entity_id,tick\n" + strings.Repeat("1,1\n", 9)
	if msg := s.compareFile(1, 2, 1, rec, []byte(csv)); msg != "" {
		t.Fatalf("the writer's rows as CSV: %s", msg)
	}
	if s.compareFile(1, 2, 1, rec, []byte(csv[:len(csv)-4])) == "" {
		t.Error("a CSV of 8 rows agrees with 9 committed")
	}
	manifest := func(tick int64, particleRows int, digest uint64) []byte {
		var tables []string
		for i, name := range s.tables {
			rows, d := int(rec.rows[i]), rec.digest[i]
			if name == "particle" {
				rows, d = particleRows, digest
			}
			tables = append(tables, fmt.Sprintf(`{"id":"t%d","name":%q,"rows":%d,"parquet":{"bytes":%d,"digest":"sha256:%016x%s"}}`,
				i, name, rows, rec.bytes[i], d, strings.Repeat("0", 48)))
		}
		return []byte(fmt.Sprintf(`{"world":"w","run":"main","tick":%d,"tables":[%s]}`, tick, strings.Join(tables, ",")))
	}
	if msg := s.compareFile(2, 0, 1, rec, manifest(1, 9, rec.digest[2])); msg != "" {
		t.Fatalf("the writer's manifest: %s", msg)
	}
	for _, data := range [][]byte{manifest(0, 9, rec.digest[2]), manifest(1, 8, rec.digest[2]), manifest(1, 9, rec.digest[2]^1), []byte(`{"tick":1}`), []byte("{")} {
		if s.compareFile(2, 0, 1, rec, data) == "" {
			t.Errorf("%s agrees with the writer's tick", data)
		}
	}
}
