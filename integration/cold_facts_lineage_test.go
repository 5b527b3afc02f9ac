package integration

import (
	"os"
	"strconv"
	"testing"
	"time"

	wfs "github.com/worldfs/worldfs/fs"

	"github.com/worldfs/worldfs/index"
)

// checkpoint writes a checkpoint of world's catalog at its tip.
func checkpoint(t *testing.T, b *stateReads, world string) {
	t.Helper()
	c, err := index.Open(ctxT(t), b, world, index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// facts/ of every world of a lineage read cold is what the worlds'
// catalogs show: w (checkpointed), its fork f and f's fork g (each
// checkpointed, with facts before and after the checkpoint), and n, a
// fork of w without a checkpoint (read through its catalog, its parent
// cold); facts of main and of a run without ticks, and receipts. The
// same once g's catalog is open (a tokens/ listing: g through its
// catalog, f and w cold), and once the mount's ctl wrote to f (f's
// catalog held by a writer).
func TestColdFactsOfALineageMatchTheCatalogs(t *testing.T) {
	b, publish := checkpointedWorld(t)
	// The catalogs' answers, at the tip: a mount that ingests through
	// its ctl (so holds each world's catalog) with a freshness of 1 ns.
	writer := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	evaluate := func(world, id string, at int64) {
		t.Helper()
		if a, errno := ctl(t, writer.path(world, "ctl"), `{"op":"evaluate","id":"`+id+`","at":`+strconv.FormatInt(at, 10)+`,"contract":{"grader_id":"g","implementation_version":"1"},"outcomes":[{"criterion":"c","verdict":"pass","score":0.5}]}`); errno != 0 {
			t.Fatalf("evaluate %s in %s: %v %+v", id, world, errno, a)
		}
	}
	inRun := func(world, run, id string) {
		t.Helper()
		cmd := `{"op":"ingest","run":"` + run + `","producer":"p","external_id":"` + id + `","table":"reading","components":{"reading":{"value":1.5,"unit":"C"}}}`
		if a, errno := ctl(t, writer.path(world, "ctl"), cmd); errno != 0 {
			t.Fatalf("ingest %s into run %s of %s: %v %+v", id, run, world, errno, a)
		}
	}
	fork := func(child, parent string, at int64) {
		t.Helper()
		c, epoch, err := index.CreateWorld(ctxT(t), b, child, index.WorldCreate{Parent: parent, ForkRun: "main", ForkTick: at, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tok := child + "-own"
		if _, err := c.Commit(ctxT(t), index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: at + 1, CommitToken: tok, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(child, "main", "t", tok, 0), Rows: 1}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	ingest(t, writer, "w", "w1", "w2")
	inRun("w", "alt", "w-alt")
	evaluate("w", "w-e1", 2)
	forkAt := int64(coldTicks + 1)
	fork("f", "w", forkAt)
	fork("n", "w", forkAt)
	ingest(t, writer, "f", "f1")
	inRun("f", "alt", "f-alt")
	evaluate("f", "f-e1", forkAt+1)
	fork("g", "f", forkAt+1)
	ingest(t, writer, "g", "g1")
	evaluate("g", "g-e1", forkAt+2)
	ingest(t, writer, "n", "n1")
	for _, w := range []string{"w", "f", "g"} {
		checkpoint(t, b, w)
	}
	// After the checkpoints: facts of each world in its log's tail.
	publish(coldTicks+2, coldTicks+3)
	ingest(t, writer, "w", "w3")
	ingest(t, writer, "f", "f2")
	inRun("g", "alt", "g-alt")
	evaluate("g", "g-e2", forkAt+2)
	ingest(t, writer, "n", "n2")

	worlds := []string{"w", "f", "g", "n"}
	want := map[string]map[string]factFile{}
	for _, w := range worlds {
		want[w] = factsTree(t, writer.path(w, "facts"))
		if _, ok := want[w]["alt/reading.parquet"]; !ok && w != "n" {
			t.Fatalf("facts/ of %s as its catalog shows it has no alt/reading.parquet: %v", w, want[w])
		}
	}
	mt := testMount(t, b)
	compare := func(state string) {
		t.Helper()
		for _, w := range worlds {
			sameFacts(t, "facts/ of "+w+" "+state, factsTree(t, mt.path(w, "facts")), want[w])
		}
	}
	compare("read cold")
	if st := mountStats(t, mt); st.CatalogsOpen != 1 {
		t.Errorf("%d catalogs open; want 1 (n's, which has no checkpoint)", st.CatalogsOpen)
	}
	// The mount's ctl writes to g: g's catalog is held, f and w are
	// still read cold.
	if a, errno := ctl(t, mt.path("g", "ctl"), `{"op":"ingest","producer":"p","external_id":"g2","table":"reading","components":{"reading":{"value":1.5,"unit":"C"}}}`); errno != 0 {
		t.Fatalf("ingest g2 into g: %v %+v", errno, a)
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 2 {
		t.Errorf("%d catalogs open after an ingest into g; want 2 (n's and g's)", st.CatalogsOpen)
	}
	refresh := func() {
		t.Helper()
		for _, w := range worlds {
			want[w] = factsTree(t, writer.path(w, "facts"))
		}
	}
	refresh()
	compare("with g's catalog held by a writer")
	// And f: g's parent through its catalog, g's grandparent cold.
	if a, errno := ctl(t, mt.path("f", "ctl"), `{"op":"ingest","producer":"p","external_id":"f3","table":"reading","components":{"reading":{"value":1.5,"unit":"C"}}}`); errno != 0 {
		t.Fatalf("ingest f3 into f: %v %+v", errno, a)
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 3 {
		t.Errorf("%d catalogs open after an ingest into f; want 3 (n's, g's and f's)", st.CatalogsOpen)
	}
	refresh()
	compare("with f's and g's catalogs held by a writer")
	// Every catalog open (a listing of g's tokens/ needs the whole
	// states of its lineage).
	if _, err := os.ReadDir(mt.path("g", "tokens")); err != nil {
		t.Fatal(err)
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 4 {
		t.Errorf("%d catalogs open after a listing of g's tokens/; want 4", st.CatalogsOpen)
	}
	compare("with every catalog open")
}
