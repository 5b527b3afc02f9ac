package bucket

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Errors callers branch on. Backends wrap them with the name and cause; test
// them with errors.Is.
var (
	// ErrExist: Create found the name taken. Nothing was written.
	ErrExist = errors.New("object already exists")
	// ErrNotExist: the name holds no object.
	ErrNotExist = errors.New("object does not exist")
	// ErrNoBucket: the bucket itself does not exist (a remote backend's
	// listing found no such bucket). Nothing was touched.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrGenerationMismatch: Delete was refused because the object under the
	// name is no longer the generation the caller read.
	ErrGenerationMismatch = errors.New("object generation moved")
	// ErrInvalidName: the name breaks the naming rules (see ValidateName).
	// Nothing was touched.
	ErrInvalidName = errors.New("invalid object name")
	// ErrInvalidRange: a ranged read started past the end of the object.
	ErrInvalidRange = errors.New("invalid range")
	// ErrAmbiguous: a mutation may or may not have taken effect (timeout,
	// lost response, throttling or a server error). Read the name back to
	// decide; CreateOnce does that for creates.
	ErrAmbiguous = errors.New("outcome unknown")
	// ErrUnavailable: a read failed for a transient reason after the
	// backend's own bounded retries; the same read may succeed later. A
	// mutation known to have changed nothing may fail with it too.
	ErrUnavailable = errors.New("bucket unavailable")
)

// DefaultTimeout is how long a bucket call waits for the bucket to answer
// unless the backend is told otherwise.
const DefaultTimeout = 30 * time.Second

// NotAnsweringError: the bucket sent nothing for a call's whole deadline, so
// the call was abandoned. A mutation (create, delete) may still take effect,
// so it matches ErrAmbiguous, unless Unapplied; everything else matches
// ErrUnavailable. Backends return it in place of waiting on: callers that
// resolve ambiguous outcomes (CreateOnce, DeleteOnce) do not ask a bucket
// that did not answer over and over, since every try waits the whole
// deadline again.
type NotAnsweringError struct {
	Bucket string // the bucket, as its URL or directory
	Op     string // create, delete, get, stat, list or open
	Name   string // the object name, or the listing's prefix
	// After is how long the call waited for an answer.
	After time.Duration
	// Unapplied: the backend knows the abandoned call changed nothing (a
	// local create abandoned before its commit point).
	Unapplied bool
}

func (e *NotAnsweringError) Error() string {
	name := e.Name
	if name == "" {
		name = "(the whole bucket)"
	}
	return fmt.Sprintf("bucket %s is not answering (no reply within %v to %s %s)", e.Bucket, e.After, e.Op, name)
}

// Mutation reports whether the abandoned call was a create or a delete.
func (e *NotAnsweringError) Mutation() bool { return e.Op == "create" || e.Op == "delete" }

// Is makes the error match ErrAmbiguous (a mutation that may have applied)
// or ErrUnavailable (anything else).
func (e *NotAnsweringError) Is(target error) bool {
	if e.Mutation() && !e.Unapplied {
		return target == ErrAmbiguous
	}
	return target == ErrUnavailable
}

// notAnswering reports whether err says the bucket did not answer in time.
func notAnswering(err error) bool {
	var na *NotAnsweringError
	return errors.As(err, &na)
}

// Attrs describes one object.
type Attrs struct {
	Name string
	Size int64
	// Generation identifies this incarnation of the name: an object created
	// again under a deleted name has a different generation. Always > 0.
	Generation int64
	// Created is when the object was created.
	Created time.Time
}

// Bucket is the object-store contract. Implementations MUST be safe for
// concurrent use by many goroutines, every method MUST honour ctx, and every
// method MUST return within a bounded time (the backend's timeout) even if
// the store never answers: with a *NotAnsweringError.
type Bucket interface {
	// Create stores data under name if and only if the name holds no object.
	// On nil return the object is complete and durable, and every later read
	// from any process sees it. If the name is taken it MUST return an error
	// wrapping ErrExist and write nothing. A crash at any moment MUST leave
	// either the whole object or nothing under the name. An outcome the
	// backend cannot decide MUST be reported as ErrAmbiguous, never as
	// success or ErrExist.
	Create(ctx context.Context, name string, data []byte) (Attrs, error)

	// Get returns the whole object. Strong: an object whose Create returned
	// is always found; a name never created is always ErrNotExist.
	Get(ctx context.Context, name string) ([]byte, Attrs, error)

	// GetRange returns up to length bytes starting at offset (length < 0:
	// to the end). A range reaching past the end is cut at the end; offset ==
	// size returns no bytes; offset > size returns ErrInvalidRange.
	GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error)

	// Stat returns the object's attributes, with Get's consistency.
	Stat(ctx context.Context, name string) (Attrs, error)

	// List yields the objects whose names start with prefix and sort
	// strictly after startAfter, in byte-wise name order, fetching them
	// from the backend page by page as the caller consumes them. The
	// listing is strongly consistent: it includes every object whose Create
	// returned before List was called. Stopping the iteration early is
	// allowed. An error ends the sequence as its last element.
	List(ctx context.Context, prefix, startAfter string) iter.Seq2[Attrs, error]

	// Delete removes the object only if its generation is still generation;
	// otherwise it MUST return ErrGenerationMismatch and remove nothing.
	// Maintenance only: nothing on a commit path deletes.
	Delete(ctx context.Context, name string, generation int64) error

	// Close releases the backend's resources.
	Close() error
}

// ClampRange turns a GetRange request on an object of size bytes into the
// half-open byte range [lo, hi) it returns, per the GetRange contract.
func ClampRange(name string, size, offset, length int64) (lo, hi int64, err error) {
	if offset < 0 {
		return 0, 0, fmt.Errorf("get %s: negative offset %d: %w", name, offset, ErrInvalidRange)
	}
	if offset > size {
		return 0, 0, fmt.Errorf("get %s: offset %d past the end (size %d): %w", name, offset, size, ErrInvalidRange)
	}
	hi = size
	if length >= 0 && length < size-offset {
		hi = offset + length
	}
	return offset, hi, nil
}
