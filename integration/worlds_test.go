package integration

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// smallWorld creates world id in b with a catalog of two ticks (no data
// files: enough for the root, the world directories and head).
func smallWorld(t *testing.T, b bucket.Bucket, id string) {
	t.Helper()
	c, epoch, err := index.CreateWorld(ctxT(t), b, id, index.WorldCreate{WriterMode: index.ModeResumable}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var entries []index.Entry
	for tick := range int64(2) {
		token := fmt.Sprintf("%032x", tick)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(id, "main", "t", token, 0), Rows: 1}}}}}})
	}
	if _, err := c.CommitAll(ctxT(t), entries...); err != nil {
		t.Fatal(err)
	}
}

// A mount of many worlds costs what its readers read: ls -l of the root
// opens no world's catalog, reading every world's head keeps at most
// MaxCatalogs catalogs open (idle worlds give their memory back), and a
// world created while mounted is found by name at once and listed within
// a second: with a freshness of 100 ms, so that the second leaves a loaded
// machine a margin of ten times the bound while a list that never ages
// still fails (the default freshness, 1 s, is what bench fs --worlds
// measures).
func TestManyWorldsCostWhatIsRead(t *testing.T) {
	const n, keep = 120, 16
	b := localBucket(t)
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("w%04d", i))
		smallWorld(t, b, ids[i])
	}
	mt := testMountWith(t, b, wfs.Options{MaxCatalogs: keep, Freshness: 100 * time.Millisecond}, wfs.MountOptions{})
	if got := ls(t, mt.dir); !slices.Equal(got, append([]string{".worldfs", "ctl", "ctl.errors"}, ids...)) {
		t.Fatalf("the root lists %d names, want %d worlds", len(got), n)
	}
	start := time.Now()
	for _, id := range ids { // what ls -l does
		info, err := os.Lstat(mt.path(id))
		if err != nil || !info.IsDir() {
			t.Fatalf("%s: %v", id, err)
		}
		if d := info.ModTime().Sub(start); d > time.Minute || d < -time.Hour {
			t.Errorf("%s: mtime %v, created just before %v", id, info.ModTime(), start)
		}
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 0 || st.CatalogsClosed != 0 {
		t.Errorf("stat of every world directory opened %d catalogs (%d closed since); want none", st.CatalogsOpen, st.CatalogsClosed)
	}
	for _, id := range ids {
		if head, err := os.Readlink(mt.path(id, "runs", "main", "head")); err != nil || head != "ticks/"+wfs.TickName(1) {
			t.Fatalf("%s head -> %q (%v)", id, head, err)
		}
	}
	if st := mountStats(t, mt); st.CatalogsOpen > keep || st.CatalogsClosed < n-keep {
		t.Errorf("after every head: %d catalogs open, %d closed; want at most %d open", st.CatalogsOpen, st.CatalogsClosed, keep)
	}
	// A world read again after its catalog was closed reads the same.
	if head, err := os.Readlink(mt.path(ids[0], "runs", "main", "head")); err != nil || head != "ticks/"+wfs.TickName(1) {
		t.Errorf("%s head again -> %q (%v)", ids[0], head, err)
	}

	ls(t, mt.dir) // the listing the new world is not in yet
	smallWorld(t, b, "znew")
	if _, err := os.Lstat(mt.path("znew")); err != nil {
		t.Fatalf("a world created a moment ago, by name: %v", err)
	}
	created := time.Now()
	for !slices.Contains(ls(t, mt.dir), "znew") {
		if time.Since(created) > time.Second {
			t.Fatal("a new world is not listed a second after it was created")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
