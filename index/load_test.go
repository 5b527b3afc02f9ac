package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
)

// A slot that is corrupt or missing in the middle of the slots a load
// reads ahead fails the load closed, with the error a load reading them
// one by one gave: on a memory bucket the log is listed after the
// checkpoint, on a local one followed by name.
func TestBadSlotInTheReadAheadFailsClosed(t *testing.T) {
	for _, backend := range []string{"mem", "local"} {
		for _, bad := range []string{"flipped byte", "missing"} {
			t.Run(backend+"/"+bad, func(t *testing.T) {
				var b bucket.Bucket = memBucket()
				if backend == "local" {
					lb, err := local.Open(t.TempDir())
					if err != nil {
						t.Fatal(err)
					}
					b = lb
				}
				ctx := ctxT(t)
				c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
				fill(t, c, epoch, 0, 10)
				cp, err := c.Checkpoint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				fill(t, c, epoch, 10, 40)
				slots, err := bucket.Collect(b.List(ctx, LogPrefix("w"), SlotName("w", cp)))
				if err != nil || len(slots) < 10 {
					t.Fatalf("%d slots after the checkpoint, %v", len(slots), err)
				}
				target, next := slots[5], slots[6]
				var data []byte
				if bad == "flipped byte" {
					if data, _, err = b.Get(ctx, target.Name); err != nil {
						t.Fatal(err)
					}
					data[len(data)/2] ^= 0x55
				}
				if err := b.Delete(ctx, target.Name, target.Generation); err != nil {
					t.Fatal(err)
				}
				if data != nil {
					if _, err := b.Create(ctx, target.Name, data); err != nil {
						t.Fatal(err)
					}
				}
				first, _ := ParseSlotName("w", target.Name)
				after, _ := ParseSlotName("w", next.Name)
				want := map[string]string{
					"mem/flipped byte":   fmt.Sprintf("slot %s: not zstd: CRC check failed", target.Name),
					"mem/missing":        fmt.Sprintf("slot %s: world w: slot starts at sequence %d after sequence %d", next.Name, after, first-1),
					"local/flipped byte": fmt.Sprintf("world w: reading the log: slot %s: not zstd: CRC check failed", target.Name),
					"local/missing":      fmt.Sprintf("world w: slot %s is missing, yet slot %s after it exists", target.Name, next.Name),
				}[backend+"/"+bad] + ": " + ErrCorrupt.Error()
				if _, _, err := Load(ctx, b, "w"); !errors.Is(err, ErrCorrupt) || err.Error() != want {
					t.Fatalf("Load = %v, want %s", err, want)
				}
			})
		}
	}
}

// gatedReads holds a load's reads: the checkpoint's shards until
// shardsGo closes, the slots until slotsGo closes, counting the slot
// reads started and how many were under way at once.
type gatedReads struct {
	bucket.Bucket
	shardsGo, slotsGo chan struct{}

	mu                      sync.Mutex
	started, inFlight, most int
	byName                  map[string]int
}

func (g *gatedReads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if strings.HasPrefix(name, WorldPrefix("w")+"state/") {
		<-g.shardsGo
	}
	if strings.HasPrefix(name, LogPrefix("w")) {
		g.mu.Lock()
		g.started++
		g.inFlight++
		g.most = max(g.most, g.inFlight)
		g.byName[name]++
		g.mu.Unlock()
		<-g.slotsGo
		defer func() {
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		}()
	}
	return g.Bucket.Get(ctx, name)
}

func (g *gatedReads) Unwrap() bucket.Bucket { return g.Bucket }

// counts returns the slot reads started and under way.
func (g *gatedReads) counts() (started, inFlight int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started, g.inFlight
}

// byNameBucket is a memory bucket that a load follows by name, as it does
// a local bucket (bucket.Local).
type byNameBucket struct{ bucket.Bucket }

func (byNameBucket) Root() string                     { return "" }
func (byNameBucket) Path(name string) (string, error) { return "", bucket.ErrNotExist }

// A load reads the slots after its checkpoint while the checkpoint loads,
// and never holds more than readAheadSlots of them that it has not
// applied: being read (at most readAheadSlots at once from a listing, one
// at a time by name) or read and waiting. Each slot is read once, and the
// state is the log's.
func TestLoadReadsAheadABoundedWindow(t *testing.T) {
	// The package's zstd coders make their pools on first use: made in a
	// bubble, they would belong to it, so they are made here first.
	c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true})
	fill(t, c, epoch, 0, 1)
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"listing", "by name"} {
		t.Run(backend, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := ctxT(t)
				var b bucket.Bucket = memBucket()
				if backend == "by name" {
					b = byNameBucket{b}
				}
				c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
				fill(t, c, epoch, 0, 10)
				if _, err := c.Checkpoint(ctx); err != nil {
					t.Fatal(err)
				}
				want := fill(t, c, epoch, 10, 3*readAheadSlots)
				g := &gatedReads{Bucket: b, shardsGo: make(chan struct{}), slotsGo: make(chan struct{}), byName: map[string]int{}}
				type loaded struct {
					s   *State
					err error
				}
				done := make(chan loaded, 1)
				var shards, slots sync.Once
				openShards := func() { shards.Do(func() { close(g.shardsGo) }) }
				openSlots := func() { slots.Do(func() { close(g.slotsGo) }) }
				var loading sync.WaitGroup
				defer loading.Wait()
				defer openShards()
				defer openSlots() // a failure below lets the load end
				loading.Go(func() {
					s, _, err := Load(ctx, g, "w")
					done <- loaded{s, err}
				})
				synctest.Wait() // every read is held
				started, inFlight := g.counts()
				if wantNow := map[string]int{"listing": readAheadSlots, "by name": 1}[backend]; started != wantNow || inFlight != wantNow {
					t.Fatalf("with every read held, %d slot reads started and %d under way, want %d", started, inFlight, wantNow)
				}
				openSlots()
				synctest.Wait() // the checkpoint is still held
				if started, _ := g.counts(); started != readAheadSlots {
					t.Fatalf("while the checkpoint loaded, %d slots were read, want the window's %d", started, readAheadSlots)
				}
				openShards()
				got := <-done
				if got.err != nil {
					t.Fatal(got.err)
				}
				if d := diff(got.s, want); d != "" {
					t.Fatal(d)
				}
				if g.most > readAheadSlots {
					t.Fatalf("%d slot reads were under way at once, want at most %d", g.most, readAheadSlots)
				}
				for name, n := range g.byName {
					if n != 1 {
						t.Fatalf("slot %s was read %d times", name, n)
					}
				}
			})
		})
	}
}
