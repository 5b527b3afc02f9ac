package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
	"github.com/worldfs/worldfs/ui"
)

func uiSpec(env Env) Bench {
	var url, world, worlds, run, dir *string
	var requests *int
	return benchSpec[*uiBench]{
		name: "ui",
		summary: "measure the web interface's server-side time per page and endpoint (first request, then median, p99 and max of repeats): " +
			"worlds, a run's timeline, rows per tick (the whole run and zoomed), older commit events, a tick's page and points, a scrubber step to the next tick, an entity's history, " +
			"two ticks compared (and a fork against its parent), a query, facts; with --worlds, the sweep page of the worlds a glob matches",
		example: "worldfs bench ui --bucket ./worldfs-data --world w1 --requests 50\n" +
			"  worldfs bench ui --bucket /var/tmp/bench-sweep/bucket --worlds 'sweep-[0-9]*' --requests 30   # the sweep page of bench sweep's 100 forks",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to measure (required without --worlds)")
			worlds = fs.String("worlds", "", "a `GLOB` of world ids: also measure the sweep page of the worlds it matches (alone without --world)")
			run = fs.String("run", "main", "run")
			requests = fs.Int("requests", 30, "repeats of each request after the first")
			dir = fs.String("dir", "", "work directory for the views' fragment lists and caches (default: a temporary one, removed after)")
		},
		check: func(args []string) error {
			if len(args) != 0 || (*world == "" && *worlds == "") || *requests < 1 {
				return usagef("bench ui takes no arguments, --world or --worlds (or both), and a positive --requests")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenExisting(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*uiBench, error) {
			d, remove, err := benchDir(*dir, "worldfs-bench-ui-")
			if err != nil {
				return nil, err
			}
			defer remove()
			opts, done, err := env.UIOptions(b, *url, d, 0)
			if err != nil {
				return nil, err
			}
			defer done()
			return uiVisit(ctx, opts, *world, *worlds, *run, *requests)
		},
		table: func(out io.Writer, res *uiBench) error {
			if res.World != "" {
				fmt.Fprintf(out, "world %s run %s: %d ticks, table %s\n", res.World, res.Run, res.Ticks, res.Table)
			}
			if res.Sweep != "" {
				fmt.Fprintf(out, "sweep %s run %s: %d worlds, %d points of %s\n", res.Sweep, res.Run, res.SweepWorlds, res.SweepPoints, res.SweepOf)
			}
			fmt.Fprintf(out, "%d requests each after the first (server-side time, no network)\n", res.Requests)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "endpoint\tfirst ms\tp50 ms\tp99 ms\tmax ms\tbytes\t")
			for _, e := range res.Steps {
				fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t\n", e.Name, e.FirstMs, e.P50ms, e.P99ms, e.MaxMs, e.Bytes)
			}
			return tw.Flush()
		},
	}.bench()
}

// uiBench is the server-side time of each page and endpoint (uiVisit).
type uiBench struct {
	World    string       `json:"world"`
	Run      string       `json:"run"`
	Ticks    int          `json:"ticks"`
	Table    string       `json:"table"`
	Requests int          `json:"requests_each"`
	Steps    []uiEndpoint `json:"endpoints"`
	// Sweep is the glob of the sweep measured (empty: none): its worlds,
	// the points of its default aggregate (SweepOf: the query) per world
	// per tick.
	Sweep       string `json:"sweep,omitempty"`
	SweepWorlds int    `json:"sweep_worlds,omitempty"`
	SweepPoints int    `json:"sweep_points,omitempty"`
	SweepOf     string `json:"sweep_query,omitempty"`
}

// uiEndpoint is one request's times: the first (which builds the
// views and opens a database), then the median, p99 and max of the
// repeats.
type uiEndpoint struct {
	Name    string  `json:"name"`
	Path    string  `json:"path"`
	FirstMs float64 `json:"first_ms"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	Bytes   int     `json:"bytes"`
}

// uiVisit measures the server's time for each page and JSON endpoint of
// (world, run) (worldSteps), then of the sweep of the worlds glob matches
// (sweepSteps; none if glob is empty, nothing of a world if world is), n
// times each, calling ServeHTTP directly (no network).
//
// What a visit needs to know first (the ticks, the table's columns) is
// asked of a server of its own, closed before the measured one starts, so
// each first request is the first of its kind on a fresh server.
func uiVisit(ctx context.Context, opts ui.Options, world, glob, run string, n int) (*uiBench, error) {
	if n < 1 {
		return nil, fmt.Errorf("bench: %d requests", n)
	}
	res := &uiBench{World: world, Run: run, Requests: n}
	var steps []uiStep
	if world != "" {
		ws, err := worldSteps(ctx, opts, res)
		if err != nil {
			return nil, err
		}
		steps = ws
	}
	if glob != "" {
		ss, err := sweepSteps(ctx, opts, glob, res)
		if err != nil {
			return nil, err
		}
		steps = append(steps, ss...)
	}
	s, err := ui.New(opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for _, st := range steps {
		ep := uiEndpoint{Name: st.name, Path: st.path(0)}
		var rec stats.Recorder
		for i := -1; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p := st.path(i + 1)
			req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1"+p, nil)
			w := httptest.NewRecorder()
			start := time.Now()
			s.ServeHTTP(w, req)
			d := time.Since(start)
			if w.Code != http.StatusOK {
				return nil, fmt.Errorf("bench: %s: %d %s", p, w.Code, strings.TrimSpace(w.Body.String()))
			}
			if i < 0 {
				ep.FirstMs, ep.Bytes = ms(d), w.Body.Len()
				continue
			}
			rec.Add(d)
		}
		sum := rec.Summarize(0)
		ep.P50ms, ep.P99ms, ep.MaxMs = sum.P50ms, sum.P99ms, sum.MaxMs
		res.Steps = append(res.Steps, ep)
	}
	return res, nil
}

// sweepSteps are the sweep page's requests for the worlds glob matches:
// the page, the sweep endpoint as the page first asks it (the default
// aggregate: the first request builds the views of every world and runs
// the query, the repeats find both kept), and each aggregate in turn (a
// person trying them: each a query the first time, then remembered).
func sweepSteps(ctx context.Context, opts ui.Options, glob string, res *uiBench) ([]uiStep, error) {
	s, err := ui.New(opts)
	if err != nil {
		return nil, err
	}
	v := url.Values{"worlds": {glob}, "run": {res.Run}}
	var sw ui.Sweep
	err = uiGet(ctx, s, "/api/sweep?"+v.Encode(), &sw)
	s.Close()
	if err != nil {
		return nil, err
	}
	res.Sweep, res.SweepWorlds, res.SweepPoints, res.SweepOf = glob, len(sw.Worlds), len(sw.Series.Rows), sw.Series.SQL
	return []uiStep{
		{"sweep page", func(int) string { return "/sweep?" + v.Encode() }},
		{"sweep", func(int) string { return "/api/sweep?" + v.Encode() }},
		{"sweep, each aggregate in turn", func(i int) string {
			a := url.Values{"worlds": {glob}, "run": {res.Run}, "table": {sw.Table}, "column": {sw.Column}, "agg": {ui.SweepAggs[(i+1)%len(ui.SweepAggs)]}}
			return "/api/sweep?" + a.Encode()
		}},
	}, nil
}

// worldSteps are the requests of a visit to res.World's run res.Run: the
// pages, the worlds list, the timeline, the tables, rows per tick (the
// whole run, then 1,000 ticks of it as a zoom asks), the page of commit
// events before the timeline's, one tick's page and points, a scrubber
// step (each request the next tick, from the middle of the run), an
// entity's history (the lowest entity_id at the head, through the whole
// run), a comparison of adjacent ticks, a query and the facts. The
// scrubber's table is particle if the run has one, else its first view.
func worldSteps(ctx context.Context, opts ui.Options, res *uiBench) ([]uiStep, error) {
	world, run := res.World, res.Run
	w := url.PathEscape(world)
	rq := "?run=" + url.QueryEscape(run)
	s, err := ui.New(opts)
	if err != nil {
		return nil, err
	}
	var tl ui.Timeline
	var cols ui.Result
	err = uiGet(ctx, s, "/api/w/"+w+"/timeline"+rq, &tl)
	if err == nil {
		err = uiGet(ctx, s, "/api/w/"+w+"/tables"+rq, &cols)
	}
	ticks := tl.TickNumbers()
	if err == nil && (len(ticks) == 0 || len(tl.Views) == 0) {
		err = fmt.Errorf("bench: run %s of %s has no visible tick or no table", run, world)
	}
	res.Ticks = len(ticks)
	// The entity followed: the lowest entity_id at the head (the oldest
	// there, whose history is the longest).
	entity := ""
	if err == nil {
		res.Table = tl.Views[0]
		if slices.Contains(tl.Views, "particle") {
			res.Table = "particle"
		}
		if slices.ContainsFunc(cols.Rows, func(r []string) bool { return r[0] == res.Table && r[1] == "entity_id" }) {
			var ids ui.Result
			q := fmt.Sprintf("SELECT min(entity_id) FROM %s(%d)", ident(res.Table+"_at"), ticks[len(ticks)-1])
			err = uiGet(ctx, s, "/api/w/"+w+"/query"+rq+"&q="+url.QueryEscape(q), &ids)
			if err == nil && len(ids.Rows) == 1 && ids.Rows[0][0] != "NULL" {
				entity = ids.Rows[0][0]
			}
		}
	}
	s.Close()
	if err != nil {
		return nil, err
	}
	var parent *index.State
	own, _, err := index.Load(ctx, opts.Bucket, world)
	if err == nil && own.World.Parent != "" {
		parent, _, err = index.Load(ctx, opts.Bucket, own.World.Parent)
	}
	if err != nil {
		return nil, err
	}
	var numeric []string
	for _, r := range cols.Rows {
		if r[0] == res.Table && r[1] != "tick" && r[1] != "entity_id" && (strings.Contains(r[2], "INT") || r[2] == "DOUBLE" || r[2] == "FLOAT") {
			numeric = append(numeric, r[1])
		}
	}
	x, y := "", ""
	switch {
	case slices.Contains(numeric, "position_x") && slices.Contains(numeric, "position_y"):
		x, y = "position_x", "position_y"
	case len(numeric) >= 2:
		x, y = numeric[0], numeric[1]
	}
	tickPath := func(t int64) string {
		v := url.Values{"run": {run}, "table": {res.Table}, "tick": {fmt.Sprint(t)}, "limit": {"50"}}
		if x != "" {
			v.Set("x", x)
			v.Set("y", y)
		}
		return "/api/w/" + w + "/tick?" + v.Encode()
	}
	mid := len(ticks) / 2
	// The registry: what a person's visit asks, in the order a visit asks it.
	steps := []uiStep{
		{"worlds page", func(int) string { return "/" }},
		{"worlds", func(int) string { return "/api/worlds" }},
		{"run page", func(int) string { return "/w/" + w + rq }},
		{"timeline", func(int) string { return "/api/w/" + w + "/timeline" + rq }},
		{"tables", func(int) string { return "/api/w/" + w + "/tables" + rq }},
		{"rows per tick", func(int) string { return "/api/w/" + w + "/counts" + rq }},
		{"rows per tick, zoomed", func(i int) string { // 1,000 ticks about the middle, moving on
			from := ticks[(mid+i)%len(ticks)] - 500
			return "/api/w/" + w + "/counts" + rq + fmt.Sprintf("&from=%d&to=%d", from, from+999)
		}},
		{"older events", func(int) string {
			return "/api/w/" + w + "/events" + rq + fmt.Sprintf("&before=%d", max(tl.LogFrom, 1))
		}},
		{"tick", func(int) string { return tickPath(ticks[mid]) }},
		{"scrubber step", func(i int) string { return tickPath(ticks[(mid+1+i)%len(ticks)]) }},
		{"compare adjacent ticks", func(i int) string {
			v := url.Values{"run": {run}, "table": {res.Table}, "a": {fmt.Sprint(ticks[(mid+i)%len(ticks)])},
				"b": {fmt.Sprint(ticks[(mid+i+1)%len(ticks)])}, "limit": {"50"}}
			if x != "" {
				v.Set("x", x)
				v.Set("y", y)
			}
			return "/api/w/" + w + "/compare?" + v.Encode()
		}},
		{"sql page", func(int) string { return "/w/" + w + "/sql" + rq }},
		{"query", func(int) string {
			return "/api/w/" + w + "/query" + rq + "&q=" + url.QueryEscape("SELECT count(*) FROM "+ident(res.Table))
		}},
		{"facts page", func(int) string { return "/w/" + w + "/facts" + rq }},
		{"facts", func(int) string { return "/api/w/" + w + "/facts" + rq }},
	}
	if entity != "" {
		// One click from a row to its history: the entity page, then its
		// every row through the lineage.
		v := url.Values{"run": {run}, "table": {res.Table}, "id": {entity}}
		steps = slices.Insert(steps, slices.IndexFunc(steps, func(st uiStep) bool { return st.name == "compare adjacent ticks" }),
			uiStep{"entity page", func(int) string { return "/w/" + w + "/entity?" + v.Encode() }},
			uiStep{"trajectory", func(int) string { return "/api/w/" + w + "/entity?" + v.Encode() }})
	}
	if p := own.World; parent != nil {
		// A fork against its parent at a tick both publish, the newest
		// first, then back to the fork point.
		hi := ticks[len(ticks)-1]
		if r, ok := parent.Run(p.ForkRun); ok {
			hi = min(hi, r.Head)
		}
		at := func(i int) string { return fmt.Sprint(max(hi-int64(i), min(p.ForkTick, hi))) }
		steps = slices.Insert(steps, slices.IndexFunc(steps, func(st uiStep) bool { return st.name == "sql page" }), uiStep{
			"compare with the parent", func(i int) string {
				v := url.Values{"run": {run}, "table": {res.Table}, "a": {at(i)}, "vs": {p.Parent}, "vsrun": {p.ForkRun}, "b": {at(i)}, "limit": {"50"}}
				if x != "" {
					v.Set("x", x)
					v.Set("y", y)
				}
				return "/api/w/" + w + "/compare?" + v.Encode()
			}})
	}
	return steps, nil
}

// uiGet asks s for path and decodes its JSON answer into v.
func uiGet(ctx context.Context, s http.Handler, path string, v any) error {
	req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1"+path, nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("bench: %s: %d %s", path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return json.Unmarshal(rec.Body.Bytes(), v)
}

// uiStep is one request of a visit, the ith repeat's path.
type uiStep struct {
	name string
	path func(i int) string
}
