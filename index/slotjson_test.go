package index

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// randomSlot is a slot holding entries of every kind, with the strings and
// numbers that test a JSON reader: escapes, non-ASCII, HTML characters,
// extreme integers, empty and absent lists.
func randomSlot(r *rand.Rand) *Slot {
	plain := []string{"", "a", "run-1", "né", "日本", "sha256:0f"}
	odd := []string{"tok<&>", `q"uote`, `back\slash`, "tab\there", "\u2028", "nul\x00", "bad\xff"}
	str := func() string {
		if r.IntN(40) == 0 { // what json.Marshal escapes: the fast reader gives up
			return odd[r.IntN(len(odd))]
		}
		return plain[r.IntN(len(plain))] + fmt.Sprint(r.IntN(3))
	}
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, 1 << 53, -(1 << 40)}
	num := func() int64 { return ints[r.IntN(len(ints))] }
	frags := func() []Fragment {
		var out []Fragment
		for range r.IntN(3) {
			f := Fragment{Path: str(), Rows: num(), Bytes: num(), Digest: str(), Generation: num()}
			if r.IntN(2) == 0 {
				f.Span = &Span{From: num(), To: num()}
			}
			out = append(out, f)
		}
		return out
	}
	tables := func() []TableFragments {
		var out []TableFragments
		for range r.IntN(3) {
			out = append(out, TableFragments{Table: str(), Fragments: frags()})
		}
		if out == nil && r.IntN(2) == 0 {
			out = []TableFragments{}
		}
		return out
	}
	strList := func() []string {
		var out []string
		for range r.IntN(3) {
			out = append(out, str())
		}
		return out
	}
	s := &Slot{Format: SlotFormat, World: str(), FirstSeq: uint64(num()) | uint64(r.IntN(2))<<63, Prev: str(), Store: str()}
	for range 1 + r.IntN(6) {
		e := Entry{Op: str(), Kind: Kind(str())}
		switch r.IntN(8) {
		case 0:
			e.WorldCreate = &WorldCreate{Parent: str(), ForkRun: str(), ForkTick: num(), WriterMode: str(), CreatedUnixMs: num()}
		case 1:
			e.FenceAcquire = &FenceAcquire{Holder: str(), Resume: r.IntN(2) == 0}
		case 2:
			e.TickPublish = &TickPublish{Run: str(), Tick: num(), CommitToken: str(), WriterEpoch: num(), Tables: tables(),
				NextEntity: num(), PublishedUnixMs: num(), Settle: strList()}
		case 3:
			e.WorldStatus = &WorldStatus{Status: str(), WriterMode: str()}
		case 4:
			e.Claim = &ClaimOp{Key: ClaimKey{Run: str(), Producer: str(), ExternalID: str()}, Digest: str(), CommitToken: str(),
				Holder: str(), LeaseUntilMs: num(), Fragments: tables(), NowMs: num()}
		case 5:
			e.Rewrite = &FragmentsRewrite{Run: str(), Tick: num(), Table: str(), Old: strList(), New: frags(), ReadSeq: uint64(num()),
				Tables: tables(), Facts: r.IntN(2) == 0, ClaimShard: num()}
			if r.IntN(2) == 0 {
				e.Rewrite.Span = &Span{From: num(), To: num()}
			}
		case 6:
			e.Command = &Command{ID: str(), Run: str(), Due: num(), Kind: str(), Body: str()}
		}
		s.Entries = append(s.Entries, e)
	}
	return s
}

// agree decodes data both ways: whatever the fast reader accepts,
// encoding/json accepts too, as the same slot.
func agree(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	got, err := decodeSlotFast(data)
	if err != nil {
		return false
	}
	want, err := decodeSlotStd(data)
	if err != nil {
		t.Fatalf("the fast reader accepted what encoding/json refuses (%v):\n%s", err, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the fast reader decoded\n%s\nas %+v, encoding/json as %+v", data, got, want)
	}
	return true
}

// The fast slot reader is a shortcut, never an authority: on every slot
// json.Marshal writes, on those slots mangled byte by byte, and on the
// fixtures of every earlier format, it either gives up or decodes exactly
// what encoding/json decodes. It must also take the common slots itself.
func TestFastSlotReaderAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	taken, mangled := 0, 0
	marks := []byte(`{}[]:,"\ n0-1.e9tfu`)
	for range 2000 {
		canonical, err := json.Marshal(randomSlot(r))
		if err != nil {
			t.Fatal(err)
		}
		if agree(t, canonical) {
			taken++
		}
		for range 20 {
			m := []byte(string(canonical))
			switch i := r.IntN(len(m)); r.IntN(4) {
			case 0:
				m = append(m[:i], m[i+1:]...)
			case 1:
				m = append(m[:i], append([]byte{marks[r.IntN(len(marks))]}, m[i:]...)...)
			case 2:
				m[i] = marks[r.IntN(len(marks))]
			case 3: // a key in other case, repeated, or unknown
				m = []byte(strings.Replace(string(m), []string{`"op"`, `"tick"`, `"rows"`}[r.IntN(3)],
					[]string{`"OP"`, `"tick":1,"tick"`, `"rowz"`}[r.IntN(3)], 1))
			}
			if agree(t, m) {
				mangled++
			}
		}
	}
	if taken < 800 {
		t.Errorf("the fast reader took %d of 2000 canonical slots: it gives up too often to be worth it", taken)
	}
	// Slots of the shape bench commit and the engine write: always fast.
	base := Empty("w")
	base.Seq, base.Hash, base.World.Epoch = 1, "h", 1
	canonical, _ := json.Marshal(benchSlot(base, 64, "s"))
	if !agree(t, canonical) {
		t.Error("the fast reader gave up on a slot of tick publications")
	}
	fixtures := 0
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "/log/") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		canonical, err := decoder.DecodeAll(data, nil)
		if err != nil {
			return err
		}
		if !agree(t, canonical) {
			t.Errorf("the fast reader gave up on fixture %s", path)
		}
		fixtures++
		return nil
	})
	if err != nil || fixtures == 0 {
		t.Fatalf("fixtures: %d read, %v", fixtures, err)
	}
	t.Logf("fast: %d of 2000 canonical, %d of 40000 mangled; %d fixtures", taken, mangled, fixtures)
}

// FuzzSlotReader holds the fast reader to encoding/json on any input.
func FuzzSlotReader(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		canonical, _ := json.Marshal(randomSlot(r))
		f.Add(canonical)
	}
	f.Fuzz(func(t *testing.T, data []byte) { agree(t, data) })
}
