package index

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
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

// A checkpoint is abandoned rather than name a shard that an attempt
// which never landed wrote long ago (collection may be deleting it: no
// checkpoint names it); once that shard is gone, the next checkpoint
// writes it anew. A log whose base checkpoint names a missing shard is
// not a whole checkpoint (CheckpointWhole).
func TestCheckpointNamesNoStaleShard(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 20)
	seq, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := CheckpointName("w", seq)
	if err := CheckpointWhole(ctx, b, "w", name); err != nil {
		t.Fatalf("a fresh checkpoint: %v", err)
	}
	// An attempt that wrote its shards two hours ago and died before its
	// checkpoint object.
	cp, err := readCheckpoint(ctx, b, "w", name)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, r := range cp.Shards {
		if err := os.Chtimes(filepath.Join(dir, ShardName("w", r.Hash)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(ctx, b, "w", Options{NoCompactor: true}) // knows no checkpoint: writes every shard
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Checkpoint(ctx); !errors.Is(err, ErrStaleShard) {
		t.Fatalf("a checkpoint over shards an old attempt wrote: %v, want ErrStaleShard", err)
	}
	if _, err := b.Stat(ctx, name); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("the abandoned checkpoint's object: %v, want none", err)
	}
	// Collection deleted them: the next checkpoint writes them anew.
	for _, r := range cp.Shards {
		if err := os.Remove(filepath.Join(dir, ShardName("w", r.Hash))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fresh.Checkpoint(ctx); err != nil {
		t.Fatalf("the checkpoint after collection: %v", err)
	}
	if err := CheckpointWhole(ctx, b, "w", name); err != nil {
		t.Fatalf("the checkpoint after collection: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, ShardName("w", cp.Shards[0].Hash))); err != nil {
		t.Fatal(err)
	}
	if err := CheckpointWhole(ctx, b, "w", name); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a checkpoint naming a missing shard: %v, want ErrCorrupt", err)
	}
}
