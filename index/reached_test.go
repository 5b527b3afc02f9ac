package index

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
)

// stallReached wraps an injector and closes hit the first time it injects
// a stall: the stalled call has then reached the bucket, so a test can
// order what it does next after it without sleeping.
type stallReached struct {
	faulty.Injector
	once sync.Once
	hit  chan struct{}
}

func newStallReached(inj faulty.Injector) *stallReached {
	return &stallReached{Injector: inj, hit: make(chan struct{})}
}

func (s *stallReached) Fault(op faulty.Op, name string) faulty.Fault {
	f := s.Injector.Fault(op, name)
	if f.Kind == faulty.Stall {
		s.once.Do(func() { close(s.hit) })
	}
	return f
}

// wait returns once the stall is reached; it fails the test if ctx ends
// first.
func (s *stallReached) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-s.hit:
	case <-ctx.Done():
		t.Fatal("the stalled call never reached the bucket")
	}
}

// tipReached is a bucket that closes reached the first time a read of one
// of world's log slots finds nothing: a change feed reading through it is
// then following the log at its tip.
type tipReached struct {
	bucket.Bucket
	world   string
	once    sync.Once
	reached chan struct{}
}

func newTipReached(b bucket.Bucket, world string) *tipReached {
	return &tipReached{Bucket: b, world: world, reached: make(chan struct{})}
}

func (b *tipReached) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	data, a, err := b.Bucket.Get(ctx, name)
	if errors.Is(err, bucket.ErrNotExist) && strings.HasPrefix(name, LogPrefix(b.world)) {
		b.once.Do(func() { close(b.reached) })
	}
	return data, a, err
}

// commitAtTip commits e through c once a feed reading through b follows
// the log at its tip (or not at all if ctx ends first).
func commitAtTip(ctx context.Context, b *tipReached, c *Catalog, e Entry) {
	go func() {
		select {
		case <-b.reached:
			c.Commit(context.Background(), e)
		case <-ctx.Done():
		}
	}()
}
