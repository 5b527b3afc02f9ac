package ui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// Side is one side of a comparison: a world's run at a tick.
type Side struct {
	World string `json:"world"`
	Run   string `json:"run"`
	Tick  int64  `json:"tick"`
}

// CompareQuery is what the compare endpoint asks: table's entities that
// differ between two sides (<table>_diff within a world,
// worldfs_diff(table, world_a, a, world_b, b) across two), counted by
// change type and paged, and two columns of each side for the overlaid
// scatter plot.
type CompareQuery struct {
	Table         string
	A, B          Side
	Limit, Offset int64
	X, Y          string
}

// across: the sides are two worlds, compared in a session of both.
func (q CompareQuery) across() bool { return q.A.World != q.B.World }

func (q CompareQuery) diff() string {
	if !q.across() {
		return fmt.Sprintf("%s(%d, %d)", quoteIdent(q.Table+"_diff"), q.A.Tick, q.B.Tick)
	}
	return fmt.Sprintf("worldfs_diff(%s, %s, %d, %s, %d)", quoteLit(q.Table), quoteLit(q.A.World), q.A.Tick, quoteLit(q.B.World), q.B.Tick)
}

// CountsSQL, RowsSQL and PointsSQL are the compare endpoint's questions.
func (q CompareQuery) CountsSQL() string {
	return "SELECT change_type, count(*) AS n FROM " + q.diff() + " GROUP BY change_type ORDER BY change_type"
}

func (q CompareQuery) RowsSQL() string {
	return fmt.Sprintf("FROM %s ORDER BY entity_id, tick, change_type LIMIT %d OFFSET %d", q.diff(), q.Limit, q.Offset)
}

func (q CompareQuery) PointsSQL(s Side) string {
	schema := ""
	if q.across() {
		schema = quoteIdent(s.World) + "."
	}
	return fmt.Sprintf("SELECT %s, %s FROM %s%s(%d)", quoteIdent(q.X), quoteIdent(q.Y), schema, quoteIdent(q.Table+"_at"), s.Tick)
}

// Comparison is the compare endpoint's answer.
type Comparison struct {
	A      Side    `json:"a"`
	B      Side    `json:"b"`
	Table  string  `json:"table"`
	Offset int64   `json:"offset"`
	Counts *Result `json:"counts"`
	Rows   *Result `json:"rows"`
	// PointsA and PointsB are the scatter plot's columns of each side.
	PointsA *Result `json:"points_a,omitempty"`
	PointsB *Result `json:"points_b,omitempty"`
	// Report is what worldfs diff A B prints (sql.Diff): per table the
	// entities inserted, deleted, updated and unchanged from a to b, per
	// component column how many updates changed it and the largest
	// change.
	Report *sql.DiffReport `json:"report"`
}

// session returns the views of two (world, run)s in one session
// (sql.Join: each world's views in a schema of its name), built again
// when either catalog moves on.
func (s *Server) session(ctx context.Context, a, b Side) (*views, error) {
	va, err := s.viewsOf(ctx, a.World, a.Run)
	if err != nil {
		return nil, err
	}
	vb, err := s.viewsOf(ctx, b.World, b.Run)
	if err != nil {
		return nil, err
	}
	seqs := append(slices.Clone(va.Seqs), vb.Seqs...)
	key := viewsKey{world: a.World + "\x00" + b.World, run: a.Run + "\x00" + b.Run}
	return s.keep(ctx, key, seqs, func(context.Context) (*sql.Script, *memory, error) {
		joined, err := sql.Join(va.Script, vb.Script)
		if err != nil {
			return nil, nil, badRequest(err)
		}
		return joined, &memory{}, nil
	})
}

func (s *Server) compare(ctx context.Context, world string, vals url.Values) (*Comparison, error) {
	q := CompareQuery{Table: vals.Get("table"), X: vals.Get("x"), Y: vals.Get("y")}
	q.A = Side{World: world, Run: vals.Get("run")}
	q.B = Side{World: vals.Get("vs"), Run: vals.Get("vsrun")}
	if q.A.Run == "" {
		q.A.Run = index.DefaultRun
	}
	if q.B.World == "" {
		q.B.World = world
	}
	if q.B.Run == "" {
		q.B.Run = q.A.Run
	}
	if q.B.World == q.A.World && q.B.Run != q.A.Run {
		return nil, badRequest(fmt.Errorf("compare two ticks of one run, or two worlds; not two runs of one world (%s and %s)", q.A.Run, q.B.Run))
	}
	var err error
	for _, p := range []struct {
		name string
		dst  *int64
		def  int64
	}{{"a", &q.A.Tick, -1}, {"b", &q.B.Tick, -1}, {"limit", &q.Limit, 100}, {"offset", &q.Offset, 0}} {
		if *p.dst, err = intParam(vals, p.name, p.def); err != nil {
			return nil, err
		}
	}
	if q.A.Tick < 0 || q.B.Tick < 0 {
		return nil, badRequest(fmt.Errorf("a and b (the ticks to compare) are required"))
	}
	if q.Limit < 1 || q.Limit > maxPage || q.Offset < 0 {
		return nil, badRequest(fmt.Errorf("limit is 1 to %d and offset is not negative (limit=%d offset=%d)", maxPage, q.Limit, q.Offset))
	}
	if (q.X == "") != (q.Y == "") {
		return nil, badRequest(fmt.Errorf("the scatter plot takes two columns: give x and y, or neither"))
	}
	var v *views
	if q.across() {
		v, err = s.session(ctx, q.A, q.B)
	} else {
		v, err = s.viewsOf(ctx, q.A.World, q.A.Run)
	}
	if err != nil {
		return nil, err
	}
	tables := v.Script.Views
	if q.across() {
		vb, err := s.viewsOf(ctx, q.B.World, q.B.Run)
		if err != nil {
			return nil, err
		}
		tables = slices.DeleteFunc(slices.Clone(tables), func(t string) bool { return !slices.Contains(vb.Script.Views, t) })
	}
	if !slices.Contains(tables, q.Table) {
		return nil, badRequest(fmt.Errorf("table %q is not a view of both sides: %s", q.Table, strings.Join(tables, ", ")))
	}
	out := &Comparison{A: q.A, B: q.B, Table: q.Table, Offset: q.Offset}
	if out.Report, err = s.diffReport(ctx, v, q.A, q.B); err != nil {
		return nil, err
	}
	if out.Counts, err = s.queryOn(ctx, v, q.CountsSQL()); err != nil {
		return nil, err
	}
	if out.Rows, err = s.queryOn(ctx, v, q.RowsSQL()); err != nil {
		return nil, err
	}
	if q.X != "" {
		if out.PointsA, err = s.queryOn(ctx, v, q.PointsSQL(q.A)); err != nil {
			return nil, err
		}
		if out.PointsB, err = s.queryOn(ctx, v, q.PointsSQL(q.B)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// diffReport is sql.Diff of a to b on views v, every table: the report
// worldfs diff prints. Asked of the same views, it is memoized with them.
func (s *Server) diffReport(ctx context.Context, v *views, a, b Side) (*sql.DiffReport, error) {
	key := fmt.Sprintf("diff %s@%d %s@%d", a.World, a.Tick, b.World, b.Tick)
	v.Extra.mu.Lock()
	r := v.Extra.mu.reports[key]
	v.Extra.mu.Unlock()
	if r != nil {
		return r, nil
	}
	db, err := v.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	r, err = sql.Diff(ctx, db, v.Script, sql.Point{World: a.World, Tick: &a.Tick}, sql.Point{World: b.World, Tick: &b.Tick}, "", false)
	v.Release(db, ctx.Err() == nil)
	switch {
	case errors.Is(err, sql.ErrNotFound):
		return nil, notFound(err)
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, queryError{err}
	}
	v.Extra.mu.Lock()
	if v.Extra.mu.reports == nil {
		v.Extra.mu.reports = map[string]*sql.DiffReport{}
	}
	if len(v.Extra.mu.reports) >= maxReports {
		clear(v.Extra.mu.reports)
	}
	v.Extra.mu.reports[key] = r
	v.Extra.mu.Unlock()
	return r, nil
}

// maxReports bounds the diff reports kept with one views.
const maxReports = 64
