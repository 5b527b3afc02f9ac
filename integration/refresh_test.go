package integration

import (
	"context"
	"errors"
	"iter"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// gatedLog holds every read of a log slot and every listing of the log,
// once armed, until release is closed; entered is closed when the first
// such call arrives.
type gatedLog struct {
	bucket.Bucket
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

// hold waits, if armed, for release when name is in the log.
func (g *gatedLog) hold(ctx context.Context, name string) error {
	if g.armed.Load() && strings.Contains(name, "/log/") {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (g *gatedLog) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if err := g.hold(ctx, name); err != nil {
		return nil, bucket.Attrs{}, err
	}
	return g.Bucket.Get(ctx, name)
}

func (g *gatedLog) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	if err := g.hold(ctx, prefix); err != nil {
		return func(yield func(bucket.Attrs, error) bool) { yield(bucket.Attrs{}, err) }
	}
	return g.Bucket.List(ctx, prefix, startAfter)
}

// While one question refreshes a world's cold state (here a lookup in
// tokens/ of a token naming a tick not yet published, whose refresh is
// held reading or listing the log), a lookup of a tick the state already
// holds, in a state fresh within the mount's freshness, does not wait for
// it: the refresh works on a copy (index.Partial.Clone), so the state
// held goes on answering.
func TestHeldTickLookupDoesNotWaitForARefresh(t *testing.T) {
	sr, _ := checkpointedWorld(t)
	g := &gatedLog{Bucket: sr, entered: make(chan struct{}), release: make(chan struct{})}
	mt := testMountWith(t, g, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	released := false
	release := func() {
		if !released {
			released = true
			close(g.release)
		}
	}
	defer release()
	dir, err := os.Open(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), wfs.TickName(5000), &st, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mt.path("w", "tokens")); err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	miss := make(chan error, 1)
	go func() {
		_, err := os.Lstat(mt.path("w", "tokens", coldToken(coldTicks+10)))
		miss <- err
	}()
	select {
	case <-g.entered:
	case err := <-miss:
		t.Fatalf("the lookup of an unpublished tick's token ended (%v) without reading the log", err)
	}
	held := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		held <- unix.Fstatat(int(dir.Fd()), wfs.TickName(5001), &st, 0)
	}()
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("lookup of held tick 5001: %v", err)
		}
	case <-time.After(10 * time.Second):
		release()
		<-held
		t.Fatal("a lookup of a tick the fresh cold state holds waited for another question's refresh of that state (10 s and more, until the refresh's log read was let go)")
	}
	release()
	if err := <-miss; !os.IsNotExist(err) {
		t.Fatalf("lookup of an unpublished tick's token: %v", err)
	}
}

// With a slot lost from the log's tail, a world read cold fails closed
// (EIO) whether its state is loaded or refreshed: a refresh does not take
// the gap for the tip, where a tick published after it would be silently
// absent (ENOENT), lookup after lookup.
func TestColdRefreshFailsClosedOnALostSlot(t *testing.T) {
	b, publish := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	dir, err := os.Open(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), wfs.TickName(5000), &st, 0); err != nil {
		t.Fatal(err)
	}
	var slots []string
	for a, err := range b.List(ctxT(t), index.LogPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, a.Name)
	}
	for tick := int64(coldTicks + 2); tick < coldTicks+5; tick++ {
		publish(tick, tick+1) // a slot each
	}
	var added []string
	for a, err := range b.List(ctxT(t), index.LogPrefix("w"), slots[len(slots)-1]) {
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, a.Name)
	}
	if len(added) != 3 {
		t.Fatalf("three publishes wrote %d slots", len(added))
	}
	a, err := b.Stat(ctxT(t), added[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctxT(t), added[1], a.Generation); err != nil {
		t.Fatal(err)
	}
	fresh := testMount(t, b)
	if _, err := os.Lstat(fresh.path("w", "runs", "main", "ticks", wfs.TickName(coldTicks+4))); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a mount loading the world after slot %s was lost: %v; want EIO", added[1], err)
	}
	err = unix.Fstatat(int(dir.Fd()), wfs.TickName(coldTicks+4), &st, 0)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("a mount refreshing its cold state after slot %s was lost: lookup of tick %d, published after it: %v; want EIO, as a load gives", added[1], coldTicks+4, err)
	}
}
