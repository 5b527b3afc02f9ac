package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/internal/realpart"
	"github.com/worldfs/worldfs/maintenance"
)

// compactedWorld makes world w of 150 ticks whose ticks 0..127 are
// compacted (two windows of 64), and mounts its bucket.
func compactedWorld(t *testing.T) (*mounted, bucket.Bucket) {
	t.Helper()
	b := localBucket(t)
	w := particleWorld(t, b, "w", 150)
	res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10})
	if err != nil || res.Windows != 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if fragmentOf(t, b, 100).Span == nil {
		t.Fatal("tick 100 is not compacted; the test proves nothing")
	}
	return testMount(t, b), b
}

// tool returns the path of a program the test needs: a real part, so
// under CI=true a missing one fails the test (realpart.Missing).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		realpart.Missing(t, name, err.Error())
	}
	return p
}

// tar cf - of a world through the mount, extracted elsewhere, reproduces
// the mount byte for byte, compacted ticks included: tar sizes every file
// by stat and writes that many bytes, so a size that is not the content's
// would lose or pad data.
func TestTarReproducesTheMount(t *testing.T) {
	mt, _ := compactedWorld(t)
	out := t.TempDir()
	tarPath := tool(t, "tar")
	pack := exec.Command(tarPath, "-C", mt.dir, "-cf", "-", "w")
	unpack := exec.Command(tarPath, "-C", out, "-xf", "-")
	var packErrs, unpackErrs bytes.Buffer // one each: the two processes write at once
	pack.Stderr, unpack.Stderr = &packErrs, &unpackErrs
	pipe, err := pack.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	unpack.Stdin = pipe
	if err := unpack.Start(); err != nil {
		t.Fatal(err)
	}
	if err := pack.Run(); err != nil {
		t.Fatalf("tar c: %v\n%s", err, packErrs.String())
	}
	if err := unpack.Wait(); err != nil {
		t.Fatalf("tar x: %v\n%s", err, unpackErrs.String())
	}
	files, compacted := 0, 0
	err = filepath.WalkDir(mt.path("w"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mt.dir, p)
		copied := filepath.Join(out, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			want, _ := os.Readlink(p)
			if got, err := os.Readlink(copied); err != nil || got != want {
				t.Errorf("%s: link to %q in the archive (%v), %q in the mount", rel, got, err, want)
			}
		case d.Type().IsRegular():
			want, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got, err := os.ReadFile(copied)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes in the archive (%v), %d in the mount", rel, len(got), err, len(want))
			}
			files++
			if strings.Contains(rel, filepath.Join("ticks", wfs.TickName(100))) {
				compacted++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 150*7 || compacted < 3 {
		t.Fatalf("compared %d files (%d of compacted tick 100); the test proves little", files, compacted)
	}
}

// hyparquet is an independent Parquet reader (npm) that sizes a file by
// stat and reads its footer at that offset: installed once per test from
// integration/testdata/hyparquet (versions pinned by its lock file) into
// the test's temporary directory. It returns the directory with read.mjs.
func hyparquet(t *testing.T) string {
	t.Helper()
	tool(t, "node")
	npm := tool(t, "npm")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "read.mjs"} {
		data, err := os.ReadFile(filepath.Join("testdata", "hyparquet", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, ".npm"), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci (hyparquet): %v\n%s", err, out)
	}
	return dir
}

// hyparquet reads every Parquet file of a compacted world's tables/ and a
// tick directory of each kind through the mount, trusting st_size, and
// finds exactly the rows worldfs sql shows for those ticks.
func TestHyparquetReadsTheMount(t *testing.T) {
	mt, b := compactedWorld(t)
	dir := hyparquet(t)
	tables := mt.path("w", "runs", "main", "tables", "particle")
	var paths []string
	for _, name := range ls(t, tables) {
		paths = append(paths, filepath.Join(tables, name))
	}
	for _, tick := range []int64{0, 100, 127, 128, 150} {
		paths = append(paths, mt.path("w", "runs", "main", "ticks", wfs.TickName(tick), "particle.parquet"))
	}
	cmd := exec.Command(tool(t, "node"), append([]string{"read.mjs"}, paths...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node read.mjs: %v", err)
	}

	db := openViews(t, b, "w")
	cols := []string{"entity_id", "tick", "commit_token", "writer_epoch", "position_x", "position_y", "velocity_x", "velocity_y"}
	read, total := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var res struct {
			Path  string
			Rows  []map[string]any
			Error string
		}
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&res); err != nil {
			t.Fatal(err)
		}
		if res.Error != "" {
			t.Errorf("hyparquet: %s: %s", res.Path, res.Error)
			continue
		}
		tick, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(res.Path), ".parquet"), 10, 64)
		if err != nil {
			tick, _ = strconv.ParseInt(filepath.Base(filepath.Dir(res.Path)), 10, 64)
		}
		var got []string
		for _, r := range res.Rows {
			var vals []any
			for _, c := range cols {
				v := r[c]
				if n, ok := v.(json.Number); ok {
					if strings.HasPrefix(c, "position") || strings.HasPrefix(c, "velocity") {
						v, _ = n.Float64()
					} else {
						v, _ = strconv.ParseInt(string(n), 10, 64)
					}
				} else if s, ok := v.(string); ok && c != "commit_token" {
					v, _ = strconv.ParseInt(s, 10, 64) // a BigInt
				}
				vals = append(vals, v)
			}
			got = append(got, line(vals))
		}
		slices.Sort(got)
		want := sqlRows(t, db, fmt.Sprintf("SELECT %s FROM particle_raw WHERE tick = %d", strings.Join(cols, ", "), tick))
		total += len(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: hyparquet read %d rows, worldfs sql shows %d (first %q, %q)", res.Path, len(got), len(want), first(got), first(want))
		}
		read++
	}
	if read != len(paths) || total < 1000 {
		t.Fatalf("hyparquet answered for %d of %d files, %d rows in all; the test proves little", read, len(paths), total)
	}
}

// sqlRows returns a query's rows as sorted lines (see line).
func sqlRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	r, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer r.Close()
	cols, _ := r.Columns()
	var out []string
	for r.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, line(vals))
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// line renders values for comparison: floats in the shortest form that
// reads back exactly, integers in decimal.
func line(vals []any) string {
	var parts []string
	for _, v := range vals {
		switch v := v.(type) {
		case float64:
			parts = append(parts, strconv.FormatFloat(v, 'g', -1, 64))
		default:
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// A tick's manifest.json describes that tick, compacted or not: each
// table's rows are the tick's (not its compacted file's), and its Parquet
// file's size and digest are those of the file beside it. Like every
// file of the tick it is the same bytes before compaction, after it and
// after collection deleted the tick's own fragments.
func TestManifestDescribesItsTick(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 150)
	ticks := []int64{5, 100, 127, 140}
	manifests := func(mt *mounted) map[int64][]byte {
		out := map[int64][]byte{}
		for _, tick := range ticks {
			data, err := os.ReadFile(mt.path("w", "runs", "main", "ticks", wfs.TickName(tick), "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			out[tick] = data
		}
		return out
	}
	before := manifests(testMount(t, b))
	old := fragmentOf(t, b, 5)
	if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := maintenance.Collect(ctxT(t), b, w.Catalog(), maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true, Now: later}); err != nil {
		t.Fatal(err)
	}
	if fragmentOf(t, b, 100).Span == nil {
		t.Fatal("tick 100 is not compacted; the test proves nothing")
	}
	if _, err := b.Stat(ctxT(t), old.Path); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("collection left %s (%v); the test proves nothing", old.Path, err)
	}
	mt := testMount(t, b)
	db := openViews(t, b, "w")
	for tick, data := range manifests(mt) {
		if !bytes.Equal(data, before[tick]) {
			t.Errorf("tick %d: manifest.json changed with compaction:\nbefore %s\nafter %s", tick, before[tick], data)
		}
		var man struct {
			Tick   int64
			Tables []struct {
				Name    string
				Rows    *int64
				Parquet *struct {
					Bytes  int64
					Digest string
				}
			}
		}
		if err := json.Unmarshal(data, &man); err != nil || man.Tick != tick || len(man.Tables) != 3 {
			t.Fatalf("tick %d manifest: %v\n%s", tick, err, data)
		}
		for _, tb := range man.Tables {
			want := sqlRows(t, db, fmt.Sprintf("SELECT count(*) FROM %s_raw WHERE tick = %d", tb.Name, tick))
			if got := "null"; tb.Rows == nil || strconv.FormatInt(*tb.Rows, 10) != want[0] {
				if tb.Rows != nil {
					got = strconv.FormatInt(*tb.Rows, 10)
				}
				t.Errorf("tick %d %s: manifest says %s rows, worldfs sql %s", tick, tb.Name, got, want[0])
			}
			file, err := os.ReadFile(mt.path("w", "runs", "main", "ticks", wfs.TickName(tick), tb.Name+".parquet"))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(file)
			if p := tb.Parquet; p == nil || p.Bytes != int64(len(file)) || p.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Errorf("tick %d %s: manifest describes its Parquet file as %+v; it has %d bytes, sha256 %x", tick, tb.Name, p, len(file), sum)
			}
		}
	}
}

// A split tick's manifest.json is the same bytes before and after
// compaction too: its Parquet file (derived from its fragments' rows
// before, rebuilt from the compacted file's tick index after) is the same
// bytes, and the manifest describes it both times.
func TestSplitTickManifestSurvivesCompaction(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 100)
	splitFragment(t, b, "w", 20, "particle")
	read := func(mt *mounted, name string) []byte {
		data, err := os.ReadFile(mt.path("w", "runs", "main", "ticks", wfs.TickName(20), name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	mt := testMount(t, b)
	man, file := read(mt, "manifest.json"), read(mt, "particle.parquet")
	if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	if fragmentOf(t, b, 20).Span == nil {
		t.Fatal("tick 20 is not compacted; the test proves nothing")
	}
	mt = testMount(t, b)
	if got := read(mt, "particle.parquet"); !bytes.Equal(got, file) {
		t.Fatalf("tick 20's particle.parquet changed with compaction: %d bytes, then %d", len(file), len(got))
	}
	if got := read(mt, "manifest.json"); !bytes.Equal(got, man) {
		t.Errorf("tick 20: manifest.json changed with compaction:\nbefore %s\nafter %s", man, got)
	}
}
