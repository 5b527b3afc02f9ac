package index

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
)

// VerifyCatalog folds the whole log and compares every checkpoint with
// it: a consistent catalog has no problems; a checkpoint of another
// history put in place of one is reported; a damaged slot is ErrCorrupt.
func TestVerifyCatalog(t *testing.T) {
	ctx := ctxT(t)
	build := func(token string) (bucket.Bucket, string) {
		b := memBucket()
		c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
		for i := range 20 {
			if _, err := c.Commit(ctx, publish("r", int64(i), fmt.Sprint(token, i), epoch)); err != nil {
				t.Fatal(err)
			}
		}
		seq, err := c.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 20; i < 25; i++ {
			if _, err := c.Commit(ctx, publish("r", int64(i), fmt.Sprint(token, i), epoch)); err != nil {
				t.Fatal(err)
			}
		}
		return b, CheckpointName("w", seq)
	}
	b, cp := build("t")
	var folded uint64
	got, err := VerifyCatalog(ctx, b, "w", func(uint64) { folded++ })
	if err != nil || len(got.Problems) != 0 || len(got.Checkpoints) != 1 || got.Slots != folded || got.FirstSlot != 1 || got.State.Slots != got.Slots {
		t.Fatalf("VerifyCatalog = %+v, %v", got, err)
	}
	n := 0
	got.State.Fragments("", func(f FragmentRef) bool { n++; return true })
	if n != 25 {
		t.Fatalf("%d fragments referenced, want 25", n)
	}

	// Another history's checkpoint at the same sequence, in place of ours.
	other, ocp := build("x")
	if ocp != cp {
		t.Fatalf("checkpoints at %s and %s", cp, ocp)
	}
	for a, err := range other.List(ctx, ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, _ := other.Get(ctx, a.Name)
		b.Create(ctx, a.Name, data)
	}
	data, _, _ := other.Get(ctx, cp)
	attrs, _ := b.Stat(ctx, cp)
	if err := b.Delete(ctx, cp, attrs.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, cp, data); err != nil {
		t.Fatal(err)
	}
	got, err = VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(got.Problems) != 1 || !strings.Contains(got.Problems[0], "differs from the log") {
		t.Fatalf("a foreign checkpoint: %+v, %v", got, err)
	}

	// A damaged slot.
	slot := SlotName("w", 3)
	attrs, _ = b.Stat(ctx, slot)
	b.Delete(ctx, slot, attrs.Generation)
	b.Create(ctx, slot, []byte("garbage"))
	if _, err := VerifyCatalog(ctx, b, "w", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged slot: %v, want ErrCorrupt", err)
	}
}

// A checkpoint at the log's very position whose shard says otherwise than
// the log (a tick's token forged) is reported by its shard, read and
// compared a few shards at a time; a checkpoint of the same log is not.
func TestVerifyCatalogComparesEachShard(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	var es []Entry
	for i := range int64(2*tickShardSpan + 10) {
		es = append(es, publish("r", i, fmt.Sprint("t", i), epoch))
	}
	for len(es) > 0 {
		k := min(len(es), 1000)
		if _, err := c.CommitAll(ctx, es[:k]...); err != nil {
			t.Fatal(err)
		}
		es = es[k:]
	}
	seq, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := VerifyCatalog(ctx, b, "w", nil); err != nil || len(got.Problems) != 0 || len(got.Checkpoints) != 1 {
		t.Fatalf("VerifyCatalog = %+v, %v; want one checkpoint, no problem", got, err)
	}
	s, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	forged := s.clone()
	tk, _ := forged.Tick("r", tickShardSpan+3)
	f := *tk
	f.CommitToken = "forged"
	forged.putTick(&f)
	other := memBucket()
	name, _, err := WriteCheckpoint(ctx, other, forged, nil)
	if err != nil || name != CheckpointName("w", seq) {
		t.Fatalf("forged checkpoint %s, %v; want %s", name, err, CheckpointName("w", seq))
	}
	for a, err := range other.List(ctx, ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, _ := other.Get(ctx, a.Name)
		b.Create(ctx, a.Name, data)
	}
	data, _, _ := other.Get(ctx, name)
	attrs, _ := b.Stat(ctx, name)
	if err := b.Delete(ctx, name, attrs.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	got, err := VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(got.Problems) != 1 || !strings.Contains(got.Problems[0], "shard t/r/1 differs") {
		t.Fatalf("a checkpoint with a forged tick: %+v, %v; want shard t/r/1 reported", got.Problems, err)
	}
}
