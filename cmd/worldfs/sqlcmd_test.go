package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// sqlWorld makes world "w" in a local bucket (particles up to tick 5) and
// returns the bucket's directory.
func sqlWorld(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	b, _ := local.Open(dir)
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), engine.Options{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	particles.Install(w)
	if err := particles.Setup(w, 3); err != nil {
		t.Fatal(err)
	}
	if err := particles.Run(ctx, w, 5, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

const outQuery = "SELECT entity_id, tick, position_x FROM particle ORDER BY tick, entity_id"

// norm renders a row of outQuery's three columns, however a format typed
// them, as one string.
func norm(e, tick, x any) string {
	f := func(v any) float64 {
		switch v := v.(type) {
		case string:
			n, _ := strconv.ParseFloat(v, 64)
			return n
		case float64:
			return v
		case float32:
			return float64(v)
		case int64:
			return float64(v)
		case int32:
			return float64(v)
		}
		return -1e300
	}
	return fmt.Sprintf("%.0f %.0f %.9g", f(e), f(tick), f(x))
}

// readOut reads a file --out wrote, by its extension.
func readOut(t *testing.T, path string) []string {
	t.Helper()
	var rows []string
	switch filepath.Ext(path) {
	case ".csv":
		f, _ := os.Open(path)
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil || len(recs) == 0 || strings.Join(recs[0], ",") != "entity_id,tick,position_x" {
			t.Fatalf("%s: %v %v", path, recs, err)
		}
		for _, r := range recs[1:] {
			rows = append(rows, norm(r[0], r[1], r[2]))
		}
	case ".json":
		data, _ := os.ReadFile(path)
		var recs []map[string]any
		if err := json.Unmarshal(data, &recs); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, r := range recs {
			rows = append(rows, norm(r["entity_id"], r["tick"], r["position_x"]))
		}
	case ".jsonl":
		f, _ := os.Open(path)
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			rows = append(rows, norm(r["entity_id"], r["tick"], r["position_x"]))
		}
	case ".parquet":
		recs, err := wsql.ReadRows(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			rows = append(rows, norm(r["entity_id"], r["tick"], r["position_x"]))
		}
	}
	return rows
}

// --out writes the rows of the query, in the format the extension names,
// replacing a file of the user's; never into the bucket or the cache.
func TestSQLOut(t *testing.T) {
	dir := sqlWorld(t)
	cacheDir := t.TempDir()
	base := []string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", cacheDir}
	code, out, stderr := cli(t, append(base, "--format", "json", outQuery)...)
	var recs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) == 0 {
		t.Fatalf("sql: %d %s %s", code, out, stderr)
	}
	var want []string
	for _, r := range recs {
		want = append(want, norm(r["entity_id"], r["tick"], r["position_x"]))
	}
	outDir := t.TempDir()
	for _, ext := range []string{".csv", ".json", ".jsonl", ".parquet"} {
		p := filepath.Join(outDir, "rows"+ext)
		os.WriteFile(p, []byte("an older result"), 0o644) // replaced
		if code, out, stderr := cli(t, append(base, "--out", p, outQuery)...); code != 0 || out != "" {
			t.Fatalf("--out %s: %d %q %s", p, code, out, stderr)
		}
		if got := readOut(t, p); !slices.Equal(got, want) {
			t.Errorf("%s holds %d rows, want %d:\n%v\n%v", p, len(got), len(want), got[:min(3, len(got))], want[:3])
		}
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 4 {
		t.Fatalf("%d files in the output directory, want the 4 results (no temporary files)", len(ents))
	}
	// Statements that describe are written like queries.
	desc := filepath.Join(t.TempDir(), "describe.csv")
	if code, _, stderr := cli(t, append(base, "--out", desc, "DESCRIBE particle")...); code != 0 {
		t.Fatalf("--out of DESCRIBE: %d %s", code, stderr)
	}
	if data, _ := os.ReadFile(desc); !strings.HasPrefix(string(data), "column_name,") || !strings.Contains(string(data), "position_x") {
		t.Fatalf("--out of DESCRIBE wrote %q", data)
	}
	// Into the bucket, the cache, or through a link to the bucket: refused,
	// nothing written.
	b, _ := local.Open(dir)
	st, _, _ := index.Load(context.Background(), b, "w")
	slot, _ := b.Path(index.SlotName("w", st.Seq+1))
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	for _, p := range []string{filepath.Join(dir, "out.csv"), filepath.Join(dir, "data", "w", "out.parquet"), slot + ".csv",
		filepath.Join(cacheDir, "out.json"), filepath.Join(cacheDir, "views", "out.json"), filepath.Join(link, "data", "out.csv")} {
		before := snapshotNames(t, dir)
		code, _, stderr := cli(t, append(base, "--out", p, outQuery)...)
		if code != 1 || !strings.Contains(stderr, "never writes into the bucket") {
			t.Errorf("--out %s: %d %s", p, code, stderr)
		}
		if after := snapshotNames(t, dir); !slices.Equal(after, before) {
			t.Errorf("--out %s changed the bucket: %v", p, after)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("--out %s wrote it", p)
		}
	}
	// Bad command lines.
	for _, args := range [][]string{{"--out", filepath.Join(outDir, "x.txt")}, {"--out", filepath.Join(outDir, "x.csv"), "--format", "json"}} {
		if code, _, stderr := cli(t, append(append(base, args...), outQuery)...); code != 2 {
			t.Errorf("%v: %d %s", args, code, stderr)
		}
	}
	// The result of a statement that is not a query, or a refused one.
	if code, _, stderr := cli(t, append(base, "--out", filepath.Join(outDir, "e.csv"), "EXPLAIN SELECT 1")...); code != 1 || !strings.Contains(stderr, "--out writes the rows of a query") {
		t.Errorf("--out of EXPLAIN: %d %s", code, stderr)
	}
	if code, _, stderr := cli(t, append(base, "--out", filepath.Join(outDir, "c.csv"), "COPY (SELECT 1) TO '"+filepath.Join(outDir, "side.csv")+"'")...); code != 1 || !strings.Contains(stderr, "refused") {
		t.Errorf("--out of a COPY: %d %s", code, stderr)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 4 {
		t.Fatalf("%d files in the output directory after refusals, want 4", len(ents))
	}
}

// worldfs sql refuses what writes, with a message pointing at --out, and
// writes nothing.
func TestSQLCommandRefusesWrites(t *testing.T) {
	dir := sqlWorld(t)
	elsewhere := t.TempDir()
	base := []string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir()}
	for _, q := range []string{
		"COPY (SELECT * FROM particle) TO '" + filepath.Join(elsewhere, "p.csv") + "'",
		"ATTACH '" + filepath.Join(elsewhere, "a.db") + "' AS a",
		"EXPORT DATABASE '" + filepath.Join(elsewhere, "exp") + "'",
		"INSTALL httpfs",
		"SET enable_external_access = true",
	} {
		code, _, stderr := cli(t, append(base, q)...)
		if code != 1 || !strings.Contains(stderr, "--out FILE") {
			t.Errorf("%s: %d %s", q, code, stderr)
		}
	}
	if code, _, stderr := cli(t, append(base, "SELECT * FROM read_csv('/etc/passwd', sep = ':')")...); code != 1 || !strings.Contains(stderr, "table function read_csv") {
		t.Errorf("read_csv of /etc/passwd: %d %s", code, stderr)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatalf("wrote %s", ents[0].Name())
	}
}

func snapshotNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			info, _ := d.Info()
			names = append(names, fmt.Sprintf("%s %d", p, info.Size()))
		}
		return nil
	})
	return names
}

// A fresh worldfs sql reuses the views the previous one built while the
// world's catalog is unchanged, and never once it changed: a tick
// committed between two runs shows at once.
func TestSQLReusesViewsOnlyWhileTheCatalogIsUnchanged(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	w := enginetest.World(t, b, "w", 5)
	base := []string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--format", "csv"}
	head := func(want string, builds int64) {
		t.Helper()
		code, out, errs := cli(t, append(base, "SELECT max(tick) AS head FROM particle")...)
		if code != 0 || out != "head\n"+want+"\n" {
			t.Fatalf("worldfs sql: exit %d, %q (%s); want head %s", code, out, errs, want)
		}
		if got := wsql.Builds(); got != builds {
			t.Fatalf("head %s: %d views built in all, want %d", want, got, builds)
		}
	}
	n := wsql.Builds()
	head("5", n+1)
	head("5", n+1) // reused
	enginetest.Run(t, w, 6)
	head("6", n+2) // the catalog changed: built again
	head("6", n+2)
}

// <table>_at(t) of a tick that is not visible prints a note on stderr,
// from views built and from views reused, with --at and with --out; the
// result and the exit status are those of the query.
func TestSQLNotesATickThatIsNotVisible(t *testing.T) {
	dir := sqlWorld(t)
	cacheDir := t.TempDir()
	base := []string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", cacheDir, "--format", "csv"}
	q := "SELECT count(*) AS n FROM particle_at(999)"
	n := wsql.Builds()
	for i, args := range [][]string{
		append(slices.Clone(base), q),
		append(slices.Clone(base), q), // reused
	} {
		code, out, stderr := cli(t, args...)
		if code != 0 || out != "n\n0\n" || stderr != "note: tick 999 is not a visible tick of run main of w (head is 5)\n" {
			t.Errorf("run %d: exit %d, %q, stderr %q", i, code, out, stderr)
		}
	}
	if got := wsql.Builds(); got != n+1 {
		t.Errorf("%d views built, want 1 (the second run reuses them)", got-n)
	}
	code, out, stderr := cli(t, append(slices.Clone(base), "--until", "3", "SELECT count(*) AS n FROM particle_at(5)")...)
	if code != 0 || out != "n\n0\n" || stderr != "note: tick 5 is not a visible tick of run main of w (the views are pinned at tick 3, where its head is 3)\n" {
		t.Errorf("--until 3: exit %d, %q, stderr %q", code, out, stderr)
	}
	code, out, stderr = cli(t, append(slices.Clone(base), "--at", "3", "SELECT count(*) AS n FROM particle_at(2)")...)
	if code != 0 || out != "n\n0\n" || stderr != "note: tick 2 is not a visible tick of run main of w (the views are pinned to tick 3 alone)\n" {
		t.Errorf("--at 3: exit %d, %q, stderr %q", code, out, stderr)
	}
	file := filepath.Join(t.TempDir(), "out.csv")
	code, _, stderr = cli(t, "sql", "--bucket", dir, "--world", "w", "--cache-dir", cacheDir, "--out", file, q)
	if data, err := os.ReadFile(file); code != 0 || err != nil || string(data) != "n\n0\n" || !strings.HasPrefix(stderr, "note: tick 999 ") {
		t.Errorf("--out: exit %d, %q %v, stderr %q", code, data, err, stderr)
	}
	if code, _, stderr := cli(t, append(slices.Clone(base), "SELECT count(*) AS n FROM particle_at(5)")...); code != 0 || stderr != "" {
		t.Errorf("a visible tick: exit %d, stderr %q", code, stderr)
	}
}

// A point pins the views to that one tick (a snapshot: --at, --at-time,
// --token); --until pins the history up to a point. Every form of a point
// goes through the one parser; a time before the first tick answers
// empty (exit 0, as _as_of); a bad or doubled pin is one line naming the
// flag and what to give.
func TestPointsPinASnapshotAndUntilPinsHistory(t *testing.T) {
	dir := sqlWorld(t)
	base := []string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--format", "csv"}
	q := "SELECT count(DISTINCT tick) AS ticks, max(tick) AS last, (SELECT count(*) FROM worldfs_ticks) AS listed FROM emitter"
	code, out, _ := cli(t, append(slices.Clone(base), "--format", "csv", "SELECT commit_token FROM worldfs_ticks WHERE tick = 2")...)
	token := strings.TrimSpace(strings.TrimPrefix(out, "commit_token\n"))
	if code != 0 || len(token) != 32 {
		t.Fatalf("the token of tick 2: %d %q", code, out)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "6,5,6"},
		{[]string{"--at", "3"}, "1,3,1"},
		{[]string{"--at", "head~1"}, "1,4,1"},
		{[]string{"--at", "head"}, "1,5,1"},
		{[]string{"--at", token}, "1,2,1"},
		{[]string{"--token", token}, "1,2,1"},
		{[]string{"--at-time", "now"}, "1,5,1"},
		{[]string{"--at", "-0.001s"}, "1,5,1"},
		{[]string{"--until", "3"}, "4,3,4"},
		{[]string{"--until", "head~2"}, "4,3,4"},
		{[]string{"--until", "now"}, "6,5,6"},
	} {
		code, out, stderr := cli(t, append(append(slices.Clone(base), c.flags...), q)...)
		if code != 0 || out != "ticks,last,listed\n"+c.want+"\n" {
			t.Errorf("%v: exit %d, %q, stderr %q; want %s", c.flags, code, out, stderr, c.want)
		}
	}
	// Before the first tick: no tick, exit 0, as _as_of.
	for _, flags := range [][]string{{"--at-time", "2000-01-01 10:00"}, {"--until", "2000-01-01T10:00:00Z"}, {"--at", "-1h"}} {
		code, out, stderr := cli(t, append(append(slices.Clone(base), flags...), "SELECT count(*) AS listed FROM worldfs_ticks")...)
		if code != 0 || out != "listed\n0\n" {
			t.Errorf("%v: exit %d, %q, stderr %q; want no tick", flags, code, out, stderr)
		}
	}
	for _, c := range []struct {
		flags []string
		says  string
	}{
		{[]string{"--at", "noon-ish"}, `worldfs sql: --at: "noon-ish" is not a point: give a tick (170), head, head~10`},
		{[]string{"--at-time", "3"}, `--at-time takes a time (2026-12-01T10:00:00Z (RFC 3339)`},
		{[]string{"--at-time", "3"}, `"3" is a tick or a token: pin it with --at 3`},
		{[]string{"--until", "head~x"}, "--until: \"head~x\": after head~ comes how many ticks before the head"},
		{[]string{"--at", "3", "--until", "4"}, "--at and --until each pin the views; give one (one tick: --at, --at-time or --token; the history up to a point: --until)"},
	} {
		code, out, stderr := cli(t, append(append(slices.Clone(base), c.flags...), q)...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, c.says) || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "worldfs sql --help") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line saying %q and pointing to --help", c.flags, code, stderr, c.says)
		}
	}
	code, _, stderr := cli(t, append(slices.Clone(base), "--at", "head~9", q)...)
	if code != exitNotFound || !strings.Contains(stderr, "head~9 is before the first tick: the run's ticks are 0..5") {
		t.Errorf("--at head~9: exit %d, %q", code, stderr)
	}
}

// Several statements are refused whole, naming them and what to do:
// each would have a result, and worldfs sql prints one.
func TestSQLRefusesSeveralStatements(t *testing.T) {
	dir := sqlWorld(t)
	for _, extra := range [][]string{nil, {"--format", "json"}, {"--out", filepath.Join(t.TempDir(), "x.csv")}} {
		args := append(append([]string{"sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir()}, extra...), "SELECT 1 AS a; SELECT 2 AS b")
		code, out, stderr := cli(t, args...)
		if code != exitFailed || out != "" || !strings.Contains(stderr, "one statement at a time: a query prints one result: this query holds 2 (1: SELECT 1 AS a; 2: SELECT 2 AS b): run each as a query of its own") {
			t.Errorf("%v: exit %d, %q %q", extra, code, out, stderr)
		}
	}
}
