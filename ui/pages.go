package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// assets are the pages (html/template), their script and style, and the
// vendored chart library (assets/vendor, with its license).
//
//go:embed assets
var assets embed.FS

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (s *Server) routes() {
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { s.page(w, r, name) }
	}
	s.mux.HandleFunc("GET /{$}", page("worlds"))
	s.mux.HandleFunc("GET /w/{world}", page("run"))
	s.mux.HandleFunc("GET /w/{world}/sql", page("sql"))
	s.mux.HandleFunc("GET /w/{world}/facts", page("facts"))
	s.mux.HandleFunc("GET /w/{world}/compare", page("compare"))
	s.mux.HandleFunc("GET /w/{world}/entity", page("entity"))
	s.mux.HandleFunc("GET /sweep", page("sweep"))

	s.mux.HandleFunc("GET /api/worlds", func(w http.ResponseWriter, r *http.Request) {
		ws, err := s.worlds(r.Context())
		writeJSON(w, ws, err)
	})
	s.mux.HandleFunc("GET /api/sweep", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.sweep(r.Context(), r.URL.Query())
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/timeline", func(w http.ResponseWriter, r *http.Request) {
		tl, err := s.timeline(r.Context(), r.PathValue("world"), runOf(r))
		writeJSON(w, tl, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/events", func(w http.ResponseWriter, r *http.Request) {
		before, err := intParam(r.URL.Query(), "before", -1)
		if err == nil && before < 1 {
			err = badRequest(fmt.Errorf("before (the sequence to read events before) is required, 1 or more"))
		}
		var page *EventPage
		if err == nil {
			page, err = s.eventsBefore(r.Context(), r.PathValue("world"), uint64(before))
		}
		writeJSON(w, page, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/counts", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.counts(r.Context(), r.PathValue("world"), runOf(r), r.URL.Query())
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/tables", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.tables(r.Context(), r.PathValue("world"), runOf(r))
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/tick", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.tick(r.Context(), r.PathValue("world"), runOf(r), r.URL.Query())
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/point", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.point(r.Context(), r.PathValue("world"), runOf(r), r.URL.Query().Get("at"))
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/query", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if strings.TrimSpace(q) == "" {
			writeJSON(w, nil, badRequest(fmt.Errorf("q (the query) is empty")))
			return
		}
		res, err := s.query(r.Context(), r.PathValue("world"), runOf(r), q)
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/compare", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.compare(r.Context(), r.PathValue("world"), r.URL.Query())
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/schema", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.schema(r.Context(), r.PathValue("world"), runOf(r))
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/download", s.download)
	s.mux.HandleFunc("GET /api/w/{world}/entity", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.trajectory(r.Context(), r.PathValue("world"), runOf(r), r.URL.Query().Get("table"), r.URL.Query().Get("id"))
		writeJSON(w, res, err)
	})
	s.mux.HandleFunc("GET /api/w/{world}/facts", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.facts(r.Context(), r.PathValue("world"), runOf(r))
		writeJSON(w, res, err)
	})
}

func runOf(r *http.Request) string {
	if run := r.URL.Query().Get("run"); run != "" {
		return run
	}
	return index.DefaultRun
}

// pageData is what a page's template gets; the page's script reads it
// from the body's data attributes and asks the JSON endpoints the rest.
type pageData struct {
	Page, Title, World, Run, Tick, Query string
}

func (s *Server) page(w http.ResponseWriter, r *http.Request, name string) {
	d := pageData{Page: name, World: r.PathValue("world"), Run: runOf(r), Tick: r.URL.Query().Get("tick"), Query: r.URL.Query().Get("q")}
	if d.World != "" {
		if err := index.ValidateWorldID(d.World); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := index.ValidateRunName(d.Run); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	switch name {
	case "worlds":
		d.Title = "worlds"
	case "run":
		d.Title = d.World + " · " + d.Run
	case "sql":
		d.Title = d.World + " · SQL"
	case "facts":
		d.Title = d.World + " · facts and receipts"
	case "compare":
		d.Title = d.World + " · compare"
	case "entity":
		d.Title = d.World + " · " + r.URL.Query().Get("table") + " " + r.URL.Query().Get("id")
	case "sweep":
		d.Title = "sweep"
		if g := r.URL.Query().Get("worlds"); g != "" {
			d.Title += " · " + g
		} else if l := r.URL.Query().Get("lineage"); l != "" {
			d.Title += " · lineage of " + l
		}
	}
	if d.World != "" {
		if err := s.pageExists(r.Context(), name, d, r.URL.Query()); err != nil {
			s.notFoundPage(r.Context(), w, d, err)
			return
		}
	}
	if l := r.URL.Query().Get("lineage"); name == "sweep" && l != "" {
		if _, err := s.state(r.Context(), l); err != nil {
			s.notFoundPage(r.Context(), w, d, err)
			return
		}
	}
	s.render(w, http.StatusOK, name, d)
}

// render writes page name with d, answering status.
func (s *Server) render(w http.ResponseWriter, status int, name string, d any) {
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name+".html", d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// notFound is the not-found page's data: what was asked, why it is not
// there, and where to go instead.
type notFoundData struct {
	pageData
	Reason string
	// Runs are the world's runs when the world exists (the run asked is
	// not one of them, or the tick is not visible in it).
	Runs []RunInfo
}

// pageExists checks that what a page of world d.World is asked to show
// exists: the world, its run (a run with no visible tick of its own or its
// lineage that the world does not name), and the tick of a run page or the
// ticks of a comparison, the second of another world (vs, its run vsrun)
// if one is named. A missing one is a notFound error saying which.
func (s *Server) pageExists(ctx context.Context, name string, d pageData, vals url.Values) error {
	type at struct{ world, run, point string }
	points := []at{{d.World, d.Run, ""}}
	switch name {
	case "run", "entity":
		points[0].point = d.Tick
	case "compare":
		points[0].point = vals.Get("a")
		b := at{vals.Get("vs"), vals.Get("vsrun"), vals.Get("b")}
		if b.world == "" {
			b.world = d.World
		}
		if b.run == "" {
			b.run = d.Run
		}
		points = append(points, b)
	}
	for _, p := range points {
		if err := s.pointExists(ctx, p.world, p.run, p.point); err != nil {
			return err
		}
	}
	return nil
}

// pointExists checks that world exists, has run, and (p not empty) shows
// tick p in it; a missing one is a notFound error saying which.
func (s *Server) pointExists(ctx context.Context, world, run, p string) error {
	st, err := s.state(ctx, world)
	if err != nil {
		return err
	}
	v, err := s.view(ctx, world, run)
	if err != nil {
		return err
	}
	if _, ok := st.Run(run); !ok && !hasTicks(v) {
		return notFound(fmt.Errorf("world %s has no run %s", world, run))
	}
	if p == "" {
		return nil
	}
	pt, err := s.point(ctx, world, run, p)
	if err != nil {
		if statusOf(err) == http.StatusNotFound || statusOf(err) == http.StatusBadRequest {
			return notFound(fmt.Errorf("run %s of world %s has no tick %s: %w", run, world, p, err))
		}
		return err
	}
	if _, ok := v.Tick(pt.Tick); !ok {
		return notFound(fmt.Errorf("run %s of world %s has no tick %s: its ticks are %s", run, world, p, tickSpans(v)))
	}
	return nil
}

// tickSpans describes v's visible ticks as spans (0–12, 20–30), at most
// a few.
func tickSpans(v *index.View) string {
	var spans [][2]int64
	v.Ticks(math.MinInt64, math.MaxInt64, func(t index.TickRef) bool {
		if n := len(spans); n > 0 && spans[n-1][1] == t.Tick.Tick-1 {
			spans[n-1][1]++
		} else {
			spans = append(spans, [2]int64{t.Tick.Tick, t.Tick.Tick})
		}
		return true
	})
	if len(spans) == 0 {
		return "none yet"
	}
	var parts []string
	for i, sp := range spans {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("… (%d spans)", len(spans)))
			break
		}
		parts = append(parts, fmt.Sprintf("%d–%d", sp[0], sp[1]))
	}
	return strings.Join(parts, ", ")
}

// hasTicks reports whether v shows any tick.
func hasTicks(v *index.View) bool {
	found := false
	v.Ticks(math.MinInt64, math.MaxInt64, func(index.TickRef) bool {
		found = true
		return false
	})
	return found
}

// notFoundPage answers a page whose world, run or tick does not exist
// with the not-found page (404), or another error's status.
func (s *Server) notFoundPage(ctx context.Context, w http.ResponseWriter, d pageData, err error) {
	status := statusOf(err)
	nd := notFoundData{pageData: d, Reason: err.Error()}
	nd.Page = "notfound"
	nd.Title = "not found"
	if status != http.StatusNotFound {
		nd.Title = http.StatusText(status)
	}
	if st, e := s.state(ctx, d.World); e == nil {
		nd.Runs = worldInfo(st, 0).Runs
	} else {
		nd.World = "" // no world: no links into it
	}
	s.render(w, status, "notfound", nd)
}

// WorldInfo is one world on the worlds page: its catalog record, its
// lineage, and its runs.
type WorldInfo struct {
	frame.WorldRecord
	Runs []RunInfo `json:"runs"`
	// LastPublishUnixMs is when its newest head tick was published (0:
	// none, or not recorded).
	LastPublishUnixMs int64 `json:"last_publish_unix_ms"`
	// SizeBytes is the bytes of its live data: the files its own catalog
	// names (liveBytes).
	SizeBytes int64 `json:"size_bytes"`
}

// RunInfo is one run of a world.
type RunInfo struct {
	Name            string `json:"name"`
	Head            int64  `json:"head_tick"`
	Published       int64  `json:"published"`
	HeadPublishedMs int64  `json:"head_published_unix_ms"`
}

// worlds lists the bucket's worlds from their catalogs.
func (s *Server) worlds(ctx context.Context) ([]WorldInfo, error) {
	markers, err := index.ListWorlds(ctx, s.opts.Bucket)
	if err != nil {
		return nil, err
	}
	// Catalogs are opened 8 at a time: a first visit loads each.
	infos := make([]*WorldInfo, len(markers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, m := range markers {
		g.Go(func() error {
			st, err := s.state(gctx, m.ID)
			if statusOf(err) == http.StatusNotFound {
				return nil // a creation that crashed before its log: no world yet
			}
			if err != nil {
				return err
			}
			size, err := s.size(st)
			if err != nil {
				return err
			}
			info := worldInfo(st, size)
			infos[i] = &info
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := []WorldInfo{}
	for _, info := range infos {
		if info != nil {
			out = append(out, *info)
		}
	}
	return out, nil
}

// size returns the bytes of st's world's live data, computed once per
// catalog state and kept as long as the world's catalog.
func (s *Server) size(st *index.State) (int64, error) {
	world := st.World.ID
	s.mu.Lock()
	k, ok := s.mu.sizes[world]
	s.mu.Unlock()
	if ok && k.seq == st.Seq {
		return k.bytes, nil
	}
	n, err := liveBytes(st)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if s.catalogs.Contains(world) && s.mu.sizes[world].seq <= st.Seq {
		s.mu.sizes[world] = keptSize{st.Seq, n}
	}
	s.mu.Unlock()
	return n, nil
}

func worldInfo(st *index.State, size int64) WorldInfo {
	info := WorldInfo{WorldRecord: frame.RecordOf(st.World, st.Seq), Runs: []RunInfo{}, SizeBytes: size}
	for _, r := range st.Runs() {
		ri := RunInfo{Name: r.Name, Head: r.Head, Published: r.Published}
		if t, ok := st.Tick(r.Name, r.Head); ok {
			ri.HeadPublishedMs = t.PublishedUnixMs
			info.LastPublishUnixMs = max(info.LastPublishUnixMs, t.PublishedUnixMs)
		}
		info.Runs = append(info.Runs, ri)
	}
	return info
}

// quoteIdent quotes a name for DuckDB.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLit quotes a string literal for DuckDB.
func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// CountsSQL is the question the timeline's rows chart asks: rows per
// table per tick, over every view of the run.
func CountsSQL(views []string) string {
	if len(views) == 0 {
		return "SELECT NULL::VARCHAR AS table_name, NULL::BIGINT AS tick, NULL::BIGINT AS n WHERE false"
	}
	parts := make([]string, len(views))
	for i, v := range views {
		parts[i] = fmt.Sprintf("SELECT %s AS table_name, tick, count(*) AS n FROM %s GROUP BY tick", quoteLit(v), quoteIdent(v))
	}
	return strings.Join(parts, "\nUNION ALL ") + "\nORDER BY table_name, tick"
}

// counts answers the rows chart: ?from=&to= (default: every tick with
// rows) in at most ?bins= bins (default 1,000).
func (s *Server) counts(ctx context.Context, world, run string, vals url.Values) (*RowsPerTick, error) {
	var from, to *int64
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"from", &from}, {"to", &to}} {
		if vals.Get(p.name) == "" {
			continue
		}
		n, err := intParam(vals, p.name, 0)
		if err != nil {
			return nil, err
		}
		*p.dst = &n
	}
	bins, err := intParam(vals, "bins", defaultBins)
	if err != nil {
		return nil, err
	}
	return s.rowsPerTick(ctx, world, run, from, to, bins)
}

// TablesSQL lists the views' columns with their types.
func TablesSQL(views []string) string {
	names := make([]string, len(views))
	for i, v := range views {
		names[i] = quoteLit(v)
	}
	if len(names) == 0 {
		names = []string{"NULL"}
	}
	return "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE table_name IN (" + strings.Join(names, ", ") +
		") ORDER BY table_name, column_index"
}

func (s *Server) tables(ctx context.Context, world, run string) (*Result, error) {
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	return s.memoQuery(ctx, world, run, TablesSQL(v.Script.Views))
}

// PointTick is the tick a point typed in the tick box names.
type PointTick struct {
	At   string `json:"at"`
	Tick int64  `json:"tick"`
}

// point resolves a point as typed in the run page's tick box, by the one
// parser of points (index.ParseMoment: 170, head, head~10, 10:00, -1m, 2h
// ago, a token; times without a zone in this server's time zone), among
// the run's visible ticks. A point that names no tick (a time before the
// first tick, head~N past it) is a 404 saying so.
func (s *Server) point(ctx context.Context, world, run, at string) (*PointTick, error) {
	m, err := index.ParseMoment(at, time.Now())
	if err != nil {
		return nil, badRequest(err)
	}
	v, err := s.view(ctx, world, run)
	if err != nil {
		return nil, err
	}
	t, ok, err := m.InView(v, math.MaxInt64)
	switch {
	case errors.Is(err, index.ErrNotFound):
		return nil, notFound(err)
	case err != nil:
		return nil, err
	case !ok:
		return nil, notFound(fmt.Errorf("%s: no tick of %s was published at or before %s", at, world, m.Time.Format(time.RFC3339)))
	}
	return &PointTick{At: at, Tick: t}, nil
}

// TickPage is a table's rows at one tick: a sorted page of them, their
// count, and the points of two columns for the scatter plot.
type TickPage struct {
	Tick int64 `json:"tick"`
	// PublishedUnixMs is when the tick was published (0: not recorded,
	// or not a visible tick).
	PublishedUnixMs int64   `json:"published_unix_ms"`
	Table           string  `json:"table"`
	Offset          int64   `json:"offset"`
	Total           int64   `json:"total"`
	Page            *Result `json:"page"`
	Points          *Result `json:"points,omitempty"`
}

// TickQuery is what the tick endpoint asks of the views: table's rows at
// tick, ordered by order (empty: the first column), limit from offset.
type TickQuery struct {
	Table, Order string
	Desc         bool
	Tick         int64
	Limit        int64
	Offset       int64
	X, Y         string // the scatter plot's columns (empty: none)
	// ID, if set, is a column the points carry third (entity_id): a
	// click on a point follows that entity.
	ID string
}

// PageSQL, CountSQL and PointsSQL are the tick endpoint's questions.
func (q TickQuery) PageSQL() string {
	order := "1"
	if q.Order != "" {
		order = quoteIdent(q.Order)
	}
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	return fmt.Sprintf("FROM %s(%d) ORDER BY %s%s NULLS LAST, 1 LIMIT %d OFFSET %d", quoteIdent(q.Table+"_at"), q.Tick, order, dir, q.Limit, q.Offset)
}

func (q TickQuery) CountSQL() string {
	return fmt.Sprintf("SELECT count(*) AS n FROM %s(%d)", quoteIdent(q.Table+"_at"), q.Tick)
}

func (q TickQuery) PointsSQL() string {
	id := ""
	if q.ID != "" {
		id = ", " + quoteIdent(q.ID)
	}
	return fmt.Sprintf("SELECT %s, %s%s FROM %s(%d)", quoteIdent(q.X), quoteIdent(q.Y), id, quoteIdent(q.Table+"_at"), q.Tick)
}

// TrajectorySQL is an entity's history: every row of table whose
// entity_id is id, by tick, through the run's lineage (the view of a
// fork reads its parent's ticks up to the fork point).
func TrajectorySQL(table, id string) string {
	return fmt.Sprintf("FROM %s WHERE entity_id = %s ORDER BY tick", quoteIdent(table), quoteLit(id))
}

// trajectory answers TrajectorySQL for (world, run).
func (s *Server) trajectory(ctx context.Context, world, run, table, id string) (*Result, error) {
	if id == "" {
		return nil, badRequest(fmt.Errorf("id (the entity_id to follow) is required"))
	}
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(v.Script.Views, table) {
		return nil, badRequest(fmt.Errorf("table %q is not a view of %s (run %s): %s", table, world, run, strings.Join(v.Script.Views, ", ")))
	}
	return s.queryValues(ctx, v, TrajectorySQL(table, id))
}

// maxPage bounds the rows of one page of a tick's table.
const maxPage = 1000

func intParam(vals map[string][]string, name string, def int64) (int64, error) {
	v := ""
	if vs := vals[name]; len(vs) > 0 {
		v = vs[0]
	}
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest(fmt.Errorf("%s=%q is not an integer", name, v))
	}
	return n, nil
}

func (s *Server) tick(ctx context.Context, world, run string, vals map[string][]string) (*TickPage, error) {
	get := func(k string) string {
		if vs := vals[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	q := TickQuery{Table: get("table"), Order: get("order"), Desc: get("desc") == "1" || get("desc") == "true", X: get("x"), Y: get("y"), ID: get("id")}
	var err error
	if _, ok := vals["tick"]; !ok {
		return nil, badRequest(fmt.Errorf("tick is required"))
	}
	if q.Tick, err = intParam(vals, "tick", 0); err != nil {
		return nil, err
	}
	if q.Limit, err = intParam(vals, "limit", 100); err != nil {
		return nil, err
	}
	if q.Offset, err = intParam(vals, "offset", 0); err != nil {
		return nil, err
	}
	if q.Limit < 1 || q.Limit > maxPage || q.Offset < 0 {
		return nil, badRequest(fmt.Errorf("limit is 1 to %d and offset is not negative (limit=%d offset=%d)", maxPage, q.Limit, q.Offset))
	}
	if (q.X == "") != (q.Y == "") {
		return nil, badRequest(fmt.Errorf("the scatter plot takes two columns: give x and y, or neither"))
	}
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(v.Script.Views, q.Table) {
		return nil, badRequest(fmt.Errorf("table %q is not a view of %s (run %s): %s", q.Table, world, run, strings.Join(v.Script.Views, ", ")))
	}
	out := &TickPage{Tick: q.Tick, Table: q.Table, Offset: q.Offset}
	if v.Extra.view != nil {
		if t, ok := v.Extra.view.Tick(q.Tick); ok {
			out.PublishedUnixMs = t.PublishedUnixMs
		}
	}
	// Every question on the views just resolved: one catalog state.
	if out.Page, err = s.queryOn(ctx, v, q.PageSQL()); err != nil {
		return nil, err
	}
	if q.X != "" {
		if out.Points, err = s.queryOn(ctx, v, q.PointsSQL()); err != nil {
			return nil, err
		}
		if !out.Points.Truncated {
			// The points are every row of the tick: their number is the
			// count, one query fewer a scrubber step.
			out.Total = int64(len(out.Points.Rows))
			return out, nil
		}
	}
	n, err := s.queryOn(ctx, v, q.CountSQL())
	if err != nil {
		return nil, err
	}
	if len(n.Rows) == 1 {
		out.Total, _ = strconv.ParseInt(n.Rows[0][0], 10, 64)
	}
	return out, nil
}

// FactsSQL and ReceiptsSQL are the facts page's questions; a receipt's
// graded_tick is the head tick of the snapshot it graded.
const (
	FactsSQL    = "SELECT fact_id, tick, table_name, producer, external_id, value, digest, commit_token FROM worldfs_facts ORDER BY tick, fact_id"
	ReceiptsSQL = "SELECT receipt_id, tick, evaluation_id, grader_id, json_extract_string(subject, '$.world') AS subject_world, " +
		"json_extract_string(subject, '$.run') AS subject_run, CAST(json_extract(subject, '$.head_tick') AS BIGINT) AS graded_tick, " +
		"CAST(outcomes AS VARCHAR) AS outcomes, commit_token FROM worldfs_receipts ORDER BY tick, receipt_id"
)

// Facts is the facts page's data.
type Facts struct {
	Facts    *Result `json:"facts"`
	Receipts *Result `json:"receipts"`
}

func (s *Server) facts(ctx context.Context, world, run string) (*Facts, error) {
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	f, err := s.queryOn(ctx, v, FactsSQL)
	if err != nil {
		return nil, err
	}
	r, err := s.queryOn(ctx, v, ReceiptsSQL)
	if err != nil {
		return nil, err
	}
	return &Facts{Facts: f, Receipts: r}, nil
}
