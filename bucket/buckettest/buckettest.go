// Package buckettest is the conformance suite of the bucket contract. Every
// backend runs all of it; a backend that cannot run fails the suite rather
// than skipping it.
package buckettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/internal/ctxtest"
)

// Factory returns a new, empty bucket for one case. It MUST NOT skip: a
// backend that cannot be built fails the test.
type Factory func(t *testing.T) bucket.Bucket

// Case is one conformance case.
type Case struct {
	Name string
	Run  func(t *testing.T, b bucket.Bucket)
}

// Cases lists every case, in the order they run. Cases are independent.
var Cases = []Case{
	{"CreateThenRead", testCreateThenRead},
	{"CreateTakenName", testCreateTakenName},
	{"ConcurrentCreators", testConcurrentCreators},
	{"NotFound", testNotFound},
	{"EmptyAndLargeObjects", testEmptyAndLarge},
	{"RangedReads", testRangedReads},
	{"ListOrder", testListOrder},
	{"ListPaging", testListPaging},
	{"DeleteGeneration", testDeleteGeneration},
	{"InvalidNames", testInvalidNames},
	{"CanceledContext", testCanceledContext},
	{"CreateOnceResolvesAmbiguity", testCreateOnce},
}

// Run runs every case against buckets from newBucket.
func Run(t *testing.T, newBucket Factory) {
	for _, c := range Cases {
		finished := false
		t.Run(c.Name, func(t *testing.T) {
			b := newBucket(t)
			t.Cleanup(func() { b.Close() })
			c.Run(t, b)
			finished = true
		})
		// A case that neither failed nor finished was skipped: for a
		// conformance suite that is a failure, not a pass.
		if !finished && !t.Failed() {
			t.Errorf("conformance case %s was skipped; a backend that cannot run a case fails", c.Name)
		}
	}
}

func ctxFor(t *testing.T) context.Context { return ctxtest.Context(t) }

func mustCreate(t *testing.T, b bucket.Bucket, name string, data []byte) bucket.Attrs {
	t.Helper()
	a, err := b.Create(ctxFor(t), name, data)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	return a
}

// createAll creates names concurrently (so that backends with modeled
// latency populate quickly); data of name is payload(name).
func createAll(t *testing.T, b bucket.Bucket, names []string) {
	t.Helper()
	ctx := ctxFor(t)
	work := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if _, err := b.Create(ctx, n, payload(n)); err != nil {
					errs <- fmt.Errorf("Create(%q): %w", n, err)
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func payload(name string) []byte { return []byte("payload of " + name) }

func testCreateThenRead(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	data := []byte("hello, world")
	before := time.Now().Add(-time.Minute)
	a := mustCreate(t, b, "worlds/w1/marker.json", data)
	if a.Name != "worlds/w1/marker.json" || a.Size != int64(len(data)) || a.Generation <= 0 {
		t.Fatalf("Create attrs = %+v", a)
	}
	if a.Created.Before(before) || a.Created.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Create attrs.Created = %v, want about now", a.Created)
	}
	got, ga, err := b.Get(ctx, "worlds/w1/marker.json")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v; want %q", got, err, data)
	}
	if ga.Size != a.Size || ga.Generation != a.Generation {
		t.Fatalf("Get attrs = %+v, Create attrs = %+v", ga, a)
	}
	sa, err := b.Stat(ctx, "worlds/w1/marker.json")
	if err != nil || sa.Name != a.Name || sa.Size != a.Size || sa.Generation != a.Generation {
		t.Fatalf("Stat = %+v, %v; want %+v", sa, err, a)
	}
	if d := sa.Created.Sub(a.Created); d < -time.Second || d > time.Second {
		t.Fatalf("Stat created %v, Create created %v", sa.Created, a.Created)
	}
}

func testCreateTakenName(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	first := mustCreate(t, b, "log/0000000000000002", []byte("first"))
	_, err := b.Create(ctx, "log/0000000000000002", []byte("second"))
	if !errors.Is(err, bucket.ErrExist) {
		t.Fatalf("second Create = %v, want ErrExist", err)
	}
	got, a, err := b.Get(ctx, "log/0000000000000002")
	if err != nil || string(got) != "first" || a.Generation != first.Generation {
		t.Fatalf("after a refused create: Get = %q gen %d, %v; want the first object", got, a.Generation, err)
	}
}

func testConcurrentCreators(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	const n = 16
	for round := range 3 {
		name := fmt.Sprintf("race/slot-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = b.Create(ctx, name, []byte(fmt.Sprintf("writer %d", i)))
			}()
		}
		close(start)
		wg.Wait()
		winner, exist := -1, 0
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("%s: writers %d and %d both created it", name, winner, i)
				}
				winner = i
			case errors.Is(err, bucket.ErrExist):
				exist++
			default:
				t.Fatalf("%s: writer %d: %v", name, i, err)
			}
		}
		if winner < 0 || exist != n-1 {
			t.Fatalf("%s: winner %d, %d ErrExist; want one winner and %d ErrExist", name, winner, exist, n-1)
		}
		got, _, err := b.Get(ctx, name)
		if err != nil || string(got) != fmt.Sprintf("writer %d", winner) {
			t.Fatalf("%s: Get = %q, %v; want the winner's bytes (writer %d)", name, got, err, winner)
		}
	}
}

func testNotFound(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	mustCreate(t, b, "a/present", []byte("x"))
	for _, name := range []string{"a/absent", "absent", "a/present/below", "b/c/d"} {
		if _, _, err := b.Get(ctx, name); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("Get(%q) = %v, want ErrNotExist", name, err)
		}
		if _, err := b.GetRange(ctx, name, 0, 1); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("GetRange(%q) = %v, want ErrNotExist", name, err)
		}
		if _, err := b.Stat(ctx, name); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want ErrNotExist", name, err)
		}
		if err := b.Delete(ctx, name, 1); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("Delete(%q) = %v, want ErrNotExist", name, err)
		}
	}
	// A prefix is not an object.
	if _, err := b.Stat(ctx, "a"); !errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("Stat of a prefix = %v, want ErrNotExist", err)
	}
}

func testEmptyAndLarge(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	mustCreate(t, b, "empty", nil)
	got, a, err := b.Get(ctx, "empty")
	if err != nil || len(got) != 0 || a.Size != 0 {
		t.Fatalf("empty object: Get = %d bytes, size %d, %v", len(got), a.Size, err)
	}
	large := make([]byte, 5<<20+7)
	for i := range large {
		large[i] = byte(i*7 + i>>11)
	}
	mustCreate(t, b, "data/w/run/table/token/0.parquet", large)
	got, a, err = b.Get(ctx, "data/w/run/table/token/0.parquet")
	if err != nil || !bytes.Equal(got, large) || a.Size != int64(len(large)) {
		t.Fatalf("large object: Get = %d bytes (equal %v), size %d, %v", len(got), bytes.Equal(got, large), a.Size, err)
	}
}

func testRangedReads(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	mustCreate(t, b, "r", data)
	for _, tc := range []struct {
		off, n int64
		want   []byte
		err    error
	}{
		{0, 10, data[:10], nil},
		{0, -1, data, nil},
		{0, 100, data, nil},
		{0, 1000, data, nil},
		{50, -1, data[50:], nil},
		{90, 10, data[90:], nil},
		{90, 20, data[90:], nil},
		{99, 1, data[99:], nil},
		{99, 5, data[99:], nil},
		{37, 0, []byte{}, nil},
		{100, 5, []byte{}, nil},
		{100, -1, []byte{}, nil},
		{101, 1, nil, bucket.ErrInvalidRange},
		{101, 0, nil, bucket.ErrInvalidRange},
		{1000, -1, nil, bucket.ErrInvalidRange},
		{-1, 5, nil, bucket.ErrInvalidRange},
	} {
		got, err := b.GetRange(ctx, "r", tc.off, tc.n)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("GetRange(%d, %d) = %v, want %v", tc.off, tc.n, err, tc.err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("GetRange(%d, %d) = %v (%d bytes), %v; want %d bytes", tc.off, tc.n, got, len(got), err, len(tc.want))
		}
	}
	mustCreate(t, b, "zero", nil)
	if got, err := b.GetRange(ctx, "zero", 0, 10); err != nil || len(got) != 0 {
		t.Errorf("GetRange on an empty object = %v, %v; want no bytes", got, err)
	}
}

func names(t *testing.T, b bucket.Bucket, prefix, startAfter string) []string {
	t.Helper()
	as, err := bucket.Collect(b.List(ctxFor(t), prefix, startAfter))
	if err != nil {
		t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
		if a.Generation <= 0 || a.Size != int64(len(payload(a.Name))) {
			t.Fatalf("List(%q, %q): attrs %+v", prefix, startAfter, a)
		}
	}
	return out
}

func testListOrder(t *testing.T, b bucket.Bucket) {
	// Names chosen so that file-system order and byte order differ: '-'
	// and '.' sort before '/', '0' after it.
	all := []string{
		"p/a-c", "p/a.b", "p/a/b", "p/a/c/d", "p/a0", "p/b", "p/bb/x", "pq", "q/1",
	}
	createAll(t, b, all)
	for _, tc := range []struct {
		prefix, after string
		want          []string
	}{
		{"", "", all},
		{"p/", "", all[:7]},
		{"p", "", all[:8]},
		{"p/a", "", all[:5]},
		{"p/a/", "", []string{"p/a/b", "p/a/c/d"}},
		{"p/a/c/d", "", []string{"p/a/c/d"}},
		{"p/", "p/a.b", []string{"p/a/b", "p/a/c/d", "p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/a/", []string{"p/a/b", "p/a/c/d", "p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/a/b", []string{"p/a/c/d", "p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/a/bz", []string{"p/a/c/d", "p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/a/c", []string{"p/a/c/d", "p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/a/c/d", []string{"p/a0", "p/b", "p/bb/x"}},
		{"p/", "p/b", []string{"p/bb/x"}},
		{"p/", "p/bb/x", nil},
		{"p/", "o", all[:7]},
		{"p/a", "p/a-c", []string{"p/a.b", "p/a/b", "p/a/c/d", "p/a0"}},
		{"", "p/bb/x", []string{"pq", "q/1"}},
		{"", "zzz", nil},
		{"r/", "", nil},
		{"p/nothing/", "", nil},
	} {
		got := names(t, b, tc.prefix, tc.after)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("List(%q, %q) = %q, want %q", tc.prefix, tc.after, got, tc.want)
		}
	}
}

func testListPaging(t *testing.T, b bucket.Bucket) {
	const n = 1203
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("log/%016x", i*3))
	}
	createAll(t, b, append(all, "log0", "lof/x"))
	got := names(t, b, "log/", "")
	if len(got) != n || got[0] != all[0] || got[n-1] != all[n-1] {
		t.Fatalf("List(log/) = %d names, want %d", len(got), n)
	}
	for i := range got {
		if got[i] != all[i] {
			t.Fatalf("List(log/)[%d] = %q, want %q", i, got[i], all[i])
		}
	}
	// Resume from the middle, from between two names, and past a page.
	if got := names(t, b, "log/", all[600]); len(got) != n-601 || got[0] != all[601] {
		t.Fatalf("List after %s: %d names from %v", all[600], len(got), got[:1])
	}
	if got := names(t, b, "log/", fmt.Sprintf("log/%016x", 1001*3+1)); len(got) != n-1002 || got[0] != all[1002] {
		t.Fatalf("List after a missing name: %d names", len(got))
	}
	// Stopping early is allowed and stops.
	var seen int
	for a, err := range b.List(ctxFor(t), "log/", "") {
		if err != nil {
			t.Fatal(err)
		}
		if a.Name != all[seen] {
			t.Fatalf("early stop: got %s at %d", a.Name, seen)
		}
		if seen++; seen == 10 {
			break
		}
	}
}

func testDeleteGeneration(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	first := mustCreate(t, b, "checkpoints/0000000000000400", []byte("one"))
	if err := b.Delete(ctx, first.Name, first.Generation+1); !errors.Is(err, bucket.ErrGenerationMismatch) {
		t.Fatalf("Delete at a wrong generation = %v, want ErrGenerationMismatch", err)
	}
	if got, _, err := b.Get(ctx, first.Name); err != nil || string(got) != "one" {
		t.Fatalf("a refused delete removed the object: %q, %v", got, err)
	}
	if err := bucket.DeleteOnce(ctx, b, first.Name, first.Generation); err != nil {
		t.Fatalf("Delete at the read generation: %v", err)
	}
	if _, err := b.Stat(ctx, first.Name); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("after Delete: Stat = %v, want ErrNotExist", err)
	}
	second := createAfterDelete(t, b, first.Name, []byte("two"))
	if second.Generation == first.Generation {
		t.Fatalf("re-created object kept generation %d", first.Generation)
	}
	if err := b.Delete(ctx, first.Name, first.Generation); !errors.Is(err, bucket.ErrGenerationMismatch) {
		t.Fatalf("Delete at the old generation of a re-created name = %v, want ErrGenerationMismatch", err)
	}
	if got, _, err := b.Get(ctx, first.Name); err != nil || string(got) != "two" {
		t.Fatalf("stale delete removed the new object: %q, %v", got, err)
	}
}

// createAfterDelete creates a name that was just deleted, waiting out a
// backend's per-name mutation limit (reported as ErrAmbiguous, nothing
// applied) if it has one.
func createAfterDelete(t *testing.T, b bucket.Bucket, name string, data []byte) bucket.Attrs {
	t.Helper()
	ctx := ctxFor(t)
	for {
		a, err := bucket.CreateOnce(ctx, b, name, data)
		if err == nil {
			return a
		}
		if !errors.Is(err, bucket.ErrAmbiguous) || ctx.Err() != nil {
			t.Fatalf("re-create %s: %v", name, err)
		}
	}
}

// Replace deletes the object called name from b and, unless data is nil,
// creates it anew with data (another generation): a test's stand-in for
// damage or a rewrite behind a reader's back.
func Replace(t testing.TB, b bucket.Bucket, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	a, err := b.Stat(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, name, a.Generation); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if _, err := b.Create(ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
}

// BadNames are names every backend refuses.
var BadNames = []string{
	"", "/abs", "a/", "a//b", "../escape", "a/../../escape", "a/./b", ".", "..",
	"nul\x00byte", "new\nline", ".worldfs/tmp/x", strings.Repeat("n", bucket.MaxNameLen+1),
	strings.Repeat("s", bucket.MaxSegmentLen+1), "bad\xffutf8",
}

func testInvalidNames(t *testing.T, b bucket.Bucket) {
	ctx := ctxFor(t)
	for _, name := range BadNames {
		short := name
		if len(short) > 40 {
			short = short[:40] + "…"
		}
		if _, err := b.Create(ctx, name, []byte("x")); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("Create(%q) = %v, want ErrInvalidName", short, err)
		}
		if _, _, err := b.Get(ctx, name); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("Get(%q) = %v, want ErrInvalidName", short, err)
		}
		if _, err := b.GetRange(ctx, name, 0, 1); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("GetRange(%q) = %v, want ErrInvalidName", short, err)
		}
		if _, err := b.Stat(ctx, name); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidName", short, err)
		}
		if err := b.Delete(ctx, name, 1); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidName", short, err)
		}
	}
	for _, prefix := range []string{"/abs", "../", "a/../", "nul\x00"} {
		if _, err := bucket.Collect(b.List(ctx, prefix, "")); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("List(%q) = %v, want ErrInvalidName", prefix, err)
		}
	}
	if got := names(t, b, "", ""); len(got) != 0 {
		t.Errorf("refused names left objects behind: %q", got)
	}
}

func testCanceledContext(t *testing.T, b bucket.Bucket) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Create(ctx, "canceled", []byte("x")); err == nil {
		t.Fatal("Create with a canceled context succeeded")
	}
	if _, _, err := b.Get(ctx, "canceled"); err == nil {
		t.Fatal("Get with a canceled context succeeded")
	}
	if _, err := b.Stat(ctx, "canceled"); err == nil {
		t.Fatal("Stat with a canceled context succeeded")
	}
	if err := b.Delete(ctx, "canceled", 1); err == nil {
		t.Fatal("Delete with a canceled context succeeded")
	}
	if _, err := bucket.Collect(b.List(ctx, "", "")); err == nil {
		t.Fatal("List with a canceled context succeeded")
	}
	// A create refused for cancellation may still have landed (ambiguous);
	// either way the bucket must answer cleanly afterwards.
	if _, err := b.Stat(ctxFor(t), "canceled"); err != nil && !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("Stat after a canceled create: %v", err)
	}
}

func testCreateOnce(t *testing.T, inner bucket.Bucket) {
	ctx := ctxFor(t)
	fault := func(k faulty.Kind) faulty.Rule {
		return faulty.Rule{Op: faulty.OpCreate, Times: 1, Fault: faulty.Fault{Kind: k}}
	}
	for _, tc := range []struct {
		kind faulty.Kind
	}{{faulty.FailBefore}, {faulty.FailAfter}} {
		name := "once/" + tc.kind.String()
		script := faulty.NewScript(fault(tc.kind))
		b := faulty.Wrap(inner, script)
		// The raw create reports the unknown outcome...
		if _, err := b.Create(ctx, name+"-raw", []byte("x")); !errors.Is(err, bucket.ErrAmbiguous) {
			t.Fatalf("%s: raw Create = %v, want ErrAmbiguous", tc.kind, err)
		}
		// ...and CreateOnce resolves it: the object is there, exactly once.
		script = faulty.NewScript(fault(tc.kind))
		b = faulty.Wrap(inner, script)
		a, err := bucket.CreateOnce(ctx, b, name, []byte("mine"))
		if err != nil {
			t.Fatalf("%s: CreateOnce = %v", tc.kind, err)
		}
		if script.Injected != 1 {
			t.Fatalf("%s: %d faults injected, want 1", tc.kind, script.Injected)
		}
		got, ga, err := inner.Get(ctx, name)
		if err != nil || string(got) != "mine" || ga.Generation != a.Generation {
			t.Fatalf("%s: after CreateOnce: %q gen %d (CreateOnce gen %d), %v", tc.kind, got, ga.Generation, a.Generation, err)
		}
	}
	// A lost response whose create landed: resolved by reading back.
	script := faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Times: 1, Fault: faulty.Fault{Kind: faulty.DropResponse}})
	b := faulty.Wrap(inner, script)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := b.Create(short, "once/dropped", []byte("mine"))
	cancel()
	if !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("dropped response: Create = %v, want ErrAmbiguous", err)
	}
	if _, err := bucket.CreateOnce(ctx, b, "once/dropped", []byte("mine")); err != nil {
		t.Fatalf("CreateOnce after a dropped response whose create landed: %v", err)
	}
	// Another writer's bytes under the name: the race is lost, not retried.
	mustCreate(t, inner, "once/theirs", []byte("theirs"))
	b = faulty.Wrap(inner, faulty.NewScript(fault(faulty.FailBefore)))
	if _, err := bucket.CreateOnce(ctx, b, "once/theirs", []byte("mine")); !errors.Is(err, bucket.ErrExist) {
		t.Fatalf("CreateOnce over another writer's object = %v, want ErrExist", err)
	}
	if got, _, _ := inner.Get(ctx, "once/theirs"); string(got) != "theirs" {
		t.Fatalf("CreateOnce changed another writer's object to %q", got)
	}
	// Faults on every attempt until the deadline: the outcome stays
	// unknown, and says so.
	b = faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Fault: faulty.Fault{Kind: faulty.FailBefore}}))
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := bucket.CreateOnce(short, b, "once/never", []byte("x")); !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("CreateOnce with every create failing = %v, want ErrAmbiguous", err)
	}
}

// Counting is a bucket that counts the whole-object reads (Get) made
// through it, in all and by name, the listings, by prefix, and the bytes
// read by name (by Get and GetRange), for tests that check what a cache, a
// snapshot or a load saves.
type Counting struct {
	bucket.Bucket
	Gets atomic.Int64

	mu       sync.Mutex
	byName   map[string]int
	byPrefix map[string]int
	bytes    map[string]int64
}

// read counts n bytes read of name.
func (c *Counting) read(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes == nil {
		c.bytes = map[string]int64{}
	}
	c.bytes[name] += int64(n)
}

// BytesOf returns the bytes of name read so far, whole or by ranges.
func (c *Counting) BytesOf(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[name]
}

// GetRange counts the bytes read and passes the read on.
func (c *Counting) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	data, err := c.Bucket.GetRange(ctx, name, offset, length)
	c.read(name, len(data))
	return data, err
}

// List counts the listing and passes it on.
func (c *Counting) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	c.mu.Lock()
	if c.byPrefix == nil {
		c.byPrefix = map[string]int{}
	}
	c.byPrefix[prefix]++
	c.mu.Unlock()
	return c.Bucket.List(ctx, prefix, startAfter)
}

// ListsOf returns how many listings of prefix were made.
func (c *Counting) ListsOf(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byPrefix[prefix]
}

// Get counts the read and passes it on.
func (c *Counting) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	c.Gets.Add(1)
	c.mu.Lock()
	if c.byName == nil {
		c.byName = map[string]int{}
	}
	c.byName[name]++
	c.mu.Unlock()
	data, a, err := c.Bucket.Get(ctx, name)
	c.read(name, len(data))
	return data, a, err
}

// GetsOf returns how many reads of name were made (found or not).
func (c *Counting) GetsOf(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byName[name]
}

// Unwrap returns the counted bucket.
func (c *Counting) Unwrap() bucket.Bucket { return c.Bucket }
