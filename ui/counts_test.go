package ui

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// sameCounts asks the rows chart of (world, run) with query (from, to,
// bins) and checks it against BinnedCountsSQL of the same bins, asked of
// worldfs sql; it returns the answer.
func sameCounts(t *testing.T, f *fixture, world, run string, views []string, query string) *RowsPerTick {
	t.Helper()
	var got RowsPerTick
	path := "/api/w/" + world + "/counts?run=" + url.QueryEscape(run)
	if query != "" {
		path += "&" + query
	}
	if code := f.get(t, path, &got); code != 200 {
		t.Fatalf("%s: %d", path, code)
	}
	if query == "" || !strings.Contains(query, "from=") {
		// The whole run: from its first tick with rows to its last.
		span := want(t, f.b, world, run, fmt.Sprintf("SELECT min(tick), max(tick) FROM (%s)", CountsSQL(views)))
		if r := span.Rows[0]; fmt.Sprint(got.From) != r[0] || fmt.Sprint(got.To) != r[1] {
			t.Fatalf("%s: ticks %d to %d, the rows are from %s to %s", path, got.From, got.To, r[0], r[1])
		}
	}
	exp := want(t, f.b, world, run, BinnedCountsSQL(views, got.From, got.To, got.Width))
	if !reflect.DeepEqual(got.Rows(), exp.Rows) || len(exp.Rows) == 0 {
		t.Fatalf("%s (%s, from %d to %d, %d ticks a bin): the server answered\n%v\nworldfs sql answers\n%v",
			path, got.Source, got.From, got.To, got.Width, got.Rows(), exp.Rows)
	}
	return &got
}

// The rows chart is CountsSQL binned: its bins equal BinnedCountsSQL of
// the same bins, and at one tick a bin each tick's rows as CountsSQL
// counts them; computed from the catalog and the compacted files' tick
// indexes (a fork keeps of its parent's compacted files only the ticks
// up to its fork point), with facts and receipts.
func TestRowsPerTickAnswersAsSQL(t *testing.T) {
	f := newFixture(t)
	compactedWorlds(t, f)
	for _, w := range []string{"w", "f", "c", "cf"} {
		var tl Timeline
		f.get(t, "/api/w/"+w+"/timeline", &tl)
		all := sameCounts(t, f, w, "main", tl.Views, "")
		if all.Source != "catalog" {
			t.Errorf("%s: rows per tick from %s, want the catalog", w, all.Source)
		}
		sameCounts(t, f, w, "main", tl.Views, "bins=7")
		sameCounts(t, f, w, "main", tl.Views, "bins=3&from=2&to=11")
		// One tick a bin: each tick's rows, as CountsSQL counts them.
		from, to := int64(3), int64(9)
		if w == "c" || w == "cf" {
			from, to = 95, 130
		}
		one := sameCounts(t, f, w, "main", tl.Views, fmt.Sprintf("from=%d&to=%d", from, to))
		per := want(t, f.b, w, "main", fmt.Sprintf("SELECT * FROM (%s) WHERE tick BETWEEN %d AND %d ORDER BY table_name, tick", CountsSQL(tl.Views), from, to))
		var rows [][]string
		for _, r := range one.Rows() {
			if r[2] != r[4] || r[3] != r[4] {
				t.Fatalf("%s: a bin of one tick with min, max and last apart: %v", w, r)
			}
			rows = append(rows, r[:3])
		}
		if one.Width != 1 || !reflect.DeepEqual(rows, per.Rows) {
			t.Fatalf("%s ticks %d to %d (%d a bin): %v, worldfs sql counts %v", w, from, to, one.Width, rows, per.Rows)
		}
	}
	for path, say := range map[string]string{
		"/api/w/w/counts?bins=0":      "bins is 1 to",
		"/api/w/w/counts?bins=100000": "bins is 1 to",
		"/api/w/w/counts?from=5&to=4": "from 5 is after to 4",
		"/api/w/w/counts?from=x":      `from="x" is not an integer`,
		"/api/w/nosuch/counts":        "world nosuch does not exist",
	} {
		var e apiError
		if code := f.get(t, path, &e); code/100 != 4 || !strings.Contains(e.Error, say) {
			t.Errorf("%s: %d %q, want a 4xx saying %q", path, code, e.Error, say)
		}
	}
}

// compactedWorlds adds to f's bucket world c (150 ticks) and its fork cf
// (from tick 100, to 140), both compacted but for their newest 10 ticks.
func compactedWorlds(t *testing.T, f *fixture) {
	t.Helper()
	ctx := enginetest.Context(t)
	enginetest.World(t, f.b, "c", 150)
	enginetest.Fork(t, f.b, "c", "cf", 100, 140)
	for _, w := range []string{"c", "cf"} {
		cat, err := index.Open(ctx, f.b, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Compact(ctx, f.b, cat, maintenance.CompactOptions{Recent: 10})
		cat.Close()
		if err != nil || res.Files == 0 {
			t.Fatalf("compacting %s: %+v %v", w, res, err)
		}
	}
}

// Where the catalog does not record every file the views read (legacy
// history, listed from the bucket), rows per tick come from SQL, and the
// bins still equal BinnedCountsSQL's.
func TestRowsPerTickOfLegacyHistoryFromSQL(t *testing.T) {
	b, _ := enginetest.Legacy(t, "../testdata/legacy", "legacyworld", 7)
	f := serve(t, b, t.TempDir())
	var tl Timeline
	f.get(t, "/api/w/legacyworld/timeline", &tl)
	for _, q := range []string{"", "bins=3", "from=2&to=6"} {
		if got := sameCounts(t, f, "legacyworld", "main", tl.Views, q); got.Source != "sql" {
			t.Fatalf("legacy history: rows per tick from %s, want sql", got.Source)
		}
	}
}
