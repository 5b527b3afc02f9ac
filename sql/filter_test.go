package sql

import (
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// Even when a fragment holding a crashed or stale attempt's rows is handed
// to DuckDB under a published tick, the token check keeps its rows out.
func TestTokenCheckKeepsForeignRowsOut(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 5)
	particle := particles.Tables()[0]
	s, _, _ := index.Load(ctx, b, "w")
	tk, _ := s.Tick("main", 5)
	var frags []fragment
	infos := map[string]engine.TableInfo{}
	nonEmpty := 0
	s.Ticks("main", 0, func(x *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, x) {
			if tf.Table == particle.ID {
				if tf.Fragments[0].Rows > 0 {
					nonEmpty++
				}
				p, _ := b.Path(tf.Fragments[0].Path)
				frags = append(frags, fragment{world: "w", run: "main", table: tf.Table, path: p, tick: x.Tick, token: x.CommitToken, epoch: x.WriterEpoch, filtered: true})
			}
		}
		return true
	})
	// Crashed attempts of tick 5: the same frame under other tokens, one
	// outside the published tokens' range (statistics alone rule it out)
	// and one inside it (only the exact check does), handed in by mistake.
	lo := tk.CommitToken
	for _, f := range frags {
		lo = min(lo, f.token)
	}
	for _, token := range []string{"zz-crashed-attempt", lo + "-crashed-attempt"} {
		data, err := engine.EncodeFragment(w.Frame("particle"), engine.Stamp{Tick: 5, CommitToken: token, WriterEpoch: 1})
		if err != nil {
			t.Fatal(err)
		}
		orphan := index.FragmentPath("w", "main", particle.ID, token, 0)
		if _, err := b.Create(ctx, orphan, data); err != nil {
			t.Fatal(err)
		}
		p, _ := b.Path(orphan)
		frags = append(frags, fragment{world: "w", run: "main", table: particle.ID, path: p, tick: 5, token: tk.CommitToken, epoch: tk.WriterEpoch, filtered: true})
	}
	infos["w/"+particle.ID] = particle.Info()
	script, err := render("w", "main", math.MaxInt64, &history{frags: frags}, infos, []string{"(0, 'w', 'main', NULL)"}, t.TempDir(), nil, nil, worldRow{world: index.World{ID: "w"}, run: "main"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, script)
	if err != nil {
		t.Fatalf("%v\n%s", err, script.run)
	}
	defer db.Close()
	var n, foreign int64
	db.QueryRow("SELECT count(*), count(*) FILTER (WHERE commit_token LIKE '%crashed-attempt') FROM particle_raw WHERE tick = 5").Scan(&n, &foreign)
	if foreign != 0 || n != int64(w.Frame("particle").Len()) {
		t.Fatalf("tick 5 shows %d rows, %d of them crashed attempts'", n, foreign)
	}
	// The component view reads the files itself, through the same check.
	var comp int64
	db.QueryRow("SELECT count(*) FROM particle WHERE tick = 5").Scan(&comp)
	if comp != n {
		t.Fatalf("tick 5 shows %d rows in particle, %d in particle_raw", comp, n)
	}
	// The files whose statistics prove their stamp (the published ticks'
	// that hold rows) are read without the row check; the two crashed
	// attempts (and empty files, which have no statistics) go through it.
	// Each list also holds the empty witness, twice.
	var proven, checked int
	if err := db.QueryRow("SELECT len(getvariable('worldfs_proven_particle_0')), len(getvariable('worldfs_checked_particle_0'))").Scan(&proven, &checked); err != nil {
		t.Fatal(err)
	}
	if proven != nonEmpty+2 || checked != 6-nonEmpty+2+2 || nonEmpty < 3 {
		t.Fatalf("%d files proven by statistics and %d checked row by row, want %d and %d (witness included, twice)", proven, checked, nonEmpty+2, 6-nonEmpty+4)
	}
	// The token check reaches the Parquet scan as a filter on
	// commit_token, which DuckDB checks against row group statistics.
	var plan string
	if err := db.QueryRow("EXPLAIN SELECT count(*) FROM particle_raw").Scan(new(string), &plan); err != nil {
		t.Fatal(err)
	}
	scan := plan[strings.Index(plan, "READ_PARQUET"):]
	if filters := strings.Index(scan, "Filters:"); filters < 0 || !strings.Contains(scan[filters:], "commit_token") {
		t.Fatalf("the views carry no token check the Parquet scan can prune with:\n%s", plan)
	}
}

// Opening the views reads no footer of a file the catalog proves: every
// fragment the engine wrote under its tick's own token (empty ones too) is
// read as is; a file a manifest names under another token is the only one
// whose footer is read, and the row check keeps its foreign rows out.
func TestCatalogProvenFilesSkipTheFooterCheck(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 5)
	particle := particles.Tables()[0]
	// A publication (tick 6) whose manifest names, besides its own
	// fragment, a crashed attempt's file stamped with another token.
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tip, err := cat.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frame := w.Frame("particle")
	var tables []index.TableFragments
	for _, token := range []string{"own-6", "crashed-6"} {
		data, err := engine.EncodeFragment(frame, engine.Stamp{Tick: 6, CommitToken: token, WriterEpoch: tip.World.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		path := index.FragmentPath("w", "main", particle.ID, token, 0)
		if _, err := b.Create(ctx, path, data); err != nil {
			t.Fatal(err)
		}
		if len(tables) == 0 {
			tables = append(tables, index.TableFragments{Table: particle.ID})
		}
		tables[0].Fragments = append(tables[0].Fragments, index.Fragment{Path: path, Rows: int64(frame.Len()), Bytes: int64(len(data)), Digest: engine.Digest(data)})
	}
	last, _ := tip.Tick("main", 5)
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: 6,
		CommitToken: "own-6", WriterEpoch: tip.World.Epoch, Tables: tables, NextEntity: last.NextEntity}}); err != nil {
		t.Fatal(err)
	}
	script, err := Build(ctx, b, "w", Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, script)
	if err != nil {
		t.Fatalf("%v\n%s", err, script.run)
	}
	defer db.Close()
	var unproven, proven, checked int
	if err := db.QueryRow("SELECT len(getvariable('worldfs_proven_particle_0_unproven')), len(getvariable('worldfs_proven_particle_0')), len(getvariable('worldfs_checked_particle_0'))").Scan(&unproven, &proven, &checked); err != nil {
		t.Fatal(err)
	}
	// Ticks 0..6 each have one fragment under their own token (7 files),
	// plus the crashed file; each list holds the witness too (the lists
	// the views read, twice).
	if unproven != 2 || proven != 9 || checked != 3 {
		t.Fatalf("%d footers read, %d files read as they are, %d checked row by row; want 2, 9, 3 (witness included)", unproven, proven, checked)
	}
	var n, foreign int64
	if err := db.QueryRow("SELECT count(*), count(*) FILTER (WHERE commit_token = 'crashed-6') FROM particle_raw WHERE tick = 6").Scan(&n, &foreign); err != nil {
		t.Fatal(err)
	}
	if foreign != 0 || n != int64(frame.Len()) {
		t.Fatalf("tick 6 shows %d rows, %d of them the crashed attempt's", n, foreign)
	}
	// The script reads the footers of the files the catalog does not prove
	// while it runs: each of them is verified first (not only the first of
	// the list, as for a view's columns). A byte flipped in place in the
	// crashed attempt's file, its modification time restored, is hashed as
	// the views open and left out of the footers read: the views open, and
	// the queries that read the file fail naming it.
	crashed, _ := b.Path(tables[0].Fragments[1].Path)
	info, err := os.Stat(crashed)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(crashed, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c [1]byte
	if _, err := f.ReadAt(c[:], info.Size()/2); err != nil {
		t.Fatal(err)
	}
	c[0] ^= 1
	if _, err := f.WriteAt(c[:], info.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(crashed, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	hashed := cache.HashCount()
	again, err := Open(ctx, script)
	if err != nil {
		t.Fatalf("views whose script reads a damaged file's footer: %v", err)
	}
	defer again.Close()
	if n := cache.HashCount() - hashed; n != 1 {
		t.Fatalf("opening the views hashed %d files; want the damaged one, before its footer is read", n)
	}
	err = Run(ctx, again, "SELECT count(*) FROM particle_raw", FormatCSV, io.Discard, nil)
	var le *LostFileError
	if !errors.Is(err, cache.ErrCorruptFragment) || !errors.As(err, &le) || le.Object != tables[0].Fragments[1].Path || le.From != 6 {
		t.Fatalf("a query of the damaged file: %v; want a LostFileError naming %s, tick 6", err, tables[0].Fragments[1].Path)
	}
}

// A views build that reuses a fragment list marks it used, so collection,
// which removes lists unused for its retention, counts from the last use.
func TestReusedFragmentListIsMarkedUsed(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "w", 3)
	dir := t.TempDir()
	first, err := Build(ctx, b, "w", Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(first.FragmentList, old, old); err != nil {
		t.Fatal(err)
	}
	again, err := Build(ctx, b, "w", Options{Dir: dir})
	if err != nil || again.FragmentList != first.FragmentList {
		t.Fatalf("the same views build %v (%v), want the list %s reused", again, err, first.FragmentList)
	}
	st, err := os.Stat(first.FragmentList)
	if err != nil || time.Since(st.ModTime()) > time.Hour {
		t.Fatalf("the reused list's last use is %v (%v), want now", st.ModTime(), err)
	}
}
