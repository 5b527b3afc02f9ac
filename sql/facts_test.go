package sql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// Facts and receipts show exactly when their claims are complete: an
// orphan row under a pending claim's token stays out, as do facts past a
// fork point or a pinned tick.
func TestViewsOfFactsAndReceipts(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 4)
	if _, err := w.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil { // lands at tick 4
		t.Fatal(err)
	}
	enginetest.Run(t, w, 8)
	for _, f := range []engine.Fact{enginetest.Reading("b", 2.5), enginetest.Reading("b", 2.5)} { // tick 8, once
		if _, err := w.Ingest(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.Orphan(t, b, "w", w.Catalog(), enginetest.Reading("c", 9))
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", 8, engine.Selector{})
	_, err := w.Evaluate(ctx, engine.Evaluation{ID: "ev", Subject: sub, Contract: engine.GraderContract{GraderID: "g", Implementation: "1"}},
		func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "c", Verdict: engine.Pass}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}

	db := views(t, b, "w", wsql.Options{})
	if n := count(t, db, "SELECT count(*) FROM reading"); n != 2 {
		t.Fatalf("reading shows %d facts, want 2 (not the orphan, not the duplicate)", n)
	}
	if n := count(t, db, "SELECT count(*) FROM reading WHERE entity_id >= 0"); n != 0 {
		t.Fatalf("%d facts with entity ids", n)
	}
	if n := count(t, db, "SELECT count(*) FROM worldfs_facts WHERE table_name = 'reading' AND ((external_id = 'a' AND tick = 4) OR (external_id = 'b' AND tick = 8))"); n != 2 {
		t.Fatalf("worldfs_facts: %d of the 2 facts at their ticks", n)
	}
	// Each fact's value: its components' columns as one JSON object.
	if got, err := query(t, db, "SELECT external_id, value FROM worldfs_facts ORDER BY external_id"); err != nil || got != "external_id,value\na,\"{\"\"reading_value\"\":1.5}\"\nb,\"{\"\"reading_value\"\":2.5}\"\n" {
		t.Fatalf("worldfs_facts' values: %v\n%s", err, got)
	}
	if n := count(t, db, "SELECT count(*) FROM worldfs_receipts WHERE evaluation_id = 'ev' AND json_extract_string(outcomes, '$[0].verdict') = 'pass' AND json_extract_string(subject, '$.head_tick') = '8'"); n != 1 {
		t.Fatalf("worldfs_receipts: %d", n)
	}
	if n := count(t, db, "SELECT count(*) FROM worldfs_manifests WHERE table_id IN (SELECT table_id FROM worldfs_fragments WHERE fact)"); n != 0 {
		t.Fatalf("facts listed as tick manifests: %d", n)
	}
	// Pinned at tick 6: only the fact that landed by then.
	if n := count(t, views(t, b, "w", wsql.Options{AtTick: ptr(int64(6))}), "SELECT count(*) FROM worldfs_facts"); n != 1 {
		t.Fatalf("as of tick 6: %d facts", n)
	}
	// A fork at tick 5 inherits the fact of tick 4, not that of tick 8.
	fork, err := engine.ForkWorld(ctx, b, "w", "f", "main", 5, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	fork.Close()
	if n := count(t, views(t, b, "f", wsql.Options{}), "SELECT count(*) FROM reading"); n != 1 {
		t.Fatalf("the fork sees %d facts, want 1", n)
	}
	// A world without facts still has both views, empty.
	w2 := enginetest.World(t, b, "w2", 1)
	w2.Close()
	db2 := views(t, b, "w2", wsql.Options{})
	if count(t, db2, "SELECT count(*) FROM worldfs_facts")+count(t, db2, "SELECT count(*) FROM worldfs_receipts") != 0 {
		t.Fatal("facts in a world without any")
	}
}

func ptr[T any](v T) *T { return &v }

// Facts ingested concurrently share fragments (one per batch), each row
// under its own claim's token: the views show each fact once, before and
// after compaction, and a row of the batch's fragment whose claim never
// completed stays out.
func TestViewsOfBatchedFacts(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 2)
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.Ingest(ctx, enginetest.Reading(fmt.Sprint("e", i), float64(i)))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// A batch of two claims whose fragment holds both rows, of which only
	// the first claim completes.
	pending := enginetest.Reading("p", 99)
	done := enginetest.Reading("d", 98)
	var frags []index.Fragment
	fr := engine.NewFrame(done.Table)
	stamps := map[int64]engine.Stamp{}
	var claims []*index.Claim
	for i, f := range []engine.Fact{done, pending} {
		digest, _ := f.Digest()
		token := fmt.Sprintf("hand.%d", i)
		r, err := w.Catalog().Commit(ctx, index.Entry{Kind: index.KindClaimAcquire, Claim: &index.ClaimOp{
			Key: index.ClaimKey{Run: "main", Producer: f.Producer, ExternalID: f.ExternalID}, Digest: digest,
			CommitToken: token, Holder: "hand", NowMs: 1, LeaseUntilMs: 2}})
		if err != nil {
			t.Fatal(err)
		}
		v := engine.Values{"reading_value": f.Values["reading_value"], engine.ColFactProducer: f.Producer, engine.ColFactExternalID: f.ExternalID,
			engine.ColFactDigest: digest, engine.ColFactCommit: token}
		if err := fr.Append(r.Claim.FactID, v); err != nil {
			t.Fatal(err)
		}
		stamps[r.Claim.FactID] = engine.Stamp{Tick: r.Claim.Tick, CommitToken: token, WriterEpoch: r.Claim.Epoch}
		claims = append(claims, r.Claim)
	}
	data, err := engine.EncodeStamped(fr, func(i int) engine.Stamp { return stamps[fr.Entities[i]] })
	if err != nil {
		t.Fatal(err)
	}
	path := index.FragmentPath("w", "main", done.Table.ID, "hand", 0)
	if _, err := b.Create(ctx, path, data); err != nil {
		t.Fatal(err)
	}
	frags = append(frags, index.Fragment{Path: path, Rows: 1, Bytes: int64(len(data)), Digest: engine.Digest(data)})
	c := claims[0]
	if _, err := w.Catalog().Commit(ctx, index.Entry{Kind: index.KindClaimComplete, Claim: &index.ClaimOp{Key: c.Key, Digest: c.Digest,
		CommitToken: c.CommitToken, NowMs: 3, Fragments: []index.TableFragments{{Table: done.Table.ID, Fragments: frags}}}}); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		db := views(t, b, "w", wsql.Options{})
		if got := count(t, db, "SELECT count(*) FROM reading"); got != n+1 {
			t.Fatalf("%s: reading shows %d facts, want %d", when, got, n+1)
		}
		if got := count(t, db, "SELECT count(*) FROM (SELECT external_id FROM worldfs_facts GROUP BY external_id HAVING count(*) > 1)"); got != 0 {
			t.Fatalf("%s: %d facts show more than once", when, got)
		}
		if got := count(t, db, "SELECT count(*) FROM worldfs_facts WHERE external_id = 'p'"); got != 0 {
			t.Fatalf("%s: the pending claim's row shows", when)
		}
	}
	check("batched")
	s, _ := w.Catalog().Exact(ctx)
	shared := map[string]int{}
	s.Claims("main", func(c *index.Claim) bool {
		if c.State == index.ClaimComplete {
			shared[c.Tables[0].Fragments[0].Path]++
		}
		return true
	})
	if len(shared) > n/4 {
		t.Fatalf("%d facts in %d fragments: not batched", n, len(shared))
	}
	res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{MinFacts: 1})
	if err != nil || res.Facts == 0 || res.Refused != 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	// Every claim shard compacted: each complete claim names a compacted
	// file, which holds its shard's facts alone.
	s, _ = w.Catalog().Exact(ctx)
	s.Claims("main", func(c *index.Claim) bool {
		if c.State == index.ClaimComplete && c.Tables[0].Fragments[0].Span == nil {
			t.Fatalf("fact %s still in %s after compaction", c.Key, c.Tables[0].Fragments[0].Path)
		}
		return true
	})
	check("compacted")
}
