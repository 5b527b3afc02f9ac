package maintenance_test

import (
	"context"
	"testing"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// The kit's fact fixtures under the names this package's tests use.
var (
	readingTable = enginetest.SensorTable
	reading      = enginetest.SensorReading
	contract     = enginetest.Contract
	passing      = enginetest.Passing
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
