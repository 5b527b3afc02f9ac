package sql_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// sweepOf opens one session of the views of worlds read as one
// (wsql.Sweep), closed when the test ends.
func sweepOf(t *testing.T, b bucket.Bucket, dir string, worlds ...string) (*wsql.Script, *sql.DB) {
	t.Helper()
	var scripts []*wsql.Script
	for _, w := range worlds {
		s, err := wsql.Build(ctxT(t), b, w, wsql.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, s)
	}
	s, err := wsql.Sweep(scripts...)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}

// lines renders a query's rows as lines, in the query's order.
func lines(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(cells, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// A sweep of 40 forks of a base world, each with its own seed in its
// metadata and its own history after its fork point: GROUP BY world,
// tick over the sweep's views equals the union of the 40 single-world
// sessions' aggregates, through the table view and each macro; a fork's
// inherited history is counted once per fork, as its own views show it;
// a tick a fork appended but never published (invisible) contributes
// nothing; worldfs_worlds lists every fork with its parent, fork tick,
// head, metadata and tags.
func TestSweepOfFortyForks(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := enginetest.Quiet
	opts.Meta = map[string]string{"gravity": "9.81"}
	base, err := engine.CreateWorld(ctx, b, "base", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, base, 12)
	base.Close()
	const forks = 40
	var worlds []string
	for i := range forks {
		name := fmt.Sprintf("sweep-%02d", i)
		worlds = append(worlds, name)
		o := enginetest.Quiet
		o.Meta = map[string]string{"seed": fmt.Sprint(100 + i)}
		at := int64(4 + i%3*4) // forks at ticks 4, 8 and 12
		f, err := engine.ForkWorld(ctx, b, "base", name, index.DefaultRun, at, particles.Tables(), o)
		if err != nil {
			t.Fatal(err)
		}
		if err := enginetest.Drive(ctx, f, at+2+int64(i%5), particles.Nudge("push", at+1, float64(i), 1)); err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			// An attempt the fork appended and never published: its rows
			// are in the bucket under a token no manifest names.
			data, err := engine.EncodeFragment(f.Frame("particle"), engine.Stamp{Tick: f.Tick() + 1, CommitToken: "unpublished", WriterEpoch: f.Epoch()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Create(ctx, index.FragmentPath(name, "main", particles.Tables()[0].ID, "unpublished", 0), data); err != nil {
				t.Fatal(err)
			}
		}
		if i == 3 {
			head := f.Tick()
			if _, err := f.Catalog().Tag(ctx, index.LoadFrom(b), index.DefaultRun, index.Moment{Text: "h", Tick: &head}, "end", ""); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	views := t.TempDir()
	sw, db := sweepOf(t, b, views, worlds...)
	// The sweep narrowed to one table: its views answer as the whole
	// sweep's, and the other tables are not defined.
	only, err := sw.Only("particle")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sw.Views, []string{"debris", "emitter", "particle"}) || !slices.Equal(only.Views, []string{"particle"}) {
		t.Fatalf("narrowed to particle: the sweep's views %v, the narrowed one's %v", sw.Views, only.Views)
	}
	narrow, err := wsql.Open(ctx, only)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { narrow.Close() })
	for _, q := range []string{
		"SELECT world, tick, count(*), sum(position_x) FROM particle GROUP BY ALL ORDER BY ALL",
		"SELECT world, count(*) FROM particle_at(9) GROUP BY ALL ORDER BY ALL",
		"SELECT world, parent, fork_tick, head_tick, meta FROM worldfs_worlds ORDER BY world",
	} {
		if got, want := lines(t, narrow, q), lines(t, db, q); len(got) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s\nnarrowed to particle: %d rows; the whole sweep: %d\n got %.5q\nwant %.5q", q, len(got), len(want), got, want)
		}
	}
	if _, err := narrow.Query("SELECT count(*) FROM emitter"); err == nil || !strings.Contains(err.Error(), "emitter") {
		t.Fatalf("the sweep narrowed to particle answered of emitter: %v", err)
	}
	if _, err := sw.Only("particle", "nebula"); err == nil || !strings.Contains(err.Error(), `table "nebula" is not a table of the sweep`) {
		t.Fatalf("narrowed to a table it does not have: %v", err)
	}
	singles := map[string]*sql.DB{}
	for _, w := range worlds {
		s, err := wsql.Build(ctx, b, w, wsql.Options{Dir: views})
		if err != nil {
			t.Fatal(err)
		}
		one, err := wsql.Open(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { one.Close() })
		singles[w] = one
	}
	for _, q := range []string{
		"SELECT world, tick, count(*), sum(position_x), sum(position_y) FROM %s GROUP BY world, tick ORDER BY ALL",
		"SELECT world, tick, count(*), sum(position_x) FROM %s_raw WHERE writer_epoch > 0 GROUP BY world, tick ORDER BY ALL",
		"SELECT world, tick, count(*), sum(position_x) FROM %s_at(9) GROUP BY world, tick ORDER BY ALL",
		"SELECT world, change_type, count(*) FROM %s_diff(3, 9) GROUP BY ALL ORDER BY ALL",
		"SELECT world, tick, change_type, count(*) FROM %s_changes(5, 11) GROUP BY ALL ORDER BY ALL",
	} {
		got := lines(t, db, fmt.Sprintf(q, "particle"))
		var want []string
		for _, w := range worlds {
			// The world's own session, its world as a constant column.
			single := strings.Replace(fmt.Sprintf(q, "particle"), "SELECT world,", "SELECT '"+w+"' AS world,", 1)
			want = append(want, lines(t, singles[w], single)...)
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(got) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s\nthrough the sweep: %d rows; the 40 sessions: %d\n got %.10q\nwant %.10q", q, len(got), len(want), got, want)
		}
	}
	// Inherited history, once per fork: tick 2 is the base's, and every
	// fork shows it.
	var forksAtTwo, baseRows int64
	if err := db.QueryRow("SELECT count(DISTINCT world), count(*) / count(DISTINCT world) FROM particle WHERE tick = 2").Scan(&forksAtTwo, &baseRows); err != nil {
		t.Fatal(err)
	}
	one, err := wsql.Build(ctx, b, "base", wsql.Options{Dir: views})
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := wsql.Open(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if want := count(t, bdb, "SELECT count(*) FROM particle WHERE tick = 2"); forksAtTwo != forks || baseRows != want {
		t.Fatalf("tick 2 (the base's): %d forks show %d rows each; want %d forks, %d rows", forksAtTwo, baseRows, forks, want)
	}
	// The unpublished attempt: no row of its tick in sweep-07's rows.
	var head int64
	if err := db.QueryRow("SELECT head_tick FROM worldfs_worlds WHERE world = 'sweep-07'").Scan(&head); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, fmt.Sprintf("SELECT count(*) FROM particle_raw WHERE world = 'sweep-07' AND (tick > %d OR commit_token = 'unpublished')", head)); n != 0 {
		t.Fatalf("sweep-07's unpublished attempt shows %d rows", n)
	}
	for _, q := range []struct{ q, want string }{
		{"SELECT count(*), count(DISTINCT meta['seed']), min(meta['gravity']), max(meta['gravity']), min(parent), max(parent) FROM worldfs_worlds", "40 40 9.81 9.81 base base"},
		{"SELECT world, fork_tick, head_tick, meta['seed'], tags['end'] FROM worldfs_worlds WHERE world IN ('sweep-03', 'sweep-07') ORDER BY world", "sweep-03 4 9 103 9|sweep-07 8 12 107 <nil>"},
		{"SELECT world, name, tick FROM worldfs_tags", "sweep-03 end 9"},
		{"SELECT count(DISTINCT world), count(*) FILTER (WHERE published_by = 'base') > 0 FROM worldfs_ticks", "40 true"},
	} {
		if got := strings.Join(lines(t, db, q.q), "|"); got != q.want {
			t.Errorf("%s: %q, want %q", q.q, got, q.want)
		}
	}
}

// Worlds whose tables differ join by column name: a column one world's
// table lacks is NULL in its rows. A column of one name and two types in
// two worlds is refused, naming the table, the column, the worlds and the
// types.
func TestSweepJoinsByColumnName(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	table := func(name string, comps ...engine.Component) *engine.Table {
		t.Helper()
		tb, err := engine.NewTable(name, comps...)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	comp := func(name string, fields ...engine.Field) engine.Component {
		t.Helper()
		c, err := engine.NewComponent(name, fields...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	make1 := func(world string, tb *engine.Table, row engine.Values) {
		t.Helper()
		w, err := engine.CreateWorld(ctx, b, world, []*engine.Table{tb}, enginetest.Quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.Spawn("agent", row); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	make1("a", table("agent", comp("pos", engine.Field{Name: "x", Type: frame.Float64})), engine.Values{"pos_x": 1.5})
	make1("b", table("agent", comp("pos", engine.Field{Name: "x", Type: frame.Float64}, engine.Field{Name: "y", Type: frame.Float64})), engine.Values{"pos_x": 2.5, "pos_y": 3.5})
	make1("c", table("agent", comp("pos", engine.Field{Name: "x", Type: frame.String})), engine.Values{"pos_x": "far"})
	_, db := sweepOf(t, b, t.TempDir(), "a", "b")
	if got := strings.Join(lines(t, db, "SELECT world, pos_x, pos_y FROM agent ORDER BY world"), "|"); got != "a 1.5 <nil>|b 2.5 3.5" {
		t.Fatalf("a sweep of worlds whose tables differ: %q", got)
	}
	var scripts []*wsql.Script
	for _, w := range []string{"a", "c"} {
		s, err := wsql.Build(ctx, b, w, wsql.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, s)
	}
	_, err = wsql.Sweep(scripts...)
	var ce *wsql.SweepColumnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "column pos_x of table agent is double in world a but string in world c") {
		t.Fatalf("a sweep of worlds typing a column differently: %v", err)
	}
}
