package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/maintenance"

	"github.com/worldfs/worldfs/index"
)

// The mount serves the same snapshots before and after compaction: a
// compacted tick's files (ticks/, tokens/, tables/, CSV too) hold exactly
// the rows they held, a fork whose parent was compacted past its fork point
// sees its inherited ticks unchanged, and a mount that looked a file up
// before the rewrite keeps reading what it read (the replaced fragment
// stays in the bucket until collection).
func TestMountServesCompactedHistory(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 150)
	forkWorld(t, b, "w", "f", 100, 110)
	db := duck(t)
	probe := []int64{0, 63, 64, 100, 127, 140}
	cols := "entity_id, tick, position_x, position_y, velocity_x, velocity_y"
	read := func(mt *mounted) map[string][]string {
		out := map[string][]string{}
		for _, world := range []string{"w", "f"} {
			for _, tick := range probe {
				if world == "f" && tick > 110 {
					continue
				}
				dir := mt.path(world, "runs", "main", "ticks", strconv.FormatInt(tick, 10))
				for _, src := range []string{
					"read_parquet(" + lit(filepath.Join(dir, "particle.parquet")) + ")",
					"read_csv(" + lit(filepath.Join(dir, "particle.csv")) + ")",
					"read_parquet(" + lit(mt.path(world, "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", tick))) + ")",
				} {
					key := fmt.Sprintf("%s %d %s", world, tick, filepath.Base(src))
					out[key] = rows(t, db, fmt.Sprintf("SELECT %s FROM %s ORDER BY entity_id", cols, src))
				}
			}
		}
		return out
	}
	before := testMount(t, b)
	want := read(before)
	n := 0
	for _, r := range want {
		n += len(r)
	}
	if n < 1000 {
		t.Fatalf("only %d rows compared; the comparison proves little", n)
	}
	res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10})
	if err != nil || res.Windows != 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if tk, _ := s.Tick("main", 100); enginetest.Tables(t, tk)[0].Fragments[0].Span == nil {
		t.Fatal("tick 100 is not compacted; the test proves nothing")
	}
	after := testMount(t, b)
	for name, got := range map[string]map[string][]string{"a new mount": read(after), "the mount from before": read(before)} {
		for key, rows := range want {
			if !slices.Equal(got[key], rows) {
				t.Errorf("%s: %s has %d rows after compaction, %d before", name, key, len(got[key]), len(rows))
			}
		}
	}
}
