package integration

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"syscall"
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
// same once the mount's ctl wrote to g (g's catalog held by a writer, f
// and w cold), then to f, once every catalog is open, and on a fresh
// mount whose ctl wrote to f (g cold, its parent through its catalog).
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
		cmd := `{"op":"ingest","create_table":true,"run":"` + run + `","producer":"p","external_id":"` + id + `","table":"reading","components":{"reading":{"value":1.5,"unit":"C"}}}`
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
	// A fresh mount whose ctl writes to f: g read cold, its parent f
	// through its catalog, its grandparent w cold.
	mt = testMount(t, b)
	if a, errno := ctl(t, mt.path("f", "ctl"), `{"op":"ingest","producer":"p","external_id":"f4","table":"reading","components":{"reading":{"value":1.5,"unit":"C"}}}`); errno != 0 {
		t.Fatalf("ingest f4 into f: %v %+v", errno, a)
	}
	refresh()
	compare("read cold but f, held by a writer")
	if st := mountStats(t, mt); st.CatalogsOpen != 2 {
		t.Errorf("%d catalogs open; want 2 (n's and f's)", st.CatalogsOpen)
	}
}

// damageShard replaces the first part of kind ("c": claims, "t": ticks)
// of world's newest checkpoint with bytes that do not hash to its name.
func damageShard(t *testing.T, b *stateReads, world, kind string) {
	t.Helper()
	var newest string
	for a, err := range b.List(ctxT(t), "worlds/"+world+"/checkpoints/", "") {
		if err != nil {
			t.Fatal(err)
		}
		newest = a.Name
	}
	data, _, err := b.Get(ctxT(t), newest)
	if err != nil {
		t.Fatal(err)
	}
	var cp struct{ Shards []struct{ Kind, Hash string } }
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	for _, s := range cp.Shards {
		if s.Kind != kind {
			continue
		}
		name := index.ShardName(world, s.Hash)
		a, err := b.Stat(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctxT(t), name, a.Generation); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctxT(t), name, []byte("damaged")); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("checkpoint %s has no part of kind %s", newest, kind)
}

// facts/ of a world read cold fails closed on a damaged claims part of
// its checkpoint: the listing of facts/main/ and a read of
// facts/receipts.csv are EIO, never a listing without the part's facts.
// A damaged tick part, which holds no claim, is not read: facts/ is
// served whole (its names and bytes as before the damage), as a cold
// ticks/ lookup of another part is.
func TestColdFactsFailClosedOnADamagedClaimsPart(t *testing.T) {
	for _, kind := range []string{"c", "t"} {
		b, _ := checkpointedWorld(t)
		writer := testMount(t, b)
		ingest(t, writer, "w", "a", "b")
		if a, errno := ctl(t, writer.path("w", "ctl"), `{"op":"evaluate","id":"e1","at":2,"contract":{"grader_id":"g","implementation_version":"1"},"outcomes":[{"criterion":"c","verdict":"pass","score":0.5}]}`); errno != 0 {
			t.Fatalf("evaluate: %v %+v", errno, a)
		}
		checkpoint(t, b, "w")
		want := factsTree(t, testMount(t, b).path("w", "facts"))
		damageShard(t, b, "w", kind)
		mt := testMount(t, b)
		_, lerr := os.ReadDir(mt.path("w", "facts", "main"))
		_, rerr := os.ReadFile(mt.path("w", "facts", "receipts.csv"))
		if kind == "t" {
			if lerr != nil || rerr != nil {
				t.Fatalf("facts/ with a damaged tick part: %v, %v", lerr, rerr)
			}
			sameFacts(t, "facts/ with a damaged tick part", factsTree(t, mt.path("w", "facts")), want)
			continue
		}
		if !errors.Is(lerr, syscall.EIO) || !errors.Is(rerr, syscall.EIO) {
			t.Errorf("facts/ with a damaged claims part: listing facts/main/: %v, reading receipts.csv: %v; want EIO", lerr, rerr)
		}
	}
}
