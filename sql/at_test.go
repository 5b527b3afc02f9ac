package sql_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// <table>_at(t) shows exactly the view's rows of tick t (at the edges of
// every kind of file), before and after
// compaction, in a world with a crashed attempt, facts and a fork whose
// parent is compacted past the fork point; and it reads only the files
// that hold tick t: a file of another tick removed from the bucket after
// the views opened does not disturb it (a whole-table read does fail).
func TestAtReadsOnlyTheFilesOfItsTick(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	a := enginetest.World(t, lb, "p", 30)
	if _, err := a.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, a, 199)
	particle := particles.Tables()[0]
	data, err := engine.EncodeFragment(a.Frame("particle"), engine.Stamp{Tick: 100, CommitToken: "crashed", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Create(ctx, index.FragmentPath("p", "main", particle.ID, "crashed", 0), data); err != nil {
		t.Fatal(err)
	}
	f := enginetest.Fork(t, lb, "p", "f", 100, 150)
	f.Close()

	agree := func(world string, last int64) {
		t.Helper()
		db := views(t, lb, world, wsql.Options{Dir: t.TempDir()})
		var total int64
		// Ticks at the edges of compacted windows (64 ticks), of the fork
		// point, of the recent tail, and a few between.
		for _, tick := range []int64{0, 1, 31, 63, 64, 65, 99, 100, 101, 127, 128, 150, 188, 189, 190, 199} {
			if tick > last {
				continue
			}
			for _, table := range []string{"particle", "emitter"} {
				q := fmt.Sprintf("SELECT (SELECT count(*) FROM %[1]s_at(%[2]d)), (SELECT count(*) FROM %[1]s WHERE tick = %[2]d), "+
					"(SELECT count(*) FROM (FROM %[1]s_at(%[2]d) EXCEPT ALL FROM %[1]s WHERE tick = %[2]d)), "+
					"(SELECT count(*) FROM (FROM %[1]s WHERE tick = %[2]d EXCEPT ALL FROM %[1]s_at(%[2]d)))", table, tick)
				var at, where, extra, missing int64
				if err := db.QueryRow(q).Scan(&at, &where, &extra, &missing); err != nil {
					t.Fatalf("world %s: %s: %v", world, q, err)
				}
				total += at
				if at != where || extra != 0 || missing != 0 {
					t.Fatalf("world %s tick %d: %s_at shows %d rows (%d not in the view, %d of the view missing), the view %d",
						world, tick, table, at, extra, missing, where)
				}
			}
		}
		if total == 0 {
			t.Fatalf("world %s shows no rows", world)
		}
	}
	// removeOther moves aside the particle file that holds tick other (and
	// not tick keep) after the views opened; _at(keep) still answers, the
	// whole table does not.
	removeOther := func(world string, keep, other int64) {
		t.Helper()
		db := views(t, lb, world, wsql.Options{Dir: t.TempDir()})
		want := count(t, db, fmt.Sprintf("SELECT count(*) FROM particle_at(%d)", keep))
		s, _, err := index.Load(ctxT(t), lb, world)
		if err != nil {
			t.Fatal(err)
		}
		tk, ok := s.Tick("main", other)
		if !ok {
			t.Fatalf("world %s has no tick %d", world, other)
		}
		for _, tf := range enginetest.Tables(t, tk) {
			if tf.Table != particle.ID {
				continue
			}
			for _, fr := range tf.Fragments {
				if fr.Span != nil && fr.Span.From <= keep && keep <= fr.Span.To {
					t.Fatalf("tick %d's file %s holds tick %d too", other, fr.Path, keep)
				}
				// Moved aside, and back after (the same file: the catalog's
				// record of it still holds).
				p, _ := lb.Path(fr.Path)
				if err := os.Rename(p, p+".aside"); err != nil {
					t.Fatal(err)
				}
				defer os.Rename(p+".aside", p)
			}
		}
		if got := count(t, db, fmt.Sprintf("SELECT count(*) FROM particle_at(%d)", keep)); got != want || got == 0 {
			t.Fatalf("world %s: particle_at(%d) shows %d rows after tick %d's file went, %d before", world, keep, got, other, want)
		}
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM particle").Scan(&n); err == nil {
			t.Fatalf("world %s: the whole table read without tick %d's file (%d rows): the removal proves nothing", world, other, n)
		}
	}

	agree("p", 199)
	agree("f", 150)
	for _, w := range []string{"p", "f"} {
		cat, err := index.Open(ctx, lb, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Compact(ctx, lb, cat, maintenance.CompactOptions{Recent: 10})
		cat.Close()
		if err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
	}
	agree("p", 199)
	agree("f", 150)
	// A compacted file (tick 20's: ticks 0..63) goes: the ticks of the
	// next window and of the recent tail, and the fork's, still answer;
	// then a recent tick's own fragment, and one of the fork's.
	removeOther("p", 70, 20)
	removeOther("p", 195, 20)
	removeOther("p", 195, 196)
	removeOther("f", 140, 141)
	removeOther("f", 70, 141)
}
