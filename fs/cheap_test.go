package fs

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"

	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	wsql "github.com/worldfs/worldfs/sql"
)

// catalogReads counts the bucket calls that read a world's catalog (its
// marker, slots, checkpoints and shards: everything under worlds/).
type catalogReads struct{ n atomic.Int64 }

func (c *catalogReads) Fault(_ faulty.Op, name string) faulty.Fault {
	if strings.HasPrefix(name, "worlds/") {
		c.n.Add(1)
	}
	return faulty.Fault{}
}

// cheapWorld makes a particle world "w" run to tick 4, and a mount of its
// bucket (read through the cache, as a remote bucket would be) whose
// catalog reads are counted.
func cheapWorld(t *testing.T, opts Options) (*Mount, *catalogReads, *local.Bucket) {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "w", 4)
	w.Close()
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reads := &catalogReads{}
	opts.Cache, opts.BucketID, opts.Writer = c, "test", enginetest.Quiet
	opts.Freshness = time.Hour // the test decides when the catalog is read
	// Only the bucket interface: no capability shows through, so the
	// mount takes it for a remote one.
	remote := struct{ bucket.Bucket }{faulty.Wrap(b, reads)}
	m, err := New(remote, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, reads, b
}

// snapOf returns the snapshot file of table at tick n of w, in format.
func snapOf(t *testing.T, m *Mount, n int64, table, format string) *snapFile {
	t.Helper()
	ctx := context.Background()
	tr, ok, err := m.tick(ctx, "w", "main", n)
	if err != nil || !ok {
		t.Fatalf("tick %d: %v %v", n, ok, err)
	}
	tables, err := m.tickTables(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	c := content{t: tr, tf: tables[table], asIs: isExact(tr, tables[table])}
	return (&snapFile{m: m, ino: 1, at: place{"w", "main"}, t: c.t, table: table, format: format}).init(c)
}

// A stat of a derived file derives nothing: size 0 and an attribute
// timeout of 0 until an open derives it, then its true size, kept.
func TestStatDerivesNothing(t *testing.T) {
	m, _, _ := cheapWorld(t, Options{})
	ctx := context.Background()
	f := snapOf(t, m, 2, "particle", frame.FormatCSV)
	var out fuse.AttrOut
	if errno := f.Getattr(ctx, nil, &out); errno != 0 {
		t.Fatal(errno)
	}
	if n := wsql.Databases() - m.stats.duckdbAt; n != 0 || out.Size != 0 || out.Timeout() != 0 {
		t.Fatalf("stat of an underived file: %d DuckDB runs, size %d, attribute timeout %v; want 0, 0, 0", n, out.Size, out.Timeout())
	}
	if out.Mtime == 0 || int64(out.Mtime) != f.t.PublishedUnixMs/1000 {
		t.Errorf("mtime %d, the tick was published at %d ms", out.Mtime, f.t.PublishedUnixMs)
	}
	fh, _, errno := f.Open(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	h := fh.(*roFile)
	defer h.Release(ctx)
	data := make([]byte, h.size)
	n, err := body{f: h.f, data: h.data}.ReadAt(data, 0)
	if err != nil || n != len(data) || !strings.HasPrefix(string(data), "entity_id,tick,position_x,position_y,velocity_x,velocity_y,commit_token,writer_epoch\n") {
		t.Fatalf("derived CSV %q: %v", data, err)
	}
	if errno := f.Getattr(ctx, nil, &out); errno != 0 || out.Size != uint64(len(data)) || out.Timeout() == 0 {
		t.Errorf("stat after open: size %d (file %d), timeout %v", out.Size, len(data), out.Timeout())
	}
	// A new node of the same file (the kernel forgot it; a new mount)
	// sized as a lookup sizes it knows the size its writer recorded,
	// still deriving and rendering nothing.
	before, rendered := (wsql.Databases() - m.stats.duckdbAt), m.stats.rendered.Load()
	g := snapOf(t, m, 2, "particle", frame.FormatCSV)
	c, err := g.plan(ctx, false)
	if err == nil {
		err = g.size(ctx, c)
	}
	if errno := g.Getattr(ctx, nil, &out); err != nil || errno != 0 || out.Size != uint64(len(data)) || (wsql.Databases()-m.stats.duckdbAt) != before || m.stats.rendered.Load() != rendered {
		t.Errorf("stat of a looked-up CSV: size %d (want %d), %d new DuckDB runs, %d renderings (%v)", out.Size, len(data), (wsql.Databases()-m.stats.duckdbAt)-before, m.stats.rendered.Load()-rendered, err)
	}
	// A facts file (which changes as claims complete) is derived by its
	// first stat, once per set of visible facts, in Go (no DuckDB), so
	// its size is true.
	gathered := m.stats.gathered.Load()
	ff, ferr := m.factFile(ctx, "w", engine.EvaluationRun, frame.ReceiptsView, frame.FormatCSV)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if errno := ff.Getattr(ctx, nil, &out); errno != 0 || out.Size == 0 || (wsql.Databases()-m.stats.duckdbAt) != before || m.stats.gathered.Load() != gathered+1 {
		t.Errorf("first stat of a facts file: errno %v, size %d, %d DuckDB runs, %d derived in Go; want 0 and 1", errno, out.Size, (wsql.Databases()-m.stats.duckdbAt)-before, m.stats.gathered.Load()-gathered)
	}
	if errno := ff.Getattr(ctx, nil, &out); errno != 0 || (wsql.Databases()-m.stats.duckdbAt) != before || m.stats.gathered.Load() != gathered+1 {
		t.Errorf("second stat of a facts file: errno %v, %d DuckDB runs, %d derived in Go; want 0 and 1", errno, (wsql.Databases()-m.stats.duckdbAt)-before, m.stats.gathered.Load()-gathered)
	}
}

// Deriving a file plans from the catalog the mount holds: it reads no
// catalog object. (A CSV of a tick served as is is rendered from the
// fragment, with no DuckDB.)
func TestMaterializeReusesTheMountsCatalog(t *testing.T) {
	m, reads, _ := cheapWorld(t, Options{})
	ctx := context.Background()
	csv := snapOf(t, m, 3, "particle", frame.FormatCSV)
	reads.n.Store(0)
	fh, _, errno := csv.Open(ctx, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	fh.(*roFile).Release(ctx)
	if m.stats.rendered.Load() != 1 || (wsql.Databases()-m.stats.duckdbAt) != 0 {
		t.Fatalf("%d renderings and %d DuckDB runs, want 1 and 0", m.stats.rendered.Load(), (wsql.Databases() - m.stats.duckdbAt))
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("materializing tick 3's CSV read %d catalog objects; the mount holds the catalog", n)
	}
}

// A read the mount's own paths cannot finish (a local fragment that is a
// FIFO no one writes: open(2) blocks) fails with EIO after the read
// timeout instead of hanging.
func TestStalledReadGivesUp(t *testing.T) {
	ctx := context.Background()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "w", 2)
	w.Close()
	c, _ := cache.Open(t.TempDir(), cache.Options{})
	m, err := New(b, Options{Cache: c, Writer: enginetest.Quiet, ReadTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := snapOf(t, m, 1, "particle", frame.FormatParquet)
	plan, err := f.plan(ctx, false)
	if err != nil || !plan.asIs {
		t.Fatalf("tick 1's particle fragment should be served as is (%v)", err)
	}
	p, _ := b.Path(plan.tf.Fragments[0].Path)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let the abandoned open finish
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	done := make(chan syscall.Errno, 1)
	go func() {
		_, _, errno := f.Open(ctx, 0)
		done <- errno
	}()
	select {
	case errno := <-done:
		if errno != syscall.EIO {
			t.Errorf("open of a stalled fragment: %v, want EIO", errno)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("open of a stalled fragment still waiting after 30s: the mount's reads must give up on their own")
	}
	var rte *ReadTimeoutError
	stuck := make(chan int)
	defer close(stuck)
	_, err = bounded(ctx, m, "x", nil, func(ctx context.Context) (int, error) { return <-stuck, nil })
	if !errors.As(err, &rte) || Errno(err) != syscall.EIO {
		t.Errorf("bounded = %v (errno %v)", err, Errno(err))
	}
}
