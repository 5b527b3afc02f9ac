package bucket_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/worldfs/worldfs/bucket"
)

// A marked error keeps its message and chain, so a package's own marked
// sentinel still matches with errors.Is, and every marked error matches
// the one marker; an unmarked one does not, and nil stays nil.
func TestMarkCorruption(t *testing.T) {
	sentinel := bucket.MarkCorruption(errors.New("corrupt catalog"))
	err := fmt.Errorf("world w: slot 3: %w: %w", sentinel, bucket.ErrNotExist)
	if !errors.Is(err, sentinel) || !bucket.IsCorruption(err) || !errors.Is(err, bucket.ErrNotExist) || err.Error() != "world w: slot 3: corrupt catalog: object does not exist" {
		t.Errorf("%q: Is(sentinel) %v, IsCorruption %v, Is(ErrNotExist) %v", err, errors.Is(err, sentinel), bucket.IsCorruption(err), errors.Is(err, bucket.ErrNotExist))
	}
	if other := bucket.MarkCorruption(errors.New("corrupt catalog")); errors.Is(err, other) {
		t.Error("a marked error matches another marked error with the same text")
	}
	if bucket.IsCorruption(fmt.Errorf("x: %w", bucket.ErrNotExist)) || bucket.MarkCorruption(nil) != nil {
		t.Error("an unmarked error is corruption, or nil was marked")
	}
	if twice := bucket.MarkCorruption(sentinel); twice != sentinel {
		t.Errorf("marking a marked error wraps it again: %#v", twice)
	}
}
