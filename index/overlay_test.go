package index

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
)

// applyEach applies entries to s one slot each (slot hashes numbered from
// the state's slot count, so two states given the same entries agree).
func applyEach(t *testing.T, s *State, entries ...Entry) *State {
	t.Helper()
	for _, e := range entries {
		n, err := s.ApplySlot(&Slot{Format: SlotFormat, World: s.World.ID, FirstSeq: s.Seq + 1, Prev: s.Hash, Entries: []Entry{e}},
			fmt.Sprintf("%064x", s.Slots+1))
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		s = n
	}
	return s
}

// A state loaded from a checkpoint keeps the checkpoint's ticks as sorted
// parts and what changed since in a tree over them. After rewrites of
// loaded ticks (one tick, and a compaction across two shards) and new
// publications before, between, within and after the parts, it answers
// every tick question and writes its next checkpoint (incrementally, from
// the loaded one) exactly as the state that replayed the same log from
// empty; the state it was derived from is unchanged.
func TestLoadedTicksOverlayShadowsParts(t *testing.T) {
	ctx := ctxT(t)
	loadedTicks := []int64{0, 1, 2, 5, 4095, 4096, 4100, 8191, 3*4096 + 7, 3*4096 + 9}
	base := []Entry{create(ModeResumable), fence("a")}
	for _, run := range []string{"b", "d"} {
		for _, tk := range loadedTicks {
			base = append(base, publish(run, tk, fmt.Sprint(run, tk), 1))
		}
	}
	base = append(base, publish("e", math.MaxInt64, "emax", 1)) // a tick of the last shard
	position := func(run string, tk int64) string {
		return FragmentPath("w", run, "position", fmt.Sprintf("%s%d", run, tk), 0)
	}
	span := &Span{From: 4095, To: 4100}
	later := []Entry{
		{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "b", Tick: 1, Table: "Position", Old: []string{position("b", 1)},
			New: []Fragment{{Path: "data/w/b/position/rewritten-1.parquet", Rows: 11, Bytes: 7, Digest: "d-rw1"}}}},
		{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "d", Tick: 3*4096 + 9, Table: "Position", Old: []string{position("d", 3*4096+9)},
			New: []Fragment{{Path: "data/w/d/position/rewritten-9.parquet", Rows: 10 + 3*4096 + 9, Bytes: 7, Digest: "d-rw9"}}}},
		{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "b", Span: span, ReadSeq: uint64(len(base)), Tables: []TableFragments{{Table: "Position",
			Fragments: []Fragment{{Path: "data/w/b/position/compacted.parquet", Rows: 4105 + 4106 + 4110, Bytes: 9, Digest: "d-c", Span: span}}}}}},
		publish("b", 3, "b3", 1),                // within a part
		publish("b", 4097, "b4097", 1),          // within a compacted part
		publish("b", 2*4096+1, "b8193", 1),      // a shard with no part
		publish("b", 5*4096, "b20480", 1),       // after the run's parts
		publish("a", 0, "a0", 1),                // a run before every part
		publish("c", 7, "c7", 1),                // a run between parts
		publish("d", 3*4096+8, "d12296", 1),     // within the last part
		publish("e", math.MaxInt64-1, "e-1", 1), // within a part that ends at the greatest tick
		publish("f", 0, "f0", 1),                // after every part
	}

	replayedBase := applyEach(t, Empty("w"), base...)
	bk := memBucket()
	name, _, err := WriteCheckpoint(ctx, bk, replayedBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	loaded, loadedCp, err := LoadCheckpoint(ctx, bk, "w", name)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.tickParts) != 7 || loaded.ticks.Len() != 0 {
		t.Fatalf("the loaded state holds %d parts and %d ticks in its tree, want 7 and 0", len(loaded.tickParts), loaded.ticks.Len())
	}
	derived := applyEach(t, loaded, later...)
	replayed := applyEach(t, Empty("w"), append(base, later...)...)
	if derived.ticks.Len() == 0 {
		t.Fatal("nothing in the overlay")
	}
	if d := diff(replayed, derived); d != "" {
		t.Fatalf("the loaded state, moved on, differs from the replayed one: %s", d)
	}
	if d := diff(replayedBase, loaded); d != "" {
		t.Fatalf("the state loaded from the checkpoint changed as a state derived from it moved on: %s", d)
	}

	// Every question, of every run, around every tick either state knows.
	runs := []string{"", "a", "b", "bb", "c", "d", "e", "f", "g"}
	probes := []int64{math.MinInt64, -1, math.MaxInt64, math.MaxInt64 - 1}
	for _, s := range []*State{replayed, derived} {
		allTicks(s, func(tk *Tick) bool {
			probes = append(probes, tk.Tick-1, tk.Tick, tk.Tick+1)
			return true
		})
	}
	type answer struct {
		Tick, Last   *Tick
		First3, All  []*Tick
		ByToken      *Tick
		HasTick, Has bool
		HasByToken   bool
		TokenOfTick  string
	}
	ask := func(s *State, run string, tk int64) answer {
		var a answer
		a.Tick, a.HasTick = s.Tick(run, tk)
		a.Last, a.Has = s.Last(run, tk)
		s.Ticks(run, tk, func(x *Tick) bool { a.First3 = append(a.First3, x); return len(a.First3) < 3 })
		s.Ticks(run, tk, func(x *Tick) bool { a.All = append(a.All, x); return true })
		a.TokenOfTick = fmt.Sprint(run, tk)
		a.ByToken, a.HasByToken = s.TickByToken(run, a.TokenOfTick)
		return a
	}
	show := func(a answer) string {
		v := func(ts ...*Tick) (out []string) {
			for _, x := range ts {
				if x == nil {
					out = append(out, "-")
					continue
				}
				v, err := valueOf(x)
				js, _ := json.Marshal(v)
				out = append(out, fmt.Sprintf("%s %v", js, err))
			}
			return out
		}
		return fmt.Sprintf("tick %v last %v first3 %v all %v by token %v", v(a.Tick), v(a.Last), v(a.First3...), v(a.All...), v(a.ByToken))
	}
	for _, run := range runs {
		for _, tk := range probes {
			if want, got := show(ask(replayed, run, tk)), show(ask(derived, run, tk)); want != got {
				t.Fatalf("run %q tick %d: the loaded state, moved on, answers\n%s\nthe replayed one\n%s", run, tk, got, want)
			}
		}
	}
	for _, s := range []*State{replayed, derived} {
		if tk, ok := s.TickByToken("b", "b4096"); !ok || tk.Tick != 4096 || tablesOf(t, tk)[0].Fragments[0].Path != "data/w/b/position/compacted.parquet" {
			t.Fatalf("TickByToken(b, b4096) = %+v, %v: not the compacted tick", tk, ok)
		}
	}

	// The next checkpoints: the loaded state's written incrementally from
	// the one it loaded, the replayed state's from nothing, are the same
	// bytes, and load as the replayed state.
	checkpointBytes := func(b bucket.Bucket, name string) []byte {
		data, _, err := b.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	replayedBk, derivedBk := memBucket(), bk
	wantName, wantCp, err := WriteCheckpoint(ctx, replayedBk, replayed, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotName, gotCp, err := WriteCheckpoint(ctx, derivedBk, derived, loadedCp)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wantCp.Shards, gotCp.Shards) || !bytes.Equal(checkpointBytes(replayedBk, wantName), checkpointBytes(derivedBk, gotName)) {
		t.Fatalf("the next checkpoints differ:\n%+v\n%+v", gotCp.Shards, wantCp.Shards)
	}
	again, _, err := LoadCheckpoint(ctx, derivedBk, "w", gotName)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(replayed, again); d != "" {
		t.Fatalf("the next checkpoint loads differently: %s", d)
	}
}

// A checkpoint whose tick records repeat a tick (a shard listed twice, a
// tick listed twice in its shard) fails closed, even when its run records
// count the repeats: a loaded state's sorted parts hold each tick once.
func TestCheckpointRepeatingATickFailsClosed(t *testing.T) {
	ctx := ctxT(t)
	s := applyEach(t, Empty("w"), create(ModeResumable), fence("a"), publish("r", 0, "t0", 1), publish("r", 1, "t1", 1))
	for name, forge := range map[string]func(b bucket.Bucket, cp *checkpoint, i int) int64{
		"a tick shard listed twice": func(_ bucket.Bucket, cp *checkpoint, i int) int64 {
			cp.Shards = slices.Insert(cp.Shards, i, cp.Shards[i])
			return 2
		},
		"a tick listed twice in its shard": func(b bucket.Bucket, cp *checkpoint, i int) int64 {
			t0, _ := s.Tick("r", 0)
			t1, _ := s.Tick("r", 1)
			repeats := Empty("w")
			repeats.tickParts = [][]*Tick{{t0, t0, t1}}
			plain, err := repeats.encodeShard(cp.Shards[i].key())
			if err != nil {
				t.Fatal(err)
			}
			data := encoder.EncodeAll(plain, nil)
			sum := sha256.Sum256(data)
			cp.Shards[i].Hash = hex.EncodeToString(sum[:])
			if _, err := b.Create(ctx, ShardName("w", cp.Shards[i].Hash), data); err != nil {
				t.Fatal(err)
			}
			return 1
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := memBucket()
			cpName, cp, err := WriteCheckpoint(ctx, b, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(cp.Shards, func(r shardRef) bool { return r.Kind == "t" })
			cp.Runs[0].Published += forge(b, cp, i)
			data, err := cp.seal()
			if err != nil {
				t.Fatal(err)
			}
			buckettest.Replace(t, b, cpName, data)
			if _, _, err := LoadCheckpoint(ctx, b, "w", cpName); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadCheckpoint = %v, want ErrCorrupt", err)
			}
		})
	}
}
