package sql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// dump runs each query and returns every row as text.
func dump(t *testing.T, db *sql.DB, queries ...string) string {
	t.Helper()
	var sb strings.Builder
	for _, q := range queries {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&sb, vals...)
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows.Close()
		fmt.Fprintf(&sb, "-- %d rows of %s\n", n, q)
	}
	return sb.String()
}

// answers are what the views say of a world: every visible row with its
// commit columns, one tick alone, the manifests, the facts and receipts,
// and the same pinned to a tick.
func answers(t *testing.T, b bucket.Bucket, world string) string {
	t.Helper()
	all := views(t, b, world, wsql.Options{Dir: t.TempDir()})
	at := int64(90)
	pinned := views(t, b, world, wsql.Options{AtTick: &at, Dir: t.TempDir()})
	one := views(t, b, world, wsql.Options{AtTick: &at, Only: true, Dir: t.TempDir()})
	for _, db := range []*sql.DB{all, pinned, one} {
		sameRowsAsRaw(t, db, "particle", "emitter")
	}
	return dump(t, all,
		"SELECT * FROM particle_raw ORDER BY tick, entity_id",
		"SELECT * FROM emitter_raw ORDER BY tick, entity_id",
		"SELECT * FROM particle_at(70) ORDER BY entity_id",
		"SELECT tick, commit_token, table_id FROM worldfs_manifests ORDER BY tick, table_id",
		"SELECT fact_id, tick, external_id, digest FROM worldfs_facts ORDER BY fact_id",
		"SELECT receipt_id, evaluation_id FROM worldfs_receipts ORDER BY receipt_id",
		"SELECT count(*), max(tick) FROM particle",
	) + dump(t, pinned,
		"SELECT * FROM particle_raw ORDER BY tick, entity_id",
		"SELECT count(*) FROM worldfs_facts",
	) + dump(t, one, "SELECT * FROM particle_raw ORDER BY tick, entity_id")
}

// The views say the same before and after compaction, on a world with a
// stale writer's late rows, a crashed attempt's orphan, facts (one an
// orphan under a pending claim), a receipt, and a fork whose parent is
// compacted past the fork point; each answer is also checked against the
// independent reading of the fragments.
func TestViewsAgreeBeforeAndAfterCompaction(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	a := enginetest.World(t, b, "p", 40)
	if _, err := a.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, a, 150)
	enginetest.Orphan(t, b, "p", a.Catalog(), enginetest.Reading("c", 9))
	// A crashed attempt of tick 100: its rows are in the bucket, under a
	// token no manifest names.
	data, err := engine.EncodeFragment(a.Frame("particle"), engine.Stamp{Tick: 100, CommitToken: "crashed", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, index.FragmentPath("p", "main", particles.Tables()[0].ID, "crashed", 0), data); err != nil {
		t.Fatal(err)
	}
	// A second writer takes over at 151; the first appends late and stops.
	bw := enginetest.Resume(t, b, "p", 151)
	particles.Schedule(a)
	if _, err := a.Step(ctx); err == nil {
		t.Fatal("the stale writer published")
	}
	s, _ := bw.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", 151, engine.Selector{})
	if _, err := bw.Evaluate(ctx, engine.Evaluation{ID: "ev", Subject: sub, Contract: engine.GraderContract{GraderID: "g", Implementation: "1"}},
		func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "c", Verdict: engine.Pass}}, nil
		}); err != nil {
		t.Fatal(err)
	}
	// A fork at tick 100, inside the parent's window 64..127.
	f := enginetest.Fork(t, b, "p", "f", 100, 140)
	f.Close()

	before := map[string]string{"p": answers(t, b, "p"), "f": answers(t, b, "f")}
	particle := particles.Tables()[0]
	for _, w := range []string{"p", "f"} {
		want, _ := expected(t, b, w, particle, math.MaxInt64)
		if w == "f" {
			inherited, _ := expected(t, b, "p", particle, 100)
			want += inherited
		}
		if !strings.Contains(before[w], fmt.Sprintf("-- %d rows of SELECT * FROM particle_raw", want)) {
			t.Fatalf("world %s: the views do not show the %d visible particle rows", w, want)
		}
	}
	for _, w := range []string{"p", "f"} {
		cat, err := index.Open(ctx, b, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10, MinFacts: 1})
		if err != nil || res.Windows == 0 || (w == "p" && res.Facts == 0) {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
		// The world's receipts, in their own run.
		if res, err = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Run: engine.EvaluationRun, MinFacts: 1}); err != nil || (w == "p" && res.Facts == 0) {
			t.Fatalf("compaction of %s's receipts: %+v, %v", w, res, err)
		}
		cat.Close()
	}
	for _, w := range []string{"p", "f"} {
		if after := answers(t, b, w); after != before[w] {
			t.Fatalf("world %s: the views changed with compaction:\n%s", w, firstDiff(before[w], after))
		}
	}
	// The fragment list names a compacted file once, not once per tick
	// and table: opening the views costs the files, not the history.
	db := views(t, b, "p", wsql.Options{Dir: t.TempDir()})
	ticks := count(t, db, "SELECT count(DISTINCT tick) FROM worldfs_manifests")
	if n := count(t, db, "SELECT count(*) FROM worldfs_fragments"); n >= ticks {
		t.Fatalf("the fragment list of the compacted world has %d rows for %d ticks", n, ticks)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  before: %s\n  after:  %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines before, %d after", len(al), len(bl))
}

// A world continued from legacy history compacts its own published ticks
// and keeps its legacy rows as they are; an uncoordinated world has nothing
// the catalog can compact. The views say the same before and after.
func TestLegacyAndUncoordinatedHistoryAfterCompaction(t *testing.T) {
	ctx := ctxT(t)
	b, w := enginetest.Legacy(t, "../testdata/legacy", "legacyworld", 100)
	bare, err := engine.Uncoordinated(ctx, "bare", b, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, bare, 20)
	queries := []string{
		"SELECT * FROM particle_raw ORDER BY tick, entity_id",
		"SELECT * FROM emitter_raw ORDER BY tick, entity_id",
		"SELECT * FROM particle_at(4) ORDER BY entity_id",
		"SELECT * FROM particle_at(30) ORDER BY entity_id",
	}
	before := map[string]string{}
	for _, world := range []string{"legacyworld", "bare"} {
		before[world] = dump(t, views(t, b, world, wsql.Options{Dir: t.TempDir()}), queries...)
	}
	res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10})
	if err != nil || res.Windows != 1 {
		t.Fatalf("compaction of the continued world: %+v, %v; want its window 0..63", res, err)
	}
	w.Close()
	cat, err := index.Open(ctx, b, "bare", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 1})
	cat.Close()
	if err != nil || res.Windows != 0 {
		t.Fatalf("compaction of an uncoordinated world: %+v, %v; want nothing", res, err)
	}
	for _, world := range []string{"legacyworld", "bare"} {
		if after := dump(t, views(t, b, world, wsql.Options{Dir: t.TempDir()}), queries...); after != before[world] {
			t.Fatalf("world %s: the views changed with compaction:\n%s", world, firstDiff(before[world], after))
		}
	}
}

// worldfs_manifests lists the ticks that name compacted files, though no
// build lists them: the views a process builds serve them from its
// catalog when a query reads worldfs_manifests; the printed script reads
// them from a list written when it is printed, in a DuckDB of its own; a
// kept script reused by a later process loads the catalogs it was built
// from again. All say the same, on a fork whose parent was compacted past
// the fork point. A reused script whose catalog changed since fails the
// query rather than mix two states.
func TestCompactedManifestsOutsideTheBuild(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "p", 150).Close()
	enginetest.Fork(t, b, "p", "f", 100, 140).Close()
	const q = "SELECT world, run, tick, commit_token, writer_epoch, table_id, path, rows FROM worldfs_manifests ORDER BY ALL"
	const ids = "SELECT tick, commit_token, table_id FROM worldfs_manifests ORDER BY ALL"
	before := dump(t, views(t, b, "f", wsql.Options{}), ids)
	for _, w := range []string{"p", "f"} {
		cat, err := index.Open(ctx, b, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
		cat.Close()
	}
	built := views(t, b, "f", wsql.Options{})
	want := dump(t, built, q)
	if got := dump(t, built, ids); got != before {
		t.Fatalf("the manifests changed with compaction:\n%s", firstDiff(before, got))
	}
	if n := count(t, built, "SELECT count(*) FROM worldfs_manifests WHERE path IN (SELECT object FROM worldfs_fragments WHERE compacted)"); n < 100 {
		t.Fatalf("%d manifest rows name compacted files; want those of the compacted ticks", n)
	}

	// The printed script, in a DuckDB of its own.
	printed := func(s *wsql.Script) string {
		t.Helper()
		text, err := s.SQL()
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(text); err != nil {
			t.Fatalf("the printed script: %v\n%s", err, text)
		}
		return dump(t, db, q)
	}
	dir := t.TempDir()
	s, err := wsql.Build(ctx, b, "f", wsql.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := printed(s); got != want {
		t.Fatalf("the printed script's manifests differ:\n%s", firstDiff(want, got))
	}

	// A kept script, reused as a later process does (a cache opened anew).
	cacheDir := t.TempDir()
	if _, err := reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	builds := wsql.Builds()
	// reused returns the kept script, opened.
	reused := func() (*wsql.Script, *sql.DB) {
		t.Helper()
		s, err := reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir})
		if err != nil || wsql.Builds() != builds {
			t.Fatalf("the views were built again (%v); want the kept script", err)
		}
		db, err := wsql.Open(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return s, db
	}
	again, db := reused()
	if got := dump(t, db, q); got != want {
		t.Fatalf("the reused script's manifests differ:\n%s", firstDiff(want, got))
	}
	// Its list of compacted ticks is written from the catalogs loaded again.
	lists, _ := filepath.Glob(filepath.Join(dir, "fragments-ticks-*"))
	for _, l := range lists {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	if got := printed(again); got != want {
		t.Fatalf("the reused script, printed: manifests differ:\n%s", firstDiff(want, got))
	}

	// The parent commits a tick after the script was reused and before
	// worldfs_manifests is read.
	_, ldb := reused()
	enginetest.Resume(t, b, "p", 151).Close()
	err = wsql.Run(ctx, ldb, "SELECT count(*) FROM worldfs_manifests", wsql.FormatCSV, io.Discard, nil)
	if !errors.Is(err, wsql.ErrCatalogChanged) {
		t.Fatalf("worldfs_manifests of a reused script after its catalog changed: %v; want ErrCatalogChanged", err)
	}
}
