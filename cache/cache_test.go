package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/internal/ctxtest"

	"github.com/worldfs/worldfs/bucket/mem"
)

func TestSharedFetchAndHits(t *testing.T) {
	ctx := context.Background()
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{Profile: mem.Profile{Read: mem.Dist{P50: 20 * time.Millisecond}}})}
	b.Bucket.Create(ctx, "data/w/f.parquet", []byte("PAR1 bytes"))
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	paths := make([]string, 16)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := d.Path(ctx, b, "bkt", "data/w/f.parquet")
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		}()
	}
	wg.Wait()
	if n := b.Gets.Load(); n != 1 {
		t.Fatalf("16 concurrent readers fetched %d times", n)
	}
	got, _ := os.ReadFile(paths[0])
	if !bytes.Equal(got, []byte("PAR1 bytes")) {
		t.Fatalf("cached copy holds %q", got)
	}
	// Another process (another Disk on the same directory) reuses the copy.
	d2, _ := Open(d.dir, Options{})
	if _, err := d2.Path(ctx, b, "bkt", "data/w/f.parquet"); err != nil || b.Gets.Load() != 1 {
		t.Fatalf("a second process refetched: %v, %d gets", err, b.Gets.Load())
	}
	if st := d.Stats(); st.Misses != 1 || st.Hits != 15 || st.Bytes != 10 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := d.Path(ctx, b, "bkt", "../escape"); err == nil {
		t.Fatal("a bad name was cached")
	}
	if _, err := d.Path(ctx, b, "bkt", "data/w/missing.parquet"); err == nil {
		t.Fatal("a missing object produced a path")
	}
}

// It runs in a synctest bubble: the 2 ms between fetches, which give each
// copy its own recency, pass on the bubble's clock, not the machine's.
func TestEvictsLeastRecentlyUsedPastGrace(t *testing.T) {
	synctest.Test(t, testEvictsLeastRecentlyUsedPastGrace)
}

func testEvictsLeastRecentlyUsedPastGrace(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	for i := range 5 {
		b.Create(ctx, fmt.Sprintf("o/%d", i), make([]byte, 100))
	}
	d, _ := Open(t.TempDir(), Options{MaxBytes: 300, Grace: time.Nanosecond})
	var paths []string
	for i := range 5 {
		p, err := d.Path(ctx, b, "bkt", fmt.Sprintf("o/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		time.Sleep(2 * time.Millisecond)
	}
	if st := d.Stats(); st.Bytes > 300 {
		t.Fatalf("cache holds %d bytes, bound 300", st.Bytes)
	}
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Fatal("the least recently used copy survived")
	}
	if _, err := os.Stat(paths[4]); err != nil {
		t.Fatal("the newest copy was evicted")
	}
	// Within the grace period nothing is evicted, whatever the bound.
	g, _ := Open(t.TempDir(), Options{MaxBytes: 100, Grace: time.Hour})
	for i := range 3 {
		g.Path(ctx, b, "bkt", fmt.Sprintf("o/%d", i))
	}
	if st := g.Stats(); st.Bytes != 300 {
		t.Fatalf("copies in use were evicted: %d bytes left", st.Bytes)
	}
}

func TestOpenRemovesDeadFetches(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "objects", "bkt", "x.tmp-dead")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("partial"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	if _, err := Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("a dead fetch's temporary file survived")
	}
}

// Derived files are made once (concurrent callers share the make), appear
// whole at their path, survive a reopen, and a failed make leaves nothing.
func TestDerived(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The make finishes only once the seven other callers wait for it, so
	// each of them shares it.
	var makes atomic.Int64
	waiters := make(chan struct{}, 8)
	d.waiting = func() { waiters <- struct{}{} }
	deadline := ctxtest.Context(t).Done()
	mk := func(tmp string) error {
		makes.Add(1)
		for range 7 {
			select {
			case <-waiters:
			case <-deadline:
				return errors.New("the other callers never waited for the make")
			}
		}
		return os.WriteFile(tmp, []byte("derived"), 0o644)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := d.Derived(ctx, "snapshots/w/main/1-tok/body.parquet", mk)
			if data, _ := os.ReadFile(p); err != nil || string(data) != "derived" {
				t.Errorf("derived: %q %v", data, err)
			}
		}()
	}
	wg.Wait()
	if makes.Load() != 1 {
		t.Errorf("%d makes, want 1", makes.Load())
	}
	d2, _ := Open(dir, Options{})
	if _, err := d2.Derived(ctx, "snapshots/w/main/1-tok/body.parquet", mk); err != nil || makes.Load() != 1 {
		t.Errorf("after a reopen: %v, %d makes", err, makes.Load())
	}
	if _, err := d.Derived(ctx, "x/fails", func(tmp string) error {
		os.WriteFile(tmp, []byte("part"), 0o644)
		return fmt.Errorf("boom")
	}); err == nil {
		t.Error("a failed make succeeded")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "objects", DerivedPrefix, "x", "*"))
	if len(matches) != 0 {
		t.Errorf("a failed make left %v", matches)
	}
	if _, err := d.Derived(ctx, "../escape", mk); err == nil {
		t.Error("a key outside the cache was accepted")
	}
}

// blockFirst is a bucket whose first Get waits for its caller's context to
// end and fails with it; later Gets pass through.
type blockFirst struct {
	bucket.Bucket
	entered chan struct{}
	once    sync.Once
}

func (b *blockFirst) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.entered)
		<-ctx.Done()
		return nil, bucket.Attrs{}, ctx.Err()
	}
	return b.Bucket.Get(ctx, name)
}

// Callers waiting on a fetch another caller started do not inherit that
// caller's cancellation: the first caller gives up, the second still gets
// the file.
func TestWaiterOutlivesTheFirstCallersCancellation(t *testing.T) {
	inner := mem.New(mem.Options{})
	inner.Create(context.Background(), "data/w/f.parquet", []byte("PAR1 bytes"))
	b := &blockFirst{Bucket: inner, entered: make(chan struct{})}
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	d.waiting = func() { waiting <- struct{}{} }
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := d.Path(first, b, "bkt", "data/w/f.parquet")
		firstErr <- err
	}()
	<-b.entered
	second := make(chan error, 1)
	var got string
	go func() {
		p, err := d.Path(context.Background(), b, "bkt", "data/w/f.parquet")
		got = p
		second <- err
	}()
	<-waiting // the second caller waits on the first one's fetch
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the waiting caller inherited the first one's cancellation: %v", err)
	}
	if data, err := os.ReadFile(got); err != nil || string(data) != "PAR1 bytes" {
		t.Fatalf("the waiting caller's file: %q %v", data, err)
	}
}

// A kept file is replaced by the next Keep of its key, read back by
// Kept, and counts against the cache's bound like any copy.
func TestKeptFilesAreReplacedAndBounded(t *testing.T) {
	d, _ := Open(t.TempDir(), Options{MaxBytes: 250, Grace: time.Nanosecond})
	if _, err := d.Kept("k/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a key never kept: %v; want not exist", err)
	}
	for _, c := range []byte{'1', '2'} {
		if err := d.Keep("k/a", bytes.Repeat([]byte{c}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := d.Kept("k/a"); err != nil || string(got) != strings.Repeat("2", 100) {
		t.Fatalf("kept %q, %v; want the second content", got, err)
	}
	if st := d.Stats(); st.Bytes != 100 {
		t.Fatalf("the cache counts %d bytes for one kept file of 100", st.Bytes)
	}
	d.Keep("k/b", make([]byte, 100))
	d.Keep("k/c", make([]byte, 100))
	left := 0
	for _, k := range []string{"k/a", "k/b", "k/c"} {
		if _, err := d.Kept(k); err == nil {
			left++
		}
	}
	if st := d.Stats(); st.Bytes > 250 || left != 2 {
		t.Fatalf("%d bytes and %d of 3 kept files left under a bound of 250", st.Bytes, left)
	}
}
