// Package watchdog bounds one attempt of a bucket call by the time the store
// goes without answering: the attempt's context is cancelled once no
// progress is reported for the limit. A transfer that keeps moving bytes is
// never cut; a store that sends nothing is given up on after the limit.
package watchdog

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNoReply is the cause of a context the watchdog cancelled.
var ErrNoReply = errors.New("no reply within the deadline")

// Dog watches one attempt.
type Dog struct {
	limit  time.Duration
	cancel context.CancelCauseFunc
	mu     struct {
		sync.Mutex
		timer *time.Timer
		// paused: the caller has the turn (between the pages of a
		// listing), so silence is not the store's.
		paused  bool
		fired   bool
		stopped bool
	}
}

// Start returns a context that ends when ctx does or when limit passes with
// no Kick, whichever is first. The countdown runs from now. Call Stop when
// the attempt is over.
func Start(ctx context.Context, limit time.Duration) (context.Context, *Dog) {
	wctx, cancel := context.WithCancelCause(ctx)
	d := &Dog{limit: limit, cancel: cancel}
	d.mu.Lock()
	d.mu.timer = time.AfterFunc(limit, d.bark)
	d.mu.Unlock()
	return wctx, d
}

func (d *Dog) bark() {
	d.mu.Lock()
	if d.mu.paused || d.mu.stopped {
		d.mu.Unlock()
		return
	}
	d.mu.fired = true
	d.mu.Unlock()
	d.cancel(ErrNoReply)
}

// Kick reports progress (bytes arrived or were taken) and restarts the
// countdown; after Pause it resumes watching.
func (d *Dog) Kick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.fired || d.mu.stopped {
		return
	}
	d.mu.paused = false
	d.mu.timer.Reset(d.limit)
}

// Pause stops the countdown until the next Kick: the store is not being
// waited on.
func (d *Dog) Pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.paused = true
	d.mu.timer.Stop()
}

// Stop ends the watch and releases the context. It reports whether the
// limit passed without an answer (the attempt was cancelled for it).
func (d *Dog) Stop() (fired bool) {
	d.mu.Lock()
	d.mu.stopped = true
	d.mu.timer.Stop()
	fired = d.mu.fired
	d.mu.Unlock()
	d.cancel(context.Canceled)
	return fired
}

// Fired reports whether the limit passed without an answer.
func (d *Dog) Fired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.fired
}
