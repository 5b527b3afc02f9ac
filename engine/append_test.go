package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/particles"
)

// failingAppends fails the creates of one table's fragments at once and
// holds those of another until their context ends, once armed.
type failingAppends struct {
	bucket.Bucket
	armed          atomic.Bool
	fail, hold     string // table ids
	held, released chan struct{}
}

func (f *failingAppends) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	if f.armed.Load() && strings.Contains(name, "/"+f.fail+"/") {
		<-f.held // fail only once the other create is in flight
		return bucket.Attrs{}, errors.New("injected: this fragment cannot be written")
	}
	if f.armed.Load() && strings.Contains(name, "/"+f.hold+"/") {
		close(f.held)
		<-ctx.Done()
		close(f.released)
		return bucket.Attrs{}, ctx.Err()
	}
	return f.Bucket.Create(ctx, name, data)
}

// A tick whose append fails does not wait for its other appends: they are
// cancelled, and Step returns the failure while the caller's context is
// still live.
func TestFailedAppendCancelsTheOthers(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	tables := particles.Tables()
	b := &failingAppends{Bucket: lb, fail: tables[0].ID, hold: tables[1].ID, held: make(chan struct{}), released: make(chan struct{})}
	w := simWorld(t, b, "w", 2)
	b.armed.Store(true)
	particles.Schedule(w)
	_, err := w.Step(ctx)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("the step: %v, want the injected failure", err)
	}
	select {
	case <-b.released:
	default:
		t.Fatal("Step returned before the held append ended")
	}
	if ctx.Err() != nil {
		t.Fatalf("the held append ended only with the test's deadline: %v", ctx.Err())
	}
	if w.Tick() != 2 {
		t.Fatalf("the world moved to tick %d", w.Tick())
	}
}
