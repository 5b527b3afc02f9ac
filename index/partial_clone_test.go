package index

import (
	"fmt"
	"sync"
	"testing"
)

// A copy of a partial state (Partial.Clone) is refreshed and reads token
// filters while the state it was copied from reads its own and is read
// and grown (Load) on another goroutine (run with -race): each changes
// itself alone, and each answers as a load at its own sequence does.
func TestPartialCloneRefreshesApart(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	n := 3*tickShardSpan + 100
	spanWorld(t, b, n)
	want := Want{Run: "r", From: 5000, To: 5000, Head: true}
	p, c := loadThenWrite(t, b, want)
	before, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	epoch := before.World.Epoch
	for i := range int64(20) {
		commitEach(t, c, publish("r", int64(n)+i, fmt.Sprint("tail", i), epoch))
	}
	// A rewrite in shard 2, which neither holds: the refresh reads it.
	commitEach(t, c, moveRows(t, c, 9000))
	at := p.Seq()
	cp := p.Clone()
	var wg sync.WaitGroup
	var refreshErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if refreshErr = cp.Refresh(ctx); refreshErr == nil {
			_, refreshErr = cp.TokenCandidates(ctx, Want{Run: "r", Token: "t101"}) // reads the token filters
		}
	}()
	if _, err := p.TokenCandidates(ctx, Want{Run: "r", Token: "t102"}); err != nil {
		t.Fatal(err)
	}
	later := Want{Run: "r", From: 100, To: 100}
	if err := p.Load(ctx, later); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, _, err := p.Tick("r", 5000); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if refreshErr != nil {
		t.Fatal(refreshErr)
	}
	if p.Seq() != at || cp.Seq() == at {
		t.Fatalf("after refreshing a copy: the state is at %d (was %d), the copy at %d", p.Seq(), at, cp.Seq())
	}
	if _, err := partialAlike(before, p, later); err != nil {
		t.Fatalf("the state copied from: %v", err)
	}
	tip, _, err := Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := partialAlike(tip, cp, want); err != nil {
		t.Fatalf("the refreshed copy: %v", err)
	}
	if err := cp.Load(ctx, later); err != nil {
		t.Fatal(err)
	}
	if _, err := partialAlike(tip, cp, later); err != nil {
		t.Fatalf("the refreshed copy, loaded for tick 100 (which the state copied from loaded meanwhile): %v", err)
	}
}

// A copy of a partial state keeps the token filters it reads to itself:
// the state it was copied from, which had read other filters before the
// copy, reads those the copy read again.
func TestPartialCloneKeepsItsOwnFilters(t *testing.T) {
	ctx := ctxT(t)
	b := &countingBucket{Bucket: memBucket()}
	spanWorld(t, b, 3*tickShardSpan+100)
	p, _, err := LoadFor(ctx, b, "w", Want{Run: "r", From: 5000, To: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TokenCandidates(ctx, Want{Run: "s", Token: "s3"}); err != nil { // run s's filter, before the copy
		t.Fatal(err)
	}
	cp := p.Clone()
	if _, err := cp.TokenCandidates(ctx, Want{Run: "r", Token: "t101"}); err != nil {
		t.Fatal(err)
	}
	b.filters.Store(0)
	if _, err := p.TokenCandidates(ctx, Want{Run: "r", Token: "t101"}); err != nil {
		t.Fatal(err)
	}
	if n := b.filters.Load(); n == 0 {
		t.Fatal("the state copied from took the filters its copy read: it read none of run r's")
	}
}
