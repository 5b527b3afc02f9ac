package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/worldfs/worldfs/index"
)

// A names-only listing of a long ticks/ (os.ReadDir, ls without -l) costs
// the mount no lookup per entry: the kernel asks for attributes with the
// entries (READDIRPLUS) only in its first reply, since nobody stats them.
func TestTickListingLooksUpNoEntry(t *testing.T) {
	const n = 3000
	b := localBucket(t)
	c, epoch, err := index.CreateWorld(ctxT(t), b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var entries []index.Entry
	for tick := range int64(n) {
		token := fmt.Sprintf("%032x", tick)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("w", "main", "t", token, 0), Rows: 1}}}}}})
	}
	if _, err := c.CommitAll(ctxT(t), entries...); err != nil {
		t.Fatal(err)
	}
	mt := testMount(t, b)
	des, err := os.ReadDir(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != n {
		t.Fatalf("ticks/ lists %d entries, want %d", len(des), n)
	}
	seen := map[string]bool{}
	for _, de := range des {
		seen[de.Name()] = true
	}
	for tick := range n {
		if !seen[strconv.Itoa(tick)] {
			t.Fatalf("tick %d is not listed", tick)
		}
	}
	if st := mountStats(t, mt); st.Ops["lookup"].Count >= n/2 {
		t.Fatalf("listing %d ticks made %d lookups; a names-only listing looks up one reply's entries at most", n, st.Ops["lookup"].Count)
	}
}
