package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// Helpers for collection (maintenance.Collect): what of the log, the
// checkpoints and their shards is still needed.

// CheckpointSeqOf returns the sequence a checkpoint of world called name
// covers (false: not a checkpoint name).
func CheckpointSeqOf(world, name string) (uint64, bool) {
	seq := checkpointSeq(world, name)
	return seq, seq != 0 && CheckpointName(world, seq) == name
}

// CheckpointShards returns the hashes of the shards the checkpoint called
// name names (ShardName gives their objects).
func CheckpointShards(ctx context.Context, b bucket.Bucket, world, name string) ([]string, error) {
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cp.Shards))
	for i, r := range cp.Shards {
		out[i] = r.Hash
	}
	return out, nil
}

// CheckpointObjects returns the names of the objects the checkpoint
// called name keeps alive beside it: its shards (each with its summary
// and token filter, ShardOfSidecar) and its summaries object.
func CheckpointObjects(ctx context.Context, b bucket.Bucket, world, name string) ([]string, error) {
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(cp.Shards)+1)
	for _, r := range cp.Shards {
		out = append(out, ShardName(world, r.Hash))
	}
	return append(out, CheckpointSummariesName(world, cp.Sum)), nil
}

// CheckpointWhole checks that every shard the checkpoint called name names
// is in the bucket (an object each, read at once by a few): what a
// collector asks of the checkpoint the log will start from before it
// deletes the slots behind it. A missing shard is ErrCorrupt.
func CheckpointWhole(ctx context.Context, b bucket.Bucket, world, name string) error {
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return err
	}
	return parallelReads(ctx, len(cp.Shards), func(i int) error {
		shard := ShardName(world, cp.Shards[i].Hash)
		if _, err := b.Stat(ctx, shard); err != nil {
			if errors.Is(err, bucket.ErrNotExist) {
				return fmt.Errorf("checkpoint %s names shard %s, which is not in the bucket: %w", name, shard, ErrCorrupt)
			}
			return fmt.Errorf("checkpoint %s: %w", name, err)
		}
		return nil
	})
}

// SlotHolding returns the slot that holds sequence seq, found with one
// short listing (slots are named by their first sequence and hold at most
// MaxSlotEntries). If that slot was collected it returns the oldest slot
// still in the bucket after it, with found false: everything before it is
// older. ok is false if the log holds no slot at or after seq's.
func SlotHolding(ctx context.Context, b bucket.Bucket, world string, seq uint64) (a bucket.Attrs, found, ok bool, err error) {
	startAfter := ""
	if seq > MaxSlotEntries {
		startAfter = SlotName(world, seq-MaxSlotEntries)
	}
	for s, err := range b.List(ctx, LogPrefix(world), startAfter) {
		if err != nil {
			return bucket.Attrs{}, false, false, err
		}
		first, perr := ParseSlotName(world, s.Name)
		if perr != nil {
			return bucket.Attrs{}, false, false, fmt.Errorf("%w: %w", perr, ErrCorrupt)
		}
		if first > seq {
			if ok {
				return a, true, true, nil
			}
			return s, false, true, nil
		}
		a, ok = s, true
	}
	return a, ok, ok, nil
}

// LogSlot is one slot of the log as listed: its object and the sequences
// it holds.
type LogSlot struct {
	bucket.Attrs
	First, Last uint64
}

// RebasePlan is which old slots of a world can go and the checkpoint that
// stands in for them.
type RebasePlan struct {
	// Base is the checkpoint the log will start from once Slots are
	// deleted: the log then begins at Base+1 (0: nothing to collect).
	Base uint64
	// Write: no checkpoint at Base exists yet; Rebase writes it.
	Write bool
	// Slots are the slots to delete, oldest first: the whole prefix of
	// the log up to Base. Delete them in order, so that a crash leaves a
	// log that still starts right after a checkpoint or at a slot the
	// next collection finds covered.
	Slots []LogSlot
}

// PlanRebase plans the collection of old slots: the longest prefix of the
// log created before cutoff (never the log's last slot), cut at a point a
// checkpoint covers or can cover. The first remaining slot must follow a
// checkpoint (a cold start, VerifyCatalog and a change feed resync start
// from there), so the base is either an existing checkpoint inside the
// prefix or a new one at its end, built from the checkpoint the log
// starts from now.
func PlanRebase(ctx context.Context, b bucket.Bucket, world string, cutoff time.Time) (RebasePlan, error) {
	cps := map[uint64]bool{}
	for a, err := range b.List(ctx, CheckpointPrefix(world), "") {
		if err != nil {
			return RebasePlan{}, fmt.Errorf("world %s: listing checkpoints: %w", world, err)
		}
		if seq, ok := CheckpointSeqOf(world, a.Name); ok {
			cps[seq] = true
		}
	}
	var slots []LogSlot
	for a, err := range b.List(ctx, LogPrefix(world), "") {
		if err != nil {
			return RebasePlan{}, fmt.Errorf("world %s: listing the log: %w", world, err)
		}
		first, err := ParseSlotName(world, a.Name)
		if err != nil {
			return RebasePlan{}, fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
		if n := len(slots); n > 0 {
			slots[n-1].Last = first - 1
		}
		if !a.Created.Before(cutoff) {
			break // this one stays, and so does everything after it
		}
		slots = append(slots, LogSlot{Attrs: a, First: first})
	}
	// The last slot listed before cutoff has no known end unless another
	// slot followed it; the log's last slot always stays.
	if n := len(slots); n > 0 && slots[n-1].Last == 0 {
		slots = slots[:n-1]
	}
	if len(slots) == 0 {
		return RebasePlan{}, nil
	}
	from := slots[0].First - 1 // the checkpoint the log starts from (0: the log is whole)
	end := slots[len(slots)-1].Last
	plan := RebasePlan{Base: end}
	switch {
	case cps[end]:
	case from == 0 || cps[from]:
		plan.Write = true
	default:
		// An earlier collection stopped midway: the log's first slot
		// follows no checkpoint, and only a checkpoint inside the prefix
		// can stand in for it.
		plan.Base = 0
		for seq := range cps {
			if seq > from && seq <= end && seq > plan.Base {
				plan.Base = seq
			}
		}
		if plan.Base == 0 {
			return RebasePlan{}, nil
		}
	}
	for _, s := range slots {
		if s.Last <= plan.Base {
			plan.Slots = append(plan.Slots, s)
		}
	}
	return plan, nil
}

// Rebase writes the checkpoint a plan needs (if any): the state at
// plan.Base, folded from the checkpoint the log starts from and the slots
// the plan will delete, which are read once here.
func Rebase(ctx context.Context, b bucket.Bucket, world string, plan RebasePlan) error {
	if !plan.Write || len(plan.Slots) == 0 {
		return nil
	}
	state := Empty(world)
	var prev *checkpoint
	if from := plan.Slots[0].First - 1; from > 0 {
		var err error
		if state, prev, err = LoadCheckpoint(ctx, b, world, CheckpointName(world, from)); err != nil {
			return err
		}
	}
	for _, s := range plan.Slots {
		var err error
		if state, _, err = readSlot(ctx, b, state, s.Name); err != nil {
			return err
		}
	}
	if state.Seq != plan.Base {
		return fmt.Errorf("world %s: the slots to collect end at sequence %d, not %d: %w", world, state.Seq, plan.Base, ErrCorrupt)
	}
	if _, _, err := WriteCheckpoint(ctx, b, state, prev); err != nil && !errors.Is(err, bucket.ErrExist) {
		return err
	}
	return nil
}

// LogBase returns the checkpoint sequence the log starts from: the first
// slot still in the bucket, minus one (0: the log is whole or empty).
func LogBase(ctx context.Context, b bucket.Bucket, world string) (uint64, error) {
	for a, err := range b.List(ctx, LogPrefix(world), "") {
		if err != nil {
			return 0, err
		}
		first, err := ParseSlotName(world, a.Name)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
		return first - 1, nil
	}
	return 0, nil
}

// KeptCheckpoints returns the checkpoints collection keeps, by name: the
// newest keep, any younger than minAge, and the one the log starts from.
// The rest are returned as dead.
func KeptCheckpoints(ctx context.Context, b bucket.Bucket, world string, keep int, minAge time.Duration, now time.Time) (kept, dead []bucket.Attrs, err error) {
	_, all, err := newestCheckpoint(ctx, b, world)
	if err != nil {
		return nil, nil, err
	}
	base, err := LogBase(ctx, b, world)
	if err != nil {
		return nil, nil, err
	}
	for i, a := range all {
		if i >= len(all)-keep || now.Sub(a.Created) < minAge || (base > 0 && a.Name == CheckpointName(world, base)) {
			kept = append(kept, a)
		} else {
			dead = append(dead, a)
		}
	}
	return kept, slices.Clip(dead), nil
}
