package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/worldfs/worldfs/index"
)

// The pipelined writer: up to Options.Depth ticks in flight.
//
// What overlaps. Submit computes tick k+1 while tick k (and the ticks
// before it) still append their fragments or wait for their slot; k+1's
// appends run in parallel with k's publish. Computing k+1 needs only what
// is in memory, never k's publication:
//   - the frames: k+1 starts from k's computed frames. They become visible
//     only if k publishes; if k does not, k+1 is discarded with it.
//   - the spawn and despawn caches: k+1 applies the entries the ticks in
//     flight did not; no entry is consumed before the tick that applied it
//     is published (step 8 of a tick write), so a discarded tick leaves its
//     entries queued for the retry.
//   - the durable commands: read from the catalog as at depth 1, except
//     those a tick in flight materialized; that tick settles them when it
//     publishes.
//
// Publishes land in tick order: a single publisher takes the ticks as they
// finish appending, oldest first, and commits every consecutive one that is
// ready in one slot (index.Catalog.CommitAll: all of them or none), only
// after the slot before is decided. So a tick is never published unless
// every tick before it is. When a slot fails, no tick behind it publishes:
//   - a definite failure (an append that failed, a refusal) discards every
//     tick in flight; the world returns to its last published state with
//     the caches intact, and the next Submit recomputes;
//   - a stale writer (fenced epoch) or another attempt at the tick stops
//     the writer, and nothing in flight publishes;
//   - an unknown outcome keeps that slot's ticks as the prepared commit and
//     freezes the world until reconciliation (step 7 of a tick write); the
//     ticks behind it are discarded, and recomputed after reconciliation.
// Discarded ticks' fragments are dead attempts: their tokens are named by
// no manifest, and collection removes them.
//
// The caller's goroutine owns the world: computing, and acting on each
// outcome (consuming caches, receipts, hooks) happen there, in Submit,
// Flush and Step. Only the appends and the slot creates run behind it.

// publisher runs the appends and the publishes of the ticks in flight.
type publisher struct {
	ctx    context.Context // the appends'; cancelled to discard the ticks in flight
	cancel context.CancelFunc
	in     chan *prepared // ticks to publish, in tick order
	out    chan published // the outcome of each slot, in order
	done   chan struct{}  // closed when the publishing goroutine returns
	group  int            // the most ticks in one slot
}

// published is the outcome of one slot: the n oldest ticks in flight
// published (err nil), or not (err).
type published struct {
	n   int
	err error
}

// Submit computes the next tick and starts its appends and its publish,
// then returns without waiting for them, unless Options.Depth ticks are
// already in flight: then it first waits for the oldest to publish. It
// returns the receipts of the ticks it saw published, oldest first. An
// error is that of the oldest tick that failed; the ticks behind it are
// discarded. Cancelling ctx while Submit waits aborts the ticks still
// appending (they are discarded) but never a publish in flight.
//
// After an unknown publish outcome, Submit (like Step) only reconciles:
// it returns the reconciled ticks' receipts, ErrNotPublished or ErrFrozen.
func (w *World) Submit(ctx context.Context) ([]CommittedTickReceipt, error) {
	if w.stopped != nil {
		return nil, w.stopped
	}
	if len(w.uncertain) > 0 {
		return w.reconcile(ctx)
	}
	out, err := w.collect(ctx, len(w.flight)-w.opts.Depth+1)
	if err != nil {
		return out, err
	}
	p, err := w.compute(ctx)
	if err != nil {
		return out, err
	}
	if len(w.flight) == 0 {
		w.base.frames, w.base.tick = w.frames, w.tick
	}
	w.flight = append(w.flight, p)
	w.frames, w.tick = p.frames, p.tick
	pub := w.publisher()
	go func() {
		p.appends, p.err = w.appendTick(pub.ctx, p)
		close(p.appended)
	}()
	pub.in <- p
	return out, nil
}

// Flush waits until no tick is in flight and returns the receipts of the
// ticks it saw published, oldest first (as Submit does).
func (w *World) Flush(ctx context.Context) ([]CommittedTickReceipt, error) {
	if w.stopped != nil {
		return nil, w.stopped
	}
	return w.collect(ctx, len(w.flight))
}

// collect acts on the outcomes of the ticks in flight: those already in,
// then more until at least n ticks have been decided.
func (w *World) collect(ctx context.Context, n int) ([]CommittedTickReceipt, error) {
	var out []CommittedTickReceipt
	for w.pub != nil && len(w.flight) > 0 {
		var res published
		select {
		case res = <-w.pub.out:
		default:
			if n <= 0 {
				return out, nil
			}
			select {
			case res = <-w.pub.out:
			case <-ctx.Done():
				rs, err := w.abort(ctx)
				return append(out, rs...), err
			}
		}
		n -= res.n
		rs, err := w.settle(ctx, w.flight[:res.n], res.err)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// abort handles the caller's cancellation while ticks are in flight: the
// ticks still appending are abandoned, a slot being created is waited for
// and its outcome acted on as usual, and the rest is discarded. It returns
// the receipts of the ticks that published, and the caller's error only if
// a tick was discarded.
func (w *World) abort(ctx context.Context) ([]CommittedTickReceipt, error) {
	pub := w.pub
	pub.cancel()
	<-pub.done
	var out []CommittedTickReceipt
	for pending := true; pending && w.pub == pub; {
		select {
		case res := <-pub.out:
			rs, err := w.settle(ctx, w.flight[:res.n], res.err)
			out = append(out, rs...)
			if err != nil {
				return out, errors.Join(fmt.Errorf("world %s: %w", w.id, ctx.Err()), err)
			}
		default:
			pending = false
		}
	}
	if w.pub == pub {
		w.pub = nil // its goroutine has returned
	}
	if len(w.flight) == 0 {
		return out, nil
	}
	w.discard()
	return out, fmt.Errorf("world %s: %w", w.id, ctx.Err())
}

// discard drops the ticks in flight: their appends are abandoned and
// waited for, and the world returns to the last published state. Their
// cache entries stay queued.
func (w *World) discard() {
	if w.pub != nil {
		w.pub.cancel()
		<-w.pub.done
		w.pub = nil
	}
	for _, p := range w.flight {
		<-p.appended
	}
	w.flight = nil
	w.frames, w.tick = w.base.frames, w.base.tick
}

// publisher returns the running publisher, starting one if none runs.
func (w *World) publisher() *publisher {
	if w.pub != nil {
		return w.pub
	}
	ctx, cancel := context.WithCancel(context.Background())
	cat := w.opts.Catalog
	pub := &publisher{ctx: ctx, cancel: cancel, in: make(chan *prepared, MaxDepth), out: make(chan published, MaxDepth),
		done: make(chan struct{}), group: min(w.opts.Depth, cat.EnsureDefaults().DeepBatch)}
	w.pub = pub
	go w.publish(pub)
	return pub
}

// publish is the publisher's goroutine: it takes the ticks in order and,
// once the oldest is appended, publishes it with every consecutive tick
// appended by then, in one slot (step 6). It returns after the first slot
// that fails, or when its context ends. It reads only what does not
// change while ticks are in flight (the catalog, the epoch, the run).
func (w *World) publish(pub *publisher) {
	defer close(pub.done)
	var queue []*prepared
	for {
		if len(queue) == 0 {
			select {
			case p := <-pub.in:
				queue = append(queue, p)
			case <-pub.ctx.Done():
				return
			}
		}
		select {
		case <-queue[0].appended:
		case <-pub.ctx.Done():
			return
		}
	more:
		for {
			select {
			case p := <-pub.in:
				queue = append(queue, p)
			default:
				break more
			}
		}
		n := 0
		for n < len(queue) && n < pub.group && appended(queue[n]) && queue[n].err == nil {
			n++
		}
		if n == 0 {
			pub.out <- published{n: 1, err: queue[0].err}
			return
		}
		if pub.ctx.Err() != nil {
			return
		}
		var err error
		if w.cat != nil {
			entries := make([]index.Entry, n)
			for i, p := range queue[:n] {
				entries[i] = w.publishEntry(p)
			}
			// The publish is not cancelled with the pipeline: an abandoned
			// wait would leave the slot create in flight, and a read that
			// misses it would look like proof of absence. The catalog
			// bounds the wait (its slot timeout) and answers for certain,
			// or ErrAmbiguous once its create has given up.
			_, err = w.cat.CommitAll(context.WithoutCancel(pub.ctx), entries...)
		}
		pub.out <- published{n: n, err: err}
		if err != nil {
			return
		}
		queue = queue[n:]
	}
}

// appended reports whether p's appends have ended.
func appended(p *prepared) bool {
	select {
	case <-p.appended:
		return true
	default:
		return false
	}
}
