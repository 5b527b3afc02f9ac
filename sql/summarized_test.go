package sql_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// A sweep's files read as they are and the sweep that omits some split
// its rows in two: every row of the sweep's view is either a row of an
// omitted file within its ticks, of its world, or a row of the sweep's
// view without those files, never both: a fork's read of its parent's
// compacted file (bounded by its fork point) included, as the loose
// ticks compaction left after each world's last window. Such a file
// reads as the views would read it (ReadFile: a damaged one is refused),
// and each world's record is worldfs_worlds' row of it.
func TestSweepSplitsIntoFilesReadAsTheyAreAndTheRest(t *testing.T) {
	ctx := ctxT(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "p", 150, enginetest.Quiet)
	f := enginetest.Fork(t, b, "p", "f", 100, 140)
	f.Close()
	for _, w := range []string{"p", "f"} {
		cat, err := index.Open(ctx, b, w, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
			t.Fatalf("compaction of %s: %+v, %v", w, res, err)
		}
		cat.Close()
	}
	dir := t.TempDir()
	s, db := sweepOf(t, b, dir, "p", "f")
	all, rest, err := s.FileReads("particle")
	if err != nil {
		t.Fatal(err)
	}
	var reads []wsql.FileRead // the compacted files, and half the loose ones
	inherited, loose := false, 0
	for _, r := range all {
		if r.From > r.To || r.Compacted() != strings.Contains(r.File.Path, "/compacted-") {
			t.Fatalf("a file read as it is: %+v", r)
		}
		inherited = inherited || r.Compacted() && r.World == "f" && strings.HasPrefix(r.File.Path, "data/p/") && r.To <= 100
		if !r.Compacted() {
			if loose++; loose%2 == 0 {
				continue
			}
		}
		reads = append(reads, r)
	}
	if rest || loose == 0 || len(reads) == loose || !inherited {
		t.Fatalf("%d files read as they are (%d loose, one of p's compacted by f: %v), other files: %v; want both kinds and no other", len(all), loose, inherited, rest)
	}
	sel := "entity_id, tick, position_x, position_y, velocity_x, velocity_y"
	whole := lines(t, db, fmt.Sprintf("SELECT world, %s FROM particle", sel))

	omitted, err := s.Omit(reads)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := wsql.Open(ctx, omitted)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	got := lines(t, rdb, fmt.Sprintf("SELECT world, %s FROM particle", sel))
	left := len(got)
	for _, r := range reads {
		got = append(got, lines(t, db, fmt.Sprintf("SELECT '%s', %s FROM read_parquet('%s') WHERE tick BETWEEN %d AND %d", r.World, sel, r.Path, r.From, r.To))...)
	}
	slices.Sort(whole)
	slices.Sort(got)
	if left == 0 || left == len(whole) || !slices.Equal(got, whole) {
		t.Fatalf("the sweep's %d rows; the rest's %d and the compacted reads' %d rows are not them", len(whole), left, len(got)-left)
	}
	one, err := wsql.Build(ctx, b, "f", wsql.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := one.FileReads("particle"); err == nil {
		t.Fatal("a world's own views list their files read as they are")
	}

	recs, err := s.Records()
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %+v, %v", recs, err)
	}
	var rows []string
	for _, r := range recs {
		rows = append(rows, fmt.Sprintf("%s %s %s %d %d", r.World.ID, r.World.Parent, r.World.ForkRun, r.World.ForkTick, *r.Head))
	}
	if want := lines(t, db, "SELECT world, coalesce(parent, ''), coalesce(fork_run, ''), coalesce(fork_tick, 0), head_tick FROM worldfs_worlds"); !slices.Equal(rows, want) {
		t.Fatalf("records %v; worldfs_worlds %v", rows, want)
	}

	// A loose file as the views read it, then damaged.
	var r wsql.FileRead
	for _, r = range all {
		if !r.Compacted() {
			break
		}
	}
	data, err := s.ReadFile(r.Path)
	if want, _, err2 := b.Get(ctx, r.File.Path); err != nil || err2 != nil || string(data) != string(want) {
		t.Fatalf("ReadFile(%s): %d bytes, %v; the object: %d bytes, %v", r.Path, len(data), err, len(want), err2)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(r.Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFile(r.Path); !errors.Is(err, cache.ErrCorruptFragment) {
		t.Fatalf("a damaged file read: %v", err)
	}
}
