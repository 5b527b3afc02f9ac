package sql_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

func ctxT(t *testing.T) context.Context { return enginetest.Context(t) }

func views(t *testing.T, b bucket.Bucket, world string, opts wsql.Options) *sql.DB {
	t.Helper()
	_, db := builtViews(t, b, world, opts)
	return db
}

// builtViews builds world's views in b and opens them (closed when the
// test ends): the script and its database.
func builtViews(t *testing.T, b bucket.Bucket, world string, opts wsql.Options) (*wsql.Script, *sql.DB) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := wsql.Build(ctxT(t), b, world, opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatalf("%v\n%s", err, plain(s))
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}

// plain returns the script s prints (or why it cannot), for failures.
func plain(s *wsql.Script) string {
	q, err := s.SQL()
	if err != nil {
		return err.Error()
	}
	return q
}

// sameRowsAsRaw fails the test unless each component view of names shows
// exactly the rows of its <view>_raw, commit columns aside (as many times
// each): the two read their files apart, each with the visibility
// filters.
func sameRowsAsRaw(t *testing.T, db *sql.DB, names ...string) {
	t.Helper()
	for _, name := range names {
		view, raw := `"`+name+`"`, `(SELECT * EXCLUDE (commit_token, writer_epoch) FROM "`+name+`_raw")`
		var only, rawOnly, rows int64
		q := "SELECT (SELECT count(*) FROM (FROM " + view + " EXCEPT ALL FROM " + raw + ")), " +
			"(SELECT count(*) FROM (FROM " + raw + " EXCEPT ALL FROM " + view + ")), (SELECT count(*) FROM " + view + ")"
		if err := db.QueryRow(q).Scan(&only, &rawOnly, &rows); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if only != 0 || rawOnly != 0 {
			t.Errorf("view %s shows %d rows %s_raw does not, and misses %d of its rows (%d rows)", name, only, name, rawOnly, rows)
		}
	}
}

func count(t *testing.T, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// expected computes, independently of the views, the visible rows of a
// table from the catalog and the raw fragments: per tick, the rows of the
// manifest's fragments stamped with the manifest's token.
func expected(t *testing.T, b bucket.Bucket, world string, table *engine.Table, upTo int64) (rows int64, perTick map[int64]int64) {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	perTick = map[int64]int64{}
	s.Ticks("main", math.MinInt64, func(tk *index.Tick) bool {
		if tk.Tick > upTo {
			return false
		}
		for _, tf := range enginetest.Tables(t, tk) {
			if tf.Table != table.ID {
				continue
			}
			for _, f := range tf.Fragments {
				data, _, err := b.Get(ctxT(t), f.Path)
				if err != nil {
					t.Fatal(err)
				}
				fr, err := engine.DecodeFragment(table, data, func(r engine.StampedRow) bool {
					return r.Tick == tk.Tick && r.CommitToken == tk.CommitToken
				})
				if err != nil {
					t.Fatal(err)
				}
				rows += int64(fr.Len())
				perTick[tk.Tick] += int64(fr.Len())
			}
		}
		return true
	})
	return rows, perTick
}

func TestViewsShowExactlyTheVisibleRows(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	a := enginetest.World(t, b, "w", 20)
	// A second writer takes over and publishes tick 21; the first then
	// appends its own tick 21 late and is refused as stale.
	enginetest.Resume(t, b, "w", 21)
	particles.Schedule(a)
	if _, err := a.Step(ctxT(t)); err == nil {
		t.Fatal("the stale writer published")
	}
	particle := particles.Tables()[0]
	wantRows, perTick := expected(t, b, "w", particle, math.MaxInt64)
	db := views(t, b, "w", wsql.Options{})
	if got := count(t, db, "SELECT count(*) FROM particle"); got != wantRows || wantRows == 0 {
		t.Fatalf("particle view: %d rows, the catalog and fragments say %d", got, wantRows)
	}
	if got := count(t, db, "SELECT count(*) FROM particle_at(7)"); got != perTick[7] {
		t.Fatalf("particle_at(7): %d rows, want %d", got, perTick[7])
	}
	// Exactly one attempt per tick is visible, and the stale writer's late
	// rows are in the bucket but not in the views.
	if got := count(t, db, "SELECT count(*) FROM (SELECT tick FROM particle_raw GROUP BY tick HAVING count(DISTINCT commit_token) > 1)"); got != 0 {
		t.Fatalf("%d ticks show more than one attempt", got)
	}
	s, _, _ := index.Load(ctxT(t), b, "w")
	tk, _ := s.Tick("main", 21)
	if got := count(t, db, "SELECT count(*) FROM particle_raw WHERE tick = 21 AND commit_token <> '"+tk.CommitToken+"'"); got != 0 {
		t.Fatalf("%d rows of another attempt at tick 21 are visible", got)
	}
	// The component view has no commit columns; the raw one does.
	var cols string
	db.QueryRow("SELECT string_agg(column_name, ',') FROM (DESCRIBE particle)").Scan(&cols)
	if strings.Contains(cols, "commit_token") || !strings.Contains(cols, "position_x") {
		t.Fatalf("particle columns: %s", cols)
	}
	if got := count(t, db, "SELECT count(*) FROM worldfs_manifests WHERE table_id = '"+particle.ID+"'"); got != 22 {
		t.Fatalf("%d particle manifests, want 22", got)
	}
	// Pinned to a tick, and to a commit token.
	at := int64(10)
	pinned := views(t, b, "w", wsql.Options{AtTick: &at})
	wantAt, _ := expected(t, b, "w", particle, 10)
	if got := count(t, pinned, "SELECT count(*) FROM particle"); got != wantAt {
		t.Fatalf("views at tick 10: %d rows, want %d", got, wantAt)
	}
	t10, _ := s.Tick("main", 10)
	byToken := views(t, b, "w", wsql.Options{Token: t10.CommitToken})
	if got := count(t, byToken, "SELECT max(tick) FROM particle"); got != 10 {
		t.Fatalf("views as of tick 10's token end at tick %d", got)
	}
	for _, d := range []*sql.DB{db, pinned, byToken} {
		sameRowsAsRaw(t, d, "particle", "emitter")
	}
}

func TestViewsOfAFork(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	p := enginetest.World(t, b, "p", 20)
	p.Close()
	f := enginetest.Fork(t, b, "p", "f", 8, 12)
	f.Close()
	particle := particles.Tables()[0]
	parentRows, _ := expected(t, b, "p", particle, 8)
	ownRows, _ := expected(t, b, "f", particle, math.MaxInt64)
	db := views(t, b, "f", wsql.Options{})
	if got := count(t, db, "SELECT count(*) FROM particle"); got != parentRows+ownRows {
		t.Fatalf("fork view: %d rows, want %d inherited + %d own", got, parentRows, ownRows)
	}
	if got := count(t, db, "SELECT max(tick) FROM particle WHERE tick <= 8"); got != 8 {
		t.Fatalf("inherited history ends at %d", got)
	}
	if got := count(t, db, "SELECT count(*) FROM worldfs_lineage"); got != 2 {
		t.Fatalf("%d lineage segments", got)
	}
	// The lineage's columns are typed alike whatever a world's lineage
	// holds: a world without a parent has only a NULL up_to_tick, which
	// must still be a BIGINT, not DuckDB's type of a bare NULL.
	for _, d := range []*sql.DB{db, views(t, b, "p", wsql.Options{})} {
		var types string
		if err := d.QueryRow("SELECT string_agg(column_type, ',' ORDER BY column_name) FROM (DESCRIBE worldfs_lineage)").Scan(&types); err != nil {
			t.Fatal(err)
		}
		if types != "VARCHAR,INTEGER,BIGINT,VARCHAR" {
			t.Fatalf("worldfs_lineage column types (run, segment, up_to_tick, world): %s", types)
		}
	}
}

func TestViewsOfUncoordinatedAndLegacyHistory(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w, err := engine.Uncoordinated(ctxT(t), "bare", b, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, w, 5)
	db := views(t, b, "bare", wsql.Options{})
	if got := count(t, db, "SELECT count(DISTINCT tick) FROM emitter"); got != 6 {
		t.Fatalf("uncoordinated emitter view covers %d ticks, want 6 (unfiltered)", got)
	}
}

// A world continued from v0.2 history shows its legacy rows as epoch-0
// history, then its own published ticks, in one view per table name.
func TestViewsOfLegacyHistory(t *testing.T) {
	b, w := enginetest.Legacy(t, "../testdata/legacy", "legacyworld", 7)
	w.Close()
	db := views(t, b, "legacyworld", wsql.Options{})
	// Ticks 0-4 are legacy (epoch 0, no token), 5-7 published.
	if got := count(t, db, "SELECT count(DISTINCT tick) FROM emitter_raw WHERE commit_token = '' AND writer_epoch = 0"); got != 5 {
		t.Fatalf("%d legacy ticks visible, want 5", got)
	}
	if got := count(t, db, "SELECT count(DISTINCT tick) FROM emitter WHERE tick >= 5"); got != 3 {
		t.Fatalf("%d own ticks visible, want 3", got)
	}
	if got := count(t, db, "SELECT count(*) FROM particle_at(4)"); got != 9 {
		t.Fatalf("legacy tick 4 shows %d particles, want 9", got)
	}
	// Pinned inside the legacy history, the views cut the legacy rows at
	// the pin.
	at := int64(3)
	pinned := views(t, b, "legacyworld", wsql.Options{AtTick: &at})
	if got := count(t, pinned, "SELECT max(tick) FROM emitter"); got != 3 {
		t.Fatalf("views pinned at tick 3 end at tick %d", got)
	}
	for _, d := range []*sql.DB{db, pinned} {
		sameRowsAsRaw(t, d, "particle", "emitter")
	}
}

func TestViewsFailClosed(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 3)
	w.Close()
	if _, err := wsql.Build(ctxT(t), b, "nope", wsql.Options{Dir: t.TempDir()}); !errors.Is(err, wsql.ErrNotFound) {
		t.Fatalf("unknown world = %v", err)
	}
	if _, err := wsql.Build(ctxT(t), b, "w", wsql.Options{Token: "no-such-token", Dir: t.TempDir()}); !errors.Is(err, wsql.ErrNotFound) {
		t.Fatalf("unknown token = %v", err)
	}
	// A corrupt slot: no views at all.
	s, _, _ := index.Load(ctxT(t), b, "w")
	name := index.SlotName("w", s.Seq)
	data, a, _ := b.Get(ctxT(t), name)
	data[len(data)/2] ^= 0xff
	b.Delete(ctxT(t), name, a.Generation)
	b.Create(ctxT(t), name, data)
	if _, err := wsql.Build(ctxT(t), b, "w", wsql.Options{Dir: t.TempDir()}); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("views of a corrupt catalog = %v, want ErrCorrupt", err)
	}
}

// The component view reads the files itself, not through <table>_raw: a
// count(*) over it plans no more projections than one over <table>_raw
// (each view a query goes through adds one to DuckDB's plan, and binding
// it costs every query), and counts the same rows.
func TestComponentViewReadsTheFilesItself(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 9).Close()
	db := views(t, b, "w", wsql.Options{})
	name := particles.Tables()[0].Name
	projections := func(view string) int {
		t.Helper()
		var plan strings.Builder
		rows, err := db.Query(`EXPLAIN SELECT count(*) FROM "` + view + `"`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var kind, text string
			if err := rows.Scan(&kind, &text); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(text)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan.String(), "READ_PARQUET") {
			t.Fatalf("the plan of %s reads no Parquet file:\n%s", view, plan.String())
		}
		return strings.Count(plan.String(), "PROJECTION")
	}
	if got, raw := projections(name), projections(name+"_raw"); got > raw {
		t.Errorf("count(*) over %s plans %d projections, over %s_raw %d: the component view goes through another view", name, got, name, raw)
	}
	if n, raw := count(t, db, `SELECT count(*) FROM "`+name+`"`), count(t, db, `SELECT count(*) FROM "`+name+`_raw"`); n != raw || n == 0 {
		t.Errorf("count(*): %d rows in %s, %d in %s_raw", n, name, raw, name)
	}
}
