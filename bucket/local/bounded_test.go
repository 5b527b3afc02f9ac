package local

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// An abandoned mutation never passes its commit point: when the hung call
// comes back after its caller gave up, commit refuses, and the caller was
// told nothing changed. One that was past the point when abandoned is
// reported as ambiguous.
func TestAbandonedMutation(t *testing.T) {
	b := &Bucket{root: "/hung", timeout: 50 * time.Millisecond}
	ctx := context.Background()
	for _, past := range []bool{false, true} {
		release, committed := make(chan struct{}), make(chan bool, 1)
		_, err := bounded(ctx, b, "create", "n", func(_ context.Context, c *call) (bucket.Attrs, error) {
			if past {
				committed <- c.commit()
				<-release // hung in link(2)
				return bucket.Attrs{}, nil
			}
			<-release // hung in fsync(2)
			ok := c.commit()
			committed <- ok
			return bucket.Attrs{}, nil
		})
		close(release)
		var noReply *bucket.NotAnsweringError
		if !errors.As(err, &noReply) || noReply.Op != "create" || noReply.Unapplied == past || errors.Is(err, bucket.ErrAmbiguous) != past {
			t.Fatalf("past the commit point %v: %v (unapplied %v), want ambiguous only when past it", past, err, noReply != nil && noReply.Unapplied)
		}
		if ok := <-committed; ok != past {
			t.Fatalf("past the commit point %v: the abandoned call committed: %v", past, ok)
		}
	}
}

// A listing whose producer hangs gives up; a listing is handed over item by
// item, and a hang between items is caught too.
func TestHungListing(t *testing.T) {
	b := &Bucket{root: "/hung", timeout: 50 * time.Millisecond}
	release := make(chan struct{})
	defer close(release)
	seq := func(ctx context.Context) iter.Seq2[bucket.Attrs, error] {
		return func(yield func(bucket.Attrs, error) bool) {
			if !yield(bucket.Attrs{Name: "a"}, nil) {
				return
			}
			<-release // hung in readdir(2)
		}
	}
	var got []string
	var err error
	for a, e := range boundedList(context.Background(), b, "p/", seq) {
		if e != nil {
			err = e
			break
		}
		got = append(got, a.Name)
	}
	var noReply *bucket.NotAnsweringError
	if len(got) != 1 || !errors.As(err, &noReply) || noReply.Op != "list" || !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("hung listing: %q then %v, want a then a NotAnsweringError", got, err)
	}
}
