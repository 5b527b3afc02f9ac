package integration

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/internal/realpart"
	wsql "github.com/worldfs/worldfs/sql"
)

// The kit (engine/enginetest) under the names these tests use.
var (
	ctxT  = enginetest.Context
	quiet = enginetest.Quiet
	// particleWorld creates a particle world run to a tick, closed with
	// the test.
	particleWorld = enginetest.World
	// forkWorld forks a world's main run at a tick and runs the fork on.
	forkWorld = enginetest.Fork
)

// requireFUSE ends a mount test where no FUSE device exists: it fails
// under CI=true and is skipped, saying why, elsewhere.
func requireFUSE(t testing.TB) {
	t.Helper()
	realpart.FUSE(t, false)
}

// localBucket opens a fresh local bucket in a temporary directory.
func localBucket(t testing.TB) *local.Bucket {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// mounted is a live test mount.
type mounted struct {
	dir string
	m   *wfs.Mount
}

// testMount mounts b in a temporary directory; it is always unmounted when
// the test ends (lazily if something still holds it).
func testMount(t testing.TB, b bucket.Bucket) *mounted {
	t.Helper()
	return testMountWith(t, b, wfs.Options{}, wfs.MountOptions{})
}

// testMountWith is testMount with options (its cache, bucket id and
// writer options are the test's).
func testMountWith(t testing.TB, b bucket.Bucket, opts wfs.Options, mo wfs.MountOptions) *mounted {
	t.Helper()
	requireFUSE(t)
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Cache, opts.BucketID, opts.Writer = c, "test", quiet
	m, err := wfs.New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := wfs.Serve(dir, m, mo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Logf("unmount %s: %v; detaching lazily", dir, err)
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("lazy unmount %s: %v", dir, err)
			}
		}
		m.Close()
	})
	return &mounted{dir: dir, m: m}
}

func (mt *mounted) path(parts ...string) string {
	return filepath.Join(append([]string{mt.dir}, parts...)...)
}

// ls returns a directory's names in the order the mount lists them.
func ls(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// ctl writes one command to a ctl file and reads the answer back on the
// same open file; it returns the answer and the write's errno.
func ctl(t testing.TB, path, cmd string) (wfs.Answer, syscall.Errno) {
	t.Helper()
	// Raw system calls, not os.File: Go's poller takes a FUSE file for a
	// pollable one and would wait forever on EAGAIN (claim pending)
	// instead of returning it.
	fd, err := syscall.Open(path, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	_, werr := syscall.Write(fd, []byte(cmd+"\n"))
	var errno syscall.Errno
	if werr != nil && !errors.As(werr, &errno) {
		t.Fatalf("ctl write: %v", werr)
	}
	buf := make([]byte, 1<<20)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		t.Fatalf("reading the ctl answer: %v", err)
	}
	var a wfs.Answer
	if err := json.Unmarshal(buf[:n], &a); err != nil {
		t.Fatalf("ctl answer %q: %v", buf[:n], err)
	}
	if (errno == 0) != a.OK {
		t.Fatalf("ctl %s: write errno %v but answer %+v", cmd, errno, a)
	}
	return a, errno
}

// openViews builds world's views in b (a fresh views directory) and opens
// them, closed when the test ends: what worldfs sql answers.
func openViews(t testing.TB, b bucket.Bucket, world string) *sql.DB {
	t.Helper()
	s, err := wsql.Build(ctxT(t), b, world, wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// duck opens an in-memory DuckDB.
func duck(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rows renders a query's result as lines, for comparison.
func rows(t testing.TB, db *sql.DB, q string) []string {
	t.Helper()
	r, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer r.Close()
	cols, _ := r.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for r.Next() {
		if err := r.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
