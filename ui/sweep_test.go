package ui

import (
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/browsertest"
	"github.com/worldfs/worldfs/maintenance"
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
func sweepFixture(t *testing.T, opts ...func(*Options)) *fixture {
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
	return serve(t, b, dir, opts...)
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

// sameSeries fails unless got, the sweep endpoint's series, is exp, the
// same aggregate (agg) as worldfs sql answers it: the same query and
// columns, the same points in the same order, each value the same
// number, a sum or average of floats to within 1e-12 of it (sweepSeries
// adds them in another order than DuckDB's query, as its parallel plans
// do; a sum of integers is exact).
func sameSeries(t *testing.T, what string, got, exp *Result, agg string) {
	t.Helper()
	if got == nil || got.SQL != exp.SQL || !reflect.DeepEqual(got.Columns, exp.Columns) || got.Truncated || !seriesAgree(got.Rows, exp.Rows, agg) {
		t.Fatalf("%s: the server answered\n%+v\nworldfs sql answers\n%+v", what, got, exp)
	}
	if len(exp.Rows) == 0 {
		t.Fatalf("%s: no rows: the fixture should give some", what)
	}
}

// seriesAgree reports whether two series' rows (world, tick, value) are
// the same points with the same numbers (see sameSeries).
func seriesAgree(got, exp [][]string, agg string) bool {
	if len(got) != len(exp) {
		return false
	}
	for i := range got {
		g, e := got[i], exp[i]
		if len(g) != 3 || len(e) != 3 || g[0] != e[0] || g[1] != e[1] {
			return false
		}
		if g[2] == e[2] {
			continue
		}
		nan := strings.NewReplacer("-nan", "nan") // NaN's sign is not a number's
		gf, err1 := strconv.ParseFloat(nan.Replace(g[2]), 64)
		ef, err2 := strconv.ParseFloat(nan.Replace(e[2]), 64)
		switch {
		case err1 != nil || err2 != nil:
			return false
		case math.IsNaN(gf) && math.IsNaN(ef), gf == ef:
		case (agg == "avg" || agg == "sum") && math.Abs(gf-ef) <= 1e-12*math.Max(math.Abs(ef), 1):
		default:
			return false
		}
	}
	return true
}

// The sweep page's database defines only the table it draws (the whole
// sweep is planned, not opened), and the sweep's plan does not take the
// place of its tables' databases: on a server that keeps one views, the
// same request thrice opens one database, another table one more (the
// ticks' own files left to DuckDB: none read by the server).
func TestSweepOpensItsTableAlone(t *testing.T) {
	f := sweepFixture(t, func(o *Options) { o.MaxViews, o.SweepFileReads = 1, -1 })
	shelved := func() [][]string {
		var out [][]string
		for _, v := range f.srv.shelf.Values() {
			out = append(out, v.Script.Views)
		}
		return out
	}
	for i := range 3 {
		var got Sweep
		if code := f.get(t, "/api/sweep?worlds=sw-*&table=particle", &got); code != http.StatusOK || len(got.Series.Rows) == 0 {
			t.Fatalf("request %d: %d, %d rows", i, code, len(got.Series.Rows))
		}
		if n := f.srv.shelf.Opened(); n != 1 {
			t.Fatalf("request %d for one table: %d databases opened, want 1", i, n)
		}
	}
	if got := shelved(); !reflect.DeepEqual(got, [][]string{{"particle"}}) {
		t.Fatalf("the shelf holds views of %v; want the sweep narrowed to particle", got)
	}
	var got Sweep
	if code := f.get(t, "/api/sweep?worlds=sw-*&table=emitter", &got); code != http.StatusOK || len(got.Series.Rows) == 0 {
		t.Fatalf("emitter: %d, %d rows", code, len(got.Series.Rows))
	}
	if n, views := f.srv.shelf.Opened(), shelved(); n != 2 || !reflect.DeepEqual(views, [][]string{{"emitter"}}) {
		t.Fatalf("another table: %d databases opened, the shelf holds %v; want 2, the sweep narrowed to emitter", n, views)
	}
	if !reflect.DeepEqual(got.Tables["particle"], []string{"position_x", "position_y", "velocity_x", "velocity_y"}) || len(got.Tables) != 3 {
		t.Fatalf("the tables offered: %v; want every table of the sweep", got.Tables)
	}
}

// The sweep endpoint answers a column's aggregate per world per tick as
// worldfs sql --worlds answers it (each aggregate, a glob and a lineage),
// the worlds' records with a column per run parameter, the tables and
// numeric columns the worlds have in common; the sweep is kept while no
// world moves on and built again when one does or the glob matches a new
// one; what it cannot answer is a 400 or 404 naming what was wrong. So
// it does whether the server reads the ticks' files itself (then it
// opens no database at all) or leaves them to DuckDB.
func TestSweepEndpoint(t *testing.T) {
	for _, mode := range []struct {
		name  string
		reads int
	}{{"the server reads the files", 0}, {"DuckDB reads the files", -1}} {
		t.Run(mode.name, func(t *testing.T) { sweepEndpoint(t, mode.reads) })
	}
}

func sweepEndpoint(t *testing.T, reads int) {
	f := sweepFixture(t, func(o *Options) { o.SweepFileReads = reads })
	duck := reads < 0
	for _, c := range []struct{ pick, table, agg, column string }{
		{"worlds=sw-*", "particle", "", ""},
		{"worlds=sw-*", "particle", "max", "position_y"},
		{"worlds=sw-*", "emitter", "sum", "position_x"}, // another table of the same sweep: its views narrowed to it
		{"worlds=sw-[ab]", "particle", "count", "velocity_x"},
		{"lineage=base", "particle", "sum", "position_x"},
	} {
		var got Sweep
		p := "/api/sweep?" + c.pick + "&table=" + c.table + "&agg=" + c.agg + "&column=" + c.column
		if code := f.get(t, p, &got); code != http.StatusOK {
			t.Fatalf("%s: %d", p, code)
		}
		q := SweepQuery{Table: c.table, Column: c.column, Agg: c.agg}
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
		if len(exp.Rows) == 0 {
			t.Fatalf("%s: the sweep holds no row of %s", p, q.Table)
		}
		sameSeries(t, p, got.Series, exp, q.Agg)
		// The same numbers as the query a person would type.
		lit := wantSweep(t, f.b, glob, lineage, fmt.Sprintf("SELECT world, tick, %s(%s) FROM %s GROUP BY ALL ORDER BY ALL", q.Agg, q.Column, q.Table))
		lit.SQL, lit.Columns = exp.SQL, exp.Columns
		sameSeries(t, p, got.Series, lit, q.Agg)
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

	// A world that moves on, and a new world the glob matches: the next
	// answer shows them (the sweep is built again), worldfs sql's still.
	before := f.srv.shelf.Opened()
	enginetest.Resume(t, f.b, "sw-c", 12)
	enginetest.Fork(t, f.b, "base", "sw-d", 3, 5)
	time.Sleep(f.srv.opts.Freshness)
	var moved Sweep
	f.get(t, "/api/sweep?worlds=sw-*", &moved)
	lit := wantSweep(t, f.b, "sw-*", "", "SELECT world, tick, avg(position_x) FROM particle GROUP BY ALL ORDER BY ALL")
	if !seriesAgree(moved.Series.Rows, lit.Rows, "avg") || len(moved.Worlds) != 5 || moved.Meta.Rows[2][4] != "12" {
		t.Fatalf("after sw-c ran on to 12 and sw-d was forked: worlds %v, records %v;\nseries\n%v\nworldfs sql --worlds\n%v", moved.Worlds, moved.Meta.Rows, moved.Series.Rows, lit.Rows)
	}
	if duck && f.srv.shelf.Opened() == before {
		t.Fatalf("the sweep was not built again")
	}
	// While nothing moves on, the sweep is kept: another aggregate is a
	// query on the same views.
	opened := f.srv.shelf.Opened()
	if code := f.get(t, "/api/sweep?worlds=sw-*&agg=max", nil); code != http.StatusOK || f.srv.shelf.Opened() != opened {
		t.Fatalf("another aggregate: %d, %d databases opened since", code, f.srv.shelf.Opened()-opened)
	}

	if !duck && f.srv.shelf.Opened() != 0 {
		t.Fatalf("%d databases opened for sweeps of files the server reads", f.srv.shelf.Opened())
	}

	// The page itself answers 200 and says what it sweeps.
	page := fetch(t, f, "/sweep?worlds="+url.QueryEscape("sw-*"))
	if !strings.Contains(page, "<title>sweep · sw-*") || !strings.Contains(page, `data-page="sweep"`) {
		t.Fatalf("sweep page:\n%s", page)
	}
}

// On compacted history the sweep endpoint takes each compacted tick's
// aggregate from its file's tick index (its column summaries) and reads
// only the rest's rows, and answers what worldfs sql --worlds answers:
// every aggregate of a floating and an integer column, for a glob and a
// lineage (the forks reading the base's compacted files up to their fork
// points), the loose ticks compaction left read as rows beside them, by
// the server or by DuckDB.
func TestSweepTakesCompactedTicksFromTheirSummaries(t *testing.T) {
	for _, reads := range []int{0, -1} {
		t.Run(fmt.Sprint("file reads ", reads), func(t *testing.T) { sweepOfSummaries(t, reads) })
	}
}

func sweepOfSummaries(t *testing.T, reads int) {
	f := sweepFixture(t, func(o *Options) { o.SweepFileReads = reads })
	ctx := enginetest.Context(t)
	for _, w := range append([]string{"base"}, "sw-a", "sw-b", "sw-c", "sw-"+longName) {
		cat, err := index.Open(ctx, f.b, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Compact(ctx, f.b, cat, maintenance.CompactOptions{Recent: 2, Windows: []int64{4, 2}})
		cat.Close()
		if err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
	}
	for _, c := range []struct{ pick, table, column string }{
		{"worlds=sw-*", "particle", "position_x"},
		{"lineage=base", "particle", "velocity_y"},
		{"worlds=sw-*", "emitter", "emitter_rate"},
		{"lineage=base", "emitter", "emitter_rate"},
	} {
		for _, agg := range SweepAggs {
			var got Sweep
			p := "/api/sweep?" + c.pick + "&table=" + c.table + "&agg=" + agg + "&column=" + c.column
			if code := f.get(t, p, &got); code != http.StatusOK {
				t.Fatalf("%s: %d", p, code)
			}
			if got.Summarized == 0 {
				t.Fatalf("%s: no compacted file's summary was read", p)
			}
			if opened := f.srv.shelf.Opened(); (reads < 0) != (opened > 0) {
				t.Fatalf("%s: %d databases opened", p, opened)
			}
			glob, lineage := "", ""
			if pick, what, _ := strings.Cut(c.pick, "="); pick == "worlds" {
				glob = what
			} else {
				lineage = what
			}
			q := SweepQuery{Table: c.table, Column: c.column, Agg: agg}
			sameSeries(t, p, got.Series, wantSweep(t, f.b, glob, lineage, q.SeriesSQL()), agg)
		}
	}

	// A compacted file damaged (its summaries intact beside it): the
	// sweep fails naming it, as a query of the views fails, rather than
	// show what its index says it holds.
	var lost string
	err := filepath.WalkDir(filepath.Join(f.dir, "data", "base"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && lost == "" && strings.Contains(p, "/compacted-") && strings.HasSuffix(p, ".parquet") && strings.Contains(p, particles.Tables()[0].ID) {
			lost = p
		}
		return err
	})
	if err != nil || lost == "" {
		t.Fatalf("no compacted file of base's particles: %v", err)
	}
	data, err := os.ReadFile(lost)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(lost, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := serve(t, f.b, f.dir, func(o *Options) { o.SweepFileReads = reads })
	var e apiError
	object, _ := filepath.Rel(f.dir, lost)
	if code := fresh.get(t, "/api/sweep?lineage=base&table=particle", &e); code == http.StatusOK || !strings.Contains(e.Error, object) {
		t.Fatalf("a sweep reading a damaged compacted file: %d %q; want an error naming %s", code, e.Error, object)
	}
}

// The sweep page in a real browser at 1,280 px: the overlay's lines and
// band and the small multiples hold worldfs sql --worlds's answers of the
// same aggregate (for a glob, another aggregate chosen on the page, and a
// lineage, reached from the worlds page); the worlds' table sorts and
// filters, the band following the
// filter; two ticked worlds open the compare page of those two at their
// common head tick; bad input says what was wrong. Each page fits the
// width; a screenshot of each is kept.
func TestBrowserSweep(t *testing.T) {
	ctx := browsertest.Chromium(t)
	f := sweepFixture(t)
	br := browsertest.New(t, ctx)
	do, eval, str := br.Do, br.Eval, br.Str
	long := "sw-" + longName

	// series checks the page's series and band against worldfs sql
	// --worlds's answer to q (over the worlds of glob, or lineage).
	series := func(what, glob, lineage string, q SweepQuery) {
		t.Helper()
		var got map[string][2][]float64
		var band [3][]*float64
		eval(&got, `window.__ui.series`)
		eval(&band, `window.__ui.band`)
		// The query as a person would type it, not the page's own.
		lit := fmt.Sprintf("SELECT world, tick, %s(%s) FROM %s GROUP BY ALL ORDER BY world, tick", q.Agg, q.Column, q.Table)
		exp := wantSweep(t, f.b, glob, lineage, lit)
		want := map[string][2][]float64{}
		for _, r := range exp.Rows {
			s := want[r[0]]
			v := floats(t, r[1:3])
			s[0], s[1] = append(s[0], v[0]), append(s[1], v[1])
			want[r[0]] = s
		}
		if len(exp.Rows) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the page draws\n%v\nworldfs sql --worlds answers\n%v", what, got, want)
		}
		bq := "SELECT tick, min(v), max(v) FROM (" + strings.Replace(lit, "FROM", "AS v FROM", 1) + ") GROUP BY tick ORDER BY tick"
		sameBand(t, what, band, wantSweep(t, f.b, glob, lineage, bq))
	}
	rows := func() []string {
		t.Helper()
		var ws []string
		eval(&ws, `[...document.querySelectorAll("#sweep-worlds tbody tr")].map(r => r.dataset.world)`)
		return ws
	}

	// The overlay: every world's line over the band.
	do("sweep page", chromedp.Navigate(f.http.URL+"/sweep?worlds="+url.QueryEscape("sw-*")), browsertest.ReadyAt(`[data-swept="particle.position_x avg 4"]`))
	series("avg(position_x) of sw-*", "sw-*", "", SweepQuery{Table: "particle", Column: "position_x", Agg: "avg"})
	var lines int
	eval(&lines, `window.__ui.sweepState.chart.series.length - 1`)
	if lines != 4 {
		t.Fatalf("the overlay draws %d lines; want one per world, 4", lines)
	}
	// The cursor over the chart reads out the tick and the band there.
	do("hover", chromedp.Evaluate[chromedp.Void](`(() => { const u = window.__ui.sweepState.chart; u.setCursor({left: u.valToPos(6, "x"), top: u.valToPos(window.__ui.band[2][5], "y")}); })()`))
	var band6 [3]*float64
	eval(&band6, `[window.__ui.band[0][5], window.__ui.band[1][5], window.__ui.band[2][5]]`)
	if says := str(chromedp.Text(chromedp.ID("sweep-readout"))); band6[0] == nil || *band6[0] != 6 || !strings.HasPrefix(says, "tick 6: ") || !strings.Contains(says, "across the worlds") {
		t.Fatalf("the readout at tick 6 says %q", says)
	}
	br.Shot("sweep-overlay")
	br.Fits("sweep page, overlay")
	if ws := rows(); !reflect.DeepEqual(ws, []string{"sw-a", "sw-b", "sw-c", long}) {
		t.Fatalf("the worlds' table lists %v", ws)
	}
	// Its numbers as the rest of the pages show them.
	var cells [][2]string
	eval(&cells, `[...document.querySelectorAll("#sweep-worlds tbody td.num")].map(td => [td.textContent, td.title])`)
	checkNumbers(t, "the worlds' table", cells)

	// Another aggregate and column, chosen on the page.
	do("max(position_y)", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("sweep-column"); s.value = "position_y"; s.dispatchEvent(new Event("change")); })()`),
		browsertest.ReadyAt(`[data-swept="particle.position_y avg 4"]`),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("sweep-agg"); s.value = "max"; s.dispatchEvent(new Event("change")); })()`),
		browsertest.ReadyAt(`[data-swept="particle.position_y max 4"]`))
	series("max(position_y) of sw-*", "sw-*", "", SweepQuery{Table: "particle", Column: "position_y", Agg: "max"})
	if u := str(chromedp.Evaluate[string](`location.search`)); !strings.Contains(u, "column=position_y") || !strings.Contains(u, "agg=max") {
		t.Fatalf("the URL does not keep the choice: %s", u)
	}

	// Sorted by a run parameter (numbers as numbers), then filtered: the
	// band is of the worlds the filter keeps.
	do("sort by seed", chromedp.Click(chromedp.CSS(`#sweep-worlds th[data-col="seed"]`)))
	if ws := rows(); !reflect.DeepEqual(ws, []string{"sw-a", "sw-c", "sw-b", long}) { // seeds 3, 7, 11, 42
		t.Fatalf("sorted by seed: %v", ws)
	}
	do("filter", chromedp.SendKeys(chromedp.ID("sweep-filter"), "seed>5 lr!=0.001"))
	var shown []string
	eval(&shown, `window.__ui.shown`)
	if ws := rows(); !reflect.DeepEqual(ws, []string{"sw-c", "sw-b"}) || !reflect.DeepEqual(shown, ws) {
		t.Fatalf("seed>5 lr!=0.001: the table lists %v, the chart draws %v; want sw-c, sw-b", ws, shown)
	}
	var band [3][]*float64
	eval(&band, `window.__ui.band`)
	eb := wantSweep(t, f.b, "sw-[bc]", "", "SELECT tick, min(v), max(v) FROM (SELECT world, tick, max(position_y) AS v FROM particle GROUP BY ALL) GROUP BY tick ORDER BY tick")
	sameBand(t, "the band of seed>5 lr!=0.001", band, eb)

	// Small multiples: a chart per world the filter keeps.
	do("small multiples", chromedp.Click(chromedp.CSS(`#sweep-mode button[data-mode="multiples"]`)), browsertest.ReadyAt(`[data-sweep-mode="multiples"]`))
	var charts []string
	eval(&charts, `[...document.querySelectorAll("#sweep-multiples .chart")].map(d => d.dataset.world)`)
	if !reflect.DeepEqual(charts, []string{"sw-c", "sw-b"}) {
		t.Fatalf("small multiples of %v", charts)
	}
	do("no filter", chromedp.Evaluate[chromedp.Void](`(() => { const i = document.getElementById("sweep-filter"); i.value = ""; i.dispatchEvent(new Event("input")); })()`))
	var multiples map[string][2][]*float64
	eval(&multiples, `window.__ui.multiples`)
	if len(multiples) != 4 {
		t.Fatalf("small multiples of %d worlds; want 4", len(multiples))
	}
	br.Shot("sweep-multiples")
	br.Fits("sweep page, small multiples")

	// Two worlds ticked: the compare page of the two at the newer of
	// their heads' lower (sw-a's 9, sw-b's 10).
	do("tick two", chromedp.Click(chromedp.CSS(`#sweep-worlds tr[data-world="sw-a"] input`)), chromedp.Click(chromedp.CSS(`#sweep-worlds tr[data-world="sw-b"] input`)))
	href := str(chromedp.Evaluate[string](`document.getElementById("compare-two").getAttribute("href")`))
	if want := "/w/sw-a/compare?run=main&a=9&vs=sw-b&vsrun=main&b=9&table=particle"; href != want {
		t.Fatalf("compare link %s; want %s", href, want)
	}
	br.Shot("sweep-two-ticked")
	do("compare the two", chromedp.Click(chromedp.ID("compare-two")), browsertest.ReadyAt(`[data-compared="sw-a@9 sw-b@9"]`))
	sameDiff(t, "compare sw-a@9 → sw-b@9", pageDiff(t, eval), wantDiff(t, f.b, Side{"sw-a", "main", 9}, Side{"sw-b", "main", 9}), "particle")
	br.Shot("sweep-compare")
	br.Fits("compare from the sweep")

	// A lineage, from the worlds page: the base world and its forks.
	var roots []string
	do("worlds page", chromedp.Navigate(f.http.URL+"/"), browsertest.ReadyAt(`[data-ready="1"]`))
	eval(&roots, `[...document.querySelectorAll("#sweep-lineage option")].map(o => o.value)`)
	if !reflect.DeepEqual(roots, []string{"base"}) {
		t.Fatalf("the worlds page offers the lineages of %v; want base's", roots)
	}
	do("sweep base's lineage", chromedp.Click(chromedp.CSS(`#sweep-lineage button`)), browsertest.ReadyAt(`[data-swept="particle.position_x avg 5"]`))
	series("avg(position_x) of base's lineage", "", "base", SweepQuery{Table: "particle", Column: "position_x", Agg: "avg"})
	do("lineage", chromedp.Navigate(f.http.URL+"/sweep?lineage=base&agg=sum"), browsertest.ReadyAt(`[data-swept="particle.position_x sum 5"]`))
	series("sum(position_x) of base's lineage", "", "base", SweepQuery{Table: "particle", Column: "position_x", Agg: "sum"})
	br.Shot("sweep-lineage")
	br.Fits("sweep page, a lineage")

	// Bad input: the page says what was wrong.
	for _, c := range []struct{ name, query, says string }{
		{"sweep-no-world", "worlds=nothing-*", `no world matches "nothing-*"`},
		{"sweep-no-column", "worlds=sw-*&table=particle&column=nope", `column "nope" is not a numeric column of table particle`},
	} {
		do(c.name, chromedp.Navigate(f.http.URL+"/sweep?"+c.query), browsertest.ReadyAt(`[data-sweep-error]`))
		if says := str(chromedp.Text(chromedp.ID("sweep-error"))); !strings.Contains(says, c.says) {
			t.Fatalf("%s: the page says %q; want %q", c.name, says, c.says)
		}
		br.Shot(c.name)
		br.Fits(c.name)
	}
}

// sameBand checks a band the page draws ([ticks, min, max], null where no
// world has a value) against SQL's tick, min, max.
func sameBand(t *testing.T, what string, band [3][]*float64, exp *Result) {
	t.Helper()
	var got [][3]float64
	for i := range band[0] {
		if band[1][i] != nil {
			got = append(got, [3]float64{*band[0][i], *band[1][i], *band[2][i]})
		}
	}
	var want [][3]float64
	for _, r := range exp.Rows {
		v := floats(t, r)
		want = append(want, [3]float64{v[0], v[1], v[2]})
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the page's band (tick, min, max)\n%v\nworldfs sql --worlds answers\n%v", what, got, want)
	}
}

// The sweep endpoint answers as worldfs sql --worlds for a column of
// every numeric type, NaN, infinities and sums past 64 bits among the
// values (each world's compacted ticks from their summaries, its last
// ticks from their files), and for a fact column whose schemas give it
// two types (int64 and double: the views' double, DuckDB's to read).
func TestSweepOfEveryNumericType(t *testing.T) {
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := engine.NewComponent("v", engine.Field{Name: "i32", Type: engine.Int32}, engine.Field{Name: "i64", Type: engine.Int64},
		engine.Field{Name: "f32", Type: engine.Float32}, engine.Field{Name: "f64", Type: engine.Float64})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := engine.NewTable("probe", v)
	if err != nil {
		t.Fatal(err)
	}
	reading := func(typ engine.Type) *engine.Table {
		c, _ := engine.NewComponent("reading", engine.Field{Name: "value", Type: typ})
		tb, _ := engine.NewFactTable("reading", c)
		return tb
	}
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.25}
	for wi, world := range []string{"ty-a", "ty-b"} {
		w, err := engine.CreateWorld(ctx, b, world, []*engine.Table{probe}, enginetest.Quiet)
		if err != nil {
			t.Fatal(err)
		}
		for e := range 5 {
			if _, err := w.Spawn("probe", engine.Values{"v_i32": int32(e - 2), "v_i64": int64(e), "v_f32": float32(e) / 3, "v_f64": float64(e) / 7}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddProcessor(func(tc *engine.TickContext) error {
			f := tc.Frame("probe")
			i32, i64, f32, f64 := f.Int32("v_i32"), f.Int64("v_i64"), f.Float32("v_f32"), f.Float64("v_f64")
			n := tc.Tick
			for i := range i32 {
				i32[i] = int32(n*int64(i+1)) - 3
				i64[i] = math.MaxInt64 - int64(i) // the sum of a tick's five passes 64 bits
				if (int(n)+i)%3 == 0 {
					i64[i] = math.MinInt64 + int64(n)
				}
				f32[i] = float32(n) / float32(i+1)
				f64[i] = float64(n)*1.1 + float64(wi)
				if k := int(n) + i; k%7 == 0 {
					f64[i], f32[i] = special[k/7%len(special)], float32(special[(k/7+1)%len(special)])
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for w.Tick() < 40 {
			if _, err := w.Submit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for i, f := range []engine.Fact{
			{ExternalID: "x", Table: reading(engine.Int64), Values: engine.Values{"reading_value": int64(9007199254740993)}},
			{ExternalID: "y", Table: reading(engine.Float64), Values: engine.Values{"reading_value": 2.5 + float64(wi)}},
		} {
			f.Producer = fmt.Sprint("sensor-", i)
			if _, err := w.Ingest(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 3, Windows: []int64{16, 8}}); err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", world, res, err)
		}
		w.Close()
	}
	f := serve(t, b, dir)
	for _, c := range []struct{ table, column string }{
		{"probe", "v_i32"}, {"probe", "v_i64"}, {"probe", "v_f32"}, {"probe", "v_f64"}, {"reading", "reading_value"},
	} {
		for _, agg := range SweepAggs {
			var got Sweep
			p := "/api/sweep?worlds=ty-*&table=" + c.table + "&agg=" + agg + "&column=" + c.column
			if code := f.get(t, p, &got); code != http.StatusOK {
				t.Fatalf("%s: %d", p, code)
			}
			if (got.Summarized > 0) != (c.table == "probe") {
				t.Fatalf("%s: %d files summarized by the server", p, got.Summarized)
			}
			q := SweepQuery{Table: c.table, Column: c.column, Agg: agg}
			sameSeries(t, p, got.Series, wantSweep(t, f.b, "ty-*", "", q.SeriesSQL()), agg)
		}
	}
}
