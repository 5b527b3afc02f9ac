package index

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// maybeCheckpoint starts the compactor if the tip is far enough past the
// last checkpoint. Every process runs one; there is no leader.
func (c *Catalog) maybeCheckpoint() {
	if c.opts.NoCompactor {
		return
	}
	tip := c.Tip()
	c.ckpt.Lock()
	defer c.ckpt.Unlock()
	if c.ckpt.running || !c.checkpointDueLocked(tip) {
		return
	}
	c.ckpt.running = true
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer func() {
			c.ckpt.Lock()
			c.ckpt.running = false
			c.ckpt.Unlock()
		}()
		// A random wait first, so that racing compactors mostly find each
		// other's checkpoint instead of writing the same one.
		if d := c.opts.CheckpointDelay; d > 0 {
			select {
			case <-time.After(time.Duration(mrand.Int64N(int64(d)))):
			case <-c.done:
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.CheckpointTimeout)
		defer cancel()
		go func() {
			select {
			case <-c.done: // Close stops a running checkpoint
				cancel()
			case <-ctx.Done():
			}
		}()
		_, _ = c.Checkpoint(ctx)
	}()
}

// RestCheckpointSlots: a catalog closes by checkpointing its tip when the
// tip is this many slots past the newest checkpoint it knows, so that a
// world at rest (a simulation that ended, a maintainer done) loads with
// no replay. Replay costs about 65 µs a slot on a local bucket (a cold
// load of the 100k bench world: 110 ms with 1,009 slots after its
// checkpoint, 47 ms with none), so a tail shorter than this is left.
const RestCheckpointSlots = 64

// restCheckpointTimeout bounds the closing checkpoint, so that a Close on
// a stalled bucket returns within it (a checkpoint of the 100k bench
// world takes about 0.25 s on a local bucket).
const restCheckpointTimeout = 10 * time.Second

// checkpointAtRest writes the closing checkpoint (RestCheckpointSlots),
// bounded by restCheckpointTimeout (or CheckpointTimeout, if shorter).
// Like the automatic ones, it is an optimization: a failure leaves the log
// whole and is not reported.
func (c *Catalog) checkpointAtRest() {
	if c.opts.NoCompactor {
		return
	}
	tip := c.Tip()
	c.ckpt.Lock()
	lastSlots, _ := c.lastCheckpointLocked()
	c.ckpt.Unlock()
	if tip.Slots < lastSlots+RestCheckpointSlots {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.opts.CheckpointTimeout, restCheckpointTimeout))
	defer cancel()
	_, _ = c.Checkpoint(ctx)
}

// checkpointDueLocked reports whether tip is far enough past the newest
// checkpoint known: CheckpointSlots slots, CheckpointEntries entries or
// CheckpointInterval. Entries count as well as slots because a slot holds
// from one entry to thousands: counted in slots alone, the replay a cold
// start pays would grow a hundredfold under load. c.ckpt is held.
func (c *Catalog) checkpointDueLocked(tip *State) bool {
	lastSlots, lastSeq := c.lastCheckpointLocked()
	if tip.Slots <= lastSlots {
		return false // a checkpoint (perhaps a peer's, adopted) covers the tip
	}
	return tip.Slots-lastSlots >= c.opts.CheckpointSlots || tip.Seq-lastSeq >= c.opts.CheckpointEntries ||
		time.Since(c.ckpt.lastAt) >= c.opts.CheckpointInterval
}

// lastCheckpointLocked returns where the newest checkpoint known ends, in
// slots and sequence (0, 0: none). c.ckpt is held.
func (c *Catalog) lastCheckpointLocked() (slots, seq uint64) {
	if last := c.ckpt.last; last != nil {
		return last.Slots, last.Seq
	}
	return 0, 0
}

// Checkpoint writes a checkpoint of the current tip unless the bucket's
// newest checkpoint already covers it, then collects old checkpoints. It
// returns the checkpoint's sequence.
func (c *Catalog) Checkpoint(ctx context.Context) (uint64, error) {
	tip, err := c.Exact(ctx)
	if err != nil {
		return 0, err
	}
	if tip.Seq == 0 {
		return 0, nil
	}
	newest, _, err := newestCheckpoint(ctx, c.b, c.world)
	if err != nil {
		return 0, err
	}
	if seq := checkpointSeq(c.world, newest); seq >= tip.Seq {
		// A peer's checkpoint covers the tip: adopt it as the base of our
		// next incremental checkpoint (its shards are in the bucket).
		cp, err := readCheckpoint(ctx, c.b, c.world, newest)
		if err != nil {
			return 0, err
		}
		c.noteCheckpoint(cp)
		return seq, nil
	}
	c.ckpt.Lock()
	prev := c.ckpt.last
	c.ckpt.Unlock()
	if seq := checkpointSeq(c.world, newest); seq > 0 && (prev == nil || seq > prev.Seq) {
		// A peer's newer checkpoint is the base: the shards carried are
		// those it names, and the shards written changed after it.
		if cp, err := readCheckpoint(ctx, c.b, c.world, newest); err == nil {
			prev = cp
		}
	}
	_, cp, err := WriteCheckpoint(ctx, c.b, tip, prev)
	if err != nil {
		return 0, err
	}
	c.stats.checkpoints.Add(1)
	c.noteCheckpoint(cp)
	if _, err := CollectCheckpoints(ctx, c.b, c.world, c.opts.KeepCheckpoints, c.opts.KeepCheckpointAge, time.Now()); err != nil {
		return cp.Seq, fmt.Errorf("world %s: collecting checkpoints: %w", c.world, err)
	}
	return cp.Seq, nil
}

// noteCheckpoint records the newest checkpoint known, the base of the next
// incremental one.
func (c *Catalog) noteCheckpoint(cp *checkpoint) {
	c.ckpt.Lock()
	defer c.ckpt.Unlock()
	if c.ckpt.last == nil || cp.Seq >= c.ckpt.last.Seq {
		c.ckpt.last = cp
	}
	c.ckpt.lastAt = time.Now()
}

func checkpointSeq(world, name string) uint64 {
	if name == "" {
		return 0
	}
	seq, err := ParseCheckpointName(world, name)
	if err != nil {
		return 0
	}
	return seq
}
