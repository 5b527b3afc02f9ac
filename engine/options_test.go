package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// Options are refused at the door: a writer of a run worldfs reserves
// (_evaluations holds evaluation receipts), with an unknown writer mode or
// with a pipeline depth out of bounds, or with compaction or collection
// options background maintenance would refuse, is ErrInvalid from every
// constructor, before anything is written; it never publishes a tick.
func TestWorldOptionsRefusedAtTheDoor(t *testing.T) {
	ctx := ctxT(t)
	bad := map[string]engine.Options{
		"reserved run":  {Run: engine.EvaluationRun, Catalog: quiet.Catalog, NoMaintenance: true},
		"underscore":    {Run: "_mine", Catalog: quiet.Catalog, NoMaintenance: true},
		"writer mode":   {WriterMode: "sometimes", Catalog: quiet.Catalog, NoMaintenance: true},
		"tiny lease":    {Ingest: engine.IngestOptions{Lease: time.Microsecond}, Catalog: quiet.Catalog, NoMaintenance: true},
		"catalog batch": {Catalog: index.Options{NoCompactor: true, MaxBatch: 8, DeepBatch: 4}, NoMaintenance: true},
		"too deep":      {Depth: engine.MaxDepth + 1, Catalog: quiet.Catalog, NoMaintenance: true},
		"depth -1":      {Depth: -1, Catalog: quiet.Catalog, NoMaintenance: true},
		"compaction":    {Compaction: maintenance.CompactOptions{Tables: []string{""}}, Catalog: quiet.Catalog},
		"collection":    {Collection: maintenance.CollectOptions{MaxDeletes: -1}, Catalog: quiet.Catalog},
	}
	for name, opts := range bad {
		t.Run(name, func(t *testing.T) {
			b, _ := local.Open(t.TempDir())
			simWorld(t, b, "p", 1).Close()
			w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
			if err == nil {
				defer w.Close()
				particles.Install(w)
				particles.Setup(w, 3)
				_, serr := w.Step(ctx)
				t.Fatalf("CreateWorld took the options (%s); Step: %v", name, serr)
			}
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("CreateWorld: %v, want ErrInvalid", err)
			}
			if _, err := index.ReadMarker(ctx, b, "w"); !errors.Is(err, bucket.ErrNotExist) {
				t.Fatalf("a refused CreateWorld left a marker: %v", err)
			}
			if _, err := engine.ResumeWorld(ctx, b, "p", particles.Tables(), opts); err == nil {
				t.Fatal("ResumeWorld took the options")
			}
			if _, err := engine.ForkWorld(ctx, b, "p", "f", "main", 1, particles.Tables(), opts); err == nil {
				t.Fatal("ForkWorld took the options")
			}
		})
	}
}
