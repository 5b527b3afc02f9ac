package iceberg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// A tag of the world is an Iceberg tag of each exported table: a ref
// naming the snapshot of the history up to the tagged tick, which reads
// (iceberg-go, at the ref) as the views pinned there (--until tag:NAME).
// An expiry of every snapshot older than now keeps it, and collection
// after a compaction keeps its files; once the tag is deleted, the next
// export drops the ref and the next expiry the snapshot.
func TestTaggedSnapshotsOutliveExpiry(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 90)
	tag := func(name string, tick int64) {
		t.Helper()
		if _, err := w.Catalog().Tag(ctx, index.LoadFrom(b), index.DefaultRun, index.Moment{Text: "n", Tick: &tick}, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	tag("fig3", 8)
	first := export(t, b, iceberg.Options{World: "w"})
	pt := table_(first, "particle")
	if _, ok := pt.Tags["fig3"]; !ok || pt.Tags["fig3"] == pt.SnapshotID {
		t.Fatalf("the first export's particle table: tags %v (current %d); want fig3 at a snapshot of its own", pt.Tags, pt.SnapshotID)
	}
	enginetest.Run(t, w, 140)
	tag("last", 140) // the current snapshot itself
	second := export(t, b, iceberg.Options{World: "w"})
	pt2 := table_(second, "particle")
	if pt2.Tags["fig3"] != pt.Tags["fig3"] || pt2.Tags["last"] != pt2.SnapshotID {
		t.Fatalf("the second export's tags %v (current %d): want fig3 at %d as before and last at the current snapshot", pt2.Tags, pt2.SnapshotID, pt.Tags["fig3"])
	}
	fsys := icebergio.LocalFS{}
	atTag := func(metadata, name string) ([]string, bool) {
		t.Helper()
		tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "t"}, metadata,
			func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := tbl.SnapshotByName(name)
		if s == nil {
			return nil, false
		}
		return scanRows(t, fsys, metadata, s.SnapshotID), true
	}
	want := tagRows(t, b, "w", "fig3")
	if len(want) == 0 {
		t.Fatal("the views at tag:fig3 show no particle")
	}
	check := func(when, metadata string) {
		t.Helper()
		got, ok := atTag(metadata, "fig3")
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("%s: iceberg-go at ref fig3 reads %d rows (ref there: %v), the views at tag:fig3 %d:\n%s", when, len(got), ok, len(want), diff(want, got))
		}
	}
	check("after the second export", pt2.Metadata)

	// Every snapshot older than now expires, but those the refs name.
	ex, err := iceberg.Expire(ctx, b, iceberg.Options{World: "w"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	meta := pt2.Metadata
	for _, e := range ex {
		if e.Table == index.IcebergTable(iceberg.DefaultPrefix("w", index.DefaultRun), "particle") {
			if e.Removed != 1 || e.Kept != 2 {
				t.Fatalf("expiry of the particle table: %+v; want the first export's current snapshot dropped, fig3's and the current kept", e)
			}
			meta = e.Metadata
		}
	}
	check("after expiry", meta)
	// Compaction moves the tagged ticks' rows; collection, long after,
	// keeps the files the tag's snapshot names.
	w.Close()
	compact(t, b, "w")
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }})
	cat.Close()
	if err != nil || res.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("collection after compaction: %+v, %v; want replaced fragments deleted", res, err)
	}
	check("after compaction and collection", meta)

	// The tag deleted: the next export drops its ref, the next expiry its
	// snapshot.
	cat, err = index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Untag(ctx, "fig3"); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	third := export(t, b, iceberg.Options{World: "w"})
	pt3 := table_(third, "particle")
	if _, ok := pt3.Tags["fig3"]; ok || pt3.Tags["last"] == 0 {
		t.Fatalf("the export after fig3's deletion: tags %v; want last alone", pt3.Tags)
	}
	if _, ok := atTag(pt3.Metadata, "fig3"); ok {
		t.Fatal("the export after fig3's deletion still has its ref")
	}
	ex, err = iceberg.Expire(ctx, b, iceberg.Options{World: "w"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ex {
		if e.Table != index.IcebergTable(iceberg.DefaultPrefix("w", index.DefaultRun), "particle") {
			continue
		}
		// The compaction made the third export a replace of tick 140:
		// fig3's snapshot and the second export's go, the current stays
		// (last names it).
		tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "t"}, e.Metadata,
			func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kept != 1 || tbl.Metadata().SnapshotByID(pt.Tags["fig3"]) != nil {
			t.Fatalf("expiry after fig3's deletion: %+v; want its snapshot dropped, the current kept", e)
		}
	}
}

// tagRows is every visible particle row of the views of world pinned up
// to its tag name (worldfs sql --until tag:NAME), one line per row,
// sorted.
func tagRows(t *testing.T, b bucket.Bucket, world, name string) []string {
	t.Helper()
	m := index.Moment{Text: index.TagPrefix + name, Tag: name}
	s, err := wsql.Build(ctxT(t), b, world, wsql.Options{At: &m, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return query(t, db, "SELECT * FROM particle_raw")
}
