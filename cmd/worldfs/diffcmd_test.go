package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	wsql "github.com/worldfs/worldfs/sql"
)

// worldfs diff: per table the counts and per column the changes equal
// what a FULL OUTER JOIN of the two ticks says (through worldfs sql),
// within a world and for a fork against its parent; --rows and --out
// hold every changed row; --exit-code exits 1 only when the sides differ.
// With inserts and deletes swapped in the report, or the unchanged
// entities counted without subtracting the updated, it fails.
func TestDiffCommand(t *testing.T) {
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	enginetest.World(t, b, "w", 30).Close()
	f, err := engine.ForkWorld(ctx, b, "w", "f", "main", 20, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.Drive(ctx, f, 30, particles.Nudge("push", 22, 3, -2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cacheDir := t.TempDir()
	flags := []string{"--bucket", dir, "--cache-dir", cacheDir}
	join := func(wa string, a int64, wb string, bt int64) map[string]float64 {
		q := fmt.Sprintf(`WITH x AS (FROM "%s".particle WHERE tick = %d), y AS (FROM "%s".particle WHERE tick = %d)
		  SELECT count(*) FILTER (WHERE x.entity_id IS NULL) AS inserted, count(*) FILTER (WHERE y.entity_id IS NULL) AS deleted,
		    count(*) FILTER (WHERE x.entity_id = y.entity_id AND row(x.position_x, x.position_y, x.velocity_x, x.velocity_y) IS DISTINCT FROM row(y.position_x, y.position_y, y.velocity_x, y.velocity_y)) AS updated,
		    count(*) FILTER (WHERE x.entity_id = y.entity_id AND row(x.position_x, x.position_y, x.velocity_x, x.velocity_y) IS NOT DISTINCT FROM row(y.position_x, y.position_y, y.velocity_x, y.velocity_y)) AS unchanged,
		    count(*) FILTER (WHERE x.position_x IS DISTINCT FROM y.position_x AND x.entity_id = y.entity_id) AS position_x_changed,
		    max(abs(y.position_y - x.position_y)) AS position_y_max
		  FROM x FULL OUTER JOIN y ON x.entity_id = y.entity_id`, wa, a, wb, bt)
		args := append([]string{"sql", "--format", "json", "--world", "w", "--world", "f"}, flags...)
		code, out, stderr := cli(t, append(args, q)...)
		var recs []map[string]float64
		if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 1 {
			t.Fatalf("sql: %d %s %s", code, out, stderr)
		}
		return recs[0]
	}
	for _, c := range []struct {
		sides      []string
		wa, wb     string
		a, b       int64
		wantDiffer bool
	}{
		{[]string{"w@10", "@20"}, "w", "w", 10, 20, true},
		{[]string{"w@25", "f@25"}, "w", "f", 25, 25, true},
		{[]string{"w@15", "f@15"}, "w", "f", 15, 15, false},
		{[]string{"w@10", "w@10"}, "w", "w", 10, 10, false},
	} {
		what := strings.Join(c.sides, " ")
		args := append(append([]string{"diff", "--json", "--rows", "--table", "particle"}, flags...), c.sides...)
		code, out, stderr := cli(t, args...)
		var r wsql.DiffReport
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Tables) != 1 {
			t.Fatalf("diff %s: %d %s %s", what, code, out, stderr)
		}
		td := r.Tables[0]
		want := join(c.wa, c.a, c.wb, c.b)
		if float64(td.Inserted) != want["inserted"] || float64(td.Deleted) != want["deleted"] || float64(td.Updated) != want["updated"] || float64(td.Unchanged) != want["unchanged"] {
			t.Fatalf("diff %s: %+v, the join says %v", what, td, want)
		}
		if r.Differ != c.wantDiffer || int64(len(td.Rows)) != td.Inserted+td.Deleted+2*td.Updated {
			t.Fatalf("diff %s: differ %v, %d rows for %+v", what, r.Differ, len(td.Rows), td)
		}
		for _, col := range td.Columns {
			if col.Column == "position_x" && float64(col.Changed) != want["position_x_changed"] {
				t.Fatalf("diff %s: position_x changed %d times, the join says %v", what, col.Changed, want["position_x_changed"])
			}
			if col.Column == "position_y" && td.Updated > 0 && (col.MaxAbsChange == nil || *col.MaxAbsChange != want["position_y_max"]) {
				t.Fatalf("diff %s: position_y's largest change %v, the join says %v", what, col.MaxAbsChange, want["position_y_max"])
			}
		}
		// --exit-code: 1 exactly when the sides differ; without it, 0.
		wantCode := 0
		if c.wantDiffer {
			wantCode = 1
		}
		if code, _, stderr := cli(t, append(append([]string{"diff", "--exit-code"}, flags...), c.sides...)...); code != wantCode {
			t.Fatalf("diff --exit-code %s: exit %d, want %d (%s)", what, code, wantCode, stderr)
		}
		// --out: every changed row of every table, with its table.
		p := filepath.Join(t.TempDir(), "rows.csv")
		if code, _, stderr := cli(t, append(append([]string{"diff", "--out", p}, flags...), c.sides...)...); code != 0 {
			t.Fatalf("diff --out %s: %d %s", what, code, stderr)
		}
		data, _ := os.ReadFile(p)
		if n := strings.Count(string(data), "\nparticle,"); int64(n) != int64(len(td.Rows)) {
			t.Fatalf("diff --out %s: %d particle rows, --rows printed %d", what, n, len(td.Rows))
		}
	}
	for _, bad := range [][]string{{"w"}, {"@3"}, {"w@x!"}, {"w@1", "w@2", "w@3"}} { // (w@x is a tag: TestTagCommands)
		if code, _, _ := cli(t, append(append([]string{"diff"}, flags...), bad...)...); code != 2 {
			t.Fatalf("diff %v: exit %d, want 2 (usage)", bad, code)
		}
	}
	// A tick or world that is not there exits 4, saying which.
	for _, missing := range [][]string{{"w@9999", "w@3"}, {"w@3", "nope@1"}} {
		if code, _, stderr := cli(t, append(append([]string{"diff"}, flags...), missing...)...); code != exitNotFound || !strings.Contains(stderr, "9999") && !strings.Contains(stderr, "nope") {
			t.Fatalf("diff %v: exit %d (%s), want %d", missing, code, stderr, exitNotFound)
		}
	}
}

// A side of worldfs diff takes every form of a point (W@170, W@head~10,
// W@10:00, a time as worldfs_ticks prints it, a token), resolved by the
// one parser among the world's visible ticks; a side before the first
// tick, or a table misspelt, says so and what there is.
func TestDiffSidesTakeEveryPointForm(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	enginetest.World(t, b, "w", 30).Close()
	flags := []string{"--bucket", dir, "--cache-dir", t.TempDir()}
	sqlOne := func(q string) string {
		t.Helper()
		code, out, stderr := cli(t, append(append([]string{"sql", "--world", "w", "--format", "csv"}, flags...), q)...)
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(rows) != 2 {
			t.Fatalf("%s: exit %d %q %s", q, code, out, stderr)
		}
		return rows[1]
	}
	published := sqlOne("SELECT published_at FROM worldfs_ticks WHERE tick = 12")
	byThen := sqlOne("SELECT max(tick) FROM worldfs_ticks WHERE published_at <= (SELECT published_at FROM worldfs_ticks WHERE tick = 12)")
	token := sqlOne("SELECT commit_token FROM worldfs_ticks WHERE tick = 7")
	for _, c := range []struct {
		sides []string
		a, b  string
	}{
		{[]string{"w@head~5", "@head"}, "25", "30"},
		{[]string{"w@head~5"}, "25", "30"},
		{[]string{"w@" + published, "@20"}, byThen, "20"},
		{[]string{"w@" + token, "w@now"}, "7", "30"},
		{[]string{"w@-1h", "@-0.001s"}, "", ""}, // an hour ago: before the first tick
	} {
		code, out, stderr := cli(t, append(append([]string{"diff", "--json"}, flags...), c.sides...)...)
		var r wsql.DiffReport
		if c.a == "" {
			if code != exitNotFound || !strings.Contains(stderr, "w@-1h: no tick of w was published at or before ") {
				t.Errorf("diff %v: exit %d %q; want 4, no tick by then", c.sides, code, stderr)
			}
			continue
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || fmt.Sprint(*r.A.Tick) != c.a || fmt.Sprint(*r.B.Tick) != c.b {
			t.Errorf("diff %v: exit %d, %s -> %s (%s); want %s -> %s", c.sides, code, out[:min(len(out), 80)], stderr, "", c.a, c.b)
		}
	}
	code, _, stderr := cli(t, append(append([]string{"diff", "--table", "partcle"}, flags...), "w@3", "@4")...)
	if code != exitNotFound || !strings.Contains(stderr, `--table partcle: no table "partcle" in w; did you mean "particle"? Their tables: "debris", "emitter"`) {
		t.Errorf("--table partcle: exit %d %q", code, stderr)
	}
	code, _, stderr = cli(t, append(append([]string{"diff"}, flags...), "w@10:61")...)
	if code != exitUsage || !strings.Contains(stderr, `worldfs diff: w@10:61: "10:61" is not a point: give a tick (170), head, head~10`) {
		t.Errorf("w@10:61: exit %d %q", code, stderr)
	}
	// A bare name is a tag (w@fig3): one the world lacks is no other
	// point either.
	code, _, stderr = cli(t, append(append([]string{"diff"}, flags...), "w@x")...)
	if code != exitNotFound || !strings.Contains(stderr, `"x" is not a point (give a tick (170), head, head~10`) || !strings.Contains(stderr, "nor a tag: world w has no tag x") {
		t.Errorf("w@x: exit %d %q", code, stderr)
	}
}
