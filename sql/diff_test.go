package sql_test

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// components returns the component columns of view, in the views' order.
func components(t *testing.T, db *sql.DB, view string) []string {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf("SELECT column_name FROM (DESCRIBE %s) WHERE column_name NOT IN ('entity_id', 'tick')", view))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		t.Fatalf("%s has no component columns", view)
	}
	return cols
}

// joined is tick a against tick b of view written out by hand: a FULL
// OUTER JOIN of the view's rows of each tick (the whole view filtered,
// not the _at macro), shaped as _diff's rows, with tick as `at` if given.
func joined(view string, cols []string, a, b int64, at string) string {
	return joinedAcross(view, view, cols, a, b, at)
}

// joinedAcross is joined with tick a of view va against tick b of vb.
func joinedAcross(va, vb string, cols []string, a, b int64, at string) string {
	var xs, ys, xc, yc []string
	for _, c := range cols {
		xs, ys = append(xs, "x."+c+" AS x_"+c), append(ys, "y."+c+" AS y_"+c)
		xc, yc = append(xc, "x_"+c), append(yc, "y_"+c)
	}
	xt, yt := "xt", "yt"
	if at != "" {
		xt, yt = at, at
	}
	differ := fmt.Sprintf("xe IS NOT NULL AND ye IS NOT NULL AND row(%s) IS DISTINCT FROM row(%s)", strings.Join(xc, ", "), strings.Join(yc, ", "))
	return fmt.Sprintf(`(WITH x AS (FROM %[1]s WHERE tick = %[2]d), y AS (FROM %[11]s WHERE tick = %[3]d),
 j AS (SELECT x.entity_id AS xe, y.entity_id AS ye, x.tick AS xt, y.tick AS yt, %[4]s, %[5]s FROM x FULL OUTER JOIN y ON x.entity_id = y.entity_id)
 SELECT 'delete' AS change_type, xe AS entity_id, %[8]s AS tick, %[6]s FROM j WHERE ye IS NULL
 UNION ALL SELECT 'insert', ye, %[9]s, %[7]s FROM j WHERE xe IS NULL
 UNION ALL SELECT 'update_preimage', xe, %[8]s, %[6]s FROM j WHERE %[10]s
 UNION ALL SELECT 'update_postimage', ye, %[9]s, %[7]s FROM j WHERE %[10]s)`,
		va, a, b, strings.Join(xs, ", "), strings.Join(ys, ", "), strings.Join(xc, ", "), strings.Join(yc, ", "), xt, yt, differ, vb)
}

// sameRows fails unless queries got and want return the same rows (as
// multisets), and some.
func sameRows(t *testing.T, db *sql.DB, what, got, want string) int64 {
	t.Helper()
	q := fmt.Sprintf("SELECT (SELECT count(*) FROM (%[1]s)), (SELECT count(*) FROM (%[2]s)), "+
		"(SELECT count(*) FROM (FROM (%[1]s) EXCEPT ALL FROM (%[2]s))), (SELECT count(*) FROM (FROM (%[2]s) EXCEPT ALL FROM (%[1]s)))", got, want)
	var n, m, extra, missing int64
	if err := db.QueryRow(q).Scan(&n, &m, &extra, &missing); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, q)
	}
	if n != m || extra != 0 || missing != 0 {
		t.Fatalf("%s: %d rows, %d by the join (%d not in the join, %d of the join missing)", what, n, m, extra, missing)
	}
	return n
}

// visibleTicks lists the visible ticks of (world, main) from the catalog.
func visibleTicks(t *testing.T, b bucket.Bucket, world string) []int64 {
	t.Helper()
	v, err := index.OpenView(ctxT(t), index.LoadFrom(b), world, "main")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	v.Ticks(math.MinInt64, math.MaxInt64, func(r index.TickRef) bool {
		out = append(out, r.Tick.Tick)
		return true
	})
	return out
}

// frameDiff is the reference simulation's own answer: the (change_type,
// entity_id) of each change from frame a to frame b, sorted.
func frameDiff(a, b *engine.Frame) []string {
	var out []string
	for _, e := range a.Entities {
		if b.Row(e) == nil {
			out = append(out, fmt.Sprintf("delete %d", e))
		} else if !sameValues(a.Row(e), b.Row(e)) {
			out = append(out, fmt.Sprintf("update_preimage %d", e), fmt.Sprintf("update_postimage %d", e))
		}
	}
	for _, e := range b.Entities {
		if a.Row(e) == nil {
			out = append(out, fmt.Sprintf("insert %d", e))
		}
	}
	slices.Sort(out)
	return out
}

// sameValues compares as IS NOT DISTINCT FROM does (NaN equals NaN).
func sameValues(a, b engine.Values) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := b[k]
		if x, ok := v.(float64); ok {
			if y, ok := w.(float64); ok && (x == y || math.IsNaN(x) && math.IsNaN(y)) {
				continue
			}
			return false
		}
		if v != w {
			return false
		}
	}
	return true
}

func sqlDiff(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ct string
		var e int64
		if err := rows.Scan(&ct, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d", ct, e))
	}
	slices.Sort(out)
	return out
}

// <table>_diff and <table>_changes equal their independent formulations:
// a FULL OUTER JOIN of the view's rows of two ticks (tick by tick over the
// catalog's visible ticks, for the change feed), and the reference
// simulation's own frames, diffed in Go; on a world with a crashed
// attempt's file in the bucket (never read), a fork diffed before and
// after its fork point, and both uncompacted and compacted. Mutations
// that fail it: the range macro's tick filter made always true (rows of
// the other ticks its files hold enter the change feed),
// and _diff comparing each side's values with themselves (no updates).
func TestDiffsAndChangesEqualAJoinAndTheSimulation(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	p := enginetest.World(t, lb, "p", -1)
	frames := map[int64]*engine.Frame{}
	for tick := int64(0); tick <= 120; tick++ {
		enginetest.Run(t, p, tick)
		frames[tick] = p.Frame("particle").Clone()
	}
	enginetest.Run(t, p, 199)
	data, err := engine.EncodeFragment(frames[5], engine.Stamp{Tick: 100, CommitToken: "crashed", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	particle := p.Tables()[0]
	if _, err := lb.Create(ctx, index.FragmentPath("p", "main", particle.ID, "crashed", 0), data); err != nil {
		t.Fatal(err)
	}
	f := enginetest.Fork(t, lb, "p", "f", 100, 150)
	f.Close()

	check := func(state string) {
		for _, c := range []struct {
			world    string
			pairs    [][2]int64
			from, to int64
		}{
			{"p", [][2]int64{{0, 1}, {50, 51}, {63, 64}, {10, 120}, {120, 3}, {100, 100}, {189, 190}, {0, 199}}, 95, 106},
			{"f", [][2]int64{{99, 100}, {100, 101}, {90, 140}, {140, 150}}, 96, 104},
		} {
			db := views(t, lb, c.world, wsql.Options{Dir: t.TempDir()})
			for _, view := range []string{"particle", "emitter"} {
				cols := components(t, db, view)
				var changed int64
				for _, pr := range c.pairs {
					what := fmt.Sprintf("%s: world %s: %s_diff(%d, %d)", state, c.world, view, pr[0], pr[1])
					changed += sameRows(t, db, what, fmt.Sprintf("FROM %s_diff(%d, %d)", view, pr[0], pr[1]), joined(view, cols, pr[0], pr[1], ""))
					fa, fb := frames[pr[0]], frames[pr[1]]
					if view == "particle" && c.world == "p" && fa != nil && fb != nil {
						got := sqlDiff(t, db, fmt.Sprintf("SELECT change_type, entity_id FROM particle_diff(%d, %d)", pr[0], pr[1]))
						if want := frameDiff(fa, fb); !slices.Equal(got, want) {
							t.Fatalf("%s: %d changes, the simulation's frames %d:\n%v\n%v", what, len(got), len(want), got, want)
						}
					}
				}
				if view == "particle" && changed == 0 {
					t.Fatalf("%s: world %s: no pair differs", state, c.world)
				}
				// The change feed: each visible tick against the one before.
				ticks := visibleTicks(t, lb, c.world)
				var parts []string
				for i := 1; i < len(ticks); i++ {
					if ticks[i] >= c.from && ticks[i] <= c.to {
						parts = append(parts, joined(view, cols, ticks[i-1], ticks[i], fmt.Sprint(ticks[i])))
					}
				}
				what := fmt.Sprintf("%s: world %s: %s_changes(%d, %d)", state, c.world, view, c.from, c.to)
				n := sameRows(t, db, what, fmt.Sprintf("SELECT change_type, entity_id, tick, %s FROM %s_changes(%d, %d)", strings.Join(cols, ", "), view, c.from, c.to),
					strings.Join(parts, " UNION ALL "))
				if view == "particle" && n == 0 {
					t.Fatalf("%s: no changes", what)
				}
				if view == "particle" && c.world == "p" {
					var got, want []string
					for tick := c.from; tick <= c.to; tick++ {
						for _, ch := range frameDiff(frames[tick-1], frames[tick]) {
							want = append(want, fmt.Sprintf("%d %s", tick, ch))
						}
					}
					rows := sqlDiff(t, db, fmt.Sprintf("SELECT tick || ' ' || change_type, entity_id FROM particle_changes(%d, %d)", c.from, c.to))
					got = append(got, rows...)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Fatalf("%s: %d changes, the simulation's frames %d", what, len(got), len(want))
					}
				}
			}
		}
	}
	check("uncompacted")
	for _, w := range []string{"p", "f"} {
		cat, err := index.Open(ctx, lb, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Compact(ctx, lb, cat, maintenance.CompactOptions{Recent: 10})
		cat.Close()
		if err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
	}
	check("compacted")
}

// published lists the visible ticks of (world, main) with their publish
// times, from the catalog.
func published(t *testing.T, b bucket.Bucket, world string) (ticks []int64, ms []int64) {
	t.Helper()
	v, err := index.OpenView(ctxT(t), index.LoadFrom(b), world, "main")
	if err != nil {
		t.Fatal(err)
	}
	v.Ticks(math.MinInt64, math.MaxInt64, func(r index.TickRef) bool {
		ticks, ms = append(ticks, r.Tick.Tick), append(ms, r.PublishedUnixMs)
		return true
	})
	return ticks, ms
}

// <table>_as_of(instant) reads the newest visible tick published at or
// before the instant: none before the first tick, the earlier tick
// between two publishes, the tick itself exactly at its publish, the head
// after it; on a world and on its fork, whose inherited ticks carry the
// parent's publish times. worldfs_ticks shows the same times, and
// Options.AtTime pins the views to the same tick. With the instant
// compared strictly (published before it), "exactly at a publish" fails
// (in the views' function and in the pin alike).
func TestAsOfReadsTheTickPublishedAtOrBefore(t *testing.T) {
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "p", 60).Close()
	enginetest.Fork(t, lb, "p", "f", 30, 45).Close()
	for _, world := range []string{"p", "f"} {
		ticks, ms := published(t, lb, world)
		db := views(t, lb, world, wsql.Options{Dir: t.TempDir()})
		// worldfs_ticks: the catalog's times.
		var n, same int64
		if err := db.QueryRow("SELECT count(*), count(*) FILTER (WHERE epoch_ms(published_at) = published_ms) FROM worldfs_ticks JOIN (SELECT unnest(?::BIGINT[]) AS tick, unnest(?::BIGINT[]) AS published_ms) USING (tick)",
			strings.ReplaceAll(fmt.Sprint(ticks), " ", ", "), strings.ReplaceAll(fmt.Sprint(ms), " ", ", ")).Scan(&n, &same); err != nil {
			t.Fatal(err)
		}
		if n != int64(len(ticks)) || same != n {
			t.Fatalf("world %s: worldfs_ticks holds %d of %d ticks, %d with the catalog's time", world, n, len(ticks), same)
		}
		at := func(us int64) (int64, bool) { // the reference: newest tick published at or before us
			best, ok := int64(0), false
			for i, tk := range ticks {
				if ms[i]*1000 <= us && (!ok || tk > best) {
					best, ok = tk, true
				}
			}
			return best, ok
		}
		instants := map[string]int64{
			"before the first tick": ms[0]*1000 - 1,
			"after the head":        ms[len(ms)-1]*1000 + 3600e6,
		}
		for i := len(ms) / 2; i < len(ms); i++ { // ticks with particles
			if ms[i] > ms[i-1] {
				instants["between two ticks"] = ms[i-1]*1000 + 500
				instants["exactly at a publish"] = ms[i] * 1000
				break
			}
		}
		if len(instants) != 4 {
			t.Fatalf("world %s: every tick published in one millisecond", world)
		}
		for what, us := range instants {
			lit := fmt.Sprintf("TIMESTAMPTZ '%s'", time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.999999+00"))
			want := "FROM particle WHERE false"
			if tk, ok := at(us); ok {
				want = fmt.Sprintf("FROM particle WHERE tick = %d", tk)
			} else if what != "before the first tick" {
				t.Fatalf("world %s: no tick %s", world, what)
			}
			got := sameRows(t, db, fmt.Sprintf("world %s: %s: particle_as_of(%s)", world, what, lit), fmt.Sprintf("FROM particle_as_of(%s)", lit), want)
			if (got == 0) != (what == "before the first tick") {
				t.Fatalf("world %s: %s: %d rows", world, what, got)
			}
			// Options.AtTime (worldfs sql --until with a time) pins the
			// views there; before the first tick, to no tick (the views
			// show nothing, as _as_of).
			instant := time.UnixMicro(us)
			s, err := wsql.Build(ctxT(t), lb, world, wsql.Options{AtTime: &instant, Dir: t.TempDir()})
			if tk, ok := at(us); !ok {
				if err != nil || s.Visible == nil || s.Visible.To >= s.Visible.From || s.AtTick >= 0 {
					t.Fatalf("world %s: views at %s, before the first tick: %+v %v", world, instant, s, err)
				}
			} else if err != nil || s.AtTick != tk {
				t.Fatalf("world %s: views at %s (%s): pinned to %v (%v), want tick %d", world, instant, what, s, err, tk)
			}
		}
	}
}

// Diffs and the change feed of a world continued from legacy history
// (v0.2 tables without commit columns, which no manifest names) equal
// the FULL OUTER JOIN of the view's rows, across the legacy ticks, the
// first ticks written since, and the boundary.
func TestDiffsOfLegacyHistory(t *testing.T) {
	b, _ := enginetest.Legacy(t, "../testdata/legacy", "legacyworld", 20)
	db := views(t, b, "legacyworld", wsql.Options{Dir: t.TempDir()})
	legacyLast := count(t, db, "SELECT max(tick) FROM particle_raw WHERE commit_token = ''")
	if legacyLast < 1 {
		t.Fatalf("the legacy fixture shows no legacy ticks (%d)", legacyLast)
	}
	cols := components(t, db, "particle")
	var changed int64
	for _, pr := range [][2]int64{{0, 1}, {0, legacyLast}, {legacyLast, legacyLast + 1}, {1, 15}, {legacyLast + 1, 20}} {
		changed += sameRows(t, db, fmt.Sprintf("legacy: particle_diff(%d, %d)", pr[0], pr[1]), fmt.Sprintf("FROM particle_diff(%d, %d)", pr[0], pr[1]), joined("particle", cols, pr[0], pr[1], ""))
	}
	if changed == 0 {
		t.Fatal("legacy: no pair differs")
	}
	var parts []string
	for tick := int64(1); tick <= 20; tick++ {
		parts = append(parts, joined("particle", cols, tick-1, tick, fmt.Sprint(tick)))
	}
	if n := sameRows(t, db, "legacy: particle_changes(1, 20)", fmt.Sprintf("SELECT change_type, entity_id, tick, %s FROM particle_changes(1, 20)", strings.Join(cols, ", ")),
		strings.Join(parts, " UNION ALL ")); n == 0 {
		t.Fatal("legacy: no changes")
	}
}

// A diff's sides are ticks the views show: a side without a tick is the
// head, a tick the views do not show (or a world not in the session) is
// ErrNotFound, and nothing is compared.
func TestDiffSidesAreVisibleTicks(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "w", 5).Close() // ticks 0..5
	s, db := builtViews(t, b, "w", wsql.Options{})
	two := int64(2)
	r, err := wsql.Diff(ctx, db, s, wsql.Point{World: "w", Tick: &two}, wsql.Point{World: "w"}, "", false)
	if err != nil || *r.A.Tick != 2 || *r.B.Tick != 5 {
		t.Fatalf("w@2 against the head: %v, %+v", err, r)
	}
	for _, p := range []wsql.Point{{World: "w", Tick: ptr(int64(6))}, {World: "w", Tick: ptr(int64(-1))}, {World: "other"}} {
		if _, err := wsql.Diff(ctx, db, s, p, wsql.Point{World: "w"}, "", false); !errors.Is(err, wsql.ErrNotFound) {
			t.Errorf("a side %+v: %v, want ErrNotFound", p, err)
		}
	}
}
