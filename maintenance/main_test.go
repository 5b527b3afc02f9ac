package maintenance_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/internal/crashtest"
)

func TestMain(m *testing.M) {
	crashtest.Main(m, map[string]crashtest.Func{
		"compact": compactChild,
		"gc":      gcChild,
	})
}

// The kit (engine/enginetest) under the names this package's tests use.
var (
	ctxT  = enginetest.Context
	quiet = enginetest.Quiet
	// simWorld creates a particle world run to a tick, closed with the test.
	simWorld = enginetest.World
)

// nudge12 is a durable command due at tick 12, enqueued by every driver
// (as engine's tests do), so that a compacted history is the one they
// check.
var nudge12 = particles.Nudge("nudge-12", 12, 5, -1)

// drive brings w to tick last (enginetest.Drive, with nudge12).
func drive(ctx context.Context, w *engine.World, last int64) error {
	return enginetest.Drive(ctx, w, last, nudge12)
}

// reference is the fingerprint of an uninterrupted run to last.
func reference(t *testing.T, last int64) string { return enginetest.Reference(t, last, nudge12) }

// readingTable is the fact table the tests ingest into.
func readingTable() *engine.Table {
	c, _ := engine.NewComponent("reading", engine.Field{Name: "sensor", Type: engine.String}, engine.Field{Name: "value", Type: engine.Float64})
	t, _ := engine.NewFactTable("reading", c)
	return t
}

func reading(producer, id string, value float64) engine.Fact {
	return engine.Fact{Producer: producer, ExternalID: id, Table: readingTable(),
		Values: engine.Values{"reading_sensor": producer, "reading_value": value}}
}

func contract(version string) engine.GraderContract {
	return engine.GraderContract{GraderID: "reach-ground", Implementation: version, Model: "m-1",
		Config: json.RawMessage(`{"b": 1, "a": [1, 2]}`), Thresholds: map[string]float64{"min": 0.5}, Seed: 7}
}

func passing(context.Context, engine.Subject) ([]engine.Outcome, error) {
	score := 0.9
	return []engine.Outcome{{Criterion: "lands", Verdict: engine.Pass, Score: &score}}, nil
}
