package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/maintenance"
)

func mountStats(t testing.TB, mt *mounted) wfs.StatsSnapshot {
	t.Helper()
	var st wfs.StatsSnapshot
	data, err := os.ReadFile(mt.path(".worldfs", "stats"))
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// On a compacted world (every tick of 0..63 a slice of a compacted file,
// so each of its files is rebuilt from its rows or derived), ls -l of ticks/, of every tick and of
// tables/ runs no DuckDB and reads no row (each tick's CSV is sized as
// its fragment's footer or its tick index records it); then Parquet and CSV readers through the mount
// (DuckDB's read_parquet, which seeks to the footer; Go's os.ReadFile,
// which sizes its buffer by fstat as Python's read() does; cat) read each
// derived file whole and right, and its size, once opened, is the file's.
// Every snapshot entry's mtime is its tick's publish time.
func TestStatIsCheapAndDerivedFilesRead(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 79)
	res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 8})
	if err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	mt := testMount(t, b)

	ticks := mt.path("w", "runs", "main", "ticks")
	var stats int
	for _, tick := range ls(t, ticks) {
		for _, name := range ls(t, filepath.Join(ticks, tick)) {
			if _, err := os.Lstat(filepath.Join(ticks, tick, name)); err != nil {
				t.Fatal(err)
			}
			stats++
		}
	}
	for _, name := range ls(t, mt.path("w", "runs", "main", "tables", "particle")) {
		if _, err := os.Lstat(mt.path("w", "runs", "main", "tables", "particle", name)); err != nil {
			t.Fatal(err)
		}
		stats++
	}
	if st := mountStats(t, mt); st.DuckDBRuns != 0 || st.Rendered != 0 || st.Rebuilt != 0 || stats < 80*7 {
		t.Fatalf("ls -l of %d entries derived %d files with DuckDB, rendered %d CSVs and rebuilt %d compacted ticks' files; a stat must do none", stats, st.DuckDBRuns, st.Rendered, st.Rebuilt)
	}
	// facts/ files change as claims complete: a stat derives the current
	// version once (in Go: no DuckDB, which the check below counts).
	for _, name := range ls(t, mt.path("w", "facts")) {
		if _, err := os.Lstat(mt.path("w", "facts", name)); err != nil {
			t.Fatal(err)
		}
	}

	views := openViews(t, b, "w")
	db := duck(t)
	cols := "entity_id, tick, position_x, position_y, velocity_x, velocity_y"
	before := mountStats(t, mt)
	for _, tick := range []int64{10, 40} {
		want := rows(t, views, fmt.Sprintf("SELECT %s FROM particle_at(%d) ORDER BY entity_id", cols, tick))
		p := filepath.Join(ticks, strconv.FormatInt(tick, 10), "particle.parquet")
		got := rows(t, db, fmt.Sprintf("SELECT %s FROM read_parquet(%s) ORDER BY entity_id", cols, lit(p)))
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("tick %d: DuckDB through the mount read %d rows, the views show %d", tick, len(got), len(want))
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := os.Stat(p); err != nil || info.Size() != int64(len(data)) || len(data) < 12 || string(data[len(data)-4:]) != "PAR1" {
			t.Errorf("tick %d: stat after reading says %d bytes; read %d (ending %q)", tick, info.Size(), len(data), data[max(0, len(data)-4):])
		}
	}
	csv := filepath.Join(ticks, "20", "particle.csv")
	out, err := exec.Command("cat", csv).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := rows(t, views, "SELECT count(*) FROM particle_at(20)")
	if lines := strings.Count(string(out), "\n"); want[0] != strconv.Itoa(lines-1) {
		t.Errorf("cat of tick 20's CSV: %d lines, the views show %s rows", lines, want[0])
	}
	// The compacted ticks' Parquet files are rebuilt from their rows
	// through the tick index, with no DuckDB, when first read.
	if st := mountStats(t, mt); st.DuckDBRuns != before.DuckDBRuns || st.Rebuilt == before.Rebuilt {
		t.Errorf("three compacted ticks read after ls -l: %d DuckDB materializations and %d files rebuilt; want none and some",
			st.DuckDBRuns-before.DuckDBRuns, st.Rebuilt-before.Rebuilt)
	}

	// mtime: the commit time.
	state, err := w.Catalog().Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tick := range []int64{5, 70, 79} {
		tk, _ := state.Tick("main", tick)
		if tk.PublishedUnixMs == 0 {
			t.Fatalf("tick %d has no publish time", tick)
		}
		want := time.UnixMilli(tk.PublishedUnixMs)
		for _, p := range []string{
			filepath.Join(ticks, strconv.FormatInt(tick, 10)),
			filepath.Join(ticks, strconv.FormatInt(tick, 10), "particle.parquet"),
			filepath.Join(ticks, strconv.FormatInt(tick, 10), "manifest.json"),
			mt.path("w", "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", tick)),
		} {
			info, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			if !info.ModTime().Equal(want) {
				t.Errorf("%s: mtime %v, published %v", p, info.ModTime(), want)
			}
		}
	}
	head, _ := state.Tick("main", 79)
	var st syscall.Stat_t
	if err := syscall.Lstat(mt.path("w", "runs", "main", "head"), &st); err != nil || st.Mtim.Sec != head.PublishedUnixMs/1000 {
		t.Errorf("head: mtime %d, head published at %d ms (%v)", st.Mtim.Sec, head.PublishedUnixMs, err)
	}
}

// Every file of a tick directory and of tables/ reports at lookup, before
// anything opened it, the size a full read then returns, and keeps it
// after, before compaction and after it (tar and readers that trust
// st_size read what the mount serves). Sizing them reads no row: a tick's
// .csv is sized as its writer recorded it in its fragment's footer or
// compaction in the tick index, so ls -l renders no CSV, rebuilds no
// compacted tick's file and runs no DuckDB.
func TestSizesAreExactAtLookup(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 79)
	check := func(state string, mt *mounted, compacted bool) {
		t.Helper()
		var paths []string
		for _, tick := range ls(t, mt.path("w", "runs", "main", "ticks")) {
			for _, name := range ls(t, mt.path("w", "runs", "main", "ticks", tick)) {
				paths = append(paths, mt.path("w", "runs", "main", "ticks", tick, name))
			}
		}
		for _, name := range ls(t, mt.path("w", "runs", "main", "tables", "particle")) {
			paths = append(paths, mt.path("w", "runs", "main", "tables", "particle", name))
		}
		sizes := map[string]int64{}
		for _, p := range paths {
			info, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			sizes[p] = info.Size()
		}
		st := mountStats(t, mt)
		if st.Rendered != 0 || st.Rebuilt != 0 || st.DuckDBRuns != 0 || st.CSVSizesRead == 0 {
			t.Errorf("%s: ls -l of %d files rendered %d CSVs, rebuilt %d compacted ticks' files, ran DuckDB %d times (read %d CSV sizes from footers); want none, none, none",
				state, len(paths), st.Rendered, st.Rebuilt, st.DuckDBRuns, st.CSVSizesRead)
		}
		csvs := 0
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) != sizes[p] || len(data) == 0 {
				t.Errorf("%s: %s: st_size %d at lookup, a read returns %d bytes", state, p, sizes[p], len(data))
			}
			if strings.HasSuffix(p, ".csv") {
				csvs++
			}
			checkSize(t, p)
		}
		if csvs < 80*3 {
			t.Fatalf("%s: only %d CSV files checked", state, csvs)
		}
		// Small files are rebuilt and rendered in memory: reading every
		// file wrote none into the cache.
		if st := mountStats(t, mt); compacted && st.Rebuilt == 0 || st.CacheBytes != 0 {
			t.Fatalf("%s: %d compacted ticks' files rebuilt; %d bytes written into the cache", state, st.Rebuilt, st.CacheBytes)
		}
	}
	check("before compaction", testMount(t, b), false)
	res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 8})
	if err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	check("after compaction", testMount(t, b), true)
}

// A tick's file in tables/<t>/ never changes, so a second ls -l (whose
// listing asks for every entry again, READDIRPLUS) answers each from the
// file looked up the first time: no lookup resolves a tick or plans its
// rows again (the mount's "lookup" op counts those that do).
func TestSecondListingOfATableResolvesNothing(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 79)
	if res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 8}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	mt := testMount(t, b)
	dir := mt.path("w", "runs", "main", "tables", "particle")
	lsl := func() int64 {
		for _, name := range ls(t, dir) {
			if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return mountStats(t, mt).Ops["lookup"].Count
	}
	first := lsl()
	if first < 80 {
		t.Fatalf("the first ls -l of 80 ticks resolved %d", first)
	}
	if again := lsl() - first; again != 0 {
		t.Fatalf("a second ls -l resolved %d ticks again; each was looked up before", again)
	}
}
