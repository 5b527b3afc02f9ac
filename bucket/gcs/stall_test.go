package gcs_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/index"
)

// within runs f and fails the test if it has not returned after bound: a
// call that would wait forever fails here instead of hanging the run.
func within[T any](t *testing.T, bound time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(bound):
		t.Fatalf("%s still waiting after %v: a call to a bucket that does not answer must give up on its own", what, bound)
		panic("unreachable")
	}
}

// bound is how long a test waits for a call that should give up after a
// deadline of a few hundred milliseconds: generous, for a loaded machine.
const bound = 30 * time.Second

// A server that accepts connections and never answers: every call gives up
// within its deadline, a create or delete as ErrAmbiguous, every read as
// ErrUnavailable, each a NotAnsweringError naming the bucket and the call.
func TestServerThatNeverAnswers(t *testing.T) {
	gcstest.Unresponsive(t)
	ctx := context.Background()
	b, err := gcs.Open(ctx, "b", "p", gcs.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		op   string
		want error
		call func() error
	}{
		{"create", bucket.ErrAmbiguous, func() error { _, err := b.Create(ctx, "log/1", []byte("slot")); return err }},
		{"get", bucket.ErrUnavailable, func() error { _, _, err := b.Get(ctx, "log/1"); return err }},
		{"get", bucket.ErrUnavailable, func() error { _, err := b.GetRange(ctx, "log/1", 1, 2); return err }},
		{"stat", bucket.ErrUnavailable, func() error { _, err := b.Stat(ctx, "log/1"); return err }},
		{"list", bucket.ErrUnavailable, func() error { _, err := bucket.Collect(b.List(ctx, "log/", "")); return err }},
		{"delete", bucket.ErrAmbiguous, func() error { return b.Delete(ctx, "log/1", 5) }},
	} {
		err := within(t, bound, tc.op, tc.call)
		var noReply *bucket.NotAnsweringError
		if !errors.Is(err, tc.want) || !errors.As(err, &noReply) || noReply.Op != tc.op || noReply.Bucket != "gs://b/p/" {
			t.Errorf("%s on a server that never answers = %v, want %v as a NotAnsweringError for %s", tc.op, err, tc.want, tc.op)
		}
	}
	// CreateOnce gives up too, still ambiguous: never success, never lost.
	err = within(t, bound, "CreateOnce", func() error { _, err := bucket.CreateOnce(ctx, b, "log/2", []byte("slot")); return err })
	if !errors.Is(err, bucket.ErrAmbiguous) || errors.Is(err, bucket.ErrExist) {
		t.Errorf("CreateOnce on a server that never answers = %v, want ErrAmbiguous", err)
	}
}

// hangFirst hangs the first n requests whose path contains match until the
// request is cancelled, as a connection that went dead would, and forwards
// every other request.
type hangFirst struct {
	next  http.RoundTripper
	match string
	n     int32
	hung  atomic.Int32
}

func (h *hangFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, h.match) && h.hung.Add(1) <= h.n {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return h.next.RoundTrip(r)
}

// Each try of a read has its own deadline, so a try that hangs is retried
// and the read succeeds, instead of the hung try eating the call's time.
func TestHungTryIsRetried(t *testing.T) {
	rt := &hangFirst{next: http.DefaultTransport, match: "/o/", n: 2}
	gcstest.Start(t, "b")
	ctx := context.Background()
	client, err := storage.NewClient(ctx, storage.WithJSONReads(), option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b, err := gcs.New(client, "b", "", gcs.Options{Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "x", []byte("data")); err != nil { // uploads go to /upload/, not hung
		t.Fatal(err)
	}
	if err := within(t, bound, "Stat", func() error { _, err := b.Stat(ctx, "x"); return err }); err != nil {
		t.Fatalf("Stat after two hung tries = %v, want success on the third", err)
	}
	if n := rt.hung.Load(); n != 3 {
		t.Fatalf("%d requests, want 2 hung and 1 answered", n)
	}
}

// flaky answers the next fail requests with 503 and forwards the rest.
type flaky struct {
	next http.RoundTripper
	fail atomic.Int32
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.fail.Add(-1) >= 0 {
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Request: r,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   io.NopCloser(strings.NewReader(`{"error":{"code":503,"message":"backend error"}}`))}, nil
	}
	return f.next.RoundTrip(r)
}

// gcs.New leaves the retry policy of the caller's client as it was: the
// client still retries on its own (its default), whatever the backend's
// options say.
func TestNewLeavesTheClientsRetryPolicy(t *testing.T) {
	gcstest.Start(t, "b")
	rt := &flaky{next: http.DefaultTransport}
	ctx := context.Background()
	client, err := storage.NewClient(ctx, storage.WithJSONReads(), option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b, err := gcs.New(client, "b", "", gcs.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	rt.fail.Store(1)
	if _, err := client.Bucket("b").Object("x").Attrs(ctx); err != nil {
		t.Fatalf("the caller's client after gcs.New: %v (its retry policy was changed)", err)
	}
}

// proxy forwards TCP connections to a server. Held, it withholds, on the
// first connection that carries bytes after the hold, either what the client
// sends (the request never reaches the server) or what the server answers
// (the server applies the request and its answer never arrives), until the
// client hangs up; everything else is served normally: the stall clears.
type proxy struct {
	target string
	l      net.Listener
	mu     struct {
		sync.Mutex
		hold string // "", "requests" or "answers"
		held int    // connections held so far
	}
}

func startProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) hold(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.hold = what
}

func (p *proxy) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.held
}

// take reports whether a hold of kind starts now, and consumes it.
func (p *proxy) take(kind string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.hold != kind {
		return false
	}
	p.mu.hold = ""
	p.mu.held++
	return true
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	go p.pipe(c, s, "answers")
	p.pipe(s, c, "requests") // until the client hangs up
}

// pipe copies src to dst until either fails; once a hold of kind starts on
// it, everything after is withheld.
func (p *proxy) pipe(dst io.Writer, src io.Reader, kind string) {
	buf := make([]byte, 32<<10)
	held := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !held {
			held = p.take(kind)
		}
		if n > 0 && !held {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A stall that clears loses nothing: a create whose request or answer was
// held gives up as ambiguous, and CreateOnce resolves it once the bucket
// answers again: the object is there, exactly the caller's bytes.
func TestStallThatClears(t *testing.T) {
	for _, hold := range []string{"requests", "answers"} {
		srv := gcstest.Start(t, "b")
		p := startProxy(t, strings.TrimPrefix(srv.URL(), "http://"))
		t.Setenv("STORAGE_EMULATOR_HOST", "http://"+p.l.Addr().String())
		ctx := context.Background()
		b, err := gcs.Open(ctx, "b", "p", gcs.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		p.hold(hold)
		err = within(t, bound, "CreateOnce", func() error { _, err := bucket.CreateOnce(ctx, b, "log/1", []byte("slot 1")); return err })
		if err != nil {
			t.Fatalf("held %s: CreateOnce = %v, want the stall resolved", hold, err)
		}
		if p.held() != 1 {
			t.Fatalf("held %s: no connection was held", hold)
		}
		got, _, err := b.Get(ctx, "log/1")
		all, lerr := bucket.Collect(b.List(ctx, "", ""))
		if err != nil || string(got) != "slot 1" || lerr != nil || len(all) != 1 {
			t.Fatalf("held %s: after CreateOnce: %q (%v), listing %+v (%v)", hold, got, err, all, lerr)
		}
	}
}

// A slot create of the catalog that stalls and clears: the commit is
// resolved by reading the slot back, and the log holds it exactly once.
func TestStalledSlotCreateIsResolved(t *testing.T) {
	for _, hold := range []string{"requests", "answers"} {
		srv := gcstest.Start(t, "b")
		p := startProxy(t, strings.TrimPrefix(srv.URL(), "http://"))
		t.Setenv("STORAGE_EMULATOR_HOST", "http://"+p.l.Addr().String())
		ctx := context.Background()
		b, err := gcs.Open(ctx, "b", hold, gcs.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		cat, epoch, err := index.CreateWorld(ctx, b, "w", index.WorldCreate{CreatedUnixMs: 1}, "creator", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		before, err := bucket.Collect(b.List(ctx, index.LogPrefix("w"), ""))
		if err != nil {
			t.Fatal(err)
		}
		p.hold(hold)
		e := index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: 0, CommitToken: "t0", WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "Position", Fragments: []index.Fragment{{Path: "data/w/main/position/t0/0.parquet", Rows: 1, Bytes: 100, Digest: "d"}}}}}}
		err = within(t, bound, "Commit", func() error { _, err := cat.Commit(ctx, e); return err })
		if err != nil || p.held() != 1 {
			t.Fatalf("held %s: Commit = %v with %d connections held, want the stalled slot create resolved", hold, err, p.held())
		}
		after, err := bucket.Collect(b.List(ctx, index.LogPrefix("w"), ""))
		st, _, lerr := index.Load(ctx, b, "w")
		if err != nil || lerr != nil || len(after) != len(before)+1 {
			t.Fatalf("held %s: the log went from %d to %d slots (%v, %v), want one more", hold, len(before), len(after), err, lerr)
		}
		if tk, ok := st.Tick("main", 0); !ok || tk.CommitToken != "t0" {
			t.Fatalf("held %s: tick 0 after the stall: %+v, %v", hold, tk, ok)
		}
	}
}
