package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
)

// sameBatch compares a rebased batch with one built afresh on the same
// base from the same requests: the same members accepted with the same
// results, refused with the same class of error, the same slot bytes and
// the same state after it.
func sameBatch(got, want *batch) string {
	for i := range want.reqs {
		if classOf(got.errs[i], Result{}) != classOf(want.errs[i], Result{}) {
			return fmt.Sprintf("member %d: %v, afresh %v", i, got.errs[i], want.errs[i])
		}
		if !reflect.DeepEqual(got.results[i], want.results[i]) {
			return fmt.Sprintf("member %d: results %+v, afresh %+v", i, got.results[i], want.results[i])
		}
	}
	if got.entries != want.entries || string(got.data) != string(want.data) {
		return fmt.Sprintf("slot of %d entries (%d bytes), afresh %d (%d bytes)", got.entries, len(got.data), want.entries, len(want.data))
	}
	if want.state == nil {
		if got.state != nil {
			return "a state where afresh there is none"
		}
		return ""
	}
	return diff(got.state, want.state)
}

// A loser's rebase carries the members the winning slots did not touch and
// rebuilds only the others, yet ends exactly where building the batch
// afresh on the new tip ends, which is where replaying its slot ends: on
// random batches and random winners, over many seeds.
func TestRebaseEqualsFullRebuild(t *testing.T) {
	var carried, rebuilt int64
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true})
		epochs := []int64{epoch}
		// A history, so that the batch and the winners meet existing
		// ticks and claims.
		for i := range 20 {
			e := randomEntry(r, epochs, int64(i))
			if res, err := c.Commit(ctxT(t), e); err == nil && e.Kind == KindFenceAcquire {
				epochs = append(epochs, res.Epoch)
			}
		}
		base := c.Tip()
		var reqs []*request
		for i := range 1 + r.IntN(40) {
			req, err := c.newRequest(ctxT(t), []Entry{randomEntry(r, epochs, int64(50+i))})
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, req)
		}
		old := c.build(base, reqs)
		// The winners: a slot of other random entries on the same base.
		tip, touched := base, newTouchSet()
		for i := range 1 + r.IntN(8) {
			e := randomEntry(r, epochs, int64(50+i))
			e.Op = fmt.Sprint("winner-", i)
			n, err := tip.ApplySlot(&Slot{Format: SlotFormat, World: "w", FirstSeq: tip.Seq + 1, Prev: tip.Hash, Store: "other", Entries: []Entry{e}}, fmt.Sprint("h", i))
			if err != nil {
				continue // does not apply: never in a slot
			}
			tip = n
			touched.add([]Entry{e})
		}
		before := c.Stats()
		got := c.rebase(old, tip, touched)
		if got == nil {
			t.Fatalf("seed %d: the rebase gave up (a carried member did not apply)", seed)
		}
		want := c.build(tip, reqs)
		if d := sameBatch(got, want); d != "" {
			t.Fatalf("seed %d: the rebased batch differs from one built afresh: %s", seed, d)
		}
		if got.slot != nil {
			replay, err := tip.ApplySlot(got.slot, got.state.Hash)
			if err != nil {
				t.Fatalf("seed %d: the rebased slot does not replay: %v", seed, err)
			}
			if d := diff(replay, got.state); d != "" {
				t.Fatalf("seed %d: replaying the rebased slot differs: %s", seed, d)
			}
		}
		after := c.Stats()
		carried += after.Carried - before.Carried
		rebuilt += after.Rebuilt - before.Rebuilt
	}
	// Both paths must have run often, or the test proves little.
	if carried < 1000 || rebuilt < 500 {
		t.Fatalf("%d members carried, %d rebuilt", carried, rebuilt)
	}
	t.Logf("%d members carried, %d rebuilt", carried, rebuilt)
}

// A committer that loses a slot reads the winner and rebuilds only the
// members the winner touched: here one publication of the same tick (now
// a conflict) and a completion of the fact the winner claimed first (now
// refused); the other members are carried as built, and everyone gets
// the answer a fresh build on the new tip gives.
func TestLostSlotRebuildsOnlyTouchedMembers(t *testing.T) {
	b, c0, c1, epoch := twoWriters(t)
	base := c1.Tip()
	mine := []Entry{
		publish("r", 1, "mine-1", epoch),
		publish("r", 2, "mine-2", epoch), // the winner publishes tick 2
		publish("r", 3, "mine-3", epoch),
		claimEntry(KindClaimAcquire, "r", "p", "x", "d", "tok-x", "h", 1, 100), // the winner claims x first
		claimEntry(KindClaimAcquire, "r", "p", "y", "d", "tok-y", "h", 1, 100),
	}
	var reqs []*request
	for _, e := range mine {
		r, err := c1.newRequest(ctxT(t), []Entry{e})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	head := c1.build(base, reqs)
	if head.entries != len(mine) {
		t.Fatalf("built %d of %d entries", head.entries, len(mine))
	}
	// The winner takes the slot this batch was built for.
	if _, err := c0.CommitAll(ctxT(t), publish("r", 2, "theirs-2", epoch), claimEntry(KindClaimAcquire, "r", "p", "x", "d", "tok-x2", "h2", 1, 100),
		publish("r", 9, "theirs-9", epoch)); err != nil {
		t.Fatal(err)
	}
	before := c1.Stats()
	pipeline := c1.decided(created{head, fmt.Errorf("slot: %w", bucket.ErrExist)}, []*batch{head})
	if len(pipeline) != 1 {
		t.Fatalf("after a lost slot the pipeline holds %d batches, want the head rebased", len(pipeline))
	}
	got, st := pipeline[0], c1.Stats()
	if carried, rebuilt := st.Carried-before.Carried, st.Rebuilt-before.Rebuilt; carried != 3 || rebuilt != 2 {
		t.Errorf("%d members carried and %d rebuilt, want 3 and 2", carried, rebuilt)
	}
	tip, err := c0.Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.base.Seq != tip.Seq || got.base.Hash != tip.Hash {
		t.Fatalf("rebased onto %d, the tip is %d", got.base.Seq, tip.Seq)
	}
	if d := sameBatch(got, c1.build(tip, reqs)); d != "" {
		t.Fatal(d)
	}
	for i, want := range []string{okClass, conflictClass, okClass, pendingClass, okClass} {
		if cl := classOf(got.errs[i], Result{}); cl != want {
			t.Errorf("member %d: %s (%v), want %s", i, cl, got.errs[i], want)
		}
	}
	// The rebased slot is created, and the log read cold holds it.
	out := make(chan created, 1)
	c1.create(got, out)
	if res := <-out; res.err != nil {
		t.Fatal(res.err)
	}
	cold, _, err := Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(cold, got.state); d != "" {
		t.Fatalf("the log read cold differs from the rebased state: %s", d)
	}
}

// A member whose caller gave up before the rebase leaves the slot, and the
// members after it that relied on it are rebuilt, not carried: here a
// completion of a claim whose acquisition was dropped is now refused.
func TestRebaseRebuildsWhatADroppedMemberChanged(t *testing.T) {
	_, c0, c1, epoch := twoWriters(t)
	gone, cancel := context.WithCancel(ctxT(t))
	var reqs []*request
	for i, e := range []Entry{
		claimEntry(KindClaimAcquire, "r", "p", "x", "d", "tok-x", "h", 1, 100),
		claimEntry(KindClaimComplete, "r", "p", "x", "d", "tok-x", "h", 1, 100),
		publish("r", 1, "mine-1", epoch),
	} {
		ctx := ctxT(t)
		if i == 0 {
			ctx = gone
		}
		r, err := c1.newRequest(ctx, []Entry{e})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	head := c1.build(c1.Tip(), reqs)
	if head.entries != 3 {
		t.Fatalf("built %d of 3 entries", head.entries)
	}
	cancel()
	if _, err := c0.Commit(ctxT(t), publish("r", 7, "theirs-7", epoch)); err != nil {
		t.Fatal(err)
	}
	pipeline := c1.decided(created{head, bucket.ErrExist}, []*batch{head})
	if len(pipeline) != 1 {
		t.Fatalf("after a lost slot the pipeline holds %d batches, want the head rebased", len(pipeline))
	}
	got := pipeline[0]
	if !errors.Is(got.errs[0], context.Canceled) || !errors.Is(got.errs[1], ErrRefused) || got.errs[2] != nil || got.entries != 1 {
		t.Fatalf("members: %v; %d entries in the slot, want the publication alone", got.errs, got.entries)
	}
	if d := sameBatch(got, c1.build(got.base, reqs)); d != "" {
		t.Fatal(d)
	}
}

// twoWriters creates world w on a memory bucket and opens it twice: the
// creator's catalog and another's, and the creator's epoch.
func twoWriters(t *testing.T) (*mem.Bucket, *Catalog, *Catalog, int64) {
	b := memBucket()
	c0, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	c1, err := Open(ctxT(t), b, "w", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close() })
	return b, c0, c1, epoch
}
