package index

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// ErrResync: a change feed cursor is older than the slots the bucket still
// holds; the reader must rebuild from a snapshot, then follow from its
// sequence.
var ErrResync = errors.New("change feed: the cursor is past slot retention; resync from a snapshot")

// Change is one committed entry, as the feed delivers it.
type Change struct {
	Seq   uint64
	Store string
	Entry Entry
}

// Changes yields every entry from sequence from on, in order, reading the
// slots (the durable change record) and then following the log: it probes
// for the next slot every poll until ctx ends. A cursor is just a sequence,
// so a reader resumes after a restart with the last sequence it handled
// plus one. A cursor whose slots were collected yields ErrResync. Corrupt
// slots end the feed with ErrCorrupt.
func Changes(ctx context.Context, b bucket.Bucket, world string, from uint64, poll time.Duration) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		from = max(from, 1)
		// List from the slot holding from-1 (it starts at most
		// MaxSlotEntries-1 before it), so that a cursor at the tip knows
		// which slot name comes next.
		startAfter := ""
		if from > MaxSlotEntries+1 {
			startAfter = SlotName(world, from-MaxSlotEntries-1)
		}
		next := uint64(0) // the first sequence of the next slot to read
		emit := func(slot *Slot) bool {
			for i, e := range slot.Entries {
				seq := slot.FirstSeq + uint64(i)
				if seq >= from && !yield(Change{Seq: seq, Store: slot.Store, Entry: e}, nil) {
					return false
				}
			}
			next = slot.LastSeq() + 1
			return true
		}
		var prevHash string
		read := func(name string) (*Slot, error) {
			data, _, err := b.Get(ctx, name)
			if err != nil {
				return nil, err
			}
			slot, hash, err := DecodeSlot(world, name, data)
			if err != nil {
				return nil, err
			}
			if next != 0 && (slot.FirstSeq != next || slot.Prev != prevHash) {
				return nil, fmt.Errorf("slot %s does not continue the log: %w", name, ErrCorrupt)
			}
			prevHash = hash
			return slot, nil
		}
		stopped := errors.New("the caller stopped")
		for a, err := range b.List(ctx, LogPrefix(world), startAfter) {
			if err != nil {
				yield(Change{}, err)
				return
			}
			if next != 0 {
				err := readSkipped(world, a.Name, next, func(name string) (uint64, error) {
					slot, err := read(name)
					if err != nil {
						return 0, err
					}
					if !emit(slot) {
						return 0, stopped
					}
					return next, nil
				})
				if err != nil {
					if !errors.Is(err, stopped) {
						yield(Change{}, err)
					}
					return
				}
			}
			slot, err := read(a.Name)
			if err != nil {
				yield(Change{}, err)
				return
			}
			if next == 0 && slot.FirstSeq > from {
				yield(Change{}, fmt.Errorf("world %s: cursor %d, oldest slot %d: %w", world, from, slot.FirstSeq, ErrResync))
				return
			}
			if !emit(slot) {
				return
			}
		}
		if next == 0 {
			next = from // nothing listed: the log has not reached the cursor
		}
		for {
			slot, err := read(SlotName(world, next))
			switch {
			case err == nil:
				if !emit(slot) {
					return
				}
				continue
			case !errors.Is(err, bucket.ErrNotExist):
				yield(Change{}, err)
				return
			}
			if err := bucket.Sleep(ctx, poll); err != nil {
				return
			}
		}
	}
}
