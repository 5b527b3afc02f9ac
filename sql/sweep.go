package sql

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A sweep is a session of several worlds read as one table (Sweep): each
// world's views in its schema, as Join gives them, and over them, in
// schema main (the session's search path), one view per name with a
// world column first: <table>, <table>_raw, the macros <table>_at,
// _diff, _changes and _as_of, worldfs_ticks, worldfs_tags and
// worldfs_worlds. Each row is of the world whose views show it, read
// under that world's own allowlist and lineage: a fork's inherited
// history is in its rows once per fork, as its own views show it, and
// no world's invisible tick is in any. The union is by column name
// (UNION ALL BY NAME): a world whose table lacks a column shows NULL
// there; a column of one name and two types in two worlds is refused
// when the session is made, naming both (SweepColumnError). The per-world
// objects keep their names in each world's schema ("w-17".worldfs_manifests).

// worldRow is what worldfs_worlds shows of a world: its record, the run
// of the views, the newest tick they show (nil: none, or not known for
// history no catalog lists) and its tags.
type worldRow struct {
	world index.World
	run   string
	head  *int64
	tags  []index.Tag
}

// worldsView defines worldfs_worlds: the world of the views as a row:
// world, run, parent, fork_run, fork_tick, head_tick, created_at, meta (a
// MAP of its run parameters) and tags (a MAP of its tags of the run to
// their ticks).
func worldsView(r worldRow) string {
	w := r.world
	parent, forkRun, forkTick := "NULL", "NULL", "NULL"
	if w.Parent != "" {
		parent, forkRun, forkTick = lit(w.Parent), lit(w.ForkRun), fmt.Sprint(w.ForkTick)
	}
	head := "NULL"
	if r.head != nil {
		head = fmt.Sprint(*r.head)
	}
	var meta []string
	for _, k := range slices.Sorted(maps.Keys(w.Meta)) {
		meta = append(meta, lit(k)+": "+lit(w.Meta[k]))
	}
	var tags []string
	for _, t := range r.tags {
		if t.Run == r.run {
			tags = append(tags, fmt.Sprintf("%s: %d", lit(t.Name), t.Tick))
		}
	}
	return fmt.Sprintf("CREATE OR REPLACE TEMP VIEW worldfs_worlds AS SELECT %s::VARCHAR AS world, %s::VARCHAR AS run, %s::VARCHAR AS parent, %s::VARCHAR AS fork_run, "+
		"%s::BIGINT AS fork_tick, %s::BIGINT AS head_tick, TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(%d::BIGINT) AS created_at, "+
		"MAP {%s}::MAP(VARCHAR, VARCHAR) AS meta, MAP {%s}::MAP(VARCHAR, BIGINT) AS tags;\n",
		lit(w.ID), lit(r.run), parent, forkRun, forkTick, head, w.CreatedUnixMs, strings.Join(meta, ", "), strings.Join(tags, ", "))
}

// SweepColumnError: two worlds of a sweep hold a column of one table
// under two types, which no one table of them can.
type SweepColumnError struct {
	Table, Column  string
	World, Other   string
	Type, OtherTyp frame.Type
}

func (e *SweepColumnError) Error() string {
	return fmt.Sprintf("a sweep reads the worlds' tables as one by column name, and column %s of table %s is %s in world %s but %s in world %s: "+
		"query them apart (--world %s, --world %s), or leave one out of the sweep",
		e.Column, e.Table, e.Type, e.World, e.OtherTyp, e.Other, e.World, e.Other)
}

// Sweep returns one session of the views of several worlds (scripts,
// each of another world) read as one: see above. Even a single world's
// views get their world column. Worlds whose tables differ join by
// column name (a missing column is NULL); a column typed differently in
// two worlds is SweepColumnError.
func Sweep(scripts ...*Script) (*Script, error) {
	if len(scripts) == 0 {
		return nil, errors.New("a sweep of no world")
	}
	type seen struct {
		world string
		typ   frame.Type
	}
	cols := map[string]map[string]seen{} // by table, by column
	for _, s := range scripts {
		for _, name := range s.Views {
			if cols[name] == nil {
				cols[name] = map[string]seen{}
			}
			for _, c := range s.Columns[name] {
				if o, ok := cols[name][c.Name]; ok && o.typ != c.Type {
					return nil, &SweepColumnError{Table: name, Column: c.Name, World: o.world, Type: o.typ, Other: s.World, OtherTyp: c.Type}
				} else if !ok {
					cols[name][c.Name] = seen{s.World, c.Type}
				}
			}
		}
	}
	j, err := join(scripts)
	if err != nil {
		return nil, err
	}
	j.sweep = true
	j.Views = slices.Sorted(maps.Keys(cols))
	return j, nil
}

// sweepText defines the sweep's views over its parts' (see above), in
// schema main, and makes main the search path.
func (s *Script) sweepText() string {
	var sb strings.Builder
	sb.WriteString("SET schema = 'main';\n")
	union := func(parts []*Script, from func(p *Script) string) string {
		qs := make([]string, len(parts))
		for i, p := range parts {
			qs[i] = from(p)
		}
		return strings.Join(qs, "\n  UNION ALL BY NAME ")
	}
	for _, name := range s.Views {
		var parts []*Script
		for _, p := range s.parts {
			if slices.Contains(p.Views, name) {
				parts = append(parts, p)
			}
		}
		obj := func(p *Script, n string) string { return ident(p.World) + "." + ident(n) }
		for _, v := range []string{name, name + "_raw"} {
			fmt.Fprintf(&sb, "CREATE OR REPLACE VIEW main.%s AS\n  %s;\n", ident(v), union(parts, func(p *Script) string {
				return fmt.Sprintf("SELECT %s AS world, * FROM %s", lit(p.World), obj(p, v))
			}))
		}
		for _, m := range []struct{ name, args string }{
			{atMacro(name), "t"}, {diffMacro(name), "a, b"}, {changesMacro(name), "f, t"}, {asOfMacro(name), "instant"},
		} {
			fmt.Fprintf(&sb, "CREATE OR REPLACE MACRO main.%s(%s) AS TABLE\n  %s;\n", ident(m.name), m.args, union(parts, func(p *Script) string {
				return fmt.Sprintf("SELECT %s AS world, * FROM %s(%s)", lit(p.World), obj(p, m.name), m.args)
			}))
		}
	}
	// The ticks each world's views show: world is the world whose views
	// show it, published_by the world whose catalog published it (an
	// ancestor's, for a tick a fork inherits).
	fmt.Fprintf(&sb, "CREATE OR REPLACE VIEW main.worldfs_ticks AS\n  %s;\n", union(s.parts, func(p *Script) string {
		return fmt.Sprintf("SELECT %s AS world, t.world AS published_by, t.* EXCLUDE (world) FROM %s.worldfs_ticks t", lit(p.World), ident(p.World))
	}))
	for _, v := range []string{"worldfs_tags", "worldfs_worlds"} {
		fmt.Fprintf(&sb, "CREATE OR REPLACE VIEW main.%s AS\n  %s;\n", v, union(s.parts, func(p *Script) string {
			return fmt.Sprintf("SELECT * FROM %s.%s", ident(p.World), v)
		}))
	}
	sb.WriteString("SET search_path = 'main';\n")
	return sb.String()
}
