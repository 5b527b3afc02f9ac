package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/browsertest"
	"github.com/worldfs/worldfs/sql"
)

// longName is a world id of 60 characters: a name as long as people give
// them, which every page must fit without scrolling sideways.
const longName = "parameter-sweep-2026-12-07-learning-rate-0.0003-seed-0042-ab"

// A person's way through the pages, in a real browser: the worlds page,
// a run, the scrubber moved with the keyboard, the tick's table and
// scatter plot checked against worldfs sql for that tick, a query typed
// and run, the receipts' links; a screenshot of each page.
func TestBrowser(t *testing.T) {
	ctx := browsertest.Chromium(t)
	f := newFixture(t)
	f.srv.opts.MaxLogEntries = 2 // set before the first request: events come a page at a time
	st, _, err := index.Load(ctx, f.b, "w")
	if err != nil {
		t.Fatal(err)
	}
	headSeq := st.Seq
	const slow = "SELECT count(*) FROM range(1000000) a, range(10000000) b WHERE (a.range * b.range) % 7 = 3"
	ended := make(chan error, 1)
	f.srv.queryEnded = func(q string, err error) { // set before the first request
		if q == slow {
			ended <- err
		}
	}
	enginetest.Fork(t, f.b, "w", longName, 6, 9)
	br := browsertest.New(t, ctx)
	shot, ready, do, eval, str, fits := br.Shot, browsertest.ReadyAt, br.Do, br.Eval, br.Str, br.Fits
	// The worlds page lists both worlds, the fork drawn under its parent,
	// each with the size of its live data.
	var worlds, sizes []string
	var edges int
	do("worlds page", chromedp.Navigate(f.http.URL+"/"), ready(`[data-ready="1"]`))
	eval(&worlds, `[...document.querySelectorAll("#worlds tbody tr")].map(r => r.dataset.world)`)
	eval(&sizes, `[...document.querySelectorAll("#worlds tbody td.size")].map(td => td.title)`)
	eval(&edges, `document.querySelectorAll("#lineage path.edge").length`)
	shot("worlds")
	fits("worlds page")
	if !reflect.DeepEqual(worlds, []string{"f", longName, "w"}) || edges != 2 {
		t.Fatalf("worlds page: %v, %d lineage edges", worlds, edges)
	}
	for i, w := range worlds {
		st, _, err := index.Load(ctx, f.b, w)
		if err != nil {
			t.Fatal(err)
		}
		n, err := liveBytes(st)
		if err != nil || strings.ReplaceAll(sizes[i], ",", "") != fmt.Sprintf("%d bytes", n) {
			t.Fatalf("worlds page: %s's size says %q, its live data is %d bytes (%v)", w, sizes[i], n, err)
		}
	}

	// Open run main of w: it shows its head tick; three steps left on the
	// scrubber show tick head-3.
	at := head - 3
	do("open the run", chromedp.Click(chromedp.CSS(`a.run-link[data-world="w"]`)), ready(fmt.Sprintf(`[data-shown-tick="%d"]`, head)))
	// The rows chart is BinnedCountsSQL's answer for the range it shows;
	// a zoom to ticks 3..7 asks the server for them, one tick a bin.
	chartRows := func(what string) *RowsPerTick {
		t.Helper()
		var views []string
		var rc RowsPerTick
		eval(&views, `window.__ui.timeline.views`)
		eval(&rc, `window.__ui.counts`)
		exp := want(t, f.b, "w", "main", BinnedCountsSQL(views, rc.From, rc.To, rc.Width))
		if !reflect.DeepEqual(rc.Rows(), exp.Rows) || len(exp.Rows) == 0 {
			t.Fatalf("%s: the rows chart draws %v, worldfs sql answers %v", what, rc.Rows(), exp.Rows)
		}
		return &rc
	}
	do("the rows chart", ready(`[data-rows-width]`))
	whole := chartRows("rows chart")
	do("zoom the rows chart", chromedp.Evaluate[chromedp.Void](`window.__ui.run.charts.rows.setScale("x", {min: 3, max: 7})`),
		ready(`[data-rows-from="3"][data-rows-to="7"]`))
	if rc := chartRows("zoomed rows chart"); rc.Width != 1 || rc.X[0] != 3 {
		t.Fatalf("zoomed to ticks 3-7: %+v", rc)
	}
	// A double-click asks for the whole run again.
	do("unzoom the rows chart", chromedp.Evaluate[chromedp.Void](`window.__ui.run.charts.rows.over.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}))`),
		ready(fmt.Sprintf(`[data-rows-from="%d"][data-rows-to="%d"]`, whole.From, whole.To)))
	chartRows("unzoomed rows chart")
	// The commit events, read a slot at a time (the server reads the
	// slots of 2 entries), page by page back to the log's start: the
	// table lists every event of the log, newest first.
	for pages := 0; ; pages++ {
		var from string
		eval(&from, `document.body.dataset.logFrom`)
		if from == "1" {
			if pages == 0 {
				t.Fatal("the timeline read the whole log at once")
			}
			break
		}
		do("older events", chromedp.Evaluate[chromedp.Void](`document.getElementById("older-events").click()`),
			ready(fmt.Sprintf(`:not([data-log-from="%s"])`, from)))
	}
	// The events say what they count: the entries of the log read, the
	// events among them, the rest tick publications.
	var logEntries, events string
	eval(&logEntries, `document.body.dataset.logEntries`)
	eval(&events, `document.body.dataset.events`)
	if summary := str(chromedp.Text(chromedp.ID("events-summary"))); logEntries != strconv.FormatUint(headSeq, 10) ||
		!strings.Contains(summary, fmt.Sprintf("commit events: %s (", events)) || !strings.Contains(summary, fmt.Sprintf("among %d entries of w's log (the whole log)", headSeq)) {
		t.Fatalf("the events' summary says %q (%s entries read); the log holds %d entries", summary, logEntries, headSeq)
	}
	// The rows chart draws one line per table, the min-max bands no
	// series of their own; the wall-clock chart is collapsed for a run of
	// seconds.
	var legend []string
	eval(&legend, `window.__ui.run.charts.rows.series.slice(1).map(s => s.label)`)
	var tlViews []string
	eval(&tlViews, `window.__ui.counts.tables.map(t => t.table)`)
	if !reflect.DeepEqual(legend, tlViews) || len(legend) < 2 {
		t.Fatalf("the rows chart's series: %v; want one per table with rows: %v", legend, tlViews)
	}
	if wc := str(chromedp.Evaluate[string](`document.body.dataset.wallclock`)); wc != "collapsed" {
		t.Fatalf("the wall-clock chart of a run of seconds is %s", wc)
	}
	var seqs []uint64
	eval(&seqs, `[...document.querySelectorAll("#events tbody tr")].map(tr => Number(tr.children[0].textContent))`)
	var logSeqs []uint64
	for _, e := range logEvents(t, f.b, "w", headSeq) {
		logSeqs = append([]uint64{e.Seq}, logSeqs...)
	}
	if !reflect.DeepEqual(seqs, logSeqs) {
		t.Fatalf("the events listed: %v, the log's (newest first): %v", seqs, logSeqs)
	}
	do("move the scrubber", chromedp.SendKeys(chromedp.ID("scrubber"), kb.ArrowLeft+kb.ArrowLeft+kb.ArrowLeft),
		ready(fmt.Sprintf(`[data-shown-tick="%d"]`, at)))
	// The step buttons: one on, two back, one on again.
	for _, s := range []struct {
		button string
		tick   int
	}{{"next", at + 1}, {"prev", at}, {"prev", at - 1}, {"next", at}} {
		do("step "+s.button, chromedp.Click(chromedp.ID(s.button)), ready(fmt.Sprintf(`[data-shown-tick="%d"]`, s.tick)))
	}
	// Times are the reader's local time (the browser's zone is India's,
	// +05:30), the UTC time on hover.
	pub := publishedAt(t, f, "w", int64(at))
	if got, utc := str(chromedp.Text(chromedp.ID("tick-time"))), str(chromedp.Evaluate[string](`document.querySelector("#tick-time time").title`)); got != "published "+localTime(pub) || utc != utcTime(pub) {
		t.Fatalf("tick %d: the page says %q (%q on hover); want %q (%q)", at, got, utc, "published "+localTime(pub), utcTime(pub))
	}
	var table struct {
		Head []string   `json:"head"`
		Rows [][]string `json:"rows"`
	}
	var scatter [][]float64
	eval(&table, `({head: [...document.querySelectorAll("#tick-rows thead th")].map(th => th.dataset.col),
		rows: [...document.querySelectorAll("#tick-rows tbody tr")].map(tr => [...tr.children].map(td => td.title || td.textContent))})`)
	eval(&scatter, `window.__ui.scatter.data`)
	var cells [][2]string
	eval(&cells, `[...document.querySelectorAll("#tick-rows tbody td.num")].map(td => [td.textContent, td.title])`)
	checkNumbers(t, "the tick's table", cells)
	scrubber, href := str(chromedp.Value(chromedp.ID("scrubber"))), str(chromedp.Location())
	shot("run")
	fits("run page")
	page := want(t, f.b, "w", "main", TickQuery{Table: "particle", Tick: int64(at), Limit: 50}.PageSQL())
	if !reflect.DeepEqual(table.Head, page.Columns) || !reflect.DeepEqual(table.Rows, page.Rows) {
		t.Fatalf("tick %d: the page shows\n%v\n%v\nworldfs sql answers\n%v\n%v", at, table.Head, table.Rows, page.Columns, page.Rows)
	}
	if scrubber != strconv.Itoa(at) || !strings.Contains(href, "tick="+strconv.Itoa(at)) {
		t.Fatalf("scrubber %s, URL %s; want tick %d", scrubber, href, at)
	}
	points := want(t, f.b, "w", "main", TickQuery{Table: "particle", Tick: int64(at), X: "position_x", Y: "position_y"}.PointsSQL())
	if got, exp := pairs(t, scatter), sqlPairs(t, points); !reflect.DeepEqual(got, exp) {
		t.Fatalf("tick %d: the scatter plot draws %v, worldfs sql answers %v", at, got, exp)
	}

	// The tick box takes a point as a person types it, resolved by the
	// server's one parser: head~2 is two ticks before the head.
	typed := func(point string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(i => { i.value = %q; i.dispatchEvent(new Event("change")); })(document.getElementById("tick-input"))`, point))
	}
	do("type head~2 in the tick box", typed("head~2"), ready(fmt.Sprintf(`[data-shown-tick="%d"]`, head-2)))
	do("type a tick in the tick box", typed(strconv.Itoa(at)), ready(fmt.Sprintf(`[data-shown-tick="%d"]`, at)))

	// One click from a row to its history: an entity of the fork f,
	// followed through its lineage (w's ticks up to the fork point, then
	// f's own), is worldfs sql's answer for that entity, each numeric
	// column a small chart over ticks, its path on the scatter plot.
	var id string
	do("a tick of the fork", chromedp.Navigate(f.http.URL+"/w/f?tick=8"), ready(`[data-shown-tick="8"]`))
	eval(&id, `document.querySelector("#tick-rows a.entity").textContent`)
	do("follow an entity", chromedp.Click(chromedp.CSS("#tick-rows a.entity")), ready(`[data-page="entity"][data-ready="1"]`))
	var traj struct {
		Columns   []string               `json:"columns"`
		Values    [][]any                `json:"values"`
		Multiples map[string][][]float64 `json:"multiples"`
		Path      [][]float64            `json:"path"`
	}
	eval(&traj, `({columns: window.__ui.trajectory.columns, values: window.__ui.trajectory.values, multiples: window.__ui.multiples, path: window.__ui.path.data})`)
	shot("entity")
	fits("entity page")
	exp := want(t, f.b, "f", "main", TrajectorySQL("particle", id))
	if !reflect.DeepEqual(traj.Columns, exp.Columns) || !sameValues(traj.Values, exp.Rows) || len(exp.Rows) < 3 {
		t.Fatalf("entity %s of f: the page shows\n%v\n%v\nworldfs sql answers\n%v\n%v", id, traj.Columns, traj.Values, exp.Columns, exp.Rows)
	}
	if first := floats(t, []string{exp.Rows[0][indexOf(exp.Columns, "tick")]})[0]; first > 6 {
		t.Fatalf("entity %s of f: its history starts at tick %v, not in its parent's ticks", id, first)
	}
	for _, col := range []string{"position_x", "position_y", "velocity_x", "velocity_y"} {
		i := indexOf(exp.Columns, col)
		var ticks, vals []string
		for _, r := range exp.Rows {
			ticks, vals = append(ticks, r[indexOf(exp.Columns, "tick")]), append(vals, r[i])
		}
		m := traj.Multiples[col]
		if len(m) != 2 || !reflect.DeepEqual(floats(t, ticks), m[0]) || !reflect.DeepEqual(floats(t, vals), m[1]) {
			t.Fatalf("entity %s's chart of %s: %v; worldfs sql answers ticks %v values %v", id, col, m, ticks, vals)
		}
		if col == "position_x" && !reflect.DeepEqual(traj.Path[0], m[1]) {
			t.Fatalf("entity %s's path: x %v; its position_x %v", id, traj.Path[0], m[1])
		}
	}
	// A history whose first row passes the server's bound on a result
	// says so; it does not say the entity has no rows. (50 bytes: more
	// than the column names of the page's other answers, less than one
	// row of particle as JSON.)
	small := serve(t, f.b, f.dir, func(o *Options) { o.MaxResultBytes = 50 })
	do("a history past the bound", chromedp.Navigate(small.http.URL+"/w/f/entity?table=particle&id="+id), ready(`[data-page="entity"][data-ready="1"]`))
	if says := str(chromedp.Text(chromedp.ID("entity-info"))); !strings.Contains(says, "larger than the server's bound") {
		t.Fatalf("entity %s, a bound of 50 bytes: the page says %q", id, says)
	}

	// A query typed into the box: its table and chart are worldfs sql's
	// answer, and the URL holds the query.
	q := "SELECT tick, count(*) AS n FROM particle GROUP BY tick ORDER BY tick"
	var result struct {
		Head []string   `json:"head"`
		Rows [][]string `json:"rows"`
	}
	var chart [][]float64
	do("run a query", chromedp.Navigate(f.http.URL+"/w/w/sql"), ready(`[data-ready="1"]`),
		chromedp.SendKeys(chromedp.ID("query"), q), chromedp.Click(chromedp.ID("run-query")), ready(`[data-queries="1"]`))
	eval(&result, `({head: [...document.querySelectorAll("#query-result thead th")].map(th => th.dataset.col),
		rows: [...document.querySelectorAll("#query-result tbody tr")].map(tr => [...tr.children].map(td => td.title || td.textContent))})`)
	eval(&chart, `window.__ui.chart.data`)
	href = str(chromedp.Location())
	shot("sql")
	fits("sql page")
	exp = want(t, f.b, "w", "main", q)
	if !reflect.DeepEqual(result.Head, exp.Columns) || !reflect.DeepEqual(result.Rows, exp.Rows) {
		t.Fatalf("query: the page shows\n%v\n%v\nworldfs sql answers\n%v\n%v", result.Head, result.Rows, exp.Columns, exp.Rows)
	}
	if got, e := pairs(t, chart), sqlPairs(t, exp); !reflect.DeepEqual(got, e) {
		t.Fatalf("query chart: %v, worldfs sql answers %v", got, e)
	}
	if u, err := url.Parse(href); err != nil || u.Query().Get("q") != q {
		t.Fatalf("the query is not in the URL: %s", href)
	}
	// Integers of four digits and more get thousands separators.
	var ints []string
	eval(&ints, `["123", "1234", "-1234", "-123", "12345678901234567890"].map(fmtValue)`)
	if !reflect.DeepEqual(ints, []string{"123", "1,234", "-1,234", "-123", "12,345,678,901,234,567,890"}) {
		t.Fatalf("integers as the page shows them: %q", ints)
	}
	// The query's time shows, the server's and the round trip's.
	if info := str(chromedp.Text(chromedp.ID("query-info"))); !strings.Contains(info, " ms on the server, ") {
		t.Fatalf("the query's time is not shown: %q", info)
	}
	// The downloads are worldfs sql's: the CSV byte for byte as
	// worldfs sql --format csv prints it, the Parquet's rows as
	// worldfs sql --out FILE.parquet writes them.
	var csvHref, parquetHref string
	eval(&csvHref, `document.getElementById("download-csv").getAttribute("href")`)
	eval(&parquetHref, `document.getElementById("download-parquet").getAttribute("href")`)
	if got, exp := fetch(t, f, csvHref), sqlCSV(t, f.b, "w", "main", q); got != exp {
		t.Fatalf("the CSV download:\n%s\nworldfs sql --format csv prints:\n%s", got, exp)
	}
	gotPq := filepath.Join(t.TempDir(), "got.parquet")
	if err := os.WriteFile(gotPq, []byte(fetch(t, f, parquetHref)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, exp := parquetRows(t, gotPq), parquetRows(t, sqlParquet(t, f.b, "w", "main", q)); !reflect.DeepEqual(got, exp) || len(exp) == 0 {
		t.Fatalf("the Parquet download's rows:\n%v\nworldfs sql --out writes:\n%v", got, exp)
	}
	// The schema browser lists every view with its columns and the
	// macros; a click inserts a name at the cursor.
	var schemaViews []string
	eval(&schemaViews, `[...document.querySelectorAll("#schema-views details")].map(d => d.dataset.view)`)
	var tlv []string
	eval(&tlv, `window.__ui.schema.rows.filter(r => r[0] === "view").map(r => r[1]).filter((v, i, a) => a.indexOf(v) === i)`)
	for _, v := range append([]string{"particle", "worldfs_ticks"}, tlViews...) {
		if !slices.Contains(schemaViews, v) {
			t.Fatalf("the schema browser lists %v; not %s", schemaViews, v)
		}
	}
	if !reflect.DeepEqual(schemaViews, tlv) {
		t.Fatalf("the schema browser lists %v; the schema %v", schemaViews, tlv)
	}
	var macros int
	eval(&macros, `[...document.querySelectorAll("#schema-macros .macro")].filter(m => m.dataset.insert.startsWith("particle_at(")).length`)
	if macros != 1 {
		t.Fatalf("the schema browser lists particle_at %d times", macros)
	}
	do("insert a column", chromedp.Evaluate[chromedp.Void](`(q => { q.value = "SELECT  FROM particle"; q.selectionStart = q.selectionEnd = 7; })(document.getElementById("query"))`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#schema-views details[data-view="particle"]').open = true`),
		chromedp.Click(chromedp.CSS(`#schema-views details[data-view="particle"] .col[data-insert="position_x"]`)))
	if got := str(chromedp.Value(chromedp.ID("query"))); got != "SELECT position_x FROM particle" {
		t.Fatalf("a click on position_x made the query %q", got)
	}
	// Several y series, and one series per value of a column.
	q2 := "SELECT tick, table_name, n, n * 2 AS twice FROM (" + CountsSQL([]string{"emitter", "particle"}) + ") ORDER BY tick, table_name"
	var multi struct {
		Labels []string     `json:"labels"`
		Data   [][]*float64 `json:"data"`
	}
	do("several y", chromedp.Navigate(f.http.URL+"/w/w/sql?x=tick&y=n&y=twice&q="+url.QueryEscape(q2)), ready(`[data-queries="1"]`))
	eval(&multi, `window.__ui.chart`)
	exp2 := want(t, f.b, "w", "main", q2)
	if !reflect.DeepEqual(multi.Labels, []string{"n", "twice"}) || len(multi.Data) != 3 {
		t.Fatalf("two y series: %v", multi.Labels)
	}
	do("split by table", chromedp.Navigate(f.http.URL+"/w/w/sql?x=tick&y=n&split=table_name&q="+url.QueryEscape(q2)), ready(`[data-queries="1"]`))
	eval(&multi, `window.__ui.chart`)
	shot("sql-split")
	fits("sql page split by a column")
	if !reflect.DeepEqual(multi.Labels, []string{"table_name=emitter", "table_name=particle"}) {
		t.Fatalf("one series per table: %v", multi.Labels)
	}
	// Each series holds its table's n at each tick, as worldfs sql
	// answers.
	for k, table := range []string{"emitter", "particle"} {
		for _, r := range exp2.Rows {
			if r[1] != table {
				continue
			}
			i := slices.IndexFunc(multi.Data[0], func(x *float64) bool { return x != nil && strconv.FormatFloat(*x, 'f', -1, 64) == r[0] })
			if i < 0 || multi.Data[k+1][i] == nil || strconv.FormatFloat(*multi.Data[k+1][i], 'f', -1, 64) != r[2] {
				t.Fatalf("series %s at tick %s: want %s; chart %v", table, r[0], r[2], multi.Data)
			}
		}
	}

	// A TIMESTAMPTZ shows in local time, its UTC time (to the digit
	// DuckDB writes) on hover.
	tq := "SELECT tick, published_at, epoch_ms(published_at) AS ms FROM worldfs_ticks ORDER BY tick LIMIT 3"
	var times [][]string
	do("a query of times", chromedp.Navigate(f.http.URL+"/w/w/sql?q="+url.QueryEscape(tq)), ready(`[data-queries="1"]`))
	eval(&times, `[...document.querySelectorAll("#query-result tbody tr")].map(tr => [tr.children[1].textContent, tr.children[1].title])`)
	texp := want(t, f.b, "w", "main", tq)
	if len(times) != len(texp.Rows) || len(times) == 0 {
		t.Fatalf("a query of times: %d rows shown, worldfs sql answers %d", len(times), len(texp.Rows))
	}
	for i, r := range texp.Rows {
		ms, err := strconv.ParseInt(r[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		frac := regexp.MustCompile(`\.\d+`).FindString(r[1])
		utc := time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05") + frac + " UTC"
		if times[i][0] != localTime(ms) || times[i][1] != utc {
			t.Fatalf("published_at %s shows as %q, %q on hover; want %q, %q", r[1], times[i][0], times[i][1], localTime(ms), utc)
		}
	}
	// A slow query, cancelled from the page: the fetch is aborted, and
	// the server's query ends with its context cancelled.
	var info string
	do("cancel a query", chromedp.Navigate(f.http.URL+"/w/w/sql?q="+url.QueryEscape(slow)),
		chromedp.WaitEnabled(chromedp.ID("cancel-query")), chromedp.Click(chromedp.ID("cancel-query")), ready(`[data-queries="1"]`))
	info = str(chromedp.Text(chromedp.ID("query-info")))
	if info != "cancelled" {
		t.Fatalf("after Cancel the page says %q", info)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled query ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server's query ran on 30 s after the page cancelled it")
	}

	// Compare two ticks: the page shows worldfs diff's report of a → b
	// (per table, per column of the table shown), and the overlaid plot
	// holds both sides' points.
	var overlay [][]*float64
	do("compare", chromedp.Navigate(f.http.URL+"/w/w/compare?a=9&b=12&table=particle"), ready(`[data-compared="w@9 w@12"]`))
	eval(&overlay, `window.__ui.overlay`)
	shot("compare")
	fits("compare page")
	sameDiff(t, "compare w@9 → w@12", pageDiff(t, eval), wantDiff(t, f.b, Side{"w", "main", 9}, Side{"w", "main", 12}), "particle")
	cq := CompareQuery{Table: "particle", A: Side{"w", "main", 9}, B: Side{"w", "main", 12}, X: "position_x", Y: "position_y"}
	na, nb := len(want(t, f.b, "w", "main", cq.PointsSQL(cq.A)).Rows), len(want(t, f.b, "w", "main", cq.PointsSQL(cq.B)).Rows)
	if len(overlay) != 3 || nonNull(overlay[1]) != na || nonNull(overlay[2]) != nb {
		t.Fatalf("overlay: %d series; want %d points of tick 9 and %d of tick 12", len(overlay), na, nb)
	}
	// A fork against its parent goes as worldfs diff PARENT@T FORK@T:
	// from the parent to the fork, so inserted means only in the fork.
	var parentLink string
	do("compare a fork", chromedp.Navigate(f.http.URL+"/w/f/compare?a=8&b=9&table=particle"), ready(`[data-compared="f@8 f@9"]`))
	eval(&parentLink, `document.getElementById("vs-parent").getAttribute("href")`)
	do("the parent → the fork", chromedp.Navigate(f.http.URL+parentLink), ready(`[data-compared="w@9 f@9"]`))
	shot("compare-fork")
	fits("the parent → the fork")
	sameDiff(t, "compare w@9 → f@9", pageDiff(t, eval), wantDiff(t, f.b, Side{"w", "main", 9}, Side{"f", "main", 9}), "particle")
	// (The fork runs as its parent did: at one tick they agree. At two
	// ticks they differ, counted from a to b.)
	do("w@6 → f@9", chromedp.Navigate(f.http.URL+"/w/w/compare?a=6&vs=f&vsrun=main&b=9&table=particle"), ready(`[data-compared="w@6 f@9"]`))
	if d := pageDiff(t, eval); d.Report.Differ {
		sameDiff(t, "compare w@6 → f@9", d, wantDiff(t, f.b, Side{"w", "main", 6}, Side{"f", "main", 9}), "particle")
		// A row's entity opens its history on the side the row shows.
		var links [][]string
		eval(&links, `[...document.querySelectorAll("#compare-rows tbody tr")].map(tr => [tr.children[0].textContent, tr.querySelector("a.entity").getAttribute("href")])`)
		sides := map[string]bool{}
		for _, l := range links {
			want := "/w/f/entity?run=main&table=particle&id="
			if l[0] == "delete" || l[0] == "update_preimage" {
				want = "/w/w/entity?run=main&table=particle&id="
			}
			if !strings.HasPrefix(l[1], want) {
				t.Fatalf("compare w@6 → f@9: a %s row links to %s; want %s…", l[0], l[1], want)
			}
			sides[want] = true
		}
		if len(sides) != 2 {
			t.Fatalf("compare w@6 → f@9: rows %v link to one side only", links)
		}
	} else {
		t.Fatalf("compare w@6 → f@9: no differences: %+v", d.Report)
	}

	// Facts and receipts: the receipt links to the tick it graded, a
	// fact shows its value.
	var links []string
	do("facts page", chromedp.Navigate(f.http.URL+"/w/w/facts"), ready(`[data-ready="1"]`))
	eval(&links, `[...document.querySelectorAll("#receipts a.tick-link")].map(a => a.getAttribute("href"))`)
	shot("facts")
	fits("facts page")
	if !reflect.DeepEqual(links, []string{"/w/w?run=main&tick=8"}) {
		t.Fatalf("receipt links: %v", links)
	}
	var factText string
	eval(&factText, `document.getElementById("facts").innerText`)
	if !strings.Contains(factText, "value") || !strings.Contains(factText, `{"reading_value":1.5}`) {
		t.Fatalf("the facts table does not show the fact's value:\n%s", factText)
	}

	// The world of a long name: each of its pages fits, the name cut to
	// fit or wrapped.
	lw := "/w/" + longName
	for _, p := range []struct{ name, path, ready string }{
		{"long-run", lw + "?tick=7", `[data-shown-tick="7"]`},
		{"long-sql", lw + "/sql?q=" + url.QueryEscape("FROM particle_at(9)"), `[data-queries="1"]`},
		{"long-compare", lw + "/compare?a=6&b=9&table=particle", `[data-compared]`},
		{"long-facts", lw + "/facts", `[data-ready="1"]`},
		{"long-entity", lw + "/entity?table=particle&id=" + id, `[data-page="entity"][data-ready="1"]`},
		{"long-vs-parent", "/w/w/compare?a=9&vs=" + url.QueryEscape(longName) + "&vsrun=main&b=9&table=particle", `[data-compared]`},
	} {
		do(p.name, chromedp.Navigate(f.http.URL+p.path), ready(p.ready))
		shot(p.name)
		fits(p.name)
	}
	// The parent against the fork of a long name (dots in it): worldfs
	// diff's report.
	sameDiff(t, "compare w@9 → "+longName+"@9", pageDiff(t, eval), wantDiff(t, f.b, Side{"w", "main", 9}, Side{longName, "main", 9}), "particle")

	// A compacted fork: its timeline marks the fork point and each of its
	// compactions (the ticks each rewrote), as its log records them.
	compactedWorlds(t, f)
	do("a compacted fork", chromedp.Navigate(f.http.URL+"/w/cf"), ready(`[data-shown-tick="140"]`))
	for {
		var from string
		eval(&from, `document.body.dataset.logFrom`)
		if from == "1" {
			break
		}
		do("older events of cf", chromedp.Evaluate[chromedp.Void](`document.getElementById("older-events").click()`),
			ready(fmt.Sprintf(`:not([data-log-from="%s"])`, from)))
	}
	var marks []struct {
		Kind string `json:"kind"`
		Tick int64  `json:"tick"`
		From *int64 `json:"from"`
	}
	eval(&marks, `window.__ui.marks`)
	shot("compacted-fork")
	fits("compacted fork's run page")
	cfState, _, err := index.Load(ctx, f.b, "cf")
	if err != nil {
		t.Fatal(err)
	}
	wantMarks := []string{"fork 100"}
	for _, e := range logEvents(t, f.b, "cf", cfState.Seq) {
		if e.Kind == "fragments.rewrite" && e.From != nil {
			wantMarks = append(wantMarks, fmt.Sprintf("compaction %d-%d", *e.From, *e.Tick))
		}
	}
	var gotMarks []string
	for _, m := range marks {
		if m.From != nil {
			gotMarks = append(gotMarks, fmt.Sprintf("%s %d-%d", m.Kind, *m.From, m.Tick))
		} else {
			gotMarks = append(gotMarks, fmt.Sprintf("%s %d", m.Kind, m.Tick))
		}
	}
	if len(wantMarks) < 2 || !reflect.DeepEqual(gotMarks, wantMarks) {
		t.Fatalf("cf's timeline marks %v; its lineage and log: %v", gotMarks, wantMarks)
	}

	// A sweep of worlds without run parameters (as the demo's): w's
	// lineage, a world a row.
	var swept []string
	do("sweep of worlds without parameters", chromedp.Navigate(f.http.URL+"/sweep?lineage=w"), ready(`[data-swept$=" 3"]`))
	eval(&swept, `[...document.querySelectorAll("#sweep-worlds tbody tr")].map(r => r.dataset.world)`)
	shot("sweep-no-params")
	fits("sweep of worlds without parameters")
	if slices.Sort(swept); !reflect.DeepEqual(swept, []string{"f", longName, "w"}) {
		t.Fatalf("the sweep of w's lineage lists %v", swept)
	}

	// What does not exist is a not-found page, HTTP 404, that says what.
	for _, p := range []struct{ name, path, says string }{
		{"missing-world", "/w/nope", "world nope does not exist"},
		{"missing-run", "/w/w?run=nope", "world w has no run nope"},
		{"missing-tick", "/w/w?tick=999", "has no tick 999"},
		{"missing-compared-tick", "/w/w/compare?a=3&b=999", "has no tick 999"},
		{"missing-world-long", "/w/" + longName + "x/sql", "does not exist"},
		{"missing-compared-world", "/w/w/compare?a=3&vs=nope&b=3", "world nope does not exist"},
		{"missing-tick-of-compared-world", "/w/w/compare?a=3&vs=f&b=999", "run main of world f has no tick 999"},
		{"missing-lineage", "/sweep?lineage=nope", "world nope does not exist"},
	} {
		resp, err := f.http.Client().Get(f.http.URL + p.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %s answers %d; want 404", p.name, p.path, resp.StatusCode)
		}
		do(p.name, chromedp.Navigate(f.http.URL+p.path), chromedp.WaitVisible(chromedp.ID("not-found")))
		if says := str(chromedp.Text(chromedp.ID("not-found"))); !strings.Contains(says, p.says) {
			t.Fatalf("%s: the page says %q; want it to say %q", p.name, says, p.says)
		}
		shot(p.name)
		fits(p.name)
	}
}

// browserZone is the time zone the browser is told it is in
// (browsertest.Zone, Asia/Kolkata, which has no summer time): localTime is a time as the
// page shows it there, utcTime as it shows it on hover.
var browserZone = time.FixedZone("IST", 5*3600+1800)

func localTime(ms int64) string {
	return time.UnixMilli(ms).In(browserZone).Format("2006-01-02 15:04:05")
}
func utcTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 UTC") }

// checkNumbers checks cells as the page shows numbers: each number's text
// within 6 significant digits of its exact value, which is its title
// (or its text, when it is short enough to show whole), integers with
// thousands separators.
func checkNumbers(t *testing.T, what string, cells [][2]string) {
	t.Helper()
	if len(cells) == 0 {
		t.Fatalf("%s: no numbers to check", what)
	}
	for _, c := range cells {
		text, title := c[0], c[1]
		exact := title
		if exact == "" {
			exact = text
		}
		v, err := strconv.ParseFloat(exact, 64)
		if err != nil {
			continue // NULL, nan
		}
		shown, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
		if err != nil {
			t.Fatalf("%s: %q (exact %q) is not a number as shown", what, text, exact)
		}
		digits := len(strings.TrimLeft(strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, strings.Split(strings.ToLower(text), "e")[0]), "0"))
		if strings.Contains(text, ".") && digits > 6 {
			t.Fatalf("%s: %q shows %d significant digits; want at most 6", what, text, digits)
		}
		if math.Abs(shown-v) > 5e-6*math.Abs(v) {
			t.Fatalf("%s: %q is not %q to 6 significant digits", what, text, exact)
		}
		if !strings.ContainsAny(exact, ".eE") && len(strings.TrimLeft(exact, "-")) > 3 && !strings.Contains(text, ",") {
			t.Fatalf("%s: the integer %q shows as %q, without thousands separators", what, exact, text)
		}
	}
}

// pairs turns a chart's data ([xs, ys]) into sorted points.
func pairs(t *testing.T, data [][]float64) [][2]float64 {
	t.Helper()
	if len(data) != 2 || len(data[0]) != len(data[1]) || len(data[0]) == 0 {
		t.Fatalf("chart data: %v", data)
	}
	out := make([][2]float64, len(data[0]))
	for i := range data[0] {
		out[i] = [2]float64{data[0][i], data[1][i]}
	}
	return sortPairs(out)
}

// sqlPairs is a two-column result as sorted points.
func sqlPairs(t *testing.T, r *Result) [][2]float64 {
	t.Helper()
	out := make([][2]float64, len(r.Rows))
	for i, row := range r.Rows {
		for j := range 2 {
			v, err := strconv.ParseFloat(row[j], 64)
			if err != nil {
				t.Fatal(err)
			}
			out[i][j] = v
		}
	}
	return sortPairs(out)
}

func sortPairs(ps [][2]float64) [][2]float64 {
	slices.SortFunc(ps, func(a, b [2]float64) int {
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		if a[1] < b[1] {
			return -1
		}
		if a[1] > b[1] {
			return 1
		}
		return 0
	})
	return ps
}

func nonNull(vs []*float64) int {
	n := 0
	for _, v := range vs {
		if v != nil {
			n++
		}
	}
	return n
}

// shownDiff is what the compare page shows of worldfs diff's report: the
// report it got, and the text of its two summary tables (exact values).
type shownDiff struct {
	Report  sql.DiffReport `json:"report"`
	Table   string         `json:"table"`
	Tables  [][]string     `json:"tables"`
	Columns [][]string     `json:"columns"`
}

func pageDiff(t *testing.T, eval func(any, string)) *shownDiff {
	t.Helper()
	var d shownDiff
	eval(&d, `({report: window.__ui.comparison.report, table: window.__ui.comparison.table,
		tables: [...document.querySelectorAll("#diff-tables tbody tr")].map(tr => [...tr.children].map(td => td.title || td.textContent)),
		columns: [...document.querySelectorAll("#diff-columns tbody tr")].map(tr => [...tr.children].map(td => td.title || td.textContent))})`)
	return &d
}

// wantDiff is worldfs diff's report of a → b: sql.Diff on views built
// apart from the server's, in a session of both worlds if they differ.
func wantDiff(t *testing.T, b bucket.Bucket, a, bs Side) *sql.DiffReport {
	t.Helper()
	ctx := enginetest.Context(t)
	var scripts []*sql.Script
	for _, sd := range []Side{a, bs} {
		if len(scripts) == 1 && sd.World == a.World {
			break
		}
		sc, err := sql.Build(ctx, b, sd.World, sql.Options{Run: sd.Run, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, sc)
	}
	s := scripts[0]
	if len(scripts) == 2 {
		var err error
		if s, err = sql.Join(scripts...); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := sql.Diff(ctx, db, s, sql.Point{World: a.World, Tick: &a.Tick}, sql.Point{World: bs.World, Tick: &bs.Tick}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sameDiff checks the page shows report exp: its direction, each table's
// counts and each column of table's.
func sameDiff(t *testing.T, what string, got *shownDiff, exp *sql.DiffReport, table string) {
	t.Helper()
	if !reflect.DeepEqual(&got.Report, exp) {
		t.Fatalf("%s: the page's report\n%+v\nworldfs diff's\n%+v", what, got.Report, *exp)
	}
	var tables, columns [][]string
	for _, td := range exp.Tables {
		name := td.Table
		if td.OnlyIn != "" {
			name += " (only in " + td.OnlyIn + ")"
		}
		tables = append(tables, []string{name, fmt.Sprint(td.Inserted), fmt.Sprint(td.Deleted), fmt.Sprint(td.Updated), fmt.Sprint(td.Unchanged)})
		if td.Table != table {
			continue
		}
		for _, c := range td.Columns {
			m := "–"
			if c.MaxAbsChange != nil {
				m = strconv.FormatFloat(*c.MaxAbsChange, 'g', -1, 64)
			}
			columns = append(columns, []string{c.Column, fmt.Sprint(c.Changed), m})
		}
	}
	if !reflect.DeepEqual(got.Tables, tables) || !reflect.DeepEqual(got.Columns, columns) || got.Table != table {
		t.Fatalf("%s: the page shows\n%v\n%v (table %s)\nworldfs diff prints\n%v\n%v", what, got.Tables, got.Columns, got.Table, tables, columns)
	}
}

func floats(t *testing.T, ss []string) []float64 {
	t.Helper()
	out := make([]float64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// fetch GETs path of the server and returns its body; it must answer 200.
func fetch(t *testing.T, f *fixture, path string) string {
	t.Helper()
	resp, err := f.http.Client().Get(f.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, data)
	}
	return string(data)
}

// sqlCSV is what worldfs sql --format csv prints for q on (world, run):
// sql.Run on views built apart from the server's.
func sqlCSV(t *testing.T, b bucket.Bucket, world, run, q string) string {
	t.Helper()
	ctx := enginetest.Context(t)
	s, err := sql.Build(ctx, b, world, sql.Options{Run: run, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out strings.Builder
	if err := sql.Run(ctx, db, q, sql.FormatCSV, &out, nil); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// sqlParquet is the file worldfs sql --out FILE.parquet writes for q.
func sqlParquet(t *testing.T, b bucket.Bucket, world, run, q string) string {
	t.Helper()
	ctx := enginetest.Context(t)
	s, err := sql.Build(ctx, b, world, sql.Options{Run: run, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "want.parquet")
	if err := sql.Export(ctx, s, q, path, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	return path
}

func parquetRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	rows, err := sql.ReadRows(enginetest.Context(t), path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}
