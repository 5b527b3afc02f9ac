package fs

import (
	"context"
	"fmt"
	"time"
)

// ReadTimeoutError: a read the mount serves from its own paths (making a
// derived file, fetching a fragment into the cache, opening or reading a
// local file) took longer than Options.ReadTimeout. It was given up on
// (EIO); whatever it was waiting for is left to finish or fail on its own.
type ReadTimeoutError struct {
	What  string
	After time.Duration
}

func (e *ReadTimeoutError) Error() string {
	return fmt.Sprintf("%s: no answer within the mount's read timeout (%v): the bucket or the file system under it is stalled", e.What, e.After)
}

// bounded runs fn on a goroutine of its own with a context that ends after
// the mount's read timeout (and not when the kernel interrupts the request:
// see finish), and waits at most that long. A call given up on is
// abandoned: if it later succeeds, release (if not nil) gets what it
// returned, so that nothing it opened leaks.
func bounded[T any](ctx context.Context, m *Mount, what string, release func(T), fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(finish(ctx), m.opts.ReadTimeout)
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		cancel()
		return r.v, r.err
	case <-ctx.Done():
	}
	cancel()
	go func() { // the abandoned call: release what it returns, if anything
		if r := <-done; r.err == nil && release != nil {
			release(r.v)
		}
	}()
	var zero T
	return zero, &ReadTimeoutError{What: what, After: m.opts.ReadTimeout}
}
