package bench

import (
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
	res, err := uiVisit(enginetest.Context(t), ui.Options{Bucket: b, Views: sql.Options{Dir: t.TempDir()}}, "f", "main", 2)
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
