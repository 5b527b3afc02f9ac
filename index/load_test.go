package index

import (
	"errors"
	"fmt"
	"testing"

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
