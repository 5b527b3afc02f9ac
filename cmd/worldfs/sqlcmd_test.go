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
	// Statements that describe are written like queries; only the last
	// statement's result is.
	desc := filepath.Join(t.TempDir(), "describe.csv")
	if code, _, stderr := cli(t, append(base, "--out", desc, "SELECT 1; DESCRIBE particle")...); code != 0 {
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
	code, out, stderr := cli(t, append(slices.Clone(base), "--at", "3", "SELECT count(*) AS n FROM particle_at(5)")...)
	if code != 0 || out != "n\n0\n" || stderr != "note: tick 5 is not a visible tick of run main of w (the views are pinned at tick 3, where its head is 3)\n" {
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
