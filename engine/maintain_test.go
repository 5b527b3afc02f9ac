package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A background collection that cannot read what an export references
// deletes nothing and says so through World.Maintenance, and the runs
// that only compact, between two collections, do not hide it.
func TestMaintenanceKeepsACollectionsFailure(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	opts := enginetest.Quiet
	opts.NoMaintenance = false
	opts.Compaction = maintenance.CompactOptions{Recent: 4, Windows: []int64{8}}
	opts.Collection = maintenance.CollectOptions{Retention: time.Millisecond, UnsafeRetention: true, Every: 2}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := b.Create(ctx, index.ExportRegistryName("w", "0123456789abcdef"), []byte("{not a registration")); err != nil {
		t.Fatal(err)
	}
	failed := false
	for tick := int64(0); tick < 400; tick++ {
		if err := enginetest.Drive(ctx, w, tick); err != nil {
			t.Fatal(err)
		}
		res, err := w.Maintenance()
		switch {
		case err != nil && !strings.Contains(err.Error(), "export"):
			t.Fatalf("tick %d: background maintenance failed otherwise: %v", tick, err)
		case err != nil:
			failed = true
		case failed:
			t.Fatalf("tick %d: the collection's failure was hidden by a later run (%d windows compacted)", tick, res.Windows)
		}
	}
	if res, _ := w.Maintenance(); !failed || res.Windows < 8 || w.Collected() != 0 {
		t.Fatalf("after 400 ticks: failure seen %v, %d windows compacted, %d objects collected; want a failure, 8 windows or more, nothing collected", failed, res.Windows, w.Collected())
	}
}
