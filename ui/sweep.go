package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// The sweep page: a set of worlds (those whose ids match a glob, or a
// world and every fork below it) read as one table, as worldfs sql
// --worlds GLOB and --lineage W read them (sql.Sweep): a column's
// aggregate per tick for every world in one query over the sweep, and
// the worlds' records and run parameters (worldfs_worlds).

// SweepQuery is what the sweep endpoint asks: the worlds (Glob or
// Lineage), the run, and the aggregate Agg of Table's Column per world
// per tick.
type SweepQuery struct {
	Glob, Lineage string
	Run           string
	Table, Column string
	Agg           string
}

// SweepAggs are the aggregates the sweep page offers, the first the
// default.
var SweepAggs = []string{"avg", "min", "max", "sum", "count"}

// SeriesSQL is the sweep's per-tick aggregate: one row per world and
// tick, what worldfs sql --worlds answers for it.
func (q SweepQuery) SeriesSQL() string {
	return fmt.Sprintf("SELECT world, tick, %s(%s) AS %s FROM %s GROUP BY world, tick ORDER BY world, tick",
		q.Agg, quoteIdent(q.Column), quoteIdent(q.Agg+"_"+q.Column), quoteIdent(q.Table))
}

// SweepWorldsSQL is what the sweep page shows of each world: its
// parent, fork point, newest tick and run parameters (a JSON object);
// the page's table holds its answer, taken from the views' records of
// the worlds (sql.Script.Records, metaTable) without a query.
const SweepWorldsSQL = "SELECT world, parent, fork_run, fork_tick, head_tick, CAST(to_json(meta) AS VARCHAR) AS meta FROM worldfs_worlds ORDER BY world"

// Sweep is the sweep endpoint's answer.
type Sweep struct {
	// Glob or Lineage: how the worlds were picked; Worlds: them, in id
	// order (a lineage's root first).
	Glob    string   `json:"glob,omitempty"`
	Lineage string   `json:"lineage,omitempty"`
	Run     string   `json:"run"`
	Worlds  []string `json:"worlds"`
	// Tables are the tables every world of the sweep holds, each with
	// the numeric columns every world's holds (the columns the page
	// offers), by name.
	Tables map[string][]string `json:"tables"`
	Table  string              `json:"table"`
	Column string              `json:"column"`
	Agg    string              `json:"agg"`
	// Series is SeriesSQL's answer: world, tick, the aggregate
	// (sweepSeries); Summarized, how many of the files the worlds read
	// (once per world that reads each) the server summarized itself (a
	// compacted file from its tick index, a tick's own from its rows)
	// rather than DuckDB.
	Series     *Result `json:"series"`
	Summarized int     `json:"summarized"`
	// Meta is the worlds' records as a table: world, parent, fork_run,
	// fork_tick, head_tick, then each run parameter any world has (NULL
	// where a world has none of that name), SweepWorldsSQL's answer.
	Meta *Result `json:"meta"`
	// Params are the run parameters' names (Meta's last columns).
	Params []string `json:"params"`
}

// sweepTables are a sweep's tables every world has, each with the
// numeric columns every world's holds.
type sweepTables map[string][]string

// commonNumeric returns the tables every script has, each with the
// numeric component columns every script's holds, in the first's order.
func commonNumeric(scripts []*sql.Script) sweepTables {
	out := sweepTables{}
	if len(scripts) == 0 {
		return out
	}
	numeric := func(t frame.Type) bool {
		return t == frame.Float64 || t == frame.Float32 || t == frame.Int64 || t == frame.Int32
	}
	for _, table := range scripts[0].Views {
		var cols []string
		for _, c := range scripts[0].Columns[table] {
			if numeric(c.Type) {
				cols = append(cols, c.Name)
			}
		}
		in := true
		for _, s := range scripts[1:] {
			if !slices.Contains(s.Views, table) {
				in = false
				break
			}
			cols = slices.DeleteFunc(cols, func(name string) bool {
				return !slices.ContainsFunc(s.Columns[table], func(c frame.Column) bool { return c.Name == name && numeric(c.Type) })
			})
		}
		if in {
			out[table] = append([]string{}, cols...)
		}
	}
	return out
}

// sweepWorlds returns the worlds q picks: those matching q.Glob, or
// q.Lineage and every fork below it.
func (s *Server) sweepWorlds(ctx context.Context, q SweepQuery) ([]string, error) {
	var worlds []string
	var err error
	switch {
	case q.Glob != "" && q.Lineage != "":
		return nil, badRequest(errors.New("worlds (a glob) and lineage (a world and its forks) each pick the worlds of a sweep; give one"))
	case q.Glob != "":
		worlds, err = index.MatchWorlds(ctx, s.opts.Bucket, q.Glob)
	case q.Lineage != "":
		if err := index.ValidateWorldID(q.Lineage); err != nil {
			return nil, badRequest(fmt.Errorf("lineage: %w", err))
		}
		worlds, err = index.LineageWorlds(ctx, s.opts.Bucket, q.Lineage)
	default:
		return nil, badRequest(errors.New("a sweep needs its worlds: worlds=GLOB (sweep-*) or lineage=WORLD (a world and every fork below it)"))
	}
	switch {
	case errors.Is(err, path.ErrBadPattern):
		return nil, badRequest(err)
	case errors.Is(err, index.ErrNotFound):
		return nil, notFound(err)
	}
	return worlds, err
}

// sweepViews returns the views of worlds' run read as one (sql.Sweep),
// kept (on the server's plans) while no world's catalog moves on, with
// the tables and numeric columns common to them. They are planned, not
// opened: the page opens them narrowed to its table (sweepTable).
func (s *Server) sweepViews(ctx context.Context, worlds []string, run string) (*views, error) {
	if err := index.ValidateRunName(run); err != nil {
		return nil, badRequest(err)
	}
	lineages := make([]*index.View, len(worlds))
	var hasRun atomic.Bool // some world's own catalog has the run
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, w := range worlds {
		g.Go(func() error {
			st, err := s.state(gctx, w)
			if err != nil {
				return fmt.Errorf("world %s of the sweep: %w", w, err)
			}
			v, err := s.view(gctx, w, run)
			if err != nil {
				return fmt.Errorf("world %s of the sweep: %w", w, err)
			}
			_, ok := st.Run(run)
			if !ok && !hasTicks(v) {
				return notFound(fmt.Errorf("world %s of the sweep has no run %s", w, run))
			}
			if ok {
				hasRun.Store(true)
			}
			lineages[i] = v
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if !hasRun.Load() {
		return nil, notFound(fmt.Errorf("no world of the sweep has a run %s (a fork shows its parent's run up to its fork point, not a run of its own)", run))
	}
	var seqs []uint64
	for _, v := range lineages {
		seqs = append(seqs, viewSeqs(v)...)
		seqs = append(seqs, 0) // where one world's segments end
	}
	return keepOn(ctx, s.plans, sweepKey(worlds, run, ""), seqs, func(ctx context.Context) (*sql.Script, *memory, error) {
		scripts := make([]*sql.Script, len(worlds))
		// Not errgroup.WithContext: a script keeps its build's context
		// for what it reads later (as sql.BuildSweep).
		var g errgroup.Group
		g.SetLimit(sql.SweepBuilds)
		for i, w := range worlds {
			g.Go(func() error {
				opts := s.opts.Views
				opts.Run, opts.View, opts.Reuse = run, lineages[i], nil
				sc, err := sql.Build(ctx, s.opts.Bucket, w, opts)
				if err != nil {
					return fmt.Errorf("world %s of the sweep: %w", w, err)
				}
				scripts[i] = sc
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, nil, err
		}
		sw, err := sql.Sweep(scripts...)
		var ce *sql.SweepColumnError
		if errors.As(err, &ce) {
			return nil, nil, badRequest(err)
		}
		if err != nil {
			return nil, nil, err
		}
		return sw, &memory{tables: commonNumeric(scripts)}, nil
	})
}

// sweepKey names the views of a sweep on the shelf: the whole, or
// narrowed to a table.
func sweepKey(worlds []string, run, table string) viewsKey {
	return viewsKey{world: "sweep\x00" + strings.Join(worlds, "\x00"), run: run, table: table}
}

// sweepTable returns the sweep whole (sweepViews) narrowed to table
// (Script.Only), kept on the shelf while the whole is what the catalogs
// say: the views the page queries, which DuckDB defines in half the time
// of the whole (a sweep's tables cost it a few statements per table id
// each).
func (s *Server) sweepTable(ctx context.Context, worlds []string, run string, whole *views, table string) (*views, error) {
	return s.keep(ctx, sweepKey(worlds, run, table), whole.Seqs, func(context.Context) (*sql.Script, *memory, error) {
		sw, err := whole.Script.Only(table)
		return sw, &memory{tables: whole.Extra.tables}, err
	})
}

// sweepQuery reads a SweepQuery from a request's values.
func sweepQuery(vals url.Values) SweepQuery {
	q := SweepQuery{Glob: vals.Get("worlds"), Lineage: vals.Get("lineage"), Run: vals.Get("run"),
		Table: vals.Get("table"), Column: vals.Get("column"), Agg: vals.Get("agg")}
	if q.Run == "" {
		q.Run = index.DefaultRun
	}
	if q.Agg == "" {
		q.Agg = SweepAggs[0]
	}
	return q
}

// sweep answers the sweep endpoint: the worlds, their records, and the
// aggregate per world per tick (the first table's first numeric column
// by default: particle's if the worlds have one), each asked once per
// catalog state (memoOn).
func (s *Server) sweep(ctx context.Context, vals url.Values) (*Sweep, error) {
	q := sweepQuery(vals)
	if !slices.Contains(SweepAggs, q.Agg) {
		return nil, badRequest(fmt.Errorf("agg %q is not an aggregate the sweep page draws: %s", q.Agg, strings.Join(SweepAggs, ", ")))
	}
	worlds, err := s.sweepWorlds(ctx, q)
	if err != nil {
		return nil, err
	}
	whole, err := s.sweepViews(ctx, worlds, q.Run)
	if err != nil {
		return nil, err
	}
	tables := whole.Extra.tables
	names := slices.Sorted(maps.Keys(tables))
	if q.Table == "" {
		for _, t := range append([]string{"particle"}, names...) {
			if len(tables[t]) > 0 {
				q.Table = t
				break
			}
		}
		if q.Table == "" {
			return nil, badRequest(fmt.Errorf("the %d worlds of the sweep hold no table with a numeric column in common", len(worlds)))
		}
	}
	cols, ok := tables[q.Table]
	if !ok {
		return nil, badRequest(fmt.Errorf("table %q is not a table of every world of the sweep; their tables in common: %s", q.Table, orNone(names)))
	}
	if q.Column == "" {
		if len(cols) == 0 {
			return nil, badRequest(fmt.Errorf("table %s has no numeric column in every world of the sweep", q.Table))
		}
		q.Column = cols[0]
		if slices.Contains(cols, "position_x") {
			q.Column = "position_x"
		}
	}
	if !slices.Contains(cols, q.Column) {
		return nil, badRequest(fmt.Errorf("column %q is not a numeric column of table %s in every world of the sweep; its numeric columns: %s", q.Column, q.Table, orNone(cols)))
	}
	out := &Sweep{Glob: q.Glob, Lineage: q.Lineage, Run: q.Run, Worlds: worlds, Tables: tables, Table: q.Table, Column: q.Column, Agg: q.Agg}
	typ, _, err := whole.Script.ColumnType(q.Table, q.Column)
	if err != nil {
		return nil, err
	}
	if out.Series, out.Summarized, err = s.sweepSeries(ctx, worlds, q, whole, typ); err != nil {
		return nil, err
	}
	recs, err := whole.Script.Records()
	if err != nil {
		return nil, err
	}
	out.Meta, out.Params = metaTable(recs)
	return out, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// metaTable is the worlds' records as SweepWorldsSQL shows them, each
// run parameter spread into a column of its own (by name; NULL where a
// world has none of that name), and the parameters' names.
func metaTable(recs []sql.WorldRecord) (*Result, []string) {
	keys := map[string]bool{}
	for _, r := range recs {
		for k := range r.World.Meta {
			keys[k] = true
		}
	}
	params := slices.AppendSeq([]string{}, maps.Keys(keys)) // none: [], not null
	slices.Sort(params)
	out := &Result{SQL: SweepWorldsSQL, Columns: append([]string{"world", "parent", "fork_run", "fork_tick", "head_tick"}, params...), Rows: [][]string{}}
	orNull := func(s string, ok bool) string {
		if !ok {
			return "NULL"
		}
		return s
	}
	for _, r := range recs {
		w := r.World
		fork := w.Parent != ""
		row := []string{w.ID, orNull(w.Parent, fork), orNull(w.ForkRun, fork), orNull(strconv.FormatInt(w.ForkTick, 10), fork), "NULL"}
		if r.Head != nil {
			row[4] = strconv.FormatInt(*r.Head, 10)
		}
		for _, k := range params {
			v, ok := w.Meta[k]
			row = append(row, orNull(v, ok))
		}
		out.Rows = append(out.Rows, row)
	}
	slices.SortFunc(out.Rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out, params
}
