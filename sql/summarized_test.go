package sql_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// A sweep's compacted reads and the sweep that omits them split its rows
// in two: every row of the sweep's view is either a compacted read's (a
// row of its file within its ticks, of its world) or a row of the
// sweep's view without those reads, never both: a fork's read of its
// parent's compacted file (bounded by its fork point) included, and the
// loose ticks compaction left after each world's last window.
func TestSweepSplitsIntoCompactedReadsAndTheRest(t *testing.T) {
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
	reads, rest, err := s.CompactedReads("particle")
	if err != nil {
		t.Fatal(err)
	}
	inherited := false
	for _, r := range reads {
		if r.From > r.To || !strings.Contains(r.File.Path, "/compacted-") || r.File.Span == nil {
			t.Fatalf("a compacted read: %+v", r)
		}
		inherited = inherited || r.World == "f" && strings.HasPrefix(r.File.Path, "data/p/") && r.To <= 100
	}
	if len(reads) == 0 || !rest || !inherited {
		t.Fatalf("%d compacted reads (one of p's file by f: %v), other files: %v; want some of each", len(reads), inherited, rest)
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
	if _, _, err := one.CompactedReads("particle"); err == nil {
		t.Fatal("a world's own views list compacted reads")
	}
}
