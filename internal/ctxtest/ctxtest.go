// Package ctxtest gives a test the context its calls run under: one
// that ends with the test, and shortly before the test binary's own
// deadline (go test -timeout), never on a wall-clock bound of its own, so
// that a slow or loaded machine (or the race detector) gets the whole
// -timeout, and a call that hangs still fails its test with the context's
// error, with time left to report it, rather than killing the binary.
package ctxtest

import (
	"context"
	"testing"
	"time"
)

// Timeout bounds one test's calls when the test binary has no deadline
// of its own (go test -timeout 0).
const Timeout = 2 * time.Minute

// Grace is what Context leaves of the binary's deadline for the test to
// report what hung.
const Grace = 30 * time.Second

// Context returns a context for one test's calls: cancelled when the test
// ends, and Grace before the test binary's deadline, or after Timeout
// without one. Inside a synctest bubble it ends after Timeout of the
// bubble's fake clock, which moves only while every goroutine of the
// bubble is blocked: then only a hang reaches it, at once.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	if end, ok := deadline(t); ok && time.Until(end) > 2*Grace {
		cancel()
		ctx, cancel = context.WithDeadline(context.Background(), end.Add(-Grace))
	}
	t.Cleanup(cancel)
	return ctx
}

// deadline is the test binary's deadline, if t knows it: a benchmark does
// not, nor a test inside a synctest bubble (its Deadline panics: the
// bubble's clock is not the wall clock).
func deadline(t testing.TB) (end time.Time, ok bool) {
	d, can := t.(interface{ Deadline() (time.Time, bool) })
	if !can {
		return time.Time{}, false
	}
	defer func() {
		if recover() != nil {
			end, ok = time.Time{}, false
		}
	}()
	return d.Deadline()
}
