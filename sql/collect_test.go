package sql_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// Collection changes no answer of the views: dead attempts (a crashed
// attempt, a stale writer's late rows) go at once, replaced fragments
// after the retention, and views built before the compaction read the
// same rows after a collection within the retention.
func TestViewsAgreeBeforeAndAfterCollection(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	a := enginetest.World(t, b, "p", 150)
	data, err := engine.EncodeFragment(a.Frame("particle"), engine.Stamp{Tick: 100, CommitToken: "crashed", WriterEpoch: a.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	crashed := index.FragmentPath("p", "main", particles.Tables()[0].ID, "crashed", 0)
	if _, err := b.Create(ctx, crashed, data); err != nil {
		t.Fatal(err)
	}
	enginetest.Resume(t, b, "p", 160)
	particles.Schedule(a)
	if _, err := a.Step(ctx); err == nil {
		t.Fatal("the stale writer published")
	}
	const pinnedQuery = "SELECT * FROM particle_raw ORDER BY tick, entity_id"
	pinned := views(t, b, "p", wsql.Options{Dir: t.TempDir()}) // built before the compaction
	pinnedBefore := dump(t, pinned, pinnedQuery)
	before := answers(t, b, "p")

	gc := func(now time.Time) maintenance.CollectResult {
		t.Helper()
		cat, err := index.Open(ctx, b, "p", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		res, err := maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := gc(time.Now()); res.ByKind[maintenance.KindAttempt] < 2 {
		t.Fatalf("vacuum deleted %+v; want the crashed attempt and the stale writer's late rows", res.ByKind)
	}
	if _, err := b.Stat(ctx, crashed); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("the crashed attempt: %v", err)
	}
	if after := answers(t, b, "p"); after != before {
		t.Fatalf("the views changed with vacuum:\n%s", firstDiff(before, after))
	}
	cat, err := index.Open(ctx, b, "p", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10})
	cat.Close()
	if err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	within := gc(time.Now())
	if got := dump(t, pinned, pinnedQuery); got != pinnedBefore {
		t.Fatalf("views built before the compaction read otherwise after a collection within the retention:\n%s", firstDiff(pinnedBefore, got))
	}
	if within.ByKind[maintenance.KindReplaced] != 0 {
		t.Fatalf("within the retention collection deleted %+v", within.ByKind)
	}
	if res := gc(time.Now().Add(maintenance.DefaultRetention + time.Hour)); res.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("past the retention collection deleted %+v; want the replaced fragments", res.ByKind)
	}
	if after := answers(t, b, "p"); after != before {
		t.Fatalf("the views changed with collection:\n%s", firstDiff(before, after))
	}
}

// Collection finds the views' files by the names the views give them
// (index.ViewsFileName): once unused past ViewsAge, every fragment list
// and witness the views wrote is deleted, and nothing else of their
// directory.
func TestCollectionDeletesTheViewsFilesByTheirNames(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "w", 20)
	dir := t.TempDir()
	views(t, b, "w", wsql.Options{Dir: dir})
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".parquet") {
			written[e.Name()] = true
		}
	}
	if len(written) < 2 {
		t.Fatalf("the views wrote %v; want fragment lists and witnesses", written)
	}
	other := filepath.Join(dir, "other.parquet") // not a views' file
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	later := time.Now().Add(48 * time.Hour)
	res, err := maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{ViewsDir: dir, ViewsAge: 24 * time.Hour, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if res.ByKind[maintenance.KindViewList] != len(written) {
		t.Errorf("collection deleted %d views' files; the views wrote %d: %v", res.ByKind[maintenance.KindViewList], len(written), written)
	}
	for name := range written {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("collection deleted a file the views did not name: %v", err)
	}
}
