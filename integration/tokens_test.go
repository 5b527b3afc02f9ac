package integration

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// A token published at several ticks is listed once in tokens/, as the
// tick a lookup answers: the tick it names if that tick carries it, else
// the lowest carrying it.
func TestTokensAtSeveralTicksListOnce(t *testing.T) {
	named5, named9 := index.TickToken(5, [16]byte{1}), index.TickToken(9, [16]byte{2})
	tokensListAsLookedUp(t, map[string]map[int64]string{
		"main": {1: "a", 2: "a", 3: named5, 5: named5, 4: named9, 6: named9, 7: "u"},
	}, map[string]string{"a": "1", named5: "5", named9: "4", "u": "7"})
}

// A token published in several runs is listed in tokens/ once, as the
// tick a lookup of it by name answers: the tick it names in the first run
// (by name) whose tick there carries it, else the first run's lowest tick
// that does.
func TestTokensOfSeveralRunsListAsLookedUp(t *testing.T) {
	named5, named8, named9 := index.TickToken(5, [16]byte{1}), index.TickToken(8, [16]byte{2}), index.TickToken(9, [16]byte{3})
	tokensListAsLookedUp(t, map[string]map[int64]string{
		"b":    {3: named5, 4: named8, 5: "x5", 7: "a", 9: named9},
		"main": {2: "a", 5: named5, 6: named8, 9: named9},
	}, map[string]string{
		"a":    "7", // not named: run b comes first, its lowest
		named5: "5", // run b's tick 5 carries another token; main's carries it
		named8: "4", // its named tick carries it nowhere: run b's lowest
		named9: "9",
		"x5":   "5",
	})
}

// tokensListAsLookedUp publishes the tokens at gives each run's ticks in
// world w, then checks that tokens/ lists each token once, and that after
// ls -l (whose lookups the listing's records answer) and looked up by name
// on another mount, each is the tick want gives.
func tokensListAsLookedUp(t *testing.T, at map[string]map[int64]string, want map[string]string) {
	t.Helper()
	b := localBucket(t)
	c, epoch, err := index.CreateWorld(ctxT(t), b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var entries []index.Entry
	for run, ticks := range at {
		for tick, tok := range ticks {
			entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
				Run: run, Tick: tick, CommitToken: tok, WriterEpoch: epoch,
				Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("w", run, "t", fmt.Sprint("f", tick), 0), Rows: 1}}}}}})
		}
	}
	if _, err := c.CommitAll(ctxT(t), entries...); err != nil {
		t.Fatal(err)
	}
	listed := testMount(t, b)
	dir := listed.path("w", "tokens")
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if wantNames := slices.Sorted(maps.Keys(want)); !slices.Equal(names, wantNames) {
		t.Fatalf("tokens/ lists %q, want each token once: %q", names, wantNames)
	}
	if out, err := exec.Command("ls", "-l", dir).CombinedOutput(); err != nil {
		t.Fatalf("ls -l %s: %v\n%s", dir, err, out)
	}
	looked := testMount(t, b)
	for tok, tick := range want {
		if got := xattr(t, filepath.Join(dir, tok), wfs.XattrTick); got != tick {
			t.Errorf("after ls -l, tokens/%s is tick %s; want %s", tok, got, tick)
		}
		if got := xattr(t, looked.path("w", "tokens", tok), wfs.XattrTick); got != tick {
			t.Errorf("looked up by name, tokens/%s is tick %s; want %s", tok, got, tick)
		}
	}
}
