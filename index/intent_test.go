package index

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The intent entries, one rule at a time (IntentOp): an open by a fresh
// id, a renewal by its holder only, a close by its holder at once and by
// anyone else only past its lease, and a compaction only under an open
// intent, naming files written under it.
func TestApplyIntents(t *testing.T) {
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
	if err := apply(Entry{Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: ModeResumable}}); err != nil {
		t.Fatal(err)
	}
	open := func(id, holder string, until int64) error {
		return apply(Entry{Kind: KindIntentOpen, Intent: &IntentOp{ID: id, Holder: holder, NowMs: 100, LeaseUntilMs: until}})
	}
	closeAt := func(id, holder string, now int64) error {
		return apply(Entry{Kind: KindIntentClose, Intent: &IntentOp{ID: id, Holder: holder, NowMs: now}})
	}
	a, b := "00000000000000aa", "00000000000000bb"
	for _, bad := range []Entry{
		{Kind: KindIntentOpen, Intent: &IntentOp{ID: "AA", Holder: "h", NowMs: 1, LeaseUntilMs: 2}},
		{Kind: KindIntentOpen, Intent: &IntentOp{ID: a, NowMs: 1, LeaseUntilMs: 2}},
		{Kind: KindIntentOpen, Intent: &IntentOp{ID: a, Holder: "h", NowMs: 2, LeaseUntilMs: 2}},
		{Kind: KindIntentOpen},
	} {
		if err := apply(bad); !errors.Is(err, ErrRefused) {
			t.Errorf("%+v %+v: %v, want refused", bad, bad.Intent, err)
		}
	}
	if err := open(a, "h1", 1000); err != nil {
		t.Fatal(err)
	}
	pinned := seq
	if err := open(b, "h2", 5000); err != nil {
		t.Fatal(err)
	}
	if err := open(a, "h2", 9000); !errors.Is(err, ErrRefused) {
		t.Fatalf("another holder renewed intent a: %v", err)
	}
	if err := open(a, "h1", 2000); err != nil {
		t.Fatalf("its holder renewing intent a: %v", err)
	}
	if in, ok := s.Intent(a); !ok || in.LeaseUntilMs != 2000 || in.Seq != pinned || in.Holder != "h1" {
		t.Fatalf("intent a after its renewal: %+v, %v; want lease 2000, pinned at %d", in, ok, pinned)
	}
	if pin, ok := s.PinSeq(); !ok || pin != pinned {
		t.Fatalf("PinSeq = %d, %v; want %d", pin, ok, pinned)
	}
	if err := closeAt(a, "collector", 1999); !errors.Is(err, ErrRefused) {
		t.Fatalf("a collector closed intent a before its lease ended: %v", err)
	}
	if err := closeAt(a, "collector", 2000); err != nil {
		t.Fatalf("a collector closing intent a past its lease: %v", err)
	}
	if _, ok := s.Intent(a); ok {
		t.Fatal("intent a is open after its close")
	}
	if err := closeAt(a, "h1", 2000); err != nil {
		t.Fatalf("closing a closed intent: %v", err)
	}
	if err := closeAt(b, "h2", 0); err != nil {
		t.Fatalf("its holder closing intent b: %v", err)
	}
	if _, ok := s.PinSeq(); ok || len(s.Intents()) != 0 {
		t.Fatalf("intents open after every close: %+v", s.Intents())
	}
}

// Open intents survive a checkpoint: a cold load equals the live state
// and the log replayed, and a checkpoint whose intents are damaged fails
// closed.
func TestCheckpointKeepsOpenIntents(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 20)
	kept, err := c.OpenIntent(ctx, "a compaction", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.OpenIntent(ctx, "an export", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(ctx); err != nil {
		t.Fatal(err)
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
	if in, ok := loaded.Intent(kept.ID()); !ok || in.Seq != kept.Seq || in.What != "a compaction" {
		t.Fatalf("the open intent after a cold load: %+v, %v", in, ok)
	}
	name := CheckpointName("w", live.Seq)
	data, _, err := b.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := readCheckpoint(ctx, b, "w", name)
	if err != nil {
		t.Fatal(err)
	}
	cp.Intents[0].Seq = cp.Seq + 1 // pinned past the checkpoint: impossible
	bad, _ := cp.seal()
	if strings.Contains(string(data), `"seq":0`) || string(bad) == string(data) {
		t.Fatal("the damaged checkpoint is not damaged")
	}
	b2 := memBucket()
	if _, err := b2.Create(ctx, name, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := readCheckpoint(ctx, b2, "w", name); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a checkpoint pinning an intent past its own sequence: %v, want ErrCorrupt", err)
	}
}
