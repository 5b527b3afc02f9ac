package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/sql"
	"github.com/worldfs/worldfs/ui"
)

// bench ui asks every page and endpoint of a fork's visit, each answering
// 200, and times them.
func TestBenchUIAsksEveryEndpoint(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 12)
	enginetest.Fork(t, b, "w", "f", 6, 9)
	res, err := uiVisit(enginetest.Context(t), ui.Options{Bucket: b, Views: sql.Options{Dir: t.TempDir()}}, "f", "", "main", 2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range res.Steps {
		names = append(names, e.Name)
		if e.Bytes == 0 || e.P50ms <= 0 || e.MaxMs < e.P50ms {
			t.Errorf("%s: %+v", e.Name, e)
		}
	}
	if res.Table != "particle" || res.Ticks != 10 || strings.Join(names, ",") != "worlds page,worlds,run page,timeline,tables,rows per tick,rows per tick, zoomed,older events,tick,scrubber step,entity page,trajectory,compare adjacent ticks,compare with the parent,sql page,query,facts page,facts" {
		t.Fatalf("bench: %+v", res)
	}
}

// bench ui --worlds GLOB asks the sweep page of the worlds the glob
// matches: the page, the sweep as the page first asks it, each aggregate
// in turn; alone, or after a world's visit.
func TestBenchUIAsksTheSweep(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "base", 8)
	for i := range 3 {
		enginetest.Fork(t, b, "base", fmt.Sprintf("sweep-%03d", i), int64(2+i), 8+int64(i))
	}
	opts := ui.Options{Bucket: b, Views: sql.Options{Dir: t.TempDir()}}
	res, err := uiVisit(enginetest.Context(t), opts, "", "sweep-*", "main", 6)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range res.Steps {
		names = append(names, e.Name)
		if e.Bytes == 0 || e.P50ms <= 0 || e.MaxMs < e.P50ms || e.FirstMs <= 0 {
			t.Errorf("%s: %+v", e.Name, e)
		}
	}
	// Ticks 1 to 8, 9 and 10 (the rows of particle start at tick 1).
	if strings.Join(names, ",") != "sweep page,sweep,sweep, each aggregate in turn" || res.SweepWorlds != 3 || res.SweepPoints != 8+9+10 ||
		!strings.Contains(res.SweepOf, "avg(") || res.World != "" {
		t.Fatalf("bench: %+v", res)
	}
	res, err = uiVisit(enginetest.Context(t), opts, "sweep-001", "sweep-*", "main", 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Steps); n < 4 || res.Steps[n-3].Name != "sweep page" || res.Steps[0].Name != "worlds page" || res.Ticks != 10 {
		t.Fatalf("a world's visit, then the sweep: %+v", res)
	}
}
