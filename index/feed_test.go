package index

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
)

// collectChanges reads the feed from `from` until it has n changes.
func collectChanges(t *testing.T, c *Catalog, from uint64, n int) ([]Change, error) {
	t.Helper()
	return collectChangesOf(t, c.b, c.world, from, n)
}

// collectChangesOf is collectChanges reading world's feed through b.
func collectChangesOf(t *testing.T, b bucket.Bucket, world string, from uint64, n int) ([]Change, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []Change
	for ch, err := range Changes(ctx, b, world, from, 5*time.Millisecond) {
		if err != nil {
			return out, err
		}
		out = append(out, ch)
		if len(out) == n {
			break
		}
	}
	return out, nil
}

func TestChangeFeedFollowsAndResumes(t *testing.T) {
	c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true})
	tip := fill(t, c, epoch, 0, 30).Seq // 2 creation entries, 30 publishes, 3 claims, 2 commands
	all, err := collectChanges(t, c, 1, int(tip))
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range all {
		if ch.Seq != uint64(i+1) {
			t.Fatalf("change %d has sequence %d", i, ch.Seq)
		}
	}
	if all[0].Entry.Kind != KindWorldCreate || all[2].Entry.Kind != KindTickPublish {
		t.Fatalf("feed starts %s, %s", all[0].Entry.Kind, all[2].Entry.Kind)
	}
	// Resume mid-slot, as a restarted reader would, and follow new commits:
	// the late one is committed once the feed has found the tip.
	at := newTipReached(c.b, c.world)
	commitAtTip(t.Context(), at, c, publish("r", 100, "late", epoch))
	n := int(tip) - 20 + 2
	rest, err := collectChangesOf(t, at, c.world, 20, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != n {
		t.Fatalf("the resumed feed ended after %d changes, want %d: it did not follow the late commit", len(rest), n)
	}
	if last := rest[n-1]; rest[0].Seq != 20 || last.Seq != tip+1 || last.Entry.TickPublish.CommitToken != "late" {
		t.Fatalf("resumed feed: first %d, last %d %+v", rest[0].Seq, last.Seq, last.Entry.TickPublish)
	}
}

func TestChangeFeedResyncPastRetention(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 20)
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	fill(t, c, epoch, 20, 5)
	n, err := CollectSlots(ctxT(t), b, "w", 0, time.Now())
	if err != nil || n == 0 {
		t.Fatalf("CollectSlots = %d, %v", n, err)
	}
	if _, err := collectChanges(t, c, 3, 1); !errors.Is(err, ErrResync) {
		t.Fatalf("feed from a collected sequence = %v, want ErrResync", err)
	}
	// A cursor inside retention still resumes; the world still opens.
	tip := c.Tip()
	if got, err := collectChanges(t, c, tip.Seq-2, 3); err != nil || got[2].Seq != tip.Seq {
		t.Fatalf("feed inside retention: %v, %v", got, err)
	}
	loaded, _, err := Load(ctxT(t), b, "w")
	if err != nil || diff(loaded, tip) != "" {
		t.Fatalf("Load after collection: %v %s", err, fmt.Sprint(diff(loaded, tip)))
	}
}

// A catalog whose tip went unconfirmed for ReloadAfter reloads before it
// commits: a collected slot name must never look like the log's tip, or
// its commit would be acknowledged into a dead branch. ReloadAfter is a
// nanosecond, so the stale catalog's tip is always past it.
func TestStaleCatalogReloadsBeforeCommitting(t *testing.T) {
	b := memBucket()
	c0, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	stale, err := Open(ctxT(t), b, "w", Options{NoCompactor: true, ReloadAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	fill(t, c0, epoch, 0, 20)
	if _, err := c0.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	fill(t, c0, epoch, 20, 5)
	if n, err := CollectSlots(ctxT(t), b, "w", 0, time.Now()); err != nil || n == 0 {
		t.Fatalf("CollectSlots = %d, %v", n, err)
	}
	if _, err := stale.Commit(ctxT(t), publish("r", 500, "from-stale", epoch)); err != nil {
		t.Fatal(err)
	}
	final, _, err := Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok := final.Tick("r", 500); !ok || tk.CommitToken != "from-stale" {
		t.Fatal("an acknowledged commit of a stale catalog is not in the log")
	}
}

// A stale catalog that cannot reload its log fails the commits waiting on
// it, as uncommitted (ErrUnavailable, not ErrAmbiguous), instead of retrying
// the reload for as long as the bucket fails: a publish waits without a
// deadline of its own.
func TestStaleCatalogThatCannotReloadFailsTheCommit(t *testing.T) {
	script := faulty.NewScript()
	b := faulty.Wrap(memBucket(), script)
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true, ReloadAfter: time.Nanosecond})
	defer c.Close()
	script.SetRules(faulty.Rule{Op: faulty.OpGet, Fault: faulty.Fault{Kind: faulty.FailBefore}},
		faulty.Rule{Op: faulty.OpList, Fault: faulty.Fault{Kind: faulty.FailBefore}})
	done := make(chan error, 1)
	go func() {
		_, err := c.Commit(context.Background(), publish("r", 1, "t1", epoch))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a commit on a stale catalog whose reload fails is still waiting after 30s")
	}
	if !errors.Is(err, bucket.ErrUnavailable) || errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("commit whose reload failed = %v, want ErrUnavailable (nothing sent)", err)
	}
	script.SetRules()
	final, _, lerr := Load(ctxT(t), b, "w")
	if _, ok := final.Tick("r", 1); lerr != nil || ok {
		t.Fatalf("a commit answered ErrUnavailable is in the log (%v)", lerr)
	}
}
