package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// sweepForks are the forks of sweepFixture's base world: each forks at
// its own tick, is nudged its own way after it, and runs to its own head.
var sweepForks = []struct {
	name       string
	at, head   int64
	meta       map[string]string
	dx, dy     float64
	nudgeAfter int64
}{
	{"sw-a", 2, 9, map[string]string{"seed": "3", "lr": "0.1"}, 1, 0, 1},
	{"sw-b", 4, 10, map[string]string{"seed": "11", "lr": "0.01"}, -2, 1, 1},
	{"sw-c", 4, 8, map[string]string{"seed": "7"}, 3, -1, 2},
	{"sw-" + longName, 6, 11, map[string]string{"seed": "42", "lr": "0.001", "note": "a world of a long name"}, 0.5, 0.5, 1},
}

// sweepFixture is a bucket of a base world (to tick 8, run parameter
// gravity) and the sweepForks of it, served by a Server.
func sweepFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := enginetest.Quiet
	o.Meta = map[string]string{"gravity": "9.81"}
	enginetest.World(t, b, "base", 8, o)
	for _, f := range sweepForks {
		o := enginetest.Quiet
		o.Meta = f.meta
		w, err := engine.ForkWorld(ctx, b, "base", f.name, index.DefaultRun, f.at, particles.Tables(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		if err := enginetest.Drive(ctx, w, f.head, particles.Nudge("push", f.at+f.nudgeAfter, f.dx, f.dy)); err != nil {
			t.Fatal(err)
		}
	}
	return serve(t, b, dir)
}

// wantSweep is worldfs sql --worlds GLOB's answer to q (or --lineage W's,
// given lineage): the sweep's views built apart from the server's.
func wantSweep(t *testing.T, b bucket.Bucket, glob, lineage, q string) *Result {
	t.Helper()
	ctx := enginetest.Context(t)
	var worlds []string
	var err error
	if lineage != "" {
		worlds, err = index.LineageWorlds(ctx, b, lineage)
	} else {
		worlds, err = index.MatchWorlds(ctx, b, glob)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := sql.BuildSweep(ctx, b, worlds, sql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return answer(t, s, q)
}

// The sweep endpoint answers a column's aggregate per world per tick as
// worldfs sql --worlds answers it (each aggregate, a glob and a lineage),
// the worlds' records with a column per run parameter, the tables and
// numeric columns the worlds have in common; what it cannot answer is a
// 400 or 404 naming what was wrong.
func TestSweepEndpoint(t *testing.T) {
	f := sweepFixture(t)
	for _, c := range []struct{ pick, agg, column string }{
		{"worlds=sw-*", "", ""},
		{"worlds=sw-*", "max", "position_y"},
		{"worlds=sw-[ab]", "count", "velocity_x"},
		{"lineage=base", "sum", "position_x"},
	} {
		var got Sweep
		p := "/api/sweep?" + c.pick + "&table=particle&agg=" + c.agg + "&column=" + c.column
		if code := f.get(t, p, &got); code != http.StatusOK {
			t.Fatalf("%s: %d", p, code)
		}
		q := SweepQuery{Table: "particle", Column: c.column, Agg: c.agg}
		if q.Agg == "" {
			q.Agg, q.Column = "avg", "position_x"
		}
		glob, lineage, _ := strings.Cut(c.pick, "=")
		if glob == "worlds" {
			glob, lineage = lineage, ""
		} else {
			glob = ""
		}
		exp := wantSweep(t, f.b, glob, lineage, q.SeriesSQL())
		sameResult(t, p, got.Series, exp)
		worlds := map[string]bool{}
		for _, r := range exp.Rows {
			worlds[r[0]] = true
		}
		if len(worlds) != len(got.Worlds) || len(got.Meta.Rows) != len(got.Worlds) {
			t.Fatalf("%s: worlds %v; the series has %d, the records %d", p, got.Worlds, len(worlds), len(got.Meta.Rows))
		}
	}

	// The records: one row per world, the run parameters spread into
	// columns (a fork's include those it inherits), as worldfs_worlds
	// holds them.
	var got Sweep
	f.get(t, "/api/sweep?worlds=sw-*", &got)
	if got.Table != "particle" || got.Column != "position_x" || got.Agg != "avg" || !reflect.DeepEqual(got.Params, []string{"gravity", "lr", "note", "seed"}) {
		t.Fatalf("defaults: table %s column %s agg %s params %v", got.Table, got.Column, got.Agg, got.Params)
	}
	if !reflect.DeepEqual(got.Meta.Columns, []string{"world", "parent", "fork_run", "fork_tick", "head_tick", "gravity", "lr", "note", "seed"}) {
		t.Fatalf("records' columns: %v", got.Meta.Columns)
	}
	exp := wantSweep(t, f.b, "sw-*", "", "SELECT world, parent, fork_run, fork_tick, head_tick, meta['gravity'], coalesce(meta['lr'], 'NULL'), coalesce(meta['note'], 'NULL'), meta['seed'] FROM worldfs_worlds ORDER BY world")
	if !reflect.DeepEqual(got.Meta.Rows, exp.Rows) || len(exp.Rows) != len(sweepForks) {
		t.Fatalf("records:\n%v\nworldfs_worlds:\n%v", got.Meta.Rows, exp.Rows)
	}
	for _, r := range got.Meta.Rows {
		for _, sf := range sweepForks {
			if r[0] == sf.name && (r[1] != "base" || r[3] != fmt.Sprint(sf.at) || r[4] != fmt.Sprint(sf.head)) {
				t.Fatalf("record of %s: %v; want parent base, fork tick %d, head %d", sf.name, r, sf.at, sf.head)
			}
		}
	}
	if cols := got.Tables["particle"]; !reflect.DeepEqual(cols, []string{"position_x", "position_y", "velocity_x", "velocity_y"}) && len(cols) < 2 {
		t.Fatalf("particle's numeric columns: %v", cols)
	}
	for _, c := range got.Tables["particle"] {
		if c == "entity_id" || c == "tick" || c == "name" {
			t.Fatalf("particle's numeric columns: %v", got.Tables["particle"])
		}
	}

	// What it cannot answer says what was wrong.
	for _, c := range []struct {
		query string
		code  int
		says  string
	}{
		{"worlds=nothing-*", http.StatusNotFound, `no world matches "nothing-*"`},
		{"worlds=sw-[", http.StatusBadRequest, "syntax error in pattern"},
		{"lineage=nope", http.StatusNotFound, "world nope does not exist"},
		{"", http.StatusBadRequest, "worlds=GLOB"},
		{"worlds=sw-*&lineage=base", http.StatusBadRequest, "give one"},
		{"worlds=sw-*&table=particle&column=nope", http.StatusBadRequest, `column "nope" is not a numeric column of table particle`},
		{"worlds=sw-*&table=particle&column=name", http.StatusBadRequest, `column "name"`},
		{"worlds=sw-*&table=nope", http.StatusBadRequest, `table "nope" is not a table of every world`},
		{"worlds=sw-*&agg=median", http.StatusBadRequest, `agg "median"`},
		{"worlds=sw-*&run=nope", http.StatusNotFound, "nope"},
	} {
		var e apiError
		if code := f.get(t, "/api/sweep?"+c.query, &e); code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q; want %d saying %q", c.query, code, e.Error, c.code, c.says)
		}
	}

	// The page itself answers 200 and says what it sweeps.
	page := fetch(t, f, "/sweep?worlds="+url.QueryEscape("sw-*"))
	if !strings.Contains(page, "<title>sweep · sw-*") || !strings.Contains(page, `data-page="sweep"`) {
		t.Fatalf("sweep page:\n%s", page)
	}
}

