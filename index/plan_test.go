package index

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// ownPublish publishes tick under token with one fragment stored under the
// token, as the engine writes it.
func ownPublish(world, run string, tick int64, token string, epoch int64) Entry {
	return Entry{Kind: KindTickPublish, TickPublish: &TickPublish{Run: run, Tick: tick, CommitToken: token, WriterEpoch: epoch,
		Tables: []TableFragments{{Table: "pos", Fragments: []Fragment{{Path: FragmentPath(world, run, "pos", token, 0), Rows: 1}}}}}}
}

func completedFact(world, run, ext, token string) []Entry {
	key := ClaimKey{Run: run, Producer: "p", ExternalID: ext}
	return []Entry{
		{Kind: KindClaimAcquire, Claim: &ClaimOp{Key: key, Digest: "d", CommitToken: token, Holder: "h", LeaseUntilMs: math.MaxInt64}},
		{Kind: KindClaimComplete, Claim: &ClaimOp{Key: key, Digest: "d", CommitToken: token, Holder: "h",
			Fragments: []TableFragments{{Table: "fact", Fragments: []Fragment{{Path: FragmentPath(world, run, "fact", token, 0), Rows: 1}}}}}},
	}
}

func ticksOf(v *View, from, to int64) []string {
	var out []string
	v.Ticks(from, to, func(t TickRef) bool {
		out = append(out, fmt.Sprintf("%s:%d", t.World, t.Tick.Tick))
		return true
	})
	return out
}

// The planner resolves a fork's lineage (docs/ARCHITECTURE.md, "Visibility"): the
// parent up to the fork point, then the fork's own ticks; the head, a tick,
// a token and the facts of the view agree with that listing.
func TestViewOfAFork(t *testing.T) {
	b := memBucket()
	ctx := ctxT(t)
	parent, pe := newWorld(t, b, "parent", Options{NoCompactor: true})
	for tick := range int64(10) {
		commitEach(t, parent, ownPublish("parent", "main", tick, fmt.Sprintf("p%d", tick), pe))
		if tick == 3 || tick == 8 {
			commitEach(t, parent, completedFact("parent", "main", fmt.Sprint(tick), fmt.Sprintf("c%d", tick))...)
		}
	}
	fork, fe, err := CreateWorld(ctx, b, "fork", WorldCreate{Parent: "parent", ForkRun: "main", ForkTick: 4}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()

	// A fork with no tick of its own: its head is the fork point, not the
	// parent's head.
	v, err := OpenView(ctx, LoadFrom(b), "fork", "main")
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := v.Head(); !ok || h.World != "parent" || h.Tick.Tick != 4 {
		t.Fatalf("head of a fresh fork = %+v, %v; want the parent's tick 4", h, ok)
	}

	for tick := int64(5); tick < 8; tick++ {
		commitEach(t, fork, ownPublish("fork", "main", tick, fmt.Sprintf("f%d", tick), fe))
	}
	commitEach(t, fork, completedFact("fork", "main", "x", "cf")...)
	if v, err = OpenView(ctx, LoadFrom(b), "fork", "main"); err != nil {
		t.Fatal(err)
	}
	want := []string{"parent:0", "parent:1", "parent:2", "parent:3", "parent:4", "fork:5", "fork:6", "fork:7"}
	if got := ticksOf(v, math.MinInt64, math.MaxInt64); !slices.Equal(got, want) {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	if got := ticksOf(v, 3, 5); !slices.Equal(got, want[3:6]) {
		t.Fatalf("ticks 3..5 %v, want %v", got, want[3:6])
	}
	if h, ok := v.Head(); !ok || h.World != "fork" || h.Tick.Tick != 7 {
		t.Fatalf("head %+v, %v; want the fork's tick 7", h, ok)
	}
	if tk, ok := v.Tick(4); !ok || tk.World != "parent" || tk.CommitToken != "p4" {
		t.Fatalf("tick 4 = %+v, %v", tk, ok)
	}
	if _, ok := v.Tick(8); ok {
		t.Fatal("the parent's tick 8 is past the fork point, yet visible")
	}
	for token, tick := range map[string]int64{"p2": 2, "p4": 4, "f6": 6} {
		if tk, ok := v.Token(token); !ok || tk.Tick.Tick != tick {
			t.Fatalf("token %s = %+v, %v; want tick %d", token, tk, ok, tick)
		}
	}
	for _, token := range []string{"p5", "p9", "nope"} {
		if tk, ok := v.Token(token); ok {
			t.Fatalf("token %s resolves to %+v; it is not visible in the fork", token, tk)
		}
	}
	var facts []string
	v.Facts(math.MaxInt64, func(c FactRef) bool { facts = append(facts, c.World+":"+c.CommitToken); return true })
	if !slices.Equal(facts, []string{"parent:c3", "fork:cf"}) {
		t.Fatalf("facts %v: the fork sees its parent's facts up to the fork point, and its own", facts)
	}

	// Files: every tick's fragment and every fact's, each proven by the
	// catalog (stored under its own token); one tick alone lists one file.
	var files []string
	v.Files(math.MinInt64, math.MaxInt64, func(f File) bool {
		if f.Check {
			t.Errorf("%s: a fragment under its own token needs no row check", f.Path)
		}
		files = append(files, fmt.Sprintf("%s:%d:%s", f.World, f.Tick, f.Token))
		return true
	})
	if len(files) != 10 {
		t.Fatalf("files %v: want 8 ticks' and 2 facts'", files)
	}
	files = nil
	v.Files(6, 6, func(f File) bool { files = append(files, f.Path); return true })
	if !slices.Equal(files, []string{FragmentPath("fork", "main", "pos", "f6", 0)}) {
		t.Fatalf("files of tick 6 alone: %v", files)
	}
}

// A fragment the catalog does not prove (stored under another token than
// its publication's) keeps the row check.
func TestViewFilesCheckUnprovenFragments(t *testing.T) {
	b := memBucket()
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	e := ownPublish("w", "main", 0, "t0", epoch)
	e.TickPublish.Tables[0].Fragments = append(e.TickPublish.Tables[0].Fragments, Fragment{Path: FragmentPath("w", "main", "pos", "crashed", 0)})
	if _, err := c.Commit(ctx, e); err != nil {
		t.Fatal(err)
	}
	v, err := OpenView(ctx, LoadFrom(b), "w", "main")
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	v.Files(math.MinInt64, math.MaxInt64, func(f File) bool { checked[f.Path] = f.Check; return true })
	if checked[FragmentPath("w", "main", "pos", "t0", 0)] || !checked[FragmentPath("w", "main", "pos", "crashed", 0)] || len(checked) != 2 {
		t.Fatalf("row checks %v: only the fragment under another token needs one", checked)
	}
}

// Tick fragments are proven in both layouts: <token>.parquet, as the
// engine names them, and <token>/0.parquet, as it once did; a fragment
// under another token, or another part, is not.
func TestProvenLayouts(t *testing.T) {
	for path, want := range map[string]bool{
		TickFragmentPath("w", "main", "pos", "t0"):      true,
		FragmentPath("w", "main", "pos", "t0", 0):       true,
		FragmentPath("w", "main", "pos", "t0", 1):       false,
		TickFragmentPath("w", "main", "pos", "crashed"): false,
		TickFragmentPath("w", "other", "pos", "t0"):     false,
		TickFragmentPath("w", "main", "vel", "t0"):      false,
		"data/w/main/pos/t0.parquet.parquet":            false,
		"data/w/main/pos/t0/0.parquet/":                 false,
		TickFragmentPath("v", "main", "pos", "t0"):      false,
		FragmentPath("w", "main", "pos", "t0", 0) + "x": false,
	} {
		if got := Proven("w", "main", "pos", "t0", Fragment{Path: path}); got != want {
			t.Errorf("Proven(%s) = %v, want %v", path, got, want)
		}
	}
	if Proven("w", "main", "pos", "", Fragment{Path: TickFragmentPath("w", "main", "pos", "")}) {
		t.Error("a fragment without a token is proven")
	}
}

// The token index follows the ticks through a checkpoint and a rewrite.
func TestTickByTokenAfterCheckpointAndRewrite(t *testing.T) {
	b := memBucket()
	ctx := ctxT(t)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	for tick := range int64(5) {
		if _, err := c.Commit(ctx, ownPublish("w", "main", tick, fmt.Sprintf("t%d", tick), epoch)); err != nil {
			t.Fatal(err)
		}
	}
	old := FragmentPath("w", "main", "pos", "t2", 0)
	if _, err := c.Commit(ctx, Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "main", Tick: 2, Table: "pos",
		Old: []string{old}, New: []Fragment{{Path: "data/w/main/pos/compacted/0.parquet", Rows: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteCheckpoint(ctx, b, c.Tip(), nil); err != nil {
		t.Fatal(err)
	}
	s, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*State{c.Tip(), s} {
		tk, ok := st.TickByToken("main", "t2")
		if !ok || tk.Tick != 2 || tablesOf(t, tk)[0].Fragments[0].Path != "data/w/main/pos/compacted/0.parquet" {
			t.Fatalf("TickByToken(t2) = %+v, %v: want the rewritten tick 2", tk, ok)
		}
		if _, ok := st.TickByToken("main", "t9"); ok {
			t.Fatal("an unpublished token resolves")
		}
		// Index entries are hashes: an entry whose hash collides with t9's
		// names tick 2, whose token is t2, so t9 still resolves to nothing.
		collided := st.clone()
		collided.byToken.ReplaceOrInsert(tokenEntry{tokenKey("main", "t9"), 2})
		if tk, ok := collided.TickByToken("main", "t9"); ok {
			t.Fatalf("a colliding index entry resolves t9 to %+v", tk)
		}
		if last, ok := st.Last("main", 3); !ok || last.Tick != 3 {
			t.Fatalf("Last(3) = %+v", last)
		}
	}
	if d := diff(c.Tip(), s); d != "" {
		t.Fatalf("cold start differs from the live state: %s", d)
	}
}
