package sql_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// A session of several worlds: each world's views in a schema named after
// it answer exactly what a session of that world alone answers (every
// view and macro, qualified), the first world's also unqualified; a
// fork's schema never shows its parent's rows past the fork point; and
// worldfs_diff compares two (world, tick) points: the fork against its
// parent equals a FULL OUTER JOIN across the schemas, before the fork
// point it is empty, and within one world it is that world's _diff. Both
// uncompacted and compacted. Mutations that fail it: the references from
// macros left unqualified (the fork's _diff reads the parent's _at), the
// variables left unprefixed (the second world's file lists replace the
// first's), and the fork's schema without its own tick functions (its
// _changes reads the parent's ticks).
func TestSessionOfSeveralWorlds(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "p", 199).Close()
	// The simulation is deterministic: the fork diverges by a command
	// its parent never got.
	f, err := engine.ForkWorld(ctx, lb, "p", "f", "main", 100, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.Drive(ctx, f, 150, particles.Nudge("push", 110, 3, -2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	queries := []string{
		"SELECT * FROM %[1]sparticle_raw ORDER BY tick, entity_id",
		"SELECT * FROM %[1]semitter ORDER BY tick, entity_id",
		"SELECT * FROM %[1]sparticle_at(120) ORDER BY entity_id",
		"SELECT * FROM %[1]sparticle_diff(90, 140)",
		"SELECT * FROM %[1]sparticle_changes(96, 104)",
		"SELECT count(*) FROM %[1]sparticle_as_of(now())",
		"SELECT world, run, tick, commit_token, writer_epoch, tables FROM %[1]sworldfs_ticks ORDER BY tick",
		"SELECT tick, commit_token, table_id FROM %[1]sworldfs_manifests ORDER BY tick, table_id, path",
		"SELECT * FROM %[1]sworldfs_lineage",
	}
	check := func(state string) {
		alone := map[string]string{}
		var scripts []*wsql.Script
		for _, w := range []string{"p", "f"} {
			s, err := wsql.Build(ctx, lb, w, wsql.Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			scripts = append(scripts, s)
			db := views(t, lb, w, wsql.Options{Dir: t.TempDir()})
			for _, q := range queries {
				alone[w+q] = dump(t, db, fmt.Sprintf(q, ""))
			}
		}
		j, err := wsql.Join(scripts...)
		if err != nil {
			t.Fatal(err)
		}
		db, err := wsql.Open(ctx, j)
		if err != nil {
			t.Fatalf("%v\n%s", err, plain(j))
		}
		defer db.Close()
		for _, q := range queries {
			for _, c := range []struct{ world, prefix string }{{"p", `"p".`}, {"f", `"f".`}, {"p", ""}} {
				got := strings.ReplaceAll(dump(t, db, fmt.Sprintf(q, c.prefix)), fmt.Sprintf(q, c.prefix), fmt.Sprintf(q, ""))
				if want := alone[c.world+q]; got != want {
					t.Fatalf("%s: %s through the session: %s\nalone: %s", state, fmt.Sprintf(q, c.prefix), firstDiff(got, want), firstDiff(want, got))
				}
			}
		}
		// The fork's rows past the fork point are its own.
		if n := count(t, db, `SELECT count(*) FROM f.particle_raw WHERE tick > 100 AND commit_token IN (SELECT commit_token FROM p.worldfs_ticks)`); n != 0 {
			t.Fatalf("%s: the fork's schema shows %d of its parent's rows past the fork point", state, n)
		}
		if n := count(t, db, `SELECT count(*) FROM f.worldfs_ticks WHERE tick > 100 AND world <> 'f'`); n != 0 {
			t.Fatalf("%s: the fork's ticks past the fork point: %d of its parent's", state, n)
		}
		cols := components(t, db, "particle")
		if n := sameRows(t, db, state+": worldfs_diff of the fork against its parent at 120",
			"FROM worldfs_diff('particle', 'p', 120, 'f', 120)", joinedAcross(`"p".particle`, `"f".particle`, cols, 120, 120, "")); n == 0 {
			t.Fatalf("%s: the fork and its parent agree at tick 120", state)
		}
		sameRows(t, db, state+": worldfs_diff of the fork against its parent, 140 against 150",
			"FROM worldfs_diff('particle', 'p', 140, 'f', 150)", joinedAcross(`"p".particle`, `"f".particle`, cols, 140, 150, ""))
		if n := count(t, db, "SELECT count(*) FROM worldfs_diff('particle', 'p', 100, 'f', 100)"); n != 0 {
			t.Fatalf("%s: the fork differs from its parent at the fork point: %d rows", state, n)
		}
		sameRows(t, db, state+": worldfs_diff within a world", "FROM worldfs_diff('particle', 'f', 90, 'f', 140)", "FROM f.particle_diff(90, 140)")
		// The printed script of the session, in a DuckDB of its own,
		// answers the same.
		text, err := j.SQL()
		if err != nil {
			t.Fatal(err)
		}
		own, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer own.Close()
		own.SetMaxOpenConns(1)
		if _, err := own.Exec(text); err != nil {
			t.Fatalf("%s: the printed session: %v", state, err)
		}
		for _, q := range []string{
			`SELECT * FROM "f".particle_diff(90, 140)`, `SELECT * FROM "f".particle_changes(96, 104)`, "SELECT * FROM particle_at(120) ORDER BY entity_id",
			"SELECT * FROM worldfs_diff('particle', 'p', 140, 'f', 150)", `SELECT count(*) FROM "f".particle_as_of(now())`,
		} {
			if got, want := dump(t, own, q), dump(t, db, q); got != want {
				t.Fatalf("%s: %s printed: %s", state, q, firstDiff(got, want))
			}
		}
		// Through the gate.
		var out bytes.Buffer
		for _, q := range []string{`SELECT count(*) AS n FROM worldfs_diff('emitter', 'p', 120, 'f', 120)`, `SELECT count(*) AS n FROM "f".particle_at(120)`} {
			out.Reset()
			if err := wsql.Run(ctx, db, q, wsql.FormatCSV, &out, nil); err != nil || !strings.HasPrefix(out.String(), "n\n") {
				t.Fatalf("%s: through the gate: %s: %q %v", state, q, out.String(), err)
			}
		}
	}
	check("uncompacted")
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
	check("compacted")
	// One world named twice is refused.
	s, err := wsql.Build(ctx, lb, "p", wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wsql.Join(s, s); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Fatalf("a world twice: %v", err)
	}
}

// A session of worlds whose names hold dots (world ids may: "sweep-0.3")
// defines each world's views in a schema of that whole name, not a
// catalog and a schema: worldfs_diff across them, and each world's views,
// answer as they do for any name. Broken, DuckDB refuses to build it
// ("No catalog + schema named …").
func TestSessionOfWorldsWithDotsInTheirNames(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "p.1", 30).Close()
	f, err := engine.ForkWorld(ctx, lb, "p.1", "f.0.3", "main", 10, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.Drive(ctx, f, 30, particles.Nudge("push", 12, 3, -2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var scripts []*wsql.Script
	for _, w := range []string{"p.1", "f.0.3"} {
		s, err := wsql.Build(ctx, lb, w, wsql.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, s)
	}
	j, err := wsql.Join(scripts...)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctx, j)
	if err != nil {
		t.Fatalf("a session of p.1 and f.0.3: %v", err)
	}
	defer db.Close()
	alone := views(t, lb, "f.0.3", wsql.Options{Dir: t.TempDir()})
	if got, want := count(t, db, `SELECT count(*) FROM "f.0.3".particle`), count(t, alone, "SELECT count(*) FROM particle"); got != want || got == 0 {
		t.Fatalf(`"f.0.3".particle through the session: %d rows; alone: %d`, got, want)
	}
	if n := count(t, db, "SELECT count(*) FROM worldfs_diff('particle', 'p.1', 20, 'f.0.3', 20)"); n == 0 {
		t.Fatal("worldfs_diff of f.0.3 against p.1 at tick 20: no rows; the fork was pushed at tick 12")
	}
}
