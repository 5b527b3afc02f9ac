package ctxtest_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/internal/ctxtest"
)

// A test's context lasts until Grace before the binary's deadline (go
// test -timeout), not a wall-clock bound of its own; without a deadline,
// Timeout.
func TestContextEndsBeforeTheBinaryDeadline(t *testing.T) {
	before := time.Now()
	ctx := ctxtest.Context(t)
	got, ok := ctx.Deadline()
	if !ok {
		t.Fatal("the context has no deadline")
	}
	if end, has := t.Deadline(); has && time.Until(end) > 2*ctxtest.Grace {
		if want := end.Add(-ctxtest.Grace); !got.Equal(want) {
			t.Fatalf("the context ends at %v, want %v (the binary's deadline %v less %v)", got, want, end, ctxtest.Grace)
		}
		return
	}
	if got.Before(before.Add(ctxtest.Timeout)) || got.After(time.Now().Add(ctxtest.Timeout)) {
		t.Fatalf("without a binary deadline the context ends at %v, want %v from now", got, ctxtest.Timeout)
	}
}

// Inside a synctest bubble (where t.Deadline panics) the context ends
// after Timeout of the bubble's clock.
func TestContextInASynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := ctxtest.Context(t)
		if got, ok := ctx.Deadline(); !ok || !got.Equal(time.Now().Add(ctxtest.Timeout)) {
			t.Fatalf("the context ends at %v (%v), want %v", got, ok, time.Now().Add(ctxtest.Timeout))
		}
	})
}
