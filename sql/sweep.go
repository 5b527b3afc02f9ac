package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A sweep is a session of several worlds read as one table (Sweep). Each
// world's views are planned as its own (Build: its allowlist, its
// lineage, its fragment list), and the sweep reads those plans as data:
// one table of every world's fragment list, each row with the world whose
// views list it (worldfs_fragments' sweep_world), and per view one read
// of the files of each table id, each row joined to the worlds whose
// lists name its file, within the ticks each world's plan shows of it
// (first_tick..last_tick: a fork reads its parent's files up to its fork
// point), a file the catalog does not prove through the row rule
// (index.RowRule) against that world's published ticks. So every row is
// of a world whose views show it: a fork's inherited history is in its
// rows once per fork, as its own views show it, a file shared by many
// worlds is read once, and no world's invisible tick is in any. Its
// objects: <table>, <table>_raw, the macros <table>_at, _diff, _changes
// and _as_of, worldfs_ticks, worldfs_tags, worldfs_worlds (each with a
// world column first), worldfs_diff(table, world_a, a, world_b, b)
// across worlds, and worldfs_fragments. The statements that define them
// are a few per table, whatever the number of worlds: a thousand worlds
// open about as fast as ten (a session of one schema per world, Join,
// costs DuckDB about a millisecond per object per world).
//
// Worlds whose tables differ join by column name (UNION ALL BY NAME): a
// world whose table lacks a column shows NULL there; a column of one name
// and two types in two worlds is refused when the session is made,
// naming both (SweepColumnError). History no catalog lists (legacy,
// uncoordinated) is refused: its rows are found by listing, not planned.

// worldRow is what worldfs_worlds shows of a world: its record, the run
// of the views, the newest tick they show (nil: none, or not known for
// history no catalog lists) and its tags.
type worldRow struct {
	world index.World
	run   string
	head  *int64
	tags  []index.Tag
}

// worldsCols are worldfs_worlds' columns.
const worldsCols = "world, run, parent, fork_run, fork_tick, head_tick, created_at, meta, tags"

// values is the row as SQL values: world, run, parent, fork_run,
// fork_tick, head_tick, created_at, meta (a MAP of the run parameters),
// tags (a MAP of the tags of the run to their ticks).
func (r worldRow) values() string {
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
	return fmt.Sprintf("(%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::BIGINT, %s::BIGINT, TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(%d::BIGINT), "+
		"MAP {%s}::MAP(VARCHAR, VARCHAR), MAP {%s}::MAP(VARCHAR, BIGINT))",
		lit(w.ID), lit(r.run), parent, forkRun, forkTick, head, w.CreatedUnixMs, strings.Join(meta, ", "), strings.Join(tags, ", "))
}

// worldsView defines worldfs_worlds over rows (SQL values, worldRow's).
func worldsView(rows ...string) string {
	return fmt.Sprintf("CREATE OR REPLACE TEMP VIEW worldfs_worlds AS SELECT * FROM (VALUES %s) w(%s);\n", strings.Join(rows, ",\n  "), worldsCols)
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
// each of another world, all of one views directory) read as one: see
// above. Even a single world's views get their world column.
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
		if len(s.Unlisted) > 0 {
			return nil, fmt.Errorf("world %s: table %s holds history no catalog lists (legacy or uncoordinated), which a sweep cannot read; query the world alone (--world %s)",
				s.World, s.Unlisted[0], s.World)
		}
		if s.WorldRow == "" {
			return nil, fmt.Errorf("world %s: views of an older worldfs; build them again", s.World)
		}
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

// Only returns the sweep s with the views and macros of the tables
// called names alone (each a table of the sweep), and every object a
// sweep has besides (worldfs_fragments, worldfs_ticks, worldfs_tags,
// worldfs_worlds, worldfs_diff): for a reader of one table of many
// worlds (the web interface's sweep page), which DuckDB then defines in
// part of the time, each table costing it a few statements per table
// id. A world's own views are narrowed as they are built
// (Options.Table).
func (s *Script) Only(names ...string) (*Script, error) {
	if !s.sweep {
		return nil, errors.New("only a sweep's views are narrowed after they are built; narrow a world's with Options.Table")
	}
	for _, n := range names {
		if !slices.Contains(s.Views, n) {
			return nil, fmt.Errorf("table %q is not a table of the sweep; its tables: %s", n, strings.Join(s.Views, ", "))
		}
	}
	o := *s
	o.Views = slices.DeleteFunc(slices.Clone(s.Views), func(v string) bool { return !slices.Contains(names, v) })
	return &o, nil
}

// SweepBuilds is how many worlds' views BuildSweep builds at once.
const SweepBuilds = 8

// BuildSweep builds the views of each of worlds with opts (Build, several
// at once) and returns them as one sweep (Sweep). A world's failure names
// it.
func BuildSweep(ctx context.Context, b bucket.Bucket, worlds []string, opts Options) (*Script, error) {
	scripts := make([]*Script, len(worlds))
	// Not errgroup.WithContext: a script keeps its build's context for
	// what it reads later (the ticks of compacted files, reused views'
	// catalogs), which must outlive the builds.
	var g errgroup.Group
	g.SetLimit(SweepBuilds)
	for i, w := range worlds {
		g.Go(func() error {
			s, err := Build(ctx, b, w, opts)
			if err != nil {
				return fmt.Errorf("world %s of the sweep: %w", w, err)
			}
			scripts[i] = s
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return Sweep(scripts...)
}

// sweepTicksFunc serves the visible ticks of every world of a sweep.
const sweepTicksFunc = "worldfs_sweep_ticks"

// sweepText is the sweep's script: printed, for a DuckDB outside worldfs
// (the worlds' visible ticks read from lists written in the views
// directory), or the one worldfs runs (served by sweepTicksFunc).
func (s *Script) sweepText(printed bool) (string, error) {
	var sb strings.Builder
	worlds := s.Worlds()
	fmt.Fprintf(&sb, "-- worldfs views of a sweep of %d worlds (%s), run %s: one table of them all, each row of the world whose views show it.\n",
		len(worlds), strings.Join(worlds[:min(len(worlds), 5)], ", ")+map[bool]string{true: ", …", false: ""}[len(worlds) > 5], s.Run)
	// The worlds' fragment lists, as one table. A list several worlds
	// share (forks whose views read the same files) is read once.
	var lists, pairs []string
	for _, p := range s.parts {
		pairs = append(pairs, fmt.Sprintf("(%s, %s)", lit(p.World), lit(p.FragmentList)))
		if !slices.Contains(lists, lit(p.FragmentList)) {
			lists = append(lists, lit(p.FragmentList))
		}
	}
	fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP TABLE worldfs_sweep_lists AS SELECT * FROM (VALUES %s) l(world, list);\n", strings.Join(pairs, ", "))
	fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP TABLE worldfs_fragments AS SELECT l.world AS sweep_world, f.* EXCLUDE (filename)\n"+
		"  FROM read_parquet([%s], filename = true) f JOIN worldfs_sweep_lists l ON f.filename = l.list;\n", strings.Join(lists, ", "))
	// The worlds' visible ticks: world, the world whose catalog published
	// it (published_by: an ancestor's, for a tick a fork inherits), then
	// as each world's worldfs_tick_list.
	if printed {
		var tlists, tpairs []string
		for _, p := range s.parts {
			path, err := p.ticks.list()
			if err != nil {
				return "", err
			}
			tpairs = append(tpairs, fmt.Sprintf("(%s, %s)", lit(p.World), lit(path)))
			if !slices.Contains(tlists, lit(path)) {
				tlists = append(tlists, lit(path))
			}
		}
		fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP VIEW worldfs_tick_list AS SELECT l.world, t.world AS published_by, t.* EXCLUDE (world, filename)\n"+
			"  FROM read_parquet([%s], filename = true) t JOIN (VALUES %s) l(world, list) ON t.filename = l.list;\n", strings.Join(tlists, ", "), strings.Join(tpairs, ", "))
	} else {
		fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP VIEW worldfs_tick_list AS SELECT * FROM %s();\n", sweepTicksFunc)
	}
	sb.WriteString(`CREATE OR REPLACE TEMP VIEW worldfs_ticks AS
  SELECT t.world, t.published_by, t.run, t.tick, CASE WHEN t.published_ms > 0 THEN TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(t.published_ms) END AS published_at,
    t.commit_token, t.writer_epoch, s.tables
  FROM worldfs_tick_list t LEFT JOIN (
    SELECT sweep_world, tick, commit_token, list({'table': view, 'rows': rows, 'bytes': bytes} ORDER BY view) AS tables FROM (
      SELECT sweep_world, tick, commit_token, view, sum(nullif(rows, -1))::BIGINT AS rows, sum(nullif(bytes, -1))::BIGINT AS bytes
      FROM worldfs_fragments WHERE filtered AND NOT fact AND NOT compacted GROUP BY ALL)
    GROUP BY ALL) s ON s.sweep_world = t.world AND s.tick = t.tick AND s.commit_token = t.commit_token;
`)
	var tags, rows []string
	for _, p := range s.parts {
		rows = append(rows, p.WorldRow)
		for _, t := range p.Tags {
			tags = append(tags, fmt.Sprintf("(%s, %s, %s, %d, %s, %s, %d)", lit(p.World), lit(t.Name), lit(t.Run), t.Tick, lit(t.CommitToken), lit(t.Message), t.CreatedUnixMs))
		}
	}
	if len(tags) == 0 {
		sb.WriteString(tagsView("", nil))
	} else {
		fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP VIEW worldfs_tags AS SELECT world::VARCHAR AS world, name::VARCHAR AS name, run::VARCHAR AS run, tick::BIGINT AS tick, "+
			"commit_token::VARCHAR AS commit_token, message::VARCHAR AS message, TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(created_ms::BIGINT) AS created_at\n"+
			"  FROM (VALUES %s) t(world, name, run, tick, commit_token, message, created_ms);\n", strings.Join(tags, ",\n  "))
	}
	sb.WriteString(worldsView(rows...))
	keep := s.omitted(&sb)
	for _, name := range s.Views {
		s.sweepTable(&sb, name, keep)
	}
	sb.WriteString(sweepDiffAcross())
	text := sb.String()
	if printed {
		return plainSQL.Replace(text), nil
	}
	return checkedSQL.Replace(text), nil
}

// sweepTable writes the sweep's views and macros of the table called
// name, reading the rows of worldfs_fragments that keep (a condition
// that follows others, or "") keeps.
func (s *Script) sweepTable(sb *strings.Builder, name, keep string) {
	var ids, cols []string
	dirOf := map[string]string{} // a table id's views directory (its witness)
	mixed := false
	for _, p := range s.parts {
		for _, id := range p.TableIDs[name] {
			if _, ok := dirOf[id]; !ok {
				ids = append(ids, id)
				dirOf[id] = filepath.Dir(p.FragmentList)
			}
		}
		for _, c := range p.Columns[name] {
			if q := ident(c.Name); !slices.Contains(cols, q) {
				cols = append(cols, q)
			}
		}
		mixed = mixed || slices.Contains(p.Mixed, name)
	}
	slices.Sort(ids)
	colList := strings.Join(append([]string{"entity_id", "tick"}, cols...), ", ")
	if mixed {
		fmt.Fprintf(sb, "CREATE OR REPLACE TEMP TABLE %s AS SELECT DISTINCT sweep_world AS world, tick, commit_token FROM worldfs_fragments WHERE view = %s AND filtered;\n",
			ident("worldfs_sweep_pub_"+name), lit(name))
	}
	// Per table id: each world's files and the ticks it shows of each
	// (its map), the files once (the witness, an empty file of the
	// schema, first), and their bounds for <table>_at (a file some world
	// reads through the row check: every tick).
	var reads []func(list, where string) string
	for _, id := range ids {
		m, files, bounds := "worldfs_sweep_"+name+"_"+id, "worldfs_sweep_"+name+"_"+id+"_files", "worldfs_sweep_"+name+"_"+id+"_bounds"
		witness := lit(witnessPath(dirOf[id], id))
		fmt.Fprintf(sb, "CREATE OR REPLACE TEMP TABLE %s AS SELECT sweep_world AS world, path, min(first_tick) AS lo, max(last_tick) AS hi, bool_and(filtered AND proven) AS proven\n"+
			"  FROM worldfs_fragments WHERE view = %s AND table_id = %s%s GROUP BY ALL;\n", ident(m), lit(name), lit(id), keep)
		fmt.Fprintf(sb, "SET VARIABLE %s = (SELECT list_concat([%s, %s], coalesce(list(path ORDER BY path), []::VARCHAR[])) FROM (SELECT DISTINCT path FROM %s));\n",
			ident(files), witness, witness, ident(m))
		fmt.Fprintf(sb, "SET VARIABLE %s = (SELECT list({'path': path, 'lo': lo, 'hi': hi} ORDER BY path) FROM (\n"+
			"  SELECT %s AS path, '%d'::BIGINT AS lo, '%d'::BIGINT AS hi UNION ALL\n"+
			"  SELECT path, CASE WHEN bool_and(proven) THEN min(lo) ELSE '%d'::BIGINT END, CASE WHEN bool_and(proven) THEN max(hi) ELSE '%d'::BIGINT END FROM %s GROUP BY path));\n",
			ident(bounds), witness, int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), ident(m))
		cond := "r.tick BETWEEN m.lo AND m.hi"
		if mixed {
			rule := index.RowRule.SQL(index.SQLColumns{Tick: "r.tick", Token: "r.commit_token", Epoch: "r.writer_epoch",
				Published: "SELECT p.tick, p.commit_token FROM " + ident("worldfs_sweep_pub_"+name) + " p WHERE p.world = m.world"})
			cond = fmt.Sprintf("(m.proven AND %s OR NOT m.proven AND %s)", cond, rule)
		}
		reads = append(reads, func(list, where string) string {
			if list == "" {
				list = "getvariable(" + lit(files) + ")"
			}
			return fmt.Sprintf("SELECT m.world, r.* EXCLUDE (filename) FROM read_parquet(%s, filename = true) r JOIN %s m ON r.filename = m.path WHERE %s%s",
				verifiedList(list), ident(m), cond, where)
		})
		_ = bounds
	}
	union := func(list func(id string) string, where string) string {
		qs := make([]string, len(reads))
		for i, read := range reads {
			qs[i] = read(list(ids[i]), where)
		}
		return strings.Join(qs, "\n    UNION ALL BY NAME ")
	}
	whole := func(string) string { return "" }
	boundsIn := func(cond string) func(id string) string {
		return func(id string) string {
			return "[f['path'] FOR f IN getvariable(" + lit("worldfs_sweep_"+name+"_"+id+"_bounds") + ") IF " + cond + "]"
		}
	}
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP VIEW %s AS SELECT world, %s, commit_token, writer_epoch FROM (\n    %s);\n", ident(name+"_raw"), colList, union(whole, ""))
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP VIEW %s AS SELECT world, %s FROM (\n    %s);\n", ident(name), colList, union(whole, ""))
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP MACRO %s(t) AS TABLE SELECT world, %s FROM (\n    %s);\n", ident(atMacro(name)), colList,
		union(boundsIn("f['lo'] <= t AND t <= f['hi']"), " AND r.tick = t"))
	sb.WriteString(sweepChangeMacros(name, cols))
}

// sweepChangeMacros defines the sweep's <table>_diff, _changes and
// _as_of (as changeMacros does a world's), each world's rows compared
// with its own: the world is part of every key.
func sweepChangeMacros(name string, cols []string) string {
	differs := "false"
	var ds []string
	for _, c := range cols {
		ds = append(ds, "x."+c+" IS DISTINCT FROM y."+c)
	}
	if len(ds) > 0 {
		differs = strings.Join(ds, " OR ")
	}
	of := func(side string) string {
		return side + ".world, " + side + ".entity_id, " + side + ".tick" + sideCols(cols, side)
	}
	colList := strings.Join(append([]string{"entity_id", "tick"}, cols...), ", ")
	var sb strings.Builder
	fmt.Fprintf(&sb, `CREATE OR REPLACE TEMP MACRO %[1]s(a, b) AS TABLE
  WITH x AS (SELECT * FROM %[2]s(a)), y AS (SELECT * FROM %[2]s(b))
  SELECT world, change_type, %[3]s FROM (
    SELECT CASE WHEN y.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, %[4]s, 0 AS worldfs_side
      FROM x LEFT JOIN y ON x.world = y.world AND x.entity_id = y.entity_id WHERE y.entity_id IS NULL OR %[6]s
    UNION ALL
    SELECT CASE WHEN x.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END, %[5]s, 1
      FROM y LEFT JOIN x ON x.world = y.world AND x.entity_id = y.entity_id WHERE x.entity_id IS NULL OR %[6]s)
  ORDER BY world, entity_id, worldfs_side;
`, ident(diffMacro(name)), ident(atMacro(name)), colList, of("x"), of("y"), differs)
	// Per world: the ticks from the one before f (or f) to t, each with
	// the tick before it; x: each row with the tick after its own (the
	// state a change at that tick left), y: the rows of ticks f..t.
	fmt.Fprintf(&sb, `CREATE OR REPLACE TEMP MACRO %[1]s(f, t) AS TABLE
  WITH lb AS (SELECT world, coalesce(before, f) AS lo FROM (SELECT world, max(tick) FILTER (WHERE tick < f) AS before FROM worldfs_tick_list GROUP BY world)),
  k AS (SELECT l.world, l.tick, lag(l.tick) OVER (PARTITION BY l.world ORDER BY l.tick) AS prev FROM worldfs_tick_list l JOIN lb USING (world)
        WHERE l.tick <= t AND l.tick >= lb.lo),
  r AS (SELECT v.* FROM %[2]s v JOIN lb USING (world) WHERE v.tick >= lb.lo AND v.tick <= t),
  x AS (SELECT r.*, k.tick AS worldfs_at FROM r JOIN k ON r.world = k.world AND r.tick = k.prev WHERE k.tick >= f),
  y AS (SELECT r.*, r.tick AS worldfs_at FROM r WHERE r.tick >= f)
  SELECT world, tick, change_type, %[3]s FROM (
    SELECT x.world, x.worldfs_at AS tick, CASE WHEN y.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, %[4]s, 0 AS worldfs_side
      FROM x LEFT JOIN y ON x.world = y.world AND x.entity_id = y.entity_id AND x.worldfs_at = y.worldfs_at WHERE y.entity_id IS NULL OR %[6]s
    UNION ALL
    SELECT y.world, y.worldfs_at, CASE WHEN x.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END, %[5]s, 1
      FROM y LEFT JOIN x ON x.world = y.world AND x.entity_id = y.entity_id AND x.worldfs_at = y.worldfs_at WHERE x.entity_id IS NULL OR %[6]s)
  ORDER BY world, tick, entity_id, worldfs_side;
`, ident(changesMacro(name)), ident(name), strings.Join(append([]string{"entity_id"}, cols...), ", "),
		"x.entity_id"+sideCols(cols, "x"), "y.entity_id"+sideCols(cols, "y"), differs)
	fmt.Fprintf(&sb, `CREATE OR REPLACE TEMP MACRO %[1]s(instant) AS TABLE
  SELECT v.world, %[3]s FROM %[2]s v JOIN (SELECT world, max(tick) AS tick FROM worldfs_tick_list
    WHERE published_ms > 0 AND published_ms <= epoch_ms(instant::TIMESTAMPTZ) GROUP BY world) k ON v.world = k.world AND v.tick = k.tick;
`, ident(asOfMacro(name)), ident(name), sideCols(append([]string{"entity_id", "tick"}, cols...), "v")[2:])
	return sb.String()
}

// sweepDiffAcross defines worldfs_diff(tbl, wa, a, wb, b) over a sweep:
// the entities of table tbl that differ between tick a of world wa and
// tick b of world wb (run 17 against run 42), as <table>_diff shows them
// within a world, each side read through <table>_at of the sweep.
func sweepDiffAcross() string {
	side := func(w, t string) string {
		return fmt.Sprintf(`'SELECT * EXCLUDE (world, tick) FROM "' || replace(tbl || '_at', '"', '""') || '"(' || %s::BIGINT || ') WHERE world = ''' || replace(%s, '''', '''''') || ''''`, t, w)
	}
	return fmt.Sprintf(`CREATE OR REPLACE TEMP MACRO %s(tbl, wa, a, wb, b) AS TABLE
  WITH x AS (FROM query(%s)), y AS (FROM query(%s)),
  j AS (SELECT x AS xr, y AS yr FROM x FULL OUTER JOIN y ON x.entity_id = y.entity_id WHERE x IS DISTINCT FROM y)
  SELECT change_type, entity_id, tick, * EXCLUDE (change_type, entity_id, tick, worldfs_side) FROM (
    SELECT CASE WHEN yr.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, a::BIGINT AS tick, 0 AS worldfs_side, unnest(xr) FROM j WHERE xr.entity_id IS NOT NULL
    UNION ALL BY NAME
    SELECT CASE WHEN xr.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END AS change_type, b::BIGINT AS tick, 1 AS worldfs_side, unnest(yr) FROM j WHERE yr.entity_id IS NOT NULL)
  ORDER BY entity_id, worldfs_side;
`, diffFunc, side("wa", "a"), side("wb", "b"))
}

// registerSweepTicks makes sweepTicksFunc serve the visible ticks of the
// parts of s on db, each world's read when a query first needs them.
func (s *Script) registerSweepTicks(ctx context.Context, db *sql.DB) error {
	return withTypes(ctx, db, func(conn *sql.Conn, str, bigint, _ duckdb.TypeInfo) error {
		cols := []duckdb.ColumnInfo{{Name: "world", T: str}, {Name: "published_by", T: str}, {Name: "run", T: str}, {Name: "tick", T: bigint},
			{Name: "published_ms", T: bigint}, {Name: "commit_token", T: str}, {Name: "writer_epoch", T: bigint}}
		return duckdb.RegisterTableUDF(conn, sweepTicksFunc, duckdb.RowTableFunction{
			BindArgumentsContext: func(ctx context.Context, _ map[string]any, _ ...any) (duckdb.RowTableSource, error) {
				sk, _ := ctx.Value(sinkKey{}).(*sink)
				return &sweepTicksSource{parts: s.parts, cols: cols, sink: sk}, nil
			},
		})
	})
}

// sweepTicksSource is one scan of sweepTicksFunc: each part's ticks in
// turn.
type sweepTicksSource struct {
	parts []*Script
	cols  []duckdb.ColumnInfo
	sink  *sink

	part int
	rows []tickRow
	i    int
}

func (s *sweepTicksSource) ColumnInfos() []duckdb.ColumnInfo     { return s.cols }
func (s *sweepTicksSource) Cardinality() *duckdb.CardinalityInfo { return nil }
func (s *sweepTicksSource) Init()                                {}

func (s *sweepTicksSource) FillRow(row duckdb.Row) (bool, error) {
	for s.i >= len(s.rows) {
		if s.part >= len(s.parts) {
			return false, nil
		}
		p := s.parts[s.part]
		s.part, s.i, s.rows = s.part+1, 0, nil
		if p.ticks == nil {
			continue
		}
		rows, err := p.ticks.rows()
		if err != nil {
			if s.sink != nil {
				s.sink.set(err)
			}
			return false, err
		}
		s.rows = rows
	}
	r := s.rows[s.i]
	s.i++
	for k, v := range []any{s.parts[s.part-1].World, r.World, r.Run, r.Tick, r.PublishedMs, r.CommitToken, r.WriterEpoch} {
		if err := row.SetRowValue(k, v); err != nil {
			return false, err
		}
	}
	return true, nil
}
