package index

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tag entries, one rule at a time (TagOp): a name of the world's own,
// taken once until it is deleted; a bad name or message refused; a tick
// of the world's own history tagged only if it is published under the
// token the tag names.
func TestApplyTags(t *testing.T) {
	s := Empty("w")
	seq := uint64(0)
	apply := func(e Entry) error {
		t.Helper()
		seq++
		n, _, err := s.Check(&e, seq)
		if err == nil {
			s = n
		} else {
			seq--
		}
		return err
	}
	mustApply := func(e Entry) {
		t.Helper()
		if err := apply(e); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(Entry{Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: ModeResumable}})
	mustApply(fence("h"))
	mustApply(ownPublish("w", "main", 0, "t0", 1))
	mustApply(ownPublish("w", "main", 1, "t1", 1))
	tag := func(name string, tick int64, token, message string) Entry {
		return Entry{Kind: KindTagCreate, Tag: &TagOp{Name: name, Run: "main", Tick: tick, CommitToken: token, Message: message, Holder: "h", NowMs: 1000}}
	}
	untag := func(name string) Entry {
		return Entry{Kind: KindTagDelete, Tag: &TagOp{Name: name, Holder: "h", NowMs: 2000}}
	}
	for _, bad := range []struct {
		e    Entry
		want string
	}{
		{tag("fig/3", 1, "t1", ""), "has a '/'"},
		{tag("", 1, "t1", ""), "needs a name"},
		{tag("Fig3", 1, "t1", ""), "starting with a letter"},
		{tag("head", 1, "t1", ""), "reads as a point"},
		{tag("now", 1, "t1", ""), "reads as a point"},
		{tag(strings.Repeat("a", 65), 1, "t1", ""), "over the 64"},
		{tag("big", 1, "t1", strings.Repeat("m", MaxTagMessage+1)), "over the 4096"},
		{tag("gone", 2, "t2", ""), "not visible"},  // not published
		{tag("other", 1, "t0", ""), "not visible"}, // published under another token
		{Entry{Kind: KindTagCreate}, "with 0 payloads"},
	} {
		err := apply(bad.e)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want refused saying %q", bad.e.Tag, err, bad.want)
		}
	}
	if len(s.Tags()) != 0 {
		t.Fatalf("refused tags are held: %+v", s.Tags())
	}
	mustApply(tag("fig3", 1, "t1", "the paper's figure 3"))
	created := seq
	err := apply(tag("fig3", 0, "t0", ""))
	var taken *TagExistsError
	if !errors.As(err, &taken) || taken.Tag.Tick != 1 || !strings.Contains(err.Error(), "tag --delete w fig3") {
		t.Fatalf("a second tag fig3: %v, want TagExistsError naming tick 1 and how to delete it", err)
	}
	got, ok := s.Tag("fig3")
	want := Tag{Name: "fig3", Run: "main", Tick: 1, CommitToken: "t1", Message: "the paper's figure 3", Holder: "h", CreatedUnixMs: 1000, Seq: created}
	if !ok || got != want {
		t.Fatalf("tag fig3 = %+v, %v; want %+v", got, ok, want)
	}
	mustApply(tag("base", 0, "t0", ""))
	if names := s.Tags(); len(names) != 2 || names[0].Name != "base" || names[1].Name != "fig3" {
		t.Fatalf("Tags() = %+v, want base and fig3 by name", names)
	}
	if err := apply(untag("nope")); !errors.Is(err, ErrNoTag) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting a tag the world lacks: %v, want ErrNoTag", err)
	}
	mustApply(untag("fig3"))
	if _, ok := s.Tag("fig3"); ok {
		t.Fatal("tag fig3 is held after its deletion")
	}
	mustApply(tag("fig3", 0, "t0", "taken again")) // a deleted name is free
	if got, _ := s.Tag("fig3"); got.Tick != 0 {
		t.Fatalf("fig3 taken again = %+v, want tick 0", got)
	}
}

// A fork tags a tick it inherits (its parent's, at or before the fork
// point) as readers see it: Catalog.Tag checks the tick through the
// lineage, and the tag resolves through the fork's view.
func TestForkTagsAnInheritedTick(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, fe := forkAtFour(t, b)
	commitEach(t, c, ownPublish("f", "main", 5, "f5", fe))
	load := LoadFrom(b)
	three := int64(3)
	if _, err := c.Tag(ctx, load, "main", Moment{Text: "3", Tick: &three}, "early", ""); err != nil {
		t.Fatalf("tagging an inherited tick: %v", err)
	}
	nine := int64(9)
	if _, err := c.Tag(ctx, load, "main", Moment{Text: "9", Tick: &nine}, "late", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tagging a tick that is not visible: %v, want ErrNotFound", err)
	}
	if s := c.Tip(); len(s.Tags()) != 1 {
		t.Fatalf("tags after one refusal: %+v", s.Tags())
	}
	v, err := OpenView(ctx, load, "f", "main")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMoment("tag:early", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, ok, err := m.InView(v, math.MaxInt64)
	if err != nil || !ok || n != 3 {
		t.Fatalf("tag:early in the fork's view = %d, %v, %v; want 3", n, ok, err)
	}
	if tr, _ := v.Tick(3); tr.World != "parent" || tr.CommitToken != "p3" {
		t.Fatalf("tick 3 of the fork is %+v, want the parent's", tr)
	}
	if _, _, err := m.InView(v, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tag:early in a view pinned before it: %v, want ErrNotFound", err)
	}
	if _, _, err := (Moment{Text: "nope", Tag: "nope"}).InView(v, math.MaxInt64); !errors.Is(err, ErrNoTag) || !strings.Contains(err.Error(), "its tags: early") {
		t.Fatalf("an unknown tag: %v, want ErrNoTag naming the world's tags", err)
	}
}

// Two writers (two catalogs of one world, as two processes are) tag one
// name at once: the log decides, exactly one wins, and the other gets
// TagExistsError naming the tick the winner tagged.
func TestTwoWritersTagOneName(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	commitEach(t, c, ownPublish("w", "main", 0, "t0", epoch), ownPublish("w", "main", 1, "t1", epoch))
	for round := range 20 {
		name := "race" + strings.Repeat("x", round)
		var cats [2]*Catalog
		for i := range cats {
			cat, err := Open(ctx, b, "w", Options{NoCompactor: true, Store: []string{"a", "b"}[i]})
			if err != nil {
				t.Fatal(err)
			}
			cats[i] = cat
		}
		var wg sync.WaitGroup
		var errs [2]error
		start := make(chan struct{})
		for i, cat := range cats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				tick := int64(i)
				_, errs[i] = cat.Tag(ctx, LoadFrom(b), "main", Moment{Text: "n", Tick: &tick}, name, "")
			}()
		}
		close(start)
		wg.Wait()
		for _, cat := range cats {
			cat.Close()
		}
		var taken *TagExistsError
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.As(err, &taken):
				t.Fatalf("round %d: writer %d: %v, want a win or TagExistsError", round, i, err)
			}
		}
		s, _, err := Load(ctx, b, "w")
		if err != nil {
			t.Fatal(err)
		}
		held, ok := s.Tag(name)
		if won != 1 || !ok {
			t.Fatalf("round %d: %d writers won (%v), tag %+v", round, won, errs, held)
		}
		// The loser is told the tick the winner tagged.
		if errs[held.Tick] != nil || taken == nil || taken.Tag.Tick != held.Tick {
			t.Fatalf("round %d: the tag names tick %d, the outcomes are %v", round, held.Tick, errs)
		}
	}
}

// A checkpoint carries the tags: a cold load from it equals the live
// state, and a checkpoint naming a tag it cannot hold is corrupt.
func TestCheckpointKeepsTags(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 20)
	for _, name := range []string{"kept", "gone"} {
		five := int64(5)
		if _, err := c.Tag(ctx, LoadFrom(b), "r", Moment{Text: "5", Tick: &five}, name, "a message"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Untag(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Untag(ctx, "gone"); !errors.Is(err, ErrNoTag) {
		t.Fatalf("deleting a deleted tag: %v, want ErrNoTag", err)
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	live := c.Tip()
	loaded, info, err := Load(ctx, b, "w")
	if err != nil || info.SlotsReplayed != 0 {
		t.Fatalf("Load = %v (%+v)", err, info)
	}
	if d := diff(live, loaded); d != "" {
		t.Fatalf("the checkpoint's state differs from the live state: %s", d)
	}
	if tg, ok := loaded.Tag("kept"); !ok || tg.Tick != 5 || tg.Message != "a message" {
		t.Fatalf("tag kept after a cold load: %+v, %v", tg, ok)
	}
	// A state loaded in part holds the tags too.
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 1, To: 0})
	if err != nil {
		t.Fatal(err)
	}
	if tags := p.Tags(); len(tags) != 1 || tags[0].Name != "kept" {
		t.Fatalf("a partial state's tags: %+v", tags)
	}
	name := CheckpointName("w", live.Seq)
	cp, err := readCheckpoint(ctx, b, "w", name)
	if err != nil {
		t.Fatal(err)
	}
	cp.Tags[0].Seq = cp.Seq + 1 // created past the checkpoint: impossible
	bad, _ := cp.seal()
	b2 := memBucket()
	if _, err := b2.Create(ctx, name, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := readCheckpoint(ctx, b2, "w", name); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a checkpoint with a tag created after it: %v, want ErrCorrupt", err)
	}
}

// A world's metadata is its world.create's, within bounds: kept by a
// checkpoint, and a create over a bound is refused with the bound named.
func TestWorldMeta(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	meta := map[string]string{"seed": "17", "gravity": "9.81"}
	c, _, err := CreateWorld(ctx, b, "w", WorldCreate{CreatedUnixMs: 1, Meta: meta}, "creator", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta["seed"] = "changed by the caller" // the state holds its own copy
	if got := c.Tip().World.Meta; got["seed"] != "17" || got["gravity"] != "9.81" || len(got) != 2 {
		t.Fatalf("the world's metadata: %v", got)
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	loaded, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(c.Tip(), loaded); d != "" || loaded.World.Meta["seed"] != "17" {
		t.Fatalf("the checkpoint's world: %s (%v)", d, loaded.World.Meta)
	}
	big := map[string]string{}
	for i := range MaxMetaKeys + 1 {
		big[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, bad := range []struct {
		meta map[string]string
		says string
	}{
		{map[string]string{"Seed": "1"}, `metadata key "Seed"`},
		{map[string]string{"a/b": "1"}, `character '/'`},
		{map[string]string{"seed": strings.Repeat("x", MaxMetaValueLen+1)}, "over the 1024"},
		{big, "at most 64"},
		{map[string]string{"a": strings.Repeat("x", 1000), "b": strings.Repeat("x", 1000), "c": strings.Repeat("x", 1000), "d": strings.Repeat("x", 1000),
			"e": strings.Repeat("x", 1000), "f": strings.Repeat("x", 1000), "g": strings.Repeat("x", 1000), "h": strings.Repeat("x", 1000), "i": strings.Repeat("x", 1000)}, "at most 8192"},
	} {
		s := Empty("x")
		e := Entry{Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: ModeResumable, Meta: bad.meta}}
		if _, _, err := s.Check(&e, 1); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("world.create with %d keys of metadata: %v; want refused saying %q", len(bad.meta), err, bad.says)
		}
	}
}
