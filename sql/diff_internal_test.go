package sql

import (
	"context"
	"database/sql"
	"math"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// diffRows runs q on db and returns its rows as text, one a line.
func diffRows(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var sb strings.Builder
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if i > 0 {
				sb.WriteString(" ")
			}
			sb.WriteString(cell(v))
		}
		sb.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return sb.String()
}

// The change macros compare component values as SQL's IS DISTINCT FROM
// does: NULL equals NULL and differs from a value, NaN equals NaN, -0.0
// equals 0.0; an entity absent from one side is an insert or a delete,
// and one that despawns and respawns is a delete then an insert in the
// change feed and, tick against tick, an update or nothing. Both forms of
// _changes (the one worldfs runs, reading a range through the planner's
// file lists, and the printed one, filtering the view) say the same.
// With `<>` in place of IS DISTINCT FROM, entity 2 (NULL to 1) and 5 (1 to
// NULL) go missing and the test fails.
func TestChangeMacrosCompareAsSQLDoes(t *testing.T) {
	ctx := context.Background()
	// tick, entity, c: ticks 1, 2 and 4 (3 is not a tick: the change feed
	// compares 4 with 2).
	const values = `(1, 1, NULL), (2, 1, NULL),
	(1, 2, NULL), (2, 2, 1.0::DOUBLE),
	(1, 3, 'NaN'::DOUBLE), (2, 3, 'NaN'::DOUBLE),
	(1, 4, '-0.0'::DOUBLE), (2, 4, 0.0::DOUBLE),
	(1, 5, 1.0), (2, 5, NULL),
	(1, 6, 'NaN'::DOUBLE), (2, 6, 1.0),
	(1, 7, 7.0),
	(2, 8, 8.0),
	(1, 9, 9.0), (4, 9, 9.0),
	(1, 10, 10.0), (2, 10, 10.0), (4, 10, 11.0)`
	defs := `CREATE TEMP VIEW t AS SELECT entity_id::BIGINT AS entity_id, tick::BIGINT AS tick, c::DOUBLE AS c FROM (VALUES ` + values + `) v(tick, entity_id, c);
CREATE TEMP MACRO t_at(t) AS TABLE SELECT * FROM t WHERE tick = t;
CREATE TEMP MACRO worldfs_between_t(lo, hi) AS TABLE SELECT * FROM t WHERE tick BETWEEN lo AND hi;
CREATE TEMP VIEW worldfs_tick_list AS SELECT * FROM ` + ticksServed + `;
`
	macros := changeMacros("t", []string{`"c"`}, false)
	l := &tickList{}
	var rows []tickRow
	for _, tk := range []int64{1, 2, 4} {
		rows = append(rows, tickRow{World: "w", Run: "main", Tick: tk, PublishedMs: 1000 * tk})
	}
	l.rowsList.v, l.rowsList.done = rows, true
	results := map[string]string{}
	var want string
	for form, text := range map[string]string{"run": strings.ReplaceAll(runText(macros), markRef, ""), "plain": strings.ReplaceAll(plainText(macros), markRef, "")} {
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if err := registerTicks(ctx, db, l, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(defs + text); err != nil {
			t.Fatalf("%s: %v\n%s", form, err, text)
		}
		diff := diffRows(t, db, "FROM t_diff(1, 2)")
		want = `update_preimage 2 1 NULL
update_postimage 2 2 1
update_preimage 5 1 1
update_postimage 5 2 NULL
update_preimage 6 1 NaN
update_postimage 6 2 1
delete 7 1 7
insert 8 2 8
delete 9 1 9
`
		if diff != want {
			t.Fatalf("%s: t_diff(1, 2):\n%s\nwant:\n%s", form, diff, want)
		}
		if got := diffRows(t, db, "FROM t_diff(2, 2)"); got != "" {
			t.Fatalf("%s: a tick against itself: %s", form, got)
		}
		// Tick 1 against 4: entity 9 despawned and respawned with its
		// value: not a change; 10 changed.
		if got, want := diffRows(t, db, "SELECT change_type, entity_id FROM t_diff(1, 4) WHERE entity_id >= 9"), "update_preimage 10\nupdate_postimage 10\n"; got != want {
			t.Fatalf("%s: t_diff(1, 4):\n%s\nwant:\n%s", form, got, want)
		}
		changes := diffRows(t, db, "SELECT tick, change_type, entity_id, c FROM t_changes(2, 4) WHERE entity_id >= 7")
		wantChanges := `2 delete 7 7
2 insert 8 8
2 delete 9 9
4 delete 8 8
4 insert 9 9
4 update_preimage 10 10
4 update_postimage 10 11
`
		if changes != wantChanges {
			t.Fatalf("%s: t_changes(2, 4):\n%s\nwant:\n%s", form, changes, wantChanges)
		}
		// From the first tick, everything is an insert.
		results[form] = diffRows(t, db, "FROM t_changes(0, 4)")
		if !strings.HasPrefix(results[form], "1 insert 1 NULL\n") {
			t.Fatalf("%s: t_changes(0, 4) starts with:\n%s", form, results[form])
		}
		results[form] += diffRows(t, db, "FROM t_as_of(TIMESTAMPTZ '1970-01-01 00:00:03+00')") +
			diffRows(t, db, "SELECT count(*) FROM t_as_of(TIMESTAMPTZ '1970-01-01 00:00:00.999+00')")
	}
	// worldfs_diff, across schemas, compares alike: tick 1 of one world's
	// t against tick 2 of another's.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	across := ""
	for _, w := range []string{"w1", "w2"} {
		across += "CREATE SCHEMA " + w + "; CREATE MACRO " + w + ".t_at(t) AS TABLE SELECT * FROM (SELECT entity_id::BIGINT AS entity_id, tick::BIGINT AS tick, c::DOUBLE AS c FROM (VALUES " + values + ") v(tick, entity_id, c)) WHERE tick = t;\n"
	}
	if _, err := db.Exec(across + diffMacroAcross()); err != nil {
		t.Fatal(err)
	}
	if got := diffRows(t, db, "FROM worldfs_diff('t', 'w1', 1, 'w2', 2)"); got != want {
		t.Fatalf("worldfs_diff('t', 'w1', 1, 'w2', 2):\n%s\nwant:\n%s", got, want)
	}
	if results["run"] != results["plain"] {
		t.Fatalf("the forms differ:\nrun:\n%s\nplain:\n%s", results["run"], results["plain"])
	}
	if !strings.Contains(results["run"], "10 2 10\n0\n") {
		t.Fatalf("t_as_of: the newest tick published at or before 3 s is 2 (entity 10 at tick 2), none before 1 s:\n%s", results["run"])
	}
}

// A crashed attempt's rows never reach a diff or the change feed, even
// when a manifest hands its file in by mistake (the row check reads it):
// tick 5 of the views shows the published frame, and _diff(4, 5) and
// _changes(5, 5) equal tick 4 against tick 5 of the view, which the
// token check filters. The crashed file holds tick 5's frame with every
// entity moved. With the token check dropped from the range macro's
// checked files, the change feed shows the crashed rows and the test
// fails.
func TestDiffNeverShowsACrashedAttempt(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 5)
	particle := particles.Tables()[0]
	s, _, _ := index.Load(ctx, b, "w")
	tk, _ := s.Tick("main", 5)
	var frags []fragment
	l := &tickList{}
	l.rowsList.done = true
	s.Ticks("main", 0, func(x *index.Tick) bool {
		l.rowsList.v = append(l.rowsList.v, tickRow{World: "w", Run: "main", Tick: x.Tick, PublishedMs: x.PublishedUnixMs, CommitToken: x.CommitToken, WriterEpoch: x.WriterEpoch})
		for _, tf := range enginetest.Tables(t, x) {
			if tf.Table == particle.ID {
				p, _ := b.Path(tf.Fragments[0].Path)
				frags = append(frags, fragment{world: "w", run: "main", table: tf.Table, path: p, tick: x.Tick, token: x.CommitToken, epoch: x.WriterEpoch, filtered: true, first: x.Tick, last: x.Tick})
			}
		}
		return true
	})
	moved := w.Frame("particle").Clone()
	for i := range moved.Float64("position_x") {
		moved.Float64("position_x")[i] += 1000
	}
	data, err := engine.EncodeFragment(moved, engine.Stamp{Tick: 5, CommitToken: tk.CommitToken + "-crashed", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	orphan := index.FragmentPath("w", "main", particle.ID, tk.CommitToken+"-crashed", 0)
	if _, err := b.Create(ctx, orphan, data); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Path(orphan)
	frags = append(frags, fragment{world: "w", run: "main", table: particle.ID, path: p, tick: 5, token: tk.CommitToken, epoch: tk.WriterEpoch, filtered: true, first: 5, last: 5})
	infos := map[string]engine.TableInfo{"w/" + particle.ID: particle.Info()}
	script, err := render("w", "main", math.MaxInt64, &history{frags: frags}, infos, []string{"(0, 'w', 'main', NULL)"}, t.TempDir(), nil, l, worldRow{world: index.World{ID: "w"}, run: "main"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, script)
	if err != nil {
		t.Fatalf("%v\n%s", err, script.run)
	}
	defer db.Close()
	var far int64
	if err := db.QueryRow("SELECT count(*) FROM particle WHERE position_x > 500").Scan(&far); err != nil || far != 0 {
		t.Fatalf("the view shows %d crashed rows (%v)", far, err)
	}
	byJoin := `(WITH x AS (FROM particle WHERE tick = 4), y AS (FROM particle WHERE tick = 5)
	  SELECT count(*) FILTER (WHERE x.entity_id IS NULL) AS ins, count(*) FILTER (WHERE y.entity_id IS NULL) AS del,
	    count(*) FILTER (WHERE x.entity_id = y.entity_id AND row(x.position_x, x.position_y, x.velocity_x, x.velocity_y) IS DISTINCT FROM row(y.position_x, y.position_y, y.velocity_x, y.velocity_y)) AS upd
	  FROM x FULL OUTER JOIN y ON x.entity_id = y.entity_id)`
	want := diffRows(t, db, "FROM "+byJoin)
	for _, q := range []string{"particle_diff(4, 5)", "particle_changes(5, 5)"} {
		got := diffRows(t, db, "SELECT count(*) FILTER (WHERE change_type = 'insert'), count(*) FILTER (WHERE change_type = 'delete'), count(*) FILTER (WHERE change_type = 'update_postimage') FROM "+q)
		if got != want || want == "0 0 0\n" {
			t.Fatalf("%s: inserts, deletes, updates %s; the view's tick 4 against 5: %s", q, got, want)
		}
	}
}
