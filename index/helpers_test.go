package index

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// diff describes how two states differ ("" if they are equal).
func diff(a, b *State) string {
	if !reflect.DeepEqual(a.World, b.World) {
		return fmt.Sprintf("world %+v vs %+v", a.World, b.World)
	}
	if a.Seq != b.Seq || a.Hash != b.Hash || a.Slots != b.Slots {
		return fmt.Sprintf("position %d/%.8s/%d vs %d/%.8s/%d", a.Seq, a.Hash, a.Slots, b.Seq, b.Hash, b.Slots)
	}
	var at, bt []tickValue
	for _, p := range []struct {
		s   *State
		out *[]tickValue
	}{{a, &at}, {b, &bt}} {
		var err error
		allTicks(p.s, func(t *Tick) bool {
			var v tickValue
			v, err = valueOf(t)
			*p.out = append(*p.out, v)
			return err == nil
		})
		if err != nil {
			return err.Error()
		}
	}
	if !reflect.DeepEqual(at, bt) {
		return fmt.Sprintf("ticks differ: %d vs %d", len(at), len(bt))
	}
	if !reflect.DeepEqual(a.Runs(), b.Runs()) {
		return fmt.Sprintf("runs %+v vs %+v", a.Runs(), b.Runs())
	}
	if !reflect.DeepEqual(a.Intents(), b.Intents()) {
		return fmt.Sprintf("open intents %+v vs %+v", a.Intents(), b.Intents())
	}
	if !reflect.DeepEqual(a.Tags(), b.Tags()) {
		return fmt.Sprintf("tags %+v vs %+v", a.Tags(), b.Tags())
	}
	// The token index finds every tick, and holds nothing else.
	for _, st := range []*State{a, b} {
		n := st.byToken.Len()
		for _, part := range st.tokens {
			n += len(part.get())
		}
		if n != len(at) {
			return fmt.Sprintf("the token index has %d entries for %d ticks", n, len(at))
		}
	}
	for _, v := range at {
		t := v.Rec
		ga, oka := a.TickByToken(t.Run, t.CommitToken)
		gb, okb := b.TickByToken(t.Run, t.CommitToken)
		va, _ := valueOf(ga)
		vb, _ := valueOf(gb)
		// The tick the token names, if it carries it; else the lowest.
		named, isNamed := TokenTick(t.CommitToken)
		if !oka || !okb || ga.CommitToken != t.CommitToken || !reflect.DeepEqual(va, vb) || ga.Tick > t.Tick && !(isNamed && ga.Tick == named) {
			return fmt.Sprintf("token %s of %s/%d finds %v and %v", t.CommitToken, t.Run, t.Tick, ga, gb)
		}
	}
	var ac, bc []Claim
	a.claims.Ascend(func(c *Claim) bool { ac = append(ac, *c); return true })
	b.claims.Ascend(func(c *Claim) bool { bc = append(bc, *c); return true })
	if !reflect.DeepEqual(ac, bc) {
		return fmt.Sprintf("claims differ: %d vs %d", len(ac), len(bc))
	}
	var acmd, bcmd []CommandState
	a.commands.Ascend(func(c *CommandState) bool { acmd = append(acmd, *c); return true })
	b.commands.Ascend(func(c *CommandState) bool { bcmd = append(bcmd, *c); return true })
	if !reflect.DeepEqual(acmd, bcmd) {
		return fmt.Sprintf("commands differ: %d vs %d", len(acmd), len(bcmd))
	}
	var am, bm []shardMark
	a.shardSeq.Ascend(func(m shardMark) bool { am = append(am, m); return true })
	b.shardSeq.Ascend(func(m shardMark) bool { bm = append(bm, m); return true })
	if !reflect.DeepEqual(am, bm) {
		return fmt.Sprintf("shard marks %v vs %v", am, bm)
	}
	return ""
}

// tickValue is a tick's record with its fragment lists decoded, to
// compare.
type tickValue struct {
	Rec    Tick
	Tables []TableFragments
}

func valueOf(t *Tick) (tickValue, error) {
	if t == nil {
		return tickValue{}, nil
	}
	tables, err := t.Tables()
	v := tickValue{Rec: *t, Tables: tables}
	v.Rec.frags = nil
	return v, err
}

// tablesOf is tk's fragment lists; it fails the test if they do not
// decode.
func tablesOf(t testing.TB, tk *Tick) []TableFragments {
	t.Helper()
	tables, err := tk.Tables()
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

func publish(run string, tick int64, token string, epoch int64) Entry {
	return Entry{Kind: KindTickPublish, TickPublish: &TickPublish{Run: run, Tick: tick, CommitToken: token, WriterEpoch: epoch,
		Tables: []TableFragments{{Table: "Position", Fragments: []Fragment{{
			Path: FragmentPath("w", run, "position", token, 0), Rows: 10 + tick, Bytes: 1000 + tick, Digest: "d-" + token,
			Generation: 1_700_000_000_000_000_000 + tick}}}}}}
}

func fence(holder string) Entry {
	return Entry{Kind: KindFenceAcquire, FenceAcquire: &FenceAcquire{Holder: holder}}
}

func claimEntry(kind Kind, run, producer, ext, digest, token, holder string, now, lease int64) Entry {
	op := &ClaimOp{Key: ClaimKey{Run: run, Producer: producer, ExternalID: ext},
		Digest: digest, CommitToken: token, Holder: holder, NowMs: now, LeaseUntilMs: lease}
	if kind == KindClaimComplete {
		op.Fragments = factFragments(run, token)
	}
	return Entry{Kind: kind, Claim: op}
}

// factFragments is the fragment list a completion of token names.
func factFragments(run, token string) []TableFragments {
	return []TableFragments{{Table: "Reading", Fragments: []Fragment{{
		Path: FragmentPath("w", run, "reading", token, 0), Rows: 1, Bytes: 100, Digest: "d-" + token}}}}
}

// newWorld creates world w on b and returns its catalog and the creator's
// epoch.
func newWorld(t testing.TB, b bucket.Bucket, w string, opts Options) (*Catalog, int64) {
	t.Helper()
	c, epoch, err := CreateWorld(ctxT(t), b, w, WorldCreate{CreatedUnixMs: 1}, "creator", opts)
	if err != nil {
		t.Fatalf("CreateWorld(%s): %v", w, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, epoch
}

func memBucket() *mem.Bucket { return mem.New(mem.Options{}) }

// allTicks calls fn for every tick of s in order, until fn returns false.
func allTicks(s *State, fn func(*Tick) bool) {
	s.ascendTicks(&Tick{Tick: math.MinInt64}, fn)
}

// tickCount is the number of ticks of s.
func tickCount(s *State) int {
	n := 0
	allTicks(s, func(*Tick) bool { n++; return true })
	return n
}

// commitEach commits es on c one at a time, failing t on any error.
func commitEach(t *testing.T, c *Catalog, es ...Entry) {
	t.Helper()
	for _, e := range es {
		if _, err := c.Commit(ctxT(t), e); err != nil {
			t.Fatal(err)
		}
	}
}

// newestShards returns the name of world w's newest checkpoint in b and
// the shards it lists.
func newestShards(t testing.TB, b bucket.Bucket) (string, []shardRef) {
	t.Helper()
	ctx := ctxT(t)
	name, _, err := newestCheckpoint(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := readCheckpoint(ctx, b, "w", name)
	if err != nil {
		t.Fatal(err)
	}
	return name, cp.Shards
}

// tickShardOf returns tick shard n of run among shards.
func tickShardOf(t testing.TB, shards []shardRef, run string, n int64) shardRef {
	t.Helper()
	i := slices.IndexFunc(shards, func(r shardRef) bool { return r.Kind == "t" && r.Run == run && r.N == n })
	if i < 0 {
		t.Fatalf("the checkpoint lists no tick shard %d of run %s", n, run)
	}
	return shards[i]
}

// loadThenWrite loads world w of b for want (LoadFor) and opens a
// catalog of w to commit after it (closed when the test ends).
func loadThenWrite(t *testing.T, b bucket.Bucket, want Want) (*Partial, *Catalog) {
	t.Helper()
	ctx := ctxT(t)
	p, _, err := LoadFor(ctx, b, "w", want)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, b, "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// moveRows is a rewrite of tick's Position fragment of run r at c's tip
// into another file, as maintenance moves rows.
func moveRows(t *testing.T, c *Catalog, tick int64) Entry {
	t.Helper()
	old := tablesOf(t, mustTick(t, c.Tip(), "r", tick))[0].Fragments
	return Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "r", Tick: tick, Table: "Position",
		Old: []string{old[0].Path}, New: []Fragment{{Path: fmt.Sprintf("data/w/r/position/m%d/0.parquet", tick), Rows: old[0].Rows, Bytes: 1, Digest: "d-m"}}}}
}

// forkAtFour makes world "parent", which publishes ticks 3 and 4 of
// main, and world "f" forked from it at tick 4, and returns f's catalog
// and epoch (the catalog closed when the test ends).
func forkAtFour(t *testing.T, b bucket.Bucket) (*Catalog, int64) {
	t.Helper()
	parent, pe := newWorld(t, b, "parent", Options{NoCompactor: true})
	commitEach(t, parent, ownPublish("parent", "main", 3, "p3", pe), ownPublish("parent", "main", 4, "p4", pe))
	c, fe, err := CreateWorld(ctxT(t), b, "f", WorldCreate{Parent: "parent", ForkRun: "main", ForkTick: 4}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, fe
}

// oldForkWithAnEarlyPublish makes the worlds of forkAtFour, then gives
// fork f the slot an earlier catalog wrote for a publish of its tick 3
// (token f3), at or before its fork point, which a catalog now refuses.
func oldForkWithAnEarlyPublish(t *testing.T, b bucket.Bucket) {
	t.Helper()
	c, fe := forkAtFour(t, b)
	tip := c.Tip()
	c.Close()
	slot := &Slot{Format: SlotFormat, World: "f", FirstSeq: tip.Seq + 1, Prev: tip.Hash, Store: "f",
		Entries: []Entry{ownPublish("f", "main", 3, "f3", fe)}}
	data, _, err := EncodeSlot(slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctxT(t), SlotName("f", tip.Seq+1), data); err != nil {
		t.Fatal(err)
	}
}
