package local

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/internal/watchdog"
)

// call is the goroutine side of one bounded call.
type call struct {
	dog *watchdog.Dog
	mu  struct {
		sync.Mutex
		abandoned  bool // the caller stopped waiting
		committing bool // the call passed commit: it may change the bucket
	}
}

// progress reports that the file system moved (bytes were read).
func (c *call) progress() { c.dog.Kick() }

// commit is asked just before the call's commit point (link, unlink). False
// means the caller has stopped waiting: the call must stop and change
// nothing.
func (c *call) commit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.abandoned {
		return false
	}
	c.mu.committing = true
	return true
}

// abandon marks the call given up on and reports whether it had passed its
// commit point.
func (c *call) abandon() (committing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.abandoned = true
	return c.mu.committing
}

func isMutation(op string) bool { return op == "create" || op == "delete" }

// errAbandoned: a mutation stopped before its commit point because its caller
// had stopped waiting. Nobody sees it but bounded.
var errAbandoned = fmt.Errorf("abandoned before its commit point")

// bounded runs fn on a goroutine of its own and waits for it while it makes
// progress: at most b.timeout at a time without a progress report, and no
// longer than ctx. A call given up on is abandoned (see the package comment)
// and answered with *bucket.NotAnsweringError, or with ctx's error if ctx
// ended first.
func bounded[T any](ctx context.Context, b *Bucket, op, name string, fn func(context.Context, *call) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	wctx, dog := watchdog.Start(ctx, b.timeout)
	c := &call{dog: dog}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn(wctx, c)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		dog.Stop()
		return r.v, r.err
	case <-wctx.Done():
	}
	fired := dog.Stop()
	committing := c.abandon()
	select {
	case r := <-done:
		if r.err == nil {
			return r.v, nil // it finished as the deadline passed: its answer stands
		}
	default:
	}
	switch {
	case !fired && isMutation(op) && committing:
		return zero, fmt.Errorf("local: %s %s: %w: %w", op, name, bucket.ErrAmbiguous, ctx.Err())
	case !fired:
		return zero, fmt.Errorf("local: %s %s: %w", op, name, ctx.Err())
	}
	return zero, &bucket.NotAnsweringError{Bucket: b.root, Op: op, Name: name, After: b.timeout,
		Unapplied: isMutation(op) && !committing}
}

// boundedList runs the listing seq on a goroutine of its own and hands its
// elements over one by one, waiting at most b.timeout for each; the wait
// stops while the consumer holds an element. A listing given up on ends with
// *bucket.NotAnsweringError (or ctx's error) and is abandoned.
func boundedList(ctx context.Context, b *Bucket, prefix string, seq func(ctx context.Context) iter.Seq2[bucket.Attrs, error]) iter.Seq2[bucket.Attrs, error] {
	return func(yield func(bucket.Attrs, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(bucket.Attrs{}, err)
			return
		}
		wctx, dog := watchdog.Start(ctx, b.timeout)
		defer dog.Stop() // also tells an unfinished producer to stop
		type item struct {
			a   bucket.Attrs
			err error
		}
		items := make(chan item)
		go func() {
			defer close(items)
			for a, err := range seq(wctx) {
				select {
				case items <- item{a, err}:
				case <-wctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		for {
			dog.Kick()
			var it item
			var ok bool
			select {
			case it, ok = <-items:
			case <-wctx.Done():
				if dog.Stop() {
					yield(bucket.Attrs{}, &bucket.NotAnsweringError{Bucket: b.root, Op: "list", Name: prefix, After: b.timeout})
				} else {
					yield(bucket.Attrs{}, fmt.Errorf("local: list %s: %w", prefix, ctx.Err()))
				}
				return
			}
			dog.Pause()
			if !ok {
				return
			}
			if !yield(it.a, it.err) || it.err != nil {
				return
			}
		}
	}
}
