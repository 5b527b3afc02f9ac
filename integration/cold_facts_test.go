package integration

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// ingest ingests facts ids into table reading of world through the ctl
// of mt.
func ingest(t *testing.T, mt *mounted, world string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		ingestInto(t, mt, world, "reading", id)
	}
}

// ingestInto ingests fact id into table of world through the ctl of mt.
func ingestInto(t *testing.T, mt *mounted, world, table, id string) {
	t.Helper()
	cmd := `{"op":"ingest","create_table":true,"producer":"sensor-1","external_id":"` + id + `","table":"` + table + `","components":{"` + table + `":{"value":21.5,"unit":"C"}}}`
	if a, errno := ctl(t, mt.path(world, "ctl"), cmd); errno != 0 {
		t.Fatalf("ingest %s into %s of %s: %v %+v", id, table, world, errno, a)
	}
}

// factFile is a file under facts/ as a reader sees it: its size at
// lookup (before any open) and its bytes.
type factFile struct {
	size int64
	data string
}

// factsTree returns every file under dir (a world's facts/), by path
// relative to it: the names a listing gives, each looked up (its size)
// and read.
func factsTree(t *testing.T, dir string) map[string]factFile {
	t.Helper()
	out := map[string]factFile{}
	for _, name := range ls(t, dir) {
		p := filepath.Join(dir, name)
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			for rel, f := range factsTree(t, p) {
				out[name+"/"+rel] = f
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = factFile{info.Size(), string(data)}
	}
	return out
}

// sameFacts fails t unless got (a world's facts/ as one mount serves it)
// has the names, sizes and bytes of want (as another serves it).
func sameFacts(t *testing.T, what string, got, want map[string]factFile) {
	t.Helper()
	for _, n := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[n]
		switch {
		case !ok:
			t.Errorf("%s: no %s", what, n)
		case g.size != want[n].size || g.data != want[n].data:
			t.Errorf("%s: %s is %d bytes at lookup and reads %d; the catalog's is %d and %d, or its bytes differ", what, n, g.size, len(g.data), want[n].size, len(want[n].data))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: %s, which the catalog does not show", what, n)
		}
	}
}

// factIDs returns the external ids of facts/<run>/reading.parquet of a
// world in mt, sorted.
func factIDs(t *testing.T, mt *mounted, world string) string {
	t.Helper()
	return strings.Join(rows(t, duck(t), "SELECT fact_external_id FROM read_parquet("+lit(mt.path(world, "facts", "main", "reading.parquet"))+") ORDER BY 1"), ",")
}

// facts/ of a world with a checkpoint, which the mount has not opened
// the catalog of, is served from its cold state (the checkpoint's
// claims and the log after it): a listing of facts/ and facts/main/, a
// lookup (the size) and a read of each file, receipts included, read no
// checkpoint part but the one the log after the checkpoint touched (which
// any cold load reads), open no catalog of it, and show the names, sizes
// and bytes a mount that holds the world's catalog shows (one that
// ingested the facts through ctl). The same of a fork, whose parent is
// read cold: its own facts and its parent's up to the fork point,
// reading none of the parent's parts more.
func TestColdFactsReadNoHistory(t *testing.T) {
	b, publish := checkpointedWorld(t)
	writer := testMount(t, b)
	ingest(t, writer, "w", "a", "b")
	if a, errno := ctl(t, writer.path("w", "ctl"), `{"op":"evaluate","id":"eval-1","at":2,"contract":{"grader_id":"g","implementation_version":"1"},"outcomes":[{"criterion":"c","verdict":"pass","score":0.5}]}`); errno != 0 {
		t.Fatalf("evaluate: %v %+v", errno, a)
	}
	forkAt := int64(coldTicks + 1) // w's head: its facts so far are at or before it
	c, _, err := index.CreateWorld(ctxT(t), b, "f", index.WorldCreate{Parent: "w", ForkRun: "main", ForkTick: forkAt, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	publish(coldTicks+2, coldTicks+3)
	ingest(t, writer, "w", "after-the-fork")
	ingest(t, writer, "f", "own")

	mt := testMount(t, b)
	b.read()
	for i, w := range []string{"w", "f"} {
		got := factsTree(t, mt.path(w, "facts"))
		if _, ok := got["main/reading.parquet"]; !ok {
			t.Fatalf("facts/ of %s: %v; want main/reading.parquet among them", w, slices.Sorted(maps.Keys(got)))
		}
		// The first loads w's cold state, which reads the part the log
		// after the checkpoint touched (as any cold load does); the
		// fork's reads w's claims from that state.
		if n := b.read(); n > 1-i {
			t.Errorf("listing, looking up and reading facts/ of %s read %d of w's 4 checkpoint parts; want %d at most", w, n, 1-i)
		}
		sameFacts(t, "facts/ of "+w+" read cold", got, factsTree(t, writer.path(w, "facts")))
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 1 {
		t.Errorf("%d catalogs open; want 1 (the fork's, which has no checkpoint; w is read cold)", st.CatalogsOpen)
	}
	for _, c := range []struct{ world, want string }{{"w", "a,after-the-fork,b"}, {"f", "a,b,own"}} {
		if got := factIDs(t, mt, c.world); got != c.want {
			t.Errorf("facts of %s: %s; want %s", c.world, got, c.want)
		}
	}
}

// A fact completed after a listing of facts/ of a world read cold shows
// within the mount's freshness, as a catalog snapshot's would: with a
// freshness of 1 ns, at the next lookup in facts/main/ (a fact table
// that was not there, and the size of one that has one more fact) and
// of facts/receipts.csv (one more receipt). The lookups are made
// relative to the open directories, so that only they reach the mount:
// a lookup of the path's directories, or their times, would bring the
// world's cold state to the tip too.
func TestColdFactsFollowNewFacts(t *testing.T) {
	b, _ := checkpointedWorld(t)
	writer := testMount(t, b)
	ingest(t, writer, "w", "a")
	evaluate := func(id string) {
		t.Helper()
		if a, errno := ctl(t, writer.path("w", "ctl"), `{"op":"evaluate","id":"`+id+`","at":2,"contract":{"grader_id":"g","implementation_version":"1"},"outcomes":[{"criterion":"c","verdict":"pass","score":0.5}]}`); errno != 0 {
			t.Fatalf("evaluate %s: %v %+v", id, errno, a)
		}
	}
	evaluate("e1")
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	open := func(dir string) *os.File {
		t.Helper()
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	facts, run := open(mt.path("w", "facts")), open(mt.path("w", "facts", "main"))
	if names, err := run.Readdirnames(-1); err != nil || strings.Join(sorted(names), ",") != "reading.csv,reading.parquet" {
		t.Fatalf("facts/main/ of w: %v, %v", names, err)
	}
	// size is the size of name in dir at lookup, -1 if it is absent.
	size := func(dir *os.File, name string) int64 {
		t.Helper()
		var st unix.Stat_t
		err := unix.Fstatat(int(dir.Fd()), name, &st, 0)
		if errors.Is(err, unix.ENOENT) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return st.Size
	}
	sizeOf := func(path string) int64 {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	before := []int64{size(run, "reading.parquet"), size(facts, "receipts.csv")}
	if before[0] != sizeOf(writer.path("w", "facts", "main", "reading.parquet")) || before[1] != sizeOf(writer.path("w", "facts", "receipts.csv")) {
		t.Fatalf("sizes %v before any new fact; the catalog's differ", before)
	}
	ingestInto(t, writer, "w", "other", "b")
	ingest(t, writer, "w", "c")
	evaluate("e2")
	for _, c := range []struct {
		dir        *os.File
		name, want string
	}{
		{run, "other.parquet", writer.path("w", "facts", "main", "other.parquet")},
		{run, "reading.parquet", writer.path("w", "facts", "main", "reading.parquet")},
		{facts, "receipts.csv", writer.path("w", "facts", "receipts.csv")},
	} {
		if got, want := size(c.dir, c.name), sizeOf(c.want); got != want {
			t.Errorf("%s after new facts completed: %d bytes at lookup (-1: absent); the catalog's is %d", c.name, got, want)
		}
	}
	if got := factIDs(t, mt, "w"); got != "a,c" {
		t.Errorf("facts of w after a second fact completed: %s, want a,c", got)
	}
	sameFacts(t, "facts/ of w read cold", factsTree(t, mt.path("w", "facts")), factsTree(t, writer.path("w", "facts")))
	if st := mountStats(t, mt); st.CatalogsOpen != 0 {
		t.Errorf("%d catalogs open; want none (w is read cold)", st.CatalogsOpen)
	}
}
