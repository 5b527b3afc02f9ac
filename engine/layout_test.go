package engine_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// The fixture in ../testdata/tokendirs is a particle world published to
// tick 4 in the earlier layout of tick fragments, one directory per commit
// token (data/<world>/<run>/<table>/<token>/0.parquet). It is committed;
// fixture_test.go (go test -tags fixtures -run TestWriteTokenDirFixture
// ./engine/) wrote it on a checkout of that layout.
const tokenDirFixture = "../testdata/tokendirs"

// A world written in the token-directory layout resumes and goes on in
// today's (<token>.parquet): its old fragments stay read, proven (no row
// check) and kept by the collector, which collects an orphan of either
// layout.
func TestTokenDirLayoutReadable(t *testing.T) {
	b, err := local.Open(copyDir(t, tokenDirFixture))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	w := enginetest.Resume(t, b, "tokendirs", 8)
	if got, want := particles.Fingerprint(w), enginetest.Reference(t, 8); got != want {
		t.Fatalf("resumed from the old layout: %s, want %s", got, want)
	}
	s, _, err := index.Load(ctx, b, "tokendirs")
	if err != nil {
		t.Fatal(err)
	}
	layouts := map[bool]int{} // in a token directory → fragments
	for tick := range int64(9) {
		tk, ok := s.Tick("main", tick)
		if !ok {
			t.Fatalf("tick %d not published", tick)
		}
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				old := f.Path == index.FragmentPath("tokendirs", "main", tf.Table, tk.CommitToken, 0)
				if !old && f.Path != index.TickFragmentPath("tokendirs", "main", tf.Table, tk.CommitToken) {
					t.Fatalf("tick %d: fragment %s in neither layout", tick, f.Path)
				}
				if old != (tick <= 4) {
					t.Fatalf("tick %d: fragment %s", tick, f.Path)
				}
				layouts[old]++
			}
		}
	}
	if layouts[true] == 0 || layouts[false] == 0 {
		t.Fatalf("fragments by layout %v", layouts)
	}
	v, err := index.OpenView(ctx, index.LoadFrom(b), "tokendirs", "main")
	if err != nil {
		t.Fatal(err)
	}
	v.Files(math.MinInt64, math.MaxInt64, func(f index.File) bool {
		if f.Check {
			t.Errorf("fragment %s of tick %d needs a row check", f.Path, f.Tick)
		}
		return true
	})
	// Dead attempts at tick 3 (published under another token), one in
	// each layout.
	table := particles.Tables()[0].ID
	orphans := []string{
		index.FragmentPath("tokendirs", "main", table, "deadbeef", 0),
		index.TickFragmentPath("tokendirs", "main", table, "feedface"),
	}
	for i, token := range []string{"deadbeef", "feedface"} {
		data, err := engine.EncodeFragment(w.Frame("particle"), engine.Stamp{Tick: 3, CommitToken: token, WriterEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, orphans[i], data); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	cat, err := index.Open(ctx, b, "tokendirs", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	collected := map[string]bool{}
	if _, err := maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) },
		Report: func(c maintenance.Collected) {
			if strings.HasPrefix(c.Name, "data/") && !c.Kept {
				collected[c.Name] = true
			}
		}}); err != nil {
		t.Fatal(err)
	}
	if len(collected) != len(orphans) || !collected[orphans[0]] || !collected[orphans[1]] {
		t.Fatalf("collected %v, want the orphans %v", collected, orphans)
	}
}
