package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// ingestAll ingests facts concurrently (svc: an IngestionService or a
// World) and returns their receipts, in order.
func ingestAll(t *testing.T, svc interface {
	Ingest(context.Context, engine.Fact) (engine.FactReceipt, error)
}, facts []engine.Fact) []engine.FactReceipt {
	t.Helper()
	out := make([]engine.FactReceipt, len(facts))
	errs := make([]error, len(facts))
	var wg sync.WaitGroup
	for i, f := range facts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = svc.Ingest(ctxT(t), f)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fact %d: %v", i, err)
		}
	}
	return out
}

// A batch whose holder died after claiming and before appending is
// recovered with each part of its chain read once: its producers resend in
// two waves, and the taker takes each wave's claims over together, appends
// their rows together, and never reads again a part it read or wrote
// (parts are never rewritten). Exactly one row per fact is visible, under
// the batch's own tokens; resending everything again costs no read at all.
func TestCrashedBatchRecoveryReadsEachPartOnce(t *testing.T) {
	const n, firstWave = 200, 50
	ctx := ctxT(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	simWorld(t, b, "w", 2).Close()

	// The dead holder's batch: every claim acquired in one slot under
	// <batch>.<i>, leases long over, no row appended.
	facts := make([]engine.Fact, n)
	entries := make([]index.Entry, n)
	for i := range facts {
		facts[i] = reading(fmt.Sprint("sensor-", i%7), fmt.Sprint("evt-", i), float64(i))
		d, err := facts[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = index.Entry{Kind: index.KindClaimAcquire, Claim: &index.ClaimOp{
			Key: index.ClaimKey{Run: "main", Producer: facts[i].Producer, ExternalID: facts[i].ExternalID}, Digest: d,
			CommitToken: fmt.Sprint("deadbatch.", i), Holder: "dead", NowMs: 1, LeaseUntilMs: 2}}
	}
	cat, err := index.Open(ctx, b, "w", quiet.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CommitAll(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	cat.Close()

	counted := &buckettest.Counting{Bucket: b}
	svc, err := engine.OpenIngestionService(ctx, counted, "w", engine.IngestOptions{Catalog: quiet.Catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	receipts := append(ingestAll(t, svc, facts[:firstWave]), ingestAll(t, svc, facts[firstWave:])...)
	for i, r := range receipts {
		if want := fmt.Sprint("deadbatch.", i); r.CommitToken != want || r.Recovered != "append" {
			t.Fatalf("fact %d: token %s recovered %q, want the claim's %s, appended", i, r.CommitToken, r.Recovered, want)
		}
	}

	table := readingTable()
	prefix := index.RunDataPrefix("w", index.DefaultRun) + table.ID + "/deadbatch/"
	parts, reads := 0, 0
	for a, err := range b.List(ctx, prefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		parts++
		if got := counted.GetsOf(a.Name); got > 1 {
			t.Errorf("part %s was read %d times", strings.TrimPrefix(a.Name, prefix), got)
		}
	}
	for p := range parts + 1 {
		reads += counted.GetsOf(index.FragmentPath("w", "main", table.ID, "deadbatch", p))
	}
	if parts == 0 || parts > n/4 {
		t.Fatalf("%d facts recovered into %d parts: not appended together", n, parts)
	}
	t.Logf("%d facts recovered into %d parts with %d part reads", n, parts, reads)

	before := counted.Gets.Load()
	for _, r := range ingestAll(t, svc, facts) {
		if !r.Deduplicated {
			t.Fatalf("resend of %s/%s after recovery: %+v", r.Producer, r.ExternalID, r)
		}
	}
	if got := counted.Gets.Load() - before; got != 0 {
		t.Errorf("resending %d complete facts read %d objects", n, got)
	}
	rows := visibleFacts(t, b, "w", "main", table)
	if len(rows) != n {
		t.Fatalf("%d facts visible, want %d", len(rows), n)
	}
	for key, rs := range rows {
		if len(rs) != 1 {
			t.Fatalf("fact %s: %d visible rows", key, len(rs))
		}
	}
}

// A resend of a fact already complete is answered from the catalog's
// tip, as is one with other components (a conflict, forever): neither
// costs a slot.
func TestResendsOfCompleteFactsCostNoSlot(t *testing.T) {
	const n = 64
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 2)
	facts := make([]engine.Fact, n)
	for i := range facts {
		facts[i] = reading("sensor-1", fmt.Sprint("evt-", i), float64(i))
	}
	first := ingestAll(t, w, facts)
	slots := w.Catalog().Stats().Slots
	for i, r := range ingestAll(t, w, facts) {
		if !r.Deduplicated || r.CommitToken != first[i].CommitToken {
			t.Fatalf("resend %d: %+v, want the original under %s", i, r, first[i].CommitToken)
		}
	}
	var conflict *index.ClaimConflictError
	if _, err := w.Ingest(ctxT(t), reading("sensor-1", "evt-0", 99)); !errors.As(err, &conflict) {
		t.Fatalf("a changed resend: %v, want ClaimConflictError", err)
	}
	if got := w.Catalog().Stats().Slots; got != slots {
		t.Fatalf("resends cost %d slots", got-slots)
	}
}
