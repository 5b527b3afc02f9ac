package gcs_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/googleapis/gax-go/v2"
	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
)

// lossy forwards every request to the fake server; for the first n uploads
// it then throws the response away and answers 503, as a server that
// applied the create and failed to say so.
type lossy struct {
	next    http.RoundTripper
	uploads atomic.Int32
	n       int32
	status  int
}

func (l *lossy) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil || !strings.Contains(r.URL.Path, "/upload/") || l.uploads.Add(1) > l.n {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &http.Response{
		StatusCode: l.status, Status: http.StatusText(l.status), Request: r,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(`{"error":{"code":503,"message":"backend error"}}`)),
	}, nil
}

func newBucket(t *testing.T, rt http.RoundTripper) *gcs.Bucket {
	t.Helper()
	gcstest.Start(t, "b")
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads(),
		option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	b, err := gcs.New(client, "b", "prefix", gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppliedCreateWithLostResponse: the create reaches GCS, the answer is
// a 5xx. The backend must call that ambiguous (not success, not taken, and
// must not retry it itself into a 412), and CreateOnce must find it landed.
func TestAppliedCreateWithLostResponse(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusInternalServerError} {
		rt := &lossy{next: http.DefaultTransport, n: 1, status: status}
		b := newBucket(t, rt)
		ctx := context.Background()
		_, err := b.Create(ctx, "log/0000000000000002", []byte("slot"))
		if !errors.Is(err, bucket.ErrAmbiguous) {
			t.Fatalf("%d after apply: Create = %v, want ErrAmbiguous", status, err)
		}
		if n := rt.uploads.Load(); n != 1 {
			t.Fatalf("%d: the client sent the create %d times; creates must not be retried blindly", status, n)
		}
		rt.n = 2
		a, err := bucket.CreateOnce(ctx, b, "log/0000000000000003", []byte("slot 3"))
		if err != nil {
			t.Fatalf("%d: CreateOnce = %v", status, err)
		}
		got, _, err := b.Get(ctx, "log/0000000000000003")
		if err != nil || string(got) != "slot 3" || a.Size != 6 {
			t.Fatalf("%d: after CreateOnce: %q, %v", status, got, err)
		}
	}
}

func TestTakenNameIs412(t *testing.T) {
	b := newBucket(t, http.DefaultTransport)
	ctx := context.Background()
	if _, err := b.Create(ctx, "m", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "m", []byte("2")); !errors.Is(err, bucket.ErrExist) || errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("second create = %v, want ErrExist only", err)
	}
}

func TestPrefixIsolation(t *testing.T) {
	gcstest.Start(t, "shared")
	ctx := context.Background()
	one, err := gcs.Open(ctx, "shared", "one", gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := gcs.Open(ctx, "shared", "/two/", gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if _, err := one.Create(ctx, "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := two.Create(ctx, "x", []byte("2")); err != nil {
		t.Fatalf("the same name under another prefix: %v", err)
	}
	all, err := bucket.Collect(one.List(ctx, "", ""))
	if err != nil || len(all) != 1 || all[0].Name != "x" {
		t.Fatalf("List under prefix one = %+v, %v", all, err)
	}
	if _, err := gcs.Open(ctx, "shared", "a/../b", gcs.Options{}); !errors.Is(err, bucket.ErrInvalidName) {
		t.Fatalf("Open with prefix a/../b = %v, want ErrInvalidName", err)
	}
}

// Options are checked once their defaults are in: New refuses a timeout
// too short to split into its silent tries and a backoff that shrinks.
func TestNewRefusesBadOptions(t *testing.T) {
	gcstest.Start(t, "b")
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := gcs.New(client, "b", "", gcs.Options{}); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, o := range []gcs.Options{
		{Timeout: time.Millisecond},
		{Backoff: gax.Backoff{Initial: time.Millisecond, Multiplier: 0.5}},
	} {
		if _, err := gcs.New(client, "b", "", o); err == nil {
			t.Errorf("gcs.New took %+v", o)
		}
	}
}
