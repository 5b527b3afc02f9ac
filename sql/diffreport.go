package sql

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Point is one side of a diff: a world of the session and one of its
// visible ticks (nil: its head).
type Point struct {
	World string `json:"world"`
	Tick  *int64 `json:"tick"`
}

// TableDiff is what changed in one table between two points.
type TableDiff struct {
	Table string `json:"table"`
	// OnlyIn names the side ("a" or "b") that alone has the table; its
	// rows count as deleted or inserted.
	OnlyIn    string       `json:"only_in,omitempty"`
	Inserted  int64        `json:"inserted"`
	Deleted   int64        `json:"deleted"`
	Updated   int64        `json:"updated"`
	Unchanged int64        `json:"unchanged"`
	Columns   []ColumnDiff `json:"columns,omitempty"`
	// Rows, if asked for, are the changed rows as the table's _diff shows
	// them.
	Rows []map[string]any `json:"rows,omitempty"`
}

// ColumnDiff is how many updated entities changed a component column,
// and for a number the largest absolute change.
type ColumnDiff struct {
	Column       string   `json:"column"`
	Changed      int64    `json:"changed"`
	MaxAbsChange *float64 `json:"max_abs_change,omitempty"`
}

// DiffReport compares two points table by table.
type DiffReport struct {
	A      Point       `json:"a"`
	B      Point       `json:"b"`
	Tables []TableDiff `json:"tables"`
	// Differ: some table has an entity inserted, deleted or updated.
	Differ bool `json:"differ"`
}

// DiffQuery returns the query of the changed rows of table between two
// resolved points of the session s: the table's _diff within one world,
// worldfs_diff across two.
func DiffQuery(s *Script, table string, a, b Point) string {
	if a.World == b.World {
		return fmt.Sprintf("SELECT * FROM %s%s(%d, %d)", qualifier(s, a.World), ident(diffMacro(table)), *a.Tick, *b.Tick)
	}
	return fmt.Sprintf("SELECT * FROM %s(%s, %s, %d, %s, %d)", diffFunc, lit(table), lit(a.World), *a.Tick, lit(b.World), *b.Tick)
}

// qualifier is the prefix that names world's objects in the session s.
func qualifier(s *Script, world string) string {
	if s.parts == nil {
		return ""
	}
	return ident(world) + "."
}

// Diff compares two points of the session s (opened as db): per table
// (every table of either side, or only the one called table), the
// entities inserted, deleted, updated and unchanged, and per component
// column how many updates changed it and, for numbers, the largest
// absolute change; with rows, the changed rows too. A side's tick must be
// visible (ErrNotFound); nil is its head.
func Diff(ctx context.Context, db *sql.DB, s *Script, a, b Point, table string, rows bool) (*DiffReport, error) {
	views := map[string][]string{}
	parts := s.parts
	if parts == nil {
		parts = []*Script{s}
	}
	for _, p := range parts {
		views[p.World] = p.Views
	}
	for _, pt := range []*Point{&a, &b} {
		// The ticks the views show, as the script lists them (asking
		// worldfs_ticks would list every tick through DuckDB: 90 ms at
		// 100,000 ticks).
		t, err := s.visibleTick(pt.World, pt.Tick)
		if err != nil {
			return nil, err
		}
		pt.Tick = &t
	}
	names := slices.Clone(views[a.World])
	for _, v := range views[b.World] {
		if !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	slices.Sort(names)
	if table != "" {
		if !slices.Contains(names, table) {
			return nil, fmt.Errorf("no table %s in world %s or %s: %w", table, a.World, b.World, ErrNotFound)
		}
		names = []string{table}
	}
	report := &DiffReport{A: a, B: b, Tables: []TableDiff{}}
	for _, name := range names {
		td := TableDiff{Table: name}
		inA, inB := slices.Contains(views[a.World], name), slices.Contains(views[b.World], name)
		if !inA || !inB {
			only, side := "a", a
			if inB {
				only, side = "b", b
			}
			td.OnlyIn = only
			var n int64
			if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s%s(%d)", qualifier(s, side.World), ident(atMacro(name)), *side.Tick)).Scan(&n); err != nil {
				return nil, err
			}
			if inA {
				td.Deleted = n
			} else {
				td.Inserted = n
			}
		} else if err := tableDiff(ctx, db, s, &td, a, b, rows); err != nil {
			return nil, err
		}
		report.Differ = report.Differ || td.Inserted+td.Deleted+td.Updated > 0
		report.Tables = append(report.Tables, td)
	}
	return report, nil
}

// tableDiff fills td for a table both points have.
func tableDiff(ctx context.Context, db *sql.DB, s *Script, td *TableDiff, a, b Point, rows bool) error {
	qa := fmt.Sprintf("%s%s(%d)", qualifier(s, a.World), ident(atMacro(td.Table)), *a.Tick)
	qb := fmt.Sprintf("%s%s(%d)", qualifier(s, b.World), ident(atMacro(td.Table)), *b.Tick)
	// The component columns and which are numbers, from side b's view.
	crows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM %s) WHERE column_name NOT IN ('entity_id', 'tick')", qb))
	if err != nil {
		return err
	}
	type col struct {
		name    string
		numeric bool
	}
	var cols []col
	for crows.Next() {
		var n, t string
		if err := crows.Scan(&n, &t); err != nil {
			crows.Close()
			return err
		}
		numeric := slices.Contains([]string{"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE"}, t) ||
			strings.HasPrefix(t, "DECIMAL")
		cols = append(cols, col{n, numeric})
	}
	crows.Close()
	sel := []string{
		"(SELECT count(*) FROM d WHERE change_type = 'insert')",
		"(SELECT count(*) FROM d WHERE change_type = 'delete')",
		"(SELECT count(*) FROM d WHERE change_type = 'update_postimage')",
		fmt.Sprintf("(SELECT count(*) FROM (SELECT entity_id FROM %s) x JOIN (SELECT entity_id FROM %s) y USING (entity_id))", qa, qb),
	}
	for _, c := range cols {
		q := ident(c.name)
		sel = append(sel, fmt.Sprintf("count(*) FILTER (WHERE pre.%s IS DISTINCT FROM post.%s)", q, q))
		if c.numeric {
			sel = append(sel, fmt.Sprintf("max(abs(post.%s::DOUBLE - pre.%s::DOUBLE))", q, q))
		}
	}
	q := fmt.Sprintf(`WITH d AS MATERIALIZED (%s),
  pre AS (FROM d WHERE change_type = 'update_preimage'), post AS (FROM d WHERE change_type = 'update_postimage')
SELECT %s FROM pre JOIN post USING (entity_id)`, DiffQuery(s, td.Table, a, b), strings.Join(sel, ", "))
	var both int64
	ptrs := []any{&td.Inserted, &td.Deleted, &td.Updated, &both}
	counts := make([]int64, len(cols))
	maxes := make([]sql.NullFloat64, len(cols))
	for i, c := range cols {
		ptrs = append(ptrs, &counts[i])
		if c.numeric {
			ptrs = append(ptrs, &maxes[i])
		}
	}
	if err := db.QueryRowContext(ctx, q).Scan(ptrs...); err != nil {
		return fmt.Errorf("diff of table %s: %w", td.Table, err)
	}
	td.Unchanged = both - td.Updated
	for i, c := range cols {
		cd := ColumnDiff{Column: c.name, Changed: counts[i]}
		if c.numeric && counts[i] > 0 && maxes[i].Valid && !math.IsNaN(maxes[i].Float64) {
			m := maxes[i].Float64
			cd.MaxAbsChange = &m
		}
		td.Columns = append(td.Columns, cd)
	}
	if rows {
		r, err := db.QueryContext(ctx, DiffQuery(s, td.Table, a, b))
		if err != nil {
			return err
		}
		defer r.Close()
		if td.Rows, err = records(r); err != nil {
			return err
		}
	}
	return nil
}
