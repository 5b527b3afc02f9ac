package bucket_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/mem"
)

// silent is a bucket whose chosen calls get no reply: each fails at once
// with the NotAnsweringError a backend returns once its deadline passed.
type silent struct {
	bucket.Bucket
	creates, gets, deletes atomic.Int32
	createLands            bool // a create without reply still takes effect
	getAnswers             bool // reads are answered
}

func (s *silent) noReply(op, name string) error {
	return &bucket.NotAnsweringError{Bucket: "silent", Op: op, Name: name, After: time.Minute}
}

func (s *silent) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	s.creates.Add(1)
	if s.createLands {
		s.Bucket.Create(ctx, name, data)
	}
	return bucket.Attrs{}, s.noReply("create", name)
}

func (s *silent) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	s.gets.Add(1)
	if s.getAnswers {
		return s.Bucket.Get(ctx, name)
	}
	return nil, bucket.Attrs{}, s.noReply("get", name)
}

func (s *silent) Delete(ctx context.Context, name string, gen int64) error {
	s.deletes.Add(1)
	return s.noReply("delete", name)
}

// A bucket that does not answer is not asked over and over: every ask
// costs the backend's whole deadline. CreateOnce reads back once after a
// create without reply and gives up at the second create without reply,
// with ErrAmbiguous (never success, never ErrExist) that still says the
// bucket did not answer.
func TestResolversGiveUpOnABucketThatDoesNotAnswer(t *testing.T) {
	ctx := context.Background()
	var noReply *bucket.NotAnsweringError

	s := &silent{Bucket: mem.New(mem.Options{})}
	_, err := bucket.CreateOnce(ctx, s, "log/1", []byte("x"))
	if !errors.Is(err, bucket.ErrAmbiguous) || errors.Is(err, bucket.ErrExist) || !errors.As(err, &noReply) {
		t.Fatalf("CreateOnce on a silent bucket = %v, want ErrAmbiguous carrying NotAnsweringError", err)
	}
	if c, g := s.creates.Load(), s.gets.Load(); c != 1 || g != 1 {
		t.Fatalf("CreateOnce sent %d creates and %d reads to a bucket that answered none, want 1 and 1", c, g)
	}

	// Reads answer, creates do not (and do not land): the read back proves
	// the name free once, one more create goes out, then it stops.
	s = &silent{Bucket: mem.New(mem.Options{}), getAnswers: true}
	if _, err := bucket.CreateOnce(ctx, s, "log/1", []byte("x")); !errors.Is(err, bucket.ErrAmbiguous) || !errors.As(err, &noReply) {
		t.Fatalf("CreateOnce with silent creates = %v, want ErrAmbiguous carrying NotAnsweringError", err)
	}
	if c, g := s.creates.Load(), s.gets.Load(); c != 2 || g != 1 {
		t.Fatalf("CreateOnce sent %d creates and %d reads, want 2 and 1", c, g)
	}

	// The create landed without a reply and the read back answers: that is
	// this call's object.
	s = &silent{Bucket: mem.New(mem.Options{}), getAnswers: true, createLands: true}
	if _, err := bucket.CreateOnce(ctx, s, "log/1", []byte("x")); err != nil {
		t.Fatalf("CreateOnce whose create landed without a reply = %v, want success", err)
	}

	s = &silent{Bucket: mem.New(mem.Options{})}
	if err := bucket.DeleteOnce(ctx, s, "log/1", 7); !errors.Is(err, bucket.ErrAmbiguous) || !errors.As(err, &noReply) {
		t.Fatalf("DeleteOnce on a silent bucket = %v, want ErrAmbiguous carrying NotAnsweringError", err)
	}
	if d := s.deletes.Load(); d != 2 {
		t.Fatalf("DeleteOnce sent %d deletes to a bucket that answered none, want 2", d)
	}
}

// NotAnsweringError says what it is: a mutation's outcome is unknown unless
// the backend knows it changed nothing; anything else is unavailable.
func TestNotAnsweringErrorMatches(t *testing.T) {
	for _, tc := range []struct {
		op        string
		unapplied bool
		want      error
	}{
		{"create", false, bucket.ErrAmbiguous}, {"delete", false, bucket.ErrAmbiguous},
		{"create", true, bucket.ErrUnavailable}, {"get", false, bucket.ErrUnavailable},
		{"stat", false, bucket.ErrUnavailable}, {"list", false, bucket.ErrUnavailable},
	} {
		err := error(&bucket.NotAnsweringError{Bucket: "gs://b/", Op: tc.op, Name: "n", After: time.Second, Unapplied: tc.unapplied})
		other := bucket.ErrAmbiguous
		if tc.want == bucket.ErrAmbiguous {
			other = bucket.ErrUnavailable
		}
		if !errors.Is(err, tc.want) || errors.Is(err, other) {
			t.Errorf("%s (unapplied %v): matches %v: %v, %v: %v", tc.op, tc.unapplied, tc.want, errors.Is(err, tc.want), other, errors.Is(err, other))
		}
	}
	want := "bucket gs://b/ is not answering (no reply within 1s to get n)"
	if got := (&bucket.NotAnsweringError{Bucket: "gs://b/", Op: "get", Name: "n", After: time.Second}).Error(); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
