package index

import (
	"context"
	"fmt"
	"sync"

	"github.com/worldfs/worldfs/bucket"
)

// readAheadSlots bounds a logReader: at most this many slots are being
// fetched and decoded, or wait decoded, ahead of the one being applied.
// On the memory bucket's gcs model (a read takes 12 ms), a load of the
// 100,000-tick bench world, whose newest checkpoint leaves 1,000 slots to
// replay, took 13.8 s reading them one by one, and 2.4-3.0 s, 1.25 s,
// 0.6 s, 0.45-0.5 s and 0.42-0.56 s with 8, 16, 32, 64 and 128 ahead
// (BenchmarkLoadWorld on a busy machine). 32 takes most of the gain; a
// writer keeps a slot near SlotBytes compressed, so the window holds a few
// MiB of tick slots and tens of MiB of the largest.
const readAheadSlots = 32

// aheadSlot is a slot in a logReader's window: once done is closed, slot
// and hash are what DecodeSlot made of the object called name, or err is
// why there is none (bucket.ErrNotExist: no such object).
type aheadSlot struct {
	name string
	done chan struct{}
	slot *Slot
	hash string
	err  error
}

// applyTo applies the slot to s, or to a copy of s unless inPlace (s is
// the caller's alone, see applySlot).
func (a *aheadSlot) applyTo(s *State, inPlace bool) (*State, error) {
	if a.err != nil {
		return nil, a.err
	}
	if !inPlace {
		s = s.clone()
	}
	n, err := s.applySlot(a.slot, a.hash)
	if err != nil {
		return nil, fmt.Errorf("slot %s: %w", a.name, err)
	}
	return n, nil
}

// fetchSlot reads and decodes the slot called name. A missing slot is
// bucket.ErrNotExist; one that does not decode is ErrCorrupt.
func fetchSlot(ctx context.Context, b bucket.Bucket, world, name string) (*Slot, string, error) {
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, "", err
	}
	return DecodeSlot(world, name, data)
}

// A logReader fetches and decodes slots of the log ahead of a caller that
// applies them in order (next), up to readAheadSlots at once, so that a
// replay waits for the bucket about once per window instead of once per
// slot. It checks nothing itself: whoever applies a slot checks that it
// continues the state (applySlot), as when slots were read one by one.
// The slots come from one of two sources, as the log is found (see
// listLog and probeLog): a listing, whose names are all known ahead, or
// names, each slot's after the one before it ends, which a reader knows
// only once that one is decoded, so that source reads one slot at a time,
// while the caller applies the ones before.
type logReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	queue  chan *aheadSlot // the window, in log order
	window chan struct{}   // a token per slot in the window
	err    error           // why the source ended early; set before queue closes
	wg     sync.WaitGroup  // the source and its fetches
	// limit, if positive, is how many slots next returns: past them it
	// fails with ErrReload (a reader that would rather load anew than
	// follow a longer tail). given counts those it returned.
	limit, given int
}

func newLogReader(ctx context.Context) *logReader {
	r := &logReader{queue: make(chan *aheadSlot, readAheadSlots), window: make(chan struct{}, readAheadSlots)}
	r.ctx, r.cancel = context.WithCancel(ctx)
	return r
}

// readByName reads the slots after sequence after by name: the slot
// starting at after+1, then the one starting after it, up to the first
// name absent, which is the last slot next returns (its err is
// bucket.ErrNotExist), or the first that does not decode. Each name
// follows from the slot before, so they are read one at a time, by the
// source itself.
func readByName(ctx context.Context, b bucket.Bucket, world string, after uint64) *logReader {
	r := newLogReader(ctx)
	r.source(func() {
		for seq := after + 1; ; {
			a := r.place(SlotName(world, seq))
			if a == nil {
				return
			}
			a.slot, a.hash, a.err = fetchSlot(r.ctx, b, world, a.name)
			if close(a.done); a.err != nil {
				return
			}
			seq = a.slot.LastSeq() + 1
		}
	})
	return r
}

// readListed reads the slots a listing of the log shows after the slot
// called startAfter ("": from the start).
func readListed(ctx context.Context, b bucket.Bucket, world, startAfter string) *logReader {
	r := newLogReader(ctx)
	r.source(func() {
		for a, err := range b.List(r.ctx, LogPrefix(world), startAfter) {
			if err != nil {
				r.err = fmt.Errorf("world %s: listing the log: %w", world, err)
				return
			}
			if !r.fetch(b, world, a.Name) {
				return
			}
		}
	})
	return r
}

// source runs the reader's source of slots in the background: it places
// each in the window (place, fetch) in log order.
func (r *logReader) source(run func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.queue)
		run()
	}()
}

// place waits for room in the window and puts the slot called name there,
// to be fetched; it returns nil if the reader was stopped first.
func (r *logReader) place(name string) *aheadSlot {
	select {
	case r.window <- struct{}{}:
	case <-r.ctx.Done():
		return nil
	}
	a := &aheadSlot{name: name, done: make(chan struct{})}
	r.queue <- a // never waits: the window holds at most cap(queue)
	return a
}

// fetch places the slot called name in the window and reads it there in
// the background; it returns false if the reader was stopped first.
func (r *logReader) fetch(b bucket.Bucket, world, name string) bool {
	a := r.place(name)
	if a == nil {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(a.done)
		a.slot, a.hash, a.err = fetchSlot(r.ctx, b, world, name)
	}()
	return true
}

// next returns the next slot, fetched, and frees its place in the window.
// At the end of the source it returns nil, or why the source ended early.
func (r *logReader) next() (*aheadSlot, error) {
	if r.limit > 0 && r.given == r.limit {
		return nil, fmt.Errorf("the log goes on past %d slots: %w", r.limit, ErrReload)
	}
	r.given++
	a, ok := <-r.queue
	if !ok {
		if r.err != nil {
			return nil, r.err
		}
		return nil, r.ctx.Err()
	}
	<-a.done
	<-r.window
	return a, nil
}

// stop ends the reader and waits for its fetches; what it read and nobody
// took is dropped.
func (r *logReader) stop() {
	r.cancel()
	r.wg.Wait()
}
