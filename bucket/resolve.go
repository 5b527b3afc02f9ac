package bucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"time"
)

// MaxAttempts bounds how many tries CreateOnce and DeleteOnce send for one
// name. With Backoff that spans a few seconds, past a per-name mutation
// limit of one a second.
const MaxAttempts = 12

// CreateOnce creates name with data and resolves ambiguous outcomes by
// reading the name back, so that the caller learns exactly one of:
//
//   - nil: the object under name holds exactly data (this call created it,
//     or an earlier attempt of this call did and its response was lost);
//   - ErrExist: the name holds other bytes: another writer won the name;
//     (a name already holding exactly data is success, so CreateOnce may be
//     called again for an object whose earlier outcome was unknown);
//   - ErrAmbiguous: ctx ended, the attempts ran out, or the bucket did not
//     answer (a *NotAnsweringError) before the outcome could be decided;
//     the name may or may not hold data;
//   - any other error from the backend, unchanged (e.g. ErrInvalidName).
//
// Identical bytes count as this caller's object. That is exact for what
// worldfs creates: log slots carry the writer's store id and operation ids,
// and every other object is content-addressed or deterministic, so two
// writers producing identical bytes are producing the same object.
//
// A bucket that does not answer is asked at most twice: a create that got
// no reply is read back once (a read back that gets no reply ends the call),
// and a second create without a reply ends it, so a stalled bucket costs a
// few of the backend's deadlines, not dozens.
//
// Every caller that creates through a bucket with ambiguous outcomes MUST use
// CreateOnce (or read back the same way) before acting on the outcome.
func CreateOnce(ctx context.Context, b Bucket, name string, data []byte) (Attrs, error) {
	var last error
	unanswered := 0
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := Backoff(ctx, attempt); err != nil {
				return Attrs{}, ambiguous(name, last, err)
			}
		}
		attrs, err := b.Create(ctx, name, data)
		switch {
		case err == nil:
			return attrs, nil
		case !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrExist):
			return Attrs{}, err
		case notAnswering(err):
			if unanswered++; unanswered == 2 {
				return Attrs{}, ambiguous(name, last, err)
			}
		}
		// Taken or unknown: the bytes under the name decide. A name taken
		// by identical bytes is this call's object, landed by an earlier
		// attempt (of this call or of an earlier call for the same object)
		// whose response was lost.
		last = err
		attrs, found, rerr := readBack(ctx, b, name, data)
		switch {
		case rerr != nil && errors.Is(err, ErrExist) && errors.Is(rerr, ErrExist):
			return Attrs{}, err
		case rerr != nil:
			return Attrs{}, ambiguous(name, last, rerr)
		case found:
			return attrs, nil
		}
		// Proven absent: the identical create is safe to send again.
	}
	return Attrs{}, ambiguous(name, last, fmt.Errorf("gave up after %d attempts", MaxAttempts))
}

// DeleteOnce deletes name at generation, retrying unknown outcomes. After an
// unknown outcome, finding the generation gone (ErrNotExist or a newer
// generation) counts as deleted by this call: Delete is conditioned on the
// generation, and generations never repeat.
//
// Like CreateOnce it sends no third delete to a bucket that did not answer
// two: the outcome then stays ErrAmbiguous.
func DeleteOnce(ctx context.Context, b Bucket, name string, generation int64) error {
	var last error
	unanswered := 0
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := Backoff(ctx, attempt); err != nil {
				return fmt.Errorf("delete %s: %w: %w (last: %v)", name, ErrAmbiguous, err, last)
			}
		}
		err := b.Delete(ctx, name, generation)
		switch {
		case err == nil:
			return nil
		case last != nil && (errors.Is(err, ErrNotExist) || errors.Is(err, ErrGenerationMismatch)):
			// An earlier attempt's outcome was unknown: the generation we
			// read is gone, and generations never repeat, so that attempt
			// removed it (the name may hold a newer object since).
			return nil
		case !errors.Is(err, ErrAmbiguous):
			return err
		case notAnswering(err):
			if unanswered++; unanswered == 2 {
				return fmt.Errorf("delete %s: %w (last: %v)", name, err, last)
			}
		}
		last = err
	}
	return fmt.Errorf("delete %s: %w: gave up after %d attempts (last: %v)", name, ErrAmbiguous, MaxAttempts, last)
}

// readBack reads name until it can say whether it holds data. found is
// false only when the name is proven absent. A name holding other bytes is
// ErrExist. A read the bucket did not answer ends it: the backend already
// waited its deadline (and retried within it).
func readBack(ctx context.Context, b Bucket, name string, data []byte) (Attrs, bool, error) {
	var last error
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := Backoff(ctx, attempt); err != nil {
				return Attrs{}, false, err
			}
		}
		got, attrs, err := b.Get(ctx, name)
		switch {
		case err == nil && bytes.Equal(got, data):
			return attrs, true, nil
		case err == nil:
			return Attrs{}, false, fmt.Errorf("create %s: %w (another writer's object)", name, ErrExist)
		case errors.Is(err, ErrNotExist):
			return Attrs{}, false, nil
		case ctx.Err() != nil:
			return Attrs{}, false, ctx.Err()
		case notAnswering(err):
			return Attrs{}, false, err
		case !errors.Is(err, ErrUnavailable):
			return Attrs{}, false, err // a permanent failure proves nothing either way
		}
		last = err // a transient read failure proves nothing; read again
	}
	return Attrs{}, false, fmt.Errorf("reading back: %d reads failed (last: %w)", MaxAttempts, last)
}

func ambiguous(name string, last, cause error) error {
	if errors.Is(cause, ErrExist) {
		return cause
	}
	return fmt.Errorf("create %s: %w: %w (last: %v)", name, ErrAmbiguous, cause, last)
}

// Backoff sleeps before retry number attempt (1, 2, …): exponential from
// 10 ms, capped at 1 s, with equal jitter (at least half the step). It
// returns ctx's error if ctx ends first.
func Backoff(ctx context.Context, attempt int) error {
	return Sleep(ctx, backoff(attempt, rand.Int64N))
}

// backoff is the wait before retry number attempt, random(n) drawing from
// [0, n). Half of each step is always waited, so that the retries of one
// call (MaxAttempts) span more than a second whatever is drawn: GCS allows
// one mutation of a name a second, and a delete right after a create
// (answered 429) must not give up before it may succeed.
func backoff(attempt int, random func(n int64) int64) time.Duration {
	step := min(10*time.Millisecond<<min(attempt-1, 7), time.Second)
	return step/2 + time.Duration(random(int64(step/2))) + 1
}

// Sleep waits d, or returns ctx's error if ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Collect drains a listing into a slice. Meant for small listings and tests;
// large listings should be consumed as they stream.
func Collect(seq iter.Seq2[Attrs, error]) ([]Attrs, error) {
	var out []Attrs
	for a, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}
