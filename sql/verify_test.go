package sql_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// verifyWorld commits ticks 0..9 of the particle world "w" on a local
// bucket and returns the bucket and tick 5's particle fragment record.
func verifyWorld(t *testing.T) (*local.Bucket, index.Fragment) {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "w", 9)
	w.Close()
	return b, fragmentAt(t, b, 5)
}

func fragmentAt(t *testing.T, b bucket.Bucket, tick int64) index.Fragment {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick("main", tick)
	if !ok {
		t.Fatalf("no tick %d", tick)
	}
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID {
			return tf.Fragments[0]
		}
	}
	t.Fatalf("tick %d has no particle fragment", tick)
	return index.Fragment{}
}

// flipInPlace flips one byte of the file in place and restores its
// modification time (the local bucket's generation), so that size and
// generation still match and only the bytes tell.
func flipInPlace(t *testing.T, path string, at int64) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c [1]byte
	if _, err := f.ReadAt(c[:], at); err != nil {
		t.Fatal(err)
	}
	c[0] ^= 0x01
	if _, err := f.WriteAt(c[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path); after.Size() != info.Size() || !after.ModTime().Equal(info.ModTime()) {
		t.Fatal("the flip changed size or modification time")
	}
}

// wantCorrupt fails unless err is a CorruptFragmentError naming frag and
// what differs.
func wantCorrupt(t *testing.T, err error, frag string, what string) {
	t.Helper()
	var ce *cache.CorruptFragmentError
	if !errors.Is(err, cache.ErrCorruptFragment) || !errors.As(err, &ce) || ce.Name != frag || ce.What != what {
		t.Fatalf("got %v; want a corrupt fragment error naming %s (%s)", err, frag, what)
	}
}

// queryViews builds the views of world "w" with opts, opens them and runs
// q (its output discarded), as worldfs sql does.
func queryViews(t *testing.T, b bucket.Bucket, opts wsql.Options, q string) error {
	t.Helper()
	s, err := wsql.Build(ctxT(t), b, "w", opts)
	if err != nil {
		return err
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		return err
	}
	defer db.Close()
	return wsql.Run(ctxT(t), db, q, wsql.FormatCSV, io.Discard, nil)
}

const wholeTable = "SELECT count(*), sum(position_x) FROM particle"

// A byte flipped in a fragment in place, its modification time restored,
// fails a query that reads it with an error naming the file: when the
// file was never verified, and after it was verified and remembered (the
// change moved its change time, so it is hashed again). Queries that do
// not read it still answer.
func TestViewsRefuseAFlippedFragment(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "remembered"}[warm], func(t *testing.T) {
			b, frag := verifyWorld(t)
			opts := wsql.Options{Dir: t.TempDir()}
			if warm {
				if err := queryViews(t, b, opts, wholeTable); err != nil {
					t.Fatal(err)
				}
			}
			p, _ := b.Path(frag.Path)
			flipInPlace(t, p, frag.Bytes/2)
			err := queryViews(t, b, opts, wholeTable)
			wantCorrupt(t, err, frag.Path, "sha256")
			err = queryViews(t, b, opts, "SELECT count(*) FROM particle_at(5)")
			wantCorrupt(t, err, frag.Path, "sha256")
			// Another tick's rows, and views pinned to a tick before it, do
			// not read it.
			if err := queryViews(t, b, opts, "SELECT count(*) FROM particle_at(4)"); err != nil {
				t.Fatalf("tick 4 of the views: %v", err)
			}
			at := int64(4)
			if err := queryViews(t, b, wsql.Options{Dir: opts.Dir, AtTick: &at}, wholeTable); err != nil {
				t.Fatalf("views before the damaged tick: %v", err)
			}
			// CopyTick refuses it too.
			err = wsql.CopyTick(ctxT(t), b, "w", wsql.Options{Dir: opts.Dir}, "particle", 5, wsql.FormatParquet, filepath.Join(t.TempDir(), "out.parquet"))
			wantCorrupt(t, err, frag.Path, "sha256")
		})
	}
}

// A fragment replaced by another file: a longer one is caught by its size
// alone, before any byte is read; the very same bytes written again (a new
// generation, as a copied bucket has) read as they are, hashed once (the
// bytes decide, not the generation); other bytes of the same size are
// caught by their sha256.
func TestViewsRefuseAReplacedFragment(t *testing.T) {
	b, frag := verifyWorld(t)
	opts := wsql.Options{Dir: t.TempDir()}
	if err := queryViews(t, b, opts, wholeTable); err != nil { // every file verified and remembered
		t.Fatal(err)
	}
	p, _ := b.Path(frag.Path)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	replace := func(data []byte) {
		tmp := p + ".new"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	replace(append(orig[:len(orig):len(orig)], 0))
	hashed := cache.HashCount()
	err = queryViews(t, b, opts, wholeTable)
	wantCorrupt(t, err, frag.Path, "size")
	if n := cache.HashCount() - hashed; n != 0 {
		t.Fatalf("%d files hashed to catch a longer file; its size suffices", n)
	}
	replace(orig)
	if err := queryViews(t, b, opts, wholeTable); err != nil {
		t.Fatalf("the same bytes under a new generation: %v", err)
	}
	if n := cache.HashCount() - hashed; n != 1 {
		t.Fatalf("%d files hashed; want the rewritten one, once", n)
	}
	flipped := append([]byte(nil), orig...)
	flipped[len(flipped)/2] ^= 1
	replace(flipped)
	err = queryViews(t, b, opts, wholeTable)
	wantCorrupt(t, err, frag.Path, "sha256")
	os.Remove(p)
	err = queryViews(t, b, opts, wholeTable)
	wantCorrupt(t, err, frag.Path, "presence")
}

// A verified file is hashed once, not per query: a second process (it
// opens the same memory, so it is opened anew here) hashes nothing, and
// still checks size and generation.
func TestVerifiedFilesAreHashedOnce(t *testing.T) {
	b, _ := verifyWorld(t)
	dir := t.TempDir()
	before := cache.HashCount()
	if err := queryViews(t, b, wsql.Options{Dir: dir}, wholeTable); err != nil {
		t.Fatal(err)
	}
	first := cache.HashCount() - before
	if first < 10 {
		t.Fatalf("the first query hashed %d files; want every particle fragment (at least 10)", first)
	}
	before = cache.HashCount()
	if err := queryViews(t, b, wsql.Options{Dir: dir}, wholeTable); err != nil {
		t.Fatal(err)
	}
	if again := cache.HashCount() - before; again != 0 {
		t.Fatalf("the second query hashed %d files again", again)
	}
}

// A database checks each file once: a later query of the same database
// reads the files it verified without checking them again (their records
// cannot change under it), even after a file's generation moved (its
// bytes unchanged); a new database checks the file again, and hashes it,
// its generation no longer the record's.
func TestADatabaseChecksEachFileOnce(t *testing.T) {
	b, frag := verifyWorld(t)
	opts := wsql.Options{Dir: t.TempDir()}
	s, err := wsql.Build(ctxT(t), b, "w", opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := wsql.Run(ctxT(t), db, wholeTable, wsql.FormatCSV, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Path(frag.Path)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	before := cache.HashCount()
	if err := wsql.Run(ctxT(t), db, wholeTable, wsql.FormatCSV, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	if n := cache.HashCount() - before; n != 0 {
		t.Fatalf("a second query of the same database hashed %d files: it checked again what the first verified", n)
	}
	if err := queryViews(t, b, opts, wholeTable); err != nil {
		t.Fatal(err)
	}
	if n := cache.HashCount() - before; n != 1 {
		t.Fatalf("a new database hashed %d files; want the one whose generation moved", n)
	}
}

// Verifying follows what a query reads, not the length of history:
// opening the views and reading one tick hashes that tick's file and the
// one file per view DuckDB reads for its columns, not the ten ticks'
// fragments of every table.
func TestVerificationFollowsTheQuery(t *testing.T) {
	b, _ := verifyWorld(t)
	before := cache.HashCount()
	if err := queryViews(t, b, wsql.Options{Dir: t.TempDir()}, "SELECT count(*) FROM particle_at(3)"); err != nil {
		t.Fatal(err)
	}
	if n := cache.HashCount() - before; n > int64(len(particles.Tables())+1) {
		t.Fatalf("opening the views and reading tick 3 hashed %d files; want at most %d (a file per view, and tick 3's)", n, len(particles.Tables())+1)
	}
}

// A fragment in GCS whose object was replaced (deleted and created again
// with one byte flipped: a new generation) is refused by its sha256 as it
// is fetched into the cache: the queries that read it fail naming it and
// its tick, the others answer.
func TestViewsOfGCSRefuseAReplacedFragment(t *testing.T) {
	gcstest.Start(t, "worlds")
	b, err := bucketurl.Open(context.Background(), "gs://worlds/v")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := enginetest.World(t, b, "w", 6)
	w.Close()
	frag := fragmentAt(t, b, 5)
	data, attrs, err := b.Get(ctxT(t), frag.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := b.Delete(ctxT(t), frag.Path, attrs.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctxT(t), frag.Path, data); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := wsql.Options{Cache: c, BucketID: "gs-v", Dir: t.TempDir()}
	err = queryViews(t, b, opts, wholeTable)
	wantCorrupt(t, err, frag.Path, "sha256")
	var le *wsql.LostFileError
	if !errors.As(err, &le) || le.Table != "particle" || le.From != 5 || le.To != 5 {
		t.Fatalf("%v; want a LostFileError of table particle, tick 5", err)
	}
	if err := queryViews(t, b, opts, "SELECT count(*) FROM particle_at(4)"); err != nil {
		t.Fatalf("tick 4 of the views: %v", err)
	}
}
