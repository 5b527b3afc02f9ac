package ui

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// fixture is a small demo-like bucket: world w (particles to tick 12,
// two facts, an evaluation receipt of tick 8) and its fork f (from tick 6,
// run to 9), served by a Server.
type fixture struct {
	b    bucket.Bucket
	dir  string // the bucket's directory
	srv  *Server
	http *httptest.Server
}

const head = 12

func newFixture(t *testing.T, opts ...func(*Options)) *fixture {
	t.Helper()
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "w", 8)
	if _, err := w.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil {
		t.Fatal(err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := engine.PinSubject(s, "main", 8, engine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Evaluate(ctx, engine.Evaluation{ID: "ev", Subject: sub, Contract: engine.GraderContract{GraderID: "g", Implementation: "1"}},
		func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "c", Verdict: engine.Pass}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, w, head)
	enginetest.Fork(t, b, "w", "f", 6, 9)
	return serve(t, b, dir, opts...)
}

func serve(t *testing.T, b bucket.Bucket, dir string, opts ...func(*Options)) *fixture {
	t.Helper()
	o := Options{Bucket: b, Views: sql.Options{Dir: t.TempDir()}}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &fixture{b: b, dir: dir, srv: srv, http: hs}
}

// get asks the server for path and decodes its JSON into v; it returns
// the status.
func (f *fixture) get(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := f.http.Client().Get(f.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, data)
		}
	}
	if e, ok := v.(*apiError); ok && resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, e); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, data)
		}
	}
	return resp.StatusCode
}

type apiError struct {
	Error string `json:"error"`
}

// want is worldfs sql's answer to q on (world, run): views of its own,
// built and opened apart from the server's, in csv (the values as DuckDB
// renders them).
func want(t *testing.T, b bucket.Bucket, world, run, q string) *Result {
	t.Helper()
	ctx := enginetest.Context(t)
	s, err := sql.Build(ctx, b, world, sql.Options{Run: run, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return answer(t, s, q)
}

// wantSession is worldfs sql's answer to q in a session of several
// worlds (worldfs sql --world A --world B), each on its run.
func wantSession(t *testing.T, b bucket.Bucket, q string, sides ...Side) *Result {
	t.Helper()
	ctx := enginetest.Context(t)
	var scripts []*sql.Script
	for _, s := range sides {
		sc, err := sql.Build(ctx, b, s.World, sql.Options{Run: s.Run, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, sc)
	}
	joined, err := sql.Join(scripts...)
	if err != nil {
		t.Fatal(err)
	}
	return answer(t, joined, q)
}

// answer is q's result on views opened from script s, as worldfs sql
// prints it in csv.
func answer(t *testing.T, s *sql.Script, q string) *Result {
	t.Helper()
	ctx := enginetest.Context(t)
	db, err := sql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out bytes.Buffer
	if err := sql.Run(ctx, db, q, sql.FormatCSV, &out, nil); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return &Result{SQL: q, Columns: recs[0], Rows: append([][]string{}, recs[1:]...)}
}

func sameResult(t *testing.T, what string, got, exp *Result) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no result", what)
	}
	if got.SQL != exp.SQL || !reflect.DeepEqual(got.Columns, exp.Columns) || !reflect.DeepEqual(got.Rows, exp.Rows) || got.Truncated {
		t.Fatalf("%s: the server answered\n%s\n%v\n%v\nworldfs sql answers\n%s\n%v\n%v", what, got.SQL, got.Columns, got.Rows, exp.SQL, exp.Columns, exp.Rows)
	}
	if len(exp.Rows) == 0 {
		t.Fatalf("%s: no rows: the fixture should give some", what)
	}
}

// Every JSON endpoint answers what worldfs sql answers to the same
// question (through views built apart), or what the catalog records.
func TestEndpointsAnswerAsSQLAndTheCatalog(t *testing.T) {
	f := newFixture(t)
	ctx := enginetest.Context(t)

	// Worlds: as the catalogs record them.
	var ws []WorldInfo
	if code := f.get(t, "/api/worlds", &ws); code != 200 {
		t.Fatalf("/api/worlds: %d", code)
	}
	var exp []WorldInfo
	for _, id := range []string{"f", "w"} {
		st, _, err := index.Load(ctx, f.b, id)
		if err != nil {
			t.Fatal(err)
		}
		size, err := liveBytes(st)
		if err != nil {
			t.Fatal(err)
		}
		exp = append(exp, worldInfo(st, size))
	}
	if !reflect.DeepEqual(ws, exp) {
		t.Fatalf("/api/worlds:\n%+v\nthe catalogs:\n%+v", ws, exp)
	}
	if ws[0].Parent != "w" || *ws[0].ForkTick != 6 || ws[1].Runs[0].Head != head || ws[1].LastPublishUnixMs == 0 {
		t.Fatalf("worlds: %+v", ws)
	}

	// The timeline: every visible tick with its publish time (the fork's
	// inherited ticks first), and the log's other commits.
	for _, world := range []string{"w", "f"} {
		var tl Timeline
		if code := f.get(t, "/api/w/"+world+"/timeline", &tl); code != 200 {
			t.Fatalf("timeline of %s: %d", world, code)
		}
		v, err := index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
			s, _, err := index.Load(ctx, f.b, w)
			return s, err
		}, world, "main")
		if err != nil {
			t.Fatal(err)
		}
		var ticks [][2]int64
		v.Ticks(math.MinInt64, math.MaxInt64, func(r index.TickRef) bool {
			ticks = append(ticks, [2]int64{r.Tick.Tick, r.PublishedUnixMs})
			return true
		})
		var numbers []int64
		for _, tk := range ticks {
			numbers = append(numbers, tk[0])
		}
		if !reflect.DeepEqual(tl.Published, ticks) || !reflect.DeepEqual(tl.TickNumbers(), numbers) || tl.Ticks != len(ticks) || len(ticks) == 0 {
			t.Fatalf("timeline of %s: %d ticks %v published %v, the catalog's %v", world, tl.Ticks, tl.Spans, tl.Published, ticks)
		}
		// A server sampling 4 publish times: every third tick of 13, and
		// the newest; 10 of f.
		g := serve(t, f.b, f.dir)
		g.srv.timePoints = 4
		var sampled Timeline
		g.get(t, "/api/w/"+world+"/timeline", &sampled)
		var some [][2]int64
		for i, tk := range ticks {
			if i%((len(ticks)+3)/4) == 0 || i == len(ticks)-1 {
				some = append(some, tk)
			}
		}
		if !reflect.DeepEqual(sampled.Published, some) || len(some) > 5 || !reflect.DeepEqual(sampled.Spans, tl.Spans) {
			t.Fatalf("timeline of %s, 4 times: %v, want %v", world, sampled.Published, some)
		}
		// Read backward, they are what reading the log forward gives.
		tip := v.Segments[len(v.Segments)-1].State.Seq
		exp := logEvents(t, f.b, world, tip)
		if !reflect.DeepEqual(tl.Events, exp) || tl.LogFrom != 1 {
			t.Fatalf("events of %s (from %d):\n%+v\nthe log's:\n%+v", world, tl.LogFrom, tl.Events, exp)
		}
		var got []string
		for _, e := range tl.Events {
			got = append(got, e.Kind)
		}
		if world == "w" && !strings.Contains(strings.Join(got, " "), "claim.complete") {
			t.Fatalf("events of w lack the facts' claims: %v", got)
		}
	}

	// Tables, rows per tick, a tick's page, count and points, the query
	// box, facts and receipts: worldfs sql's answers.
	var tl Timeline
	f.get(t, "/api/w/w/timeline", &tl)
	var res Result
	if code := f.get(t, "/api/w/w/tables", &res); code != 200 {
		t.Fatal(code)
	}
	sameResult(t, "tables", &res, want(t, f.b, "w", "main", TablesSQL(tl.Views)))
	sameCounts(t, f, "w", "main", tl.Views, "")

	for _, c := range []struct {
		world string
		q     TickQuery
	}{
		{"w", TickQuery{Table: "particle", Tick: 10, Limit: 7, Offset: 3, Order: "position_y", Desc: true, X: "position_x", Y: "position_y"}},
		{"w", TickQuery{Table: "emitter", Tick: head, Limit: 100}},
		{"f", TickQuery{Table: "particle", Tick: 4, Limit: 5, X: "velocity_x", Y: "position_y"}}, // inherited from w
		{"f", TickQuery{Table: "particle", Tick: 9, Limit: 5, Order: "entity_id"}},
	} {
		vals := url.Values{"table": {c.q.Table}, "tick": {fmt.Sprint(c.q.Tick)}, "limit": {fmt.Sprint(c.q.Limit)}, "offset": {fmt.Sprint(c.q.Offset)},
			"order": {c.q.Order}, "x": {c.q.X}, "y": {c.q.Y}}
		if c.q.Desc {
			vals.Set("desc", "1")
		}
		var tp TickPage
		if code := f.get(t, "/api/w/"+c.world+"/tick?"+vals.Encode(), &tp); code != 200 {
			t.Fatalf("tick %+v: %d", c.q, code)
		}
		sameResult(t, "tick page", tp.Page, want(t, f.b, c.world, "main", c.q.PageSQL()))
		if pub := publishedAt(t, f, c.world, c.q.Tick); tp.PublishedUnixMs != pub || pub == 0 {
			t.Fatalf("tick %d of %s: published %d, the catalog says %d", c.q.Tick, c.world, tp.PublishedUnixMs, pub)
		}
		n := want(t, f.b, c.world, "main", c.q.CountSQL())
		if fmt.Sprint(tp.Total) != n.Rows[0][0] || tp.Total == 0 {
			t.Fatalf("tick %+v: total %d, worldfs sql counts %s", c.q, tp.Total, n.Rows[0][0])
		}
		if c.q.X != "" {
			sameResult(t, "tick points", tp.Points, want(t, f.b, c.world, "main", c.q.PointsSQL()))
		} else if tp.Points != nil {
			t.Fatalf("points without x and y: %+v", tp.Points)
		}
	}

	q := "SELECT tick, count(*) AS n, avg(position_y) AS y FROM particle GROUP BY tick ORDER BY tick"
	res = Result{}
	if code := f.get(t, "/api/w/f/query?q="+url.QueryEscape(q), &res); code != 200 {
		t.Fatal(code)
	}
	sameResult(t, "query", &res, want(t, f.b, "f", "main", q))

	var facts Facts
	if code := f.get(t, "/api/w/w/facts", &facts); code != 200 {
		t.Fatal(code)
	}
	sameResult(t, "facts", facts.Facts, want(t, f.b, "w", "main", FactsSQL))
	sameResult(t, "receipts", facts.Receipts, want(t, f.b, "w", "main", ReceiptsSQL))
	r := facts.Receipts
	if i := indexOf(r.Columns, "graded_tick"); i < 0 || r.Rows[0][i] != "8" || r.Rows[0][indexOf(r.Columns, "subject_world")] != "w" {
		t.Fatalf("the receipt does not name the tick it graded (8): %v %v", r.Columns, r.Rows)
	}

	// Bad requests name what was wrong.
	for path, say := range map[string]string{
		"/api/w/w/tick?table=nosuch&tick=1":             `table "nosuch" is not a view`,
		"/api/w/w/tick?table=particle":                  "tick is required",
		"/api/w/w/tick?table=particle&tick=x":           `tick="x" is not an integer`,
		"/api/w/w/tick?table=particle&tick=1&x=a":       "give x and y",
		"/api/w/w/tick?table=particle&tick=1&limit=0":   "limit is 1 to",
		"/api/w/w/query?q=SELECT+nosuch+FROM+particle":  "nosuch",
		"/api/w/w/query?q=":                             "q (the query) is empty",
		"/api/w/nosuch/timeline":                        "world nosuch does not exist",
		"/api/w/w/timeline?run=no%20such":               "run",
		"/api/w/w/tick?table=particle&tick=1&order=bad": "bad",
	} {
		var e apiError
		code := f.get(t, path, &e)
		if code/100 != 4 || !strings.Contains(e.Error, say) {
			t.Errorf("%s: %d %q, want a 4xx saying %q", path, code, e.Error, say)
		}
	}

	// The pages answer, naming their world; the vendored chart library
	// and its license are served.
	for _, p := range []string{"/", "/w/w?tick=3", "/w/f/sql?q=SELECT+1", "/w/w/facts", "/static/app.js", "/static/vendor/uplot/uPlot.iife.min.js", "/static/vendor/uplot/LICENSE"} {
		resp, err := f.http.Client().Get(f.http.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (strings.HasPrefix(p, "/w/") && !strings.Contains(string(data), `data-world="`+p[3:4]+`"`)) {
			t.Errorf("%s: %d\n%s", p, resp.StatusCode, data)
		}
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// The query box runs only what the gate of worldfs sql admits: no COPY,
// no ATTACH, no file read, no setting; nothing is written.
func TestQueryBoxRefusesWrites(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "out.csv")
	for _, q := range []string{
		"COPY (SELECT 1) TO '" + out + "'",
		"COPY particle TO '" + filepath.Join(f.dir, "x.parquet") + "'",
		"ATTACH '" + filepath.Join(t.TempDir(), "x.db") + "' AS x",
		"SELECT * FROM read_csv('/etc/passwd')",
		"FROM '/etc/passwd'",
		"INSTALL httpfs",
		"SET enable_external_access = true",
		"SELECT 1; COPY (SELECT 1) TO '" + out + "'",
		"CREATE TABLE t AS SELECT 1",
	} {
		var e apiError
		code := f.get(t, "/api/w/w/query?q="+url.QueryEscape(q), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error, "refused") {
			t.Errorf("%s: %d %q, want 400 refused", q, code, e.Error)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused COPY wrote %s: %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "x.parquet")); !os.IsNotExist(err) {
		t.Fatalf("a refused COPY wrote into the bucket: %v", err)
	}
}

// Without a token the server answers only loopback names; with one,
// every request needs it (?token= sets a cookie the pages then carry).
func TestTokenRequiredOffLoopback(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Token = "s3cret" })
	client := f.http.Client()
	status := func(path string, hdr map[string]string) (int, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.http.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp
	}
	for _, p := range []string{"/", "/api/worlds", "/api/w/w/query?q=SELECT+1", "/static/app.js", "/w/w", "/?token=wrong"} {
		if code, _ := status(p, nil); code != http.StatusForbidden {
			t.Errorf("%s without the token: %d, want 403", p, code)
		}
	}
	code, resp := status("/api/worlds?token=s3cret", nil)
	var cookie *http.Cookie
	name := TokenCookie(strings.TrimPrefix(f.http.URL, "http://"))
	if !strings.HasPrefix(name, "worldfs_ui_token_") || len(name) == len("worldfs_ui_token_") {
		t.Fatalf("the cookie's name %q does not hold the port", name)
	}
	for _, c := range resp.Cookies() {
		if c.Name == name {
			cookie = c
		}
	}
	if code != 200 || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("?token=: %d, cookie %v", code, cookie)
	}
	if code, _ := status("/api/worlds", map[string]string{"Cookie": name + "=s3cret"}); code != 200 {
		t.Errorf("with the cookie: %d", code)
	}
	if code, _ := status("/api/worlds", map[string]string{"Cookie": name + "=s3cre"}); code != 403 {
		t.Errorf("with a wrong cookie: %d", code)
	}
	if code, _ := status("/api/worlds", map[string]string{"Cookie": "worldfs_ui_token_1=s3cret"}); code != 403 {
		t.Errorf("with the cookie of a server on another port: %d", code)
	}
	if code, _ := status("/api/worlds", map[string]string{"Authorization": "token s3cret"}); code != 200 {
		t.Errorf("with the header: %d", code)
	}

	// No token: a request addressed to another name is refused (a page
	// elsewhere cannot reach the server through a name it points here).
	open := serve(t, f.b, f.dir)
	for host, code := range map[string]int{"127.0.0.1:1": 200, "localhost": 200, "[::1]:80": 200, "evil.example:80": 403, "10.0.0.1": 403} {
		req, _ := http.NewRequest("GET", open.http.URL+"/api/worlds", nil)
		req.Host = host
		resp, err := open.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, code)
		}
	}
	for addr, loop := range map[string]bool{"127.0.0.1:0": true, "localhost:8080": true, "[::1]:0": true, "0.0.0.0:8080": false, ":8080": false, "192.168.1.2:80": false} {
		if IsLoopback(addr) != loop {
			t.Errorf("IsLoopback(%s) = %v", addr, !loop)
		}
	}
}

// A slow query holds up no other page, even of the same world, and a page
// that aborts its fetch cancels the query on the server.
func TestSlowQueryIsCancelledAndBlocksNothing(t *testing.T) {
	const slow = "SELECT count(*) FROM range(1000000) a, range(10000000) b WHERE (a.range * b.range) % 7 = 3" // 10^13 pairs
	started := make(chan struct{})
	f := newFixture(t)
	f.srv.queryStarted = func(q string) {
		if q == slow {
			close(started)
		}
	}
	// The handler's end, seen from the server's side.
	ended := make(chan error, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.srv.ServeHTTP(w, r)
		if r.URL.Query().Get("q") == slow {
			ended <- r.Context().Err()
		}
	}))
	defer hs.Close()
	f.http = hs
	ctx, cancel := context.WithCancel(enginetest.Context(t))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/api/w/w/query?q="+url.QueryEscape(slow), nil)
	go func() {
		resp, err := f.http.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	// While it runs: the worlds page, a tick of the same world, a query.
	var tp TickPage
	if code := f.get(t, "/api/w/w/tick?table=particle&tick=5", &tp); code != 200 || tp.Total == 0 {
		t.Fatalf("a tick while a slow query runs: %d %+v", code, tp)
	}
	var res Result
	if code := f.get(t, "/api/w/w/query?q=SELECT+42", &res); code != 200 {
		t.Fatalf("a query while a slow query runs: %d", code)
	}
	select {
	case <-ended:
		t.Fatal("the other requests were answered only once the slow query had ended")
	default:
	}
	cancel() // the page aborts its fetch
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the slow query's handler ended with its request still live")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the slow query was not cancelled 30 s after its fetch was aborted")
	}
}

// A page shows the world as it is now: after more ticks, the timeline,
// rows per tick and the head tick's rows include them (the views are
// built again for the new catalog state, and what they remembered goes
// with them).
func TestPagesFollowNewTicks(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "w", 5)
	f := serve(t, b, dir, func(o *Options) { o.Freshness = time.Nanosecond })
	check := func(headTick int64) {
		t.Helper()
		var tl Timeline
		f.get(t, "/api/w/w/timeline", &tl)
		if n := len(tl.Spans); n == 0 || tl.Spans[n-1][1] != headTick || tl.Published[len(tl.Published)-1][0] != headTick {
			t.Fatalf("timeline ends at %v (published %v), want tick %d", tl.Spans, tl.Published, headTick)
		}
		sameCounts(t, f, "w", "main", tl.Views, "")
		var tp TickPage
		if code := f.get(t, fmt.Sprintf("/api/w/w/tick?table=particle&tick=%d", headTick), &tp); code != 200 || tp.Total == 0 {
			t.Fatalf("head tick %d: %d, %d rows", headTick, code, tp.Total)
		}
	}
	check(5)
	enginetest.Run(t, w, 8)
	check(8)
}

// Compare answers what worldfs sql answers: <table>_diff of two ticks of
// a run, and worldfs_diff of a fork against its parent in a session of
// both; the points of each side for the overlaid plot.
func TestCompareAnswersAsSQL(t *testing.T) {
	f := newFixture(t)
	for _, q := range []CompareQuery{
		{Table: "particle", A: Side{"w", "main", 9}, B: Side{"w", "main", 12}, Limit: 10, Offset: 5, X: "position_x", Y: "position_y"},
		{Table: "particle", A: Side{"w", "main", 3}, B: Side{"w", "main", 2}, Limit: 100},
		{Table: "particle", A: Side{"f", "main", 9}, B: Side{"w", "main", 12}, Limit: 7, X: "velocity_x", Y: "position_y"},
	} {
		vals := url.Values{"run": {q.A.Run}, "a": {fmt.Sprint(q.A.Tick)}, "b": {fmt.Sprint(q.B.Tick)}, "table": {q.Table},
			"limit": {fmt.Sprint(q.Limit)}, "offset": {fmt.Sprint(q.Offset)}, "x": {q.X}, "y": {q.Y}}
		if q.across() {
			vals.Set("vs", q.B.World)
			vals.Set("vsrun", q.B.Run)
		}
		var c Comparison
		if code := f.get(t, "/api/w/"+q.A.World+"/compare?"+vals.Encode(), &c); code != 200 {
			t.Fatalf("compare %+v: %d", q, code)
		}
		ask := func(sqlText string) *Result {
			if q.across() {
				return wantSession(t, f.b, sqlText, q.A, q.B)
			}
			return want(t, f.b, q.A.World, q.A.Run, sqlText)
		}
		sameResult(t, "compare counts", c.Counts, ask(q.CountsSQL()))
		sameResult(t, "compare rows", c.Rows, ask(q.RowsSQL()))
		if q.X != "" {
			sameResult(t, "points of a", c.PointsA, ask(q.PointsSQL(q.A)))
			sameResult(t, "points of b", c.PointsB, ask(q.PointsSQL(q.B)))
		}
	}
	for path, say := range map[string]string{
		"/api/w/w/compare?a=1&table=particle":                     "a and b",
		"/api/w/w/compare?a=1&b=2&table=nosuch":                   `table "nosuch" is not a view of both sides`,
		"/api/w/w/compare?a=1&b=2&table=particle&vsrun=other":     "not two runs of one world",
		"/api/w/f/compare?a=1&b=2&table=particle&vs=nosuch":       "world nosuch does not exist",
		"/api/w/w/compare?a=1&b=2&table=particle&limit=100000":    "limit is 1 to",
		"/api/w/w/compare?a=1&b=2&table=particle&x=position_x":    "give x and y",
		"/api/w/w/compare?a=x&b=2&table=particle":                 `a="x" is not an integer`,
		"/api/w/w/compare?a=1&b=2&table=particle&x=nosuch&y=tick": "nosuch",
	} {
		var e apiError
		if code := f.get(t, path, &e); code/100 != 4 || !strings.Contains(e.Error, say) {
			t.Errorf("%s: %d %q, want a 4xx saying %q", path, code, e.Error, say)
		}
	}
}

// Requests that find a world's views missing or stale at the same time
// build them once between them.
func TestConcurrentRequestsBuildTheViewsOnce(t *testing.T) {
	f := newFixture(t)
	before := sql.Builds()
	const n = 8
	codes := make(chan int, n)
	for range n {
		go func() {
			resp, err := f.http.Client().Get(f.http.URL + "/api/w/w/tick?table=particle&tick=4")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range n {
		if c := <-codes; c != 200 {
			t.Fatalf("a request answered %d", c)
		}
	}
	if built := sql.Builds() - before; built != 1 {
		t.Fatalf("%d concurrent requests built the views %d times, want once", n, built)
	}
}

// A result past MaxResultBytes is cut to whole rows that worldfs sql's
// answer begins with, and marked truncated; the timeline reads the
// log's newest slots backward, at most MaxLogEntries entries or until it
// holds MaxEvents events, and a page asks for older ones.
func TestBoundsOfResultsAndLog(t *testing.T) {
	f := newFixture(t)
	g := serve(t, f.b, f.dir, func(o *Options) { o.MaxResultBytes = 3000; o.MaxLogEntries = 4 })
	q := "SELECT * FROM particle ORDER BY tick, entity_id"
	var res Result
	if code := g.get(t, "/api/w/w/query?q="+url.QueryEscape(q), &res); code != 200 {
		t.Fatal(code)
	}
	all := want(t, f.b, "w", "main", q)
	if !res.Truncated || len(res.Rows) == 0 || len(res.Rows) >= len(all.Rows) || !reflect.DeepEqual(res.Rows, all.Rows[:len(res.Rows)]) {
		t.Fatalf("truncated %v, %d of %d rows, a prefix: %v", res.Truncated, len(res.Rows), len(all.Rows), len(res.Rows) > 0 && reflect.DeepEqual(res.Rows, all.Rows[:len(res.Rows)]))
	}
	// The timeline reads the slots of the newest 4 entries; older events
	// are asked page by page, until the log's start, and then the
	// timeline holds every event, timed as reading the log forward times
	// them.
	var tl Timeline
	g.get(t, "/api/w/w/timeline", &tl)
	st, _, err := index.Load(enginetest.Context(t), f.b, "w")
	if err != nil {
		t.Fatal(err)
	}
	logAll := logEvents(t, f.b, "w", st.Seq)
	if tl.LogFrom < st.Seq-3 || tl.LogFrom == 1 || !reflect.DeepEqual(kinds(tl.Events), kinds(eventsFrom(logAll, tl.LogFrom))) {
		t.Fatalf("the timeline read the log from %d (the newest 4 of %d): %v; the log's from there: %v", tl.LogFrom, st.Seq, kinds(tl.Events), kinds(eventsFrom(logAll, tl.LogFrom)))
	}
	for from, pages := tl.LogFrom, 0; from > 1; pages++ {
		var p EventPage
		if code := g.get(t, fmt.Sprintf("/api/w/w/events?before=%d", from), &p); code != 200 || p.LogFrom >= from || pages > int(st.Seq) {
			t.Fatalf("events before %d: %d, from %d", from, code, p.LogFrom)
		}
		if exp := kinds(eventsFrom(logAll, p.LogFrom)[:len(eventsFrom(logAll, p.LogFrom))-len(eventsFrom(logAll, from))]); !reflect.DeepEqual(kinds(p.Events), exp) {
			t.Fatalf("events before %d from %d: %v, the log's %v", from, p.LogFrom, kinds(p.Events), exp)
		}
		from = p.LogFrom
	}
	tl = Timeline{}
	g.get(t, "/api/w/w/timeline", &tl)
	if tl.LogFrom != 1 || !reflect.DeepEqual(tl.Events, logAll) {
		t.Fatalf("after paging to the log's start (from %d):\n%+v\nthe log's:\n%+v", tl.LogFrom, tl.Events, logAll)
	}
	// Reading backward stops once it holds MaxEvents events.
	h := serve(t, f.b, f.dir, func(o *Options) { o.MaxEvents = 1 })
	tl = Timeline{}
	h.get(t, "/api/w/w/timeline", &tl)
	if len(tl.Events) == 0 || tl.LogFrom == 1 || !reflect.DeepEqual(kinds(tl.Events), kinds(eventsFrom(logAll, tl.LogFrom))) {
		t.Fatalf("with MaxEvents 1 the timeline read the log from %d: %v", tl.LogFrom, kinds(tl.Events))
	}
	for path, say := range map[string]string{
		"/api/w/w/events":               "before (the sequence to read events before) is required",
		"/api/w/w/events?before=0":      "before (the sequence to read events before) is required",
		"/api/w/nosuch/events?before=3": "world nosuch does not exist",
	} {
		var e apiError
		if code := g.get(t, path, &e); code/100 != 4 || !strings.Contains(e.Error, say) {
			t.Errorf("%s: %d %q, want a 4xx saying %q", path, code, e.Error, say)
		}
	}
}

// publishedAt is when the catalog says tick was published in world's
// view of run main.
func publishedAt(t *testing.T, f *fixture, world string, tick int64) int64 {
	t.Helper()
	v, err := index.OpenView(enginetest.Context(t), func(ctx context.Context, w string) (*index.State, error) {
		s, _, err := index.Load(ctx, f.b, w)
		return s, err
	}, world, "main")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := v.Tick(tick)
	if r.Tick == nil {
		return 0
	}
	return r.PublishedUnixMs
}

// logEvents reads world's log forward from its start to sequence tip,
// as events.
func logEvents(t *testing.T, b bucket.Bucket, world string, tip uint64) []Event {
	t.Helper()
	ctx, stop := context.WithCancel(enginetest.Context(t))
	defer stop()
	out := []Event{}
	var ms int64
	for c, err := range index.Changes(ctx, b, world, 1, time.Second) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := eventOf(c.Seq, &c.Entry, &ms); ok {
			out = append(out, e)
		}
		if c.Seq >= tip {
			break
		}
	}
	return out
}

// eventsFrom returns the events of evs from sequence from on.
func eventsFrom(evs []Event, from uint64) []Event {
	i := 0
	for i < len(evs) && evs[i].Seq < from {
		i++
	}
	return evs[i:]
}

func kinds(evs []Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, fmt.Sprint(e.Seq, " ", e.Kind))
	}
	return out
}

// The run page's tick box takes a point as a person types it: the point
// endpoint resolves it by index.ParseMoment among the run's visible ticks
// (a fork's inherited ones too); a point that names no tick is a 404
// saying why, one that is no point a 400 saying what is.
func TestTickBoxTakesPoints(t *testing.T) {
	f := newFixture(t)
	ctx := enginetest.Context(t)
	v, err := index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		s, _, err := index.Load(ctx, f.b, w)
		return s, err
	}, "w", "main")
	if err != nil {
		t.Fatal(err)
	}
	tick7, _ := v.Tick(7)
	at4 := publishedAt(t, f, "w", 4)
	newestBy := int64(-1) // the newest tick published at or before tick 4 was
	v.Ticks(math.MinInt64, math.MaxInt64, func(r index.TickRef) bool {
		if r.PublishedUnixMs <= at4 {
			newestBy = r.Tick.Tick
		}
		return true
	})
	for _, c := range []struct {
		world, at string
		want      int64
	}{
		{"w", "5", 5}, {"w", "head", head}, {"w", "head~2", head - 2}, {"w", "HEAD~0", head},
		{"w", tick7.CommitToken, 7},
		{"w", time.UnixMilli(at4).UTC().Format(time.RFC3339Nano), newestBy},
		{"w", "now", head}, {"f", "head", 9}, {"f", "head~5", 4}, // 4: inherited from w
	} {
		var got PointTick
		if code := f.get(t, "/api/w/"+c.world+"/point?at="+url.QueryEscape(c.at), &got); code != 200 || got.Tick != c.want {
			t.Errorf("%s@%s: %d, tick %d; want %d", c.world, c.at, code, got.Tick, c.want)
		}
	}
	for _, c := range []struct {
		at   string
		code int
		says string
	}{
		{"2000-01-01 10:00", 404, "no tick of w was published at or before 2000-01-01"},
		{"head~99", 404, "head~99 is before the first tick"},
		{"tomorrow", 400, `tomorrow\" is not a point: give a tick (170), head, head~10`},
	} {
		resp, err := f.http.Client().Get(f.http.URL + "/api/w/w/point?at=" + url.QueryEscape(c.at))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s: %d %s; want %d saying %q", c.at, resp.StatusCode, body, c.code, c.says)
		}
	}
}

// The pages show a table's columns in the order its archetype declares
// them (the views' order): the emitter's rate before its label, although
// label sorts first, in the tick page's columns and in the tables list.
func TestColumnsInTheDeclaredOrder(t *testing.T) {
	f := newFixture(t)
	declared := []string{"entity_id", "tick", "position_x", "position_y", "emitter_rate", "emitter_label"}
	var tp TickPage
	vals := url.Values{"table": {"emitter"}, "tick": {fmt.Sprint(head)}, "limit": {"10"}}
	if code := f.get(t, "/api/w/w/tick?"+vals.Encode(), &tp); code != 200 {
		t.Fatalf("tick page: %d", code)
	}
	if !reflect.DeepEqual(tp.Page.Columns, declared) || len(tp.Page.Rows) == 0 {
		t.Errorf("the emitter's tick page: columns %v (%d rows), want %v", tp.Page.Columns, len(tp.Page.Rows), declared)
	}
	var res Result
	if code := f.get(t, "/api/w/w/tables", &res); code != 200 {
		t.Fatalf("tables: %d", code)
	}
	var cols []string
	for _, r := range res.Rows {
		if r[0] == "emitter" {
			cols = append(cols, r[1])
		}
	}
	if !reflect.DeepEqual(cols, declared) {
		t.Errorf("the tables list gives the emitter's columns as %v, want %v", cols, declared)
	}
}

// sameValues reports whether typed rows (a Result's Values, decoded) are
// the rows worldfs sql prints: NULL as null, a number as the number the
// text reads as, a bool as true or false, any other value as its text.
func sameValues(got [][]any, exp [][]string) bool {
	if len(got) != len(exp) {
		return false
	}
	for i, row := range got {
		if len(row) != len(exp[i]) {
			return false
		}
		for j, v := range row {
			e := exp[i][j]
			switch x := v.(type) {
			case nil:
				if e != "NULL" {
					return false
				}
			case float64:
				if f, err := strconv.ParseFloat(e, 64); err != nil || f != x {
					return false
				}
			case bool:
				if strconv.FormatBool(x) != e {
					return false
				}
			case string:
				if x != e {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// An entity's history comes typed (Result.Values): the rows worldfs sql
// prints for it, through the fork's lineage, numbers as JSON numbers;
// the server's bound on a result cuts it to a prefix of whole rows.
func TestEntityHistoryComesTyped(t *testing.T) {
	f := newFixture(t)
	id := want(t, f.b, "f", "main", "SELECT min(entity_id) FROM particle").Rows[0][0]
	exp := want(t, f.b, "f", "main", TrajectorySQL("particle", id))
	path := "/api/w/f/entity?table=particle&id=" + id
	var res Result
	var vals [][]any
	if code := f.get(t, path, &res); code != 200 || json.Unmarshal(res.Values, &vals) != nil {
		t.Fatalf("%s: %d %s", path, code, res.Values)
	}
	if len(res.Rows) != 0 || !reflect.DeepEqual(res.Columns, exp.Columns) || !sameValues(vals, exp.Rows) || len(vals) < 3 || res.Truncated {
		t.Fatalf("entity %s of f: the server answers\n%v\n%s\nworldfs sql\n%v\n%v", id, res.Columns, res.Values, exp.Columns, exp.Rows)
	}
	if _, ok := vals[0][indexOf(res.Columns, "position_x")].(float64); !ok {
		t.Fatalf("entity %s: position_x comes as %T, not a number", id, vals[0][indexOf(res.Columns, "position_x")])
	}
	g := serve(t, f.b, f.dir, func(o *Options) { o.MaxResultBytes = 400 })
	res, vals = Result{}, nil
	if code := g.get(t, path, &res); code != 200 || json.Unmarshal(res.Values, &vals) != nil {
		t.Fatalf("%s, bound 400: %d %s", path, code, res.Values)
	}
	if !res.Truncated || len(vals) == 0 || len(vals) >= len(exp.Rows) || len(res.Values) > 400+2 || !sameValues(vals, exp.Rows[:len(vals)]) {
		t.Fatalf("bound 400: truncated %v, %d of %d rows in %d bytes: %s", res.Truncated, len(vals), len(exp.Rows), len(res.Values), res.Values)
	}
}

// appendValues writes every value sql.Values gives as JSON that reads
// back as that value: numbers a double holds as numbers, the others as
// DuckDB's text.
func TestAppendValues(t *testing.T) {
	vals := []any{nil, true, int64(-128), int64(7), int64(-9), int64(255), int64(1), int64(4294967295),
		int64(1 << 53), int64(-1 << 53), int64(1<<53 + 1), int64(math.MinInt64), float32(0.1), 0.1, math.Copysign(0, -1),
		1e300, 5e-324, math.NaN(), math.Inf(1), math.Inf(-1), float32(math.Inf(-1)), "a\"b\n\u2028é", ""}
	out := appendValues(nil, vals)
	var got []any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	exp := []any{nil, true, -128.0, 7.0, -9.0, 255.0, 1.0, 4294967295.0, float64(1 << 53), float64(-1 << 53), "9007199254740993",
		"-9223372036854775808", 0.1, 0.1, math.Copysign(0, -1), 1e300, 5e-324, "nan", "inf", "-inf", "-inf", "a\"b\n\u2028é", ""}
	if len(got) != len(exp) {
		t.Fatalf("%s: %d values, want %d", out, len(got), len(exp))
	}
	for i := range exp {
		if got[i] != exp[i] || fmt.Sprint(got[i]) != fmt.Sprint(exp[i]) {
			t.Errorf("value %d (%#v): %s reads as %#v, want %#v", i, vals[i], out, got[i], exp[i])
		}
	}
}

// writeJSON writes a Result's Values as they are, and the response reads
// as encoding/json's of the same Result.
func TestWriteJSONOfValues(t *testing.T) {
	r := &Result{SQL: `FROM "p" WHERE entity_id = '<7>'`, Columns: []string{"tick", "x"}, Rows: [][]string{},
		Values: json.RawMessage(`[[1,0.5],[2,"nan"]]`), Truncated: true, Notes: "a note", ElapsedMs: 1.5}
	rec := httptest.NewRecorder()
	writeJSON(rec, r, nil)
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%s: %v", rec.Body, err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) || !strings.HasSuffix(rec.Body.String(), "]}\n") {
		t.Fatalf("writeJSON wrote\n%s\nencoding/json writes\n%s", rec.Body, want)
	}
}

// valuesJSON writes the rows added as appendValues writes them one after
// another, across batches; past its bound it keeps the whole rows that
// fit, says to stop, and reports them truncated.
func TestValuesJSONAcrossBatches(t *testing.T) {
	const n = 3*valuesBatch + 17
	row := func(i int) []any { return []any{int64(i), float64(i) / 3, fmt.Sprint("r", i)} }
	want := []byte{'['}
	for i := range n {
		if i > 0 {
			want = append(want, ',')
		}
		want = appendValues(want, row(i))
	}
	want = append(want, ']')
	w := newValuesJSON(3, len(want))
	for i := range n {
		if !w.add(row(i)) {
			t.Fatalf("row %d: add says to stop within the bound", i)
		}
	}
	if got, truncated := w.close(); string(got) != string(want) || truncated {
		t.Fatalf("%d rows: %d bytes, truncated %v; want appendValues' %d bytes", n, len(got), truncated, len(want))
	}
	bound := len(want) / 2
	w = newValuesJSON(3, bound)
	added := 0
	for i := range n {
		added++
		if !w.add(row(i)) {
			break
		}
	}
	got, truncated := w.close()
	var rows [][]any
	if err := json.Unmarshal(got, &rows); err != nil || !truncated || len(got) > bound+1 {
		t.Fatalf("bound %d: %d bytes (%v), truncated %v, %d rows added", bound, len(got), err, truncated, added)
	}
	if prefix := want[:len(got)-1]; string(got[:len(got)-1]) != string(prefix) || len(rows) < valuesBatch {
		t.Fatalf("bound %d: %d rows, not appendValues' first rows", bound, len(rows))
	}
}

// A history past the server's bound on a result, longer than a batch of
// valuesJSON, comes back truncated (HTTP 200, the rows that fit), not as
// an error: the scan stops once the formatter passes the bound.
func TestQueryValuesPastTheBound(t *testing.T) {
	f := newFixture(t)
	const bound = 100_000
	g := serve(t, f.b, f.dir, func(o *Options) { o.MaxResultBytes = bound })
	ctx := enginetest.Context(t)
	v, err := g.srv.viewsOf(ctx, "w", "main")
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.srv.queryValues(ctx, v, "SELECT range AS i, range / 3 AS x FROM range(200000)")
	if err != nil {
		t.Fatalf("200,000 rows against a bound of %d bytes: %v", bound, err)
	}
	var rows [][]float64
	if !res.Truncated || len(res.Values) > bound+1 || json.Unmarshal(res.Values, &rows) != nil || len(rows) < 2*valuesBatch {
		t.Fatalf("200,000 rows against a bound of %d bytes: truncated %v, %d bytes", bound, res.Truncated, len(res.Values))
	}
	for i, r := range rows {
		if r[0] != float64(i) || r[1] != float64(i)/3 {
			t.Fatalf("row %d is %v", i, r)
		}
	}
}
