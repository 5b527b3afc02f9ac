package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/buckettest"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func wantCorrupt(t *testing.T, err error, what string) {
	t.Helper()
	var ce *CorruptFragmentError
	if !errors.Is(err, ErrCorruptFragment) || !errors.As(err, &ce) || ce.What != what {
		t.Fatalf("got %v; want a corrupt fragment error (%s)", err, what)
	}
}

// A copy is verified as it is fetched: size and sha256 must be the
// record's, or no copy is made; a verified copy is served again without a fetch or
// a hash.
func TestVerifiedPathChecksWhatItFetches(t *testing.T) {
	ctx := context.Background()
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	data := []byte("PAR1 fragment bytes PAR1")
	attrs, err := b.Bucket.Create(ctx, "data/w/r/t/tok/0.parquet", data)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := Record{Name: attrs.Name, Size: attrs.Size, Generation: attrs.Generation, Digest: digestOf(data)}
	for _, c := range []struct {
		what string
		r    Record
	}{
		{"sha256", Record{Name: good.Name, Size: good.Size, Generation: good.Generation, Digest: digestOf([]byte("other bytes"))}},
		{"size", Record{Name: good.Name, Size: good.Size + 1, Generation: good.Generation, Digest: good.Digest}},
		{"presence", Record{Name: "data/w/r/t/tok/1.parquet", Size: good.Size, Digest: good.Digest}},
	} {
		_, err := d.VerifiedPath(ctx, b, "b", c.r)
		wantCorrupt(t, err, c.what)
	}
	if ms, _ := filepath.Glob(filepath.Join(d.Dir(), "objects", "~sha256", "*", "*")); len(ms) != 0 {
		t.Fatalf("refused fetches left copies: %v", ms)
	}
	p, err := d.VerifiedPath(ctx, b, "b", good)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(data) {
		t.Fatalf("copy holds %q", got)
	}
	gets, hashed := b.Gets.Load(), HashCount()
	if _, err := d.VerifiedPath(ctx, b, "b", good); err != nil || b.Gets.Load() != gets || HashCount() != hashed {
		t.Fatalf("second use: %v, %d fetches, %d hashes", err, b.Gets.Load()-gets, HashCount()-hashed)
	}
}

// A bucket file read in place is hashed the first time it is opened and
// remembered across processes (a new Verified on the same directory); any
// change to it in place, even one that restores its modification time,
// makes it hashed again, and a flipped byte is then found.
func TestCheckOpenRemembersWholeFiles(t *testing.T) {
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("PAR1 some fragment bytes PAR1")
	attrs, err := lb.Create(context.Background(), "data/w/r/t/tok/0.parquet", data)
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Name: attrs.Name, Size: attrs.Size, Generation: attrs.Generation, Digest: digestOf(data)}
	p, _ := lb.Path(r.Name)
	memo := t.TempDir()
	check := func() error {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return OpenVerified(memo).CheckOpen(f, r)
	}
	before := HashCount()
	if err := check(); err != nil || HashCount()-before != 1 {
		t.Fatalf("first open: %v, %d hashes", err, HashCount()-before)
	}
	if err := check(); err != nil || HashCount()-before != 1 {
		t.Fatalf("second open: %v, %d hashes in all; want the file remembered", err, HashCount()-before)
	}
	// Touch it in place, restoring its times: hashed again (still whole).
	mtime := time.Unix(0, attrs.Generation)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := check(); err != nil || HashCount()-before != 2 {
		t.Fatalf("after a touch: %v, %d hashes in all; want it hashed again", err, HashCount()-before)
	}
	// Flip a byte in place, restoring the modification time.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{'Q'}, 7)
	f.Close()
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, check(), "sha256")
	// A damaged memory only costs hashing again.
	ms, _ := filepath.Glob(filepath.Join(memo, "*"))
	for _, m := range ms {
		os.WriteFile(m, []byte("garbage"), 0o600)
	}
	wantCorrupt(t, check(), "sha256")
}

// The memory of verified files stays bounded: once a world's holds more
// than its bound, it is rewritten with only the entries in use, so the
// records of files no longer read (replaced by compaction, deleted by
// collection) are dropped, and those in use are still remembered.
func TestVerifiedMemoryIsBounded(t *testing.T) {
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	memo := t.TempDir()
	var recs []Record
	var paths []string
	for i := range 5 {
		data := []byte(fmt.Sprintf("PAR1 fragment %d PAR1", i))
		attrs, err := lb.Create(context.Background(), fmt.Sprintf("data/w/r/t/tok/%d.parquet", i), data)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, Record{Name: attrs.Name, Size: attrs.Size, Generation: attrs.Generation, Digest: digestOf(data)})
		p, _ := lb.Path(attrs.Name)
		paths = append(paths, p)
	}
	open := func() *Verified {
		v := OpenVerified(memo)
		v.max = 4
		return v
	}
	check := func(v *Verified, i int) {
		t.Helper()
		f, err := os.Open(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := v.CheckOpen(f, recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// A first process verifies files 0..3: the memory holds its bound.
	v := open()
	for i := range 4 {
		check(v, i)
	}
	// A later one reads files 0 and 1 (remembered) and verifies file 4,
	// one more than the bound: files 2 and 3 (no longer read) are dropped.
	v = open()
	before := HashCount()
	check(v, 0)
	check(v, 1)
	check(v, 4)
	if n := HashCount() - before; n != 1 {
		t.Fatalf("%d files hashed; want only file 4", n)
	}
	ms, _ := filepath.Glob(filepath.Join(memo, "*"))
	if len(ms) != 1 {
		t.Fatalf("memory files %v", ms)
	}
	if info, err := os.Stat(ms[0]); err != nil || info.Size() != int64(len(memoHeader)+3*len(key{})) {
		t.Fatalf("the memory holds %v bytes (%v); want the header and 3 entries", info.Size(), err)
	}
	// A third process still finds 0, 1 and 4 remembered, and hashes 2.
	v = open()
	before = HashCount()
	for _, i := range []int{0, 1, 4} {
		check(v, i)
	}
	if n := HashCount() - before; n != 0 {
		t.Fatalf("%d files in use hashed again", n)
	}
	check(v, 2)
	if n := HashCount() - before; n != 1 {
		t.Fatalf("a dropped file: %d hashes; want 1", n)
	}
}

// HasVerified finds the verified copy VerifiedPath made, in this process
// or another on the same directory, without a fetch; none before, none of
// a record of another size or digest.
func TestHasVerifiedFindsTheCopyVerifiedPathMade(t *testing.T) {
	ctx := context.Background()
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	data := []byte("PAR1 compacted bytes PAR1")
	attrs, err := b.Bucket.Create(ctx, "data/w/r/t/compacted-x/0.parquet", data)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Name: attrs.Name, Size: attrs.Size, Generation: attrs.Generation, Digest: digestOf(data)}
	if d.HasVerified(r) {
		t.Fatal("a verified copy before any was made")
	}
	if _, err := d.VerifiedPath(ctx, b, "b", r); err != nil {
		t.Fatal(err)
	}
	other, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    *Disk
		r    Record
		want bool
	}{
		{d, r, true},
		{other, r, true},
		{d, Record{Name: r.Name, Size: r.Size + 1, Digest: r.Digest}, false},
		{d, Record{Name: r.Name, Size: r.Size, Digest: digestOf([]byte("other bytes"))}, false},
		{d, Record{Name: r.Name, Size: r.Size}, false},
	} {
		if got := c.d.HasVerified(c.r); got != c.want {
			t.Fatalf("HasVerified(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
	if n := b.GetsOf(r.Name); n != 1 {
		t.Fatalf("%d fetches; HasVerified fetches nothing", n)
	}
}
