package cache

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

// Content decides, metadata is a fast path: an object whose generation is
// not the recorded one (a copied bucket) but whose bytes are is served by
// every reader (a fetch into the cache, a file opened in place) and is
// re-verified by Check, hashed once and then remembered; a byte flipped in
// the copy is damage, named with the digest expected and found; a copy
// with another size is damage without reading it.
func TestCopiedObjectsAreDecidedByTheirBytes(t *testing.T) {
	ctx := context.Background()
	data := []byte("PAR1 fragment bytes, copied PAR1")
	name := "data/w/r/t/tok/0.parquet"

	// The original: its record names its generation.
	orig := mem.New(mem.Options{})
	a, err := orig.Create(ctx, name, data)
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Name: name, Size: a.Size, Generation: a.Generation, Digest: digestOf(data)}

	// A remote copy: the same bytes under a new generation.
	remote := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	remote.Bucket.Create(ctx, "data/w/r/t/tok/pad", []byte("x")) // generations differ from the original's
	ca, err := remote.Bucket.Create(ctx, name, data)
	if err != nil || ca.Generation == a.Generation {
		t.Fatalf("copy: %v, generation %d (original %d)", err, ca.Generation, a.Generation)
	}
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := d.VerifiedPath(ctx, remote, "copy", r); err != nil {
		t.Fatalf("a copy fetched into the cache: %v", err)
	} else if got, _ := os.ReadFile(p); string(got) != string(data) {
		t.Fatalf("cached copy holds %q", got)
	}
	v := OpenVerified(t.TempDir())
	if c, err := v.Check(ctx, remote, "copy", r, false); err != nil || !c.Copied || c.Read != int64(len(data)) {
		t.Fatalf("check of a remote copy: %+v, %v; want re-verified by reading it", c, err)
	}
	gets := remote.Gets.Load()
	if c, err := v.Check(ctx, remote, "copy", r, false); err != nil || !c.Copied || c.Read != 0 || remote.Gets.Load() != gets {
		t.Fatalf("second check of a remote copy: %+v, %v, %d fetches; want it remembered", c, err, remote.Gets.Load()-gets)
	}
	if c, err := v.Check(ctx, orig, "orig", r, false); err != nil || c.Copied || c.Read != 0 {
		t.Fatalf("check of the original: %+v, %v; want the fast path", c, err)
	}

	// A local copy with a new modification time, as cp -r makes it.
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Create(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	p, _ := lb.Path(name)
	later := time.Unix(0, a.Generation).Add(time.Hour)
	os.Chtimes(p, later, later)
	open := func() error {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return v.CheckOpen(f, r)
	}
	before := HashCount()
	if err := open(); err != nil || HashCount()-before != 1 {
		t.Fatalf("a copied file opened in place: %v, %d hashes", err, HashCount()-before)
	}
	if c, err := v.Check(ctx, lb, "l", r, false); err != nil || !c.Copied || c.Read != 0 || HashCount()-before != 1 {
		t.Fatalf("check of a copied file: %+v, %v, %d hashes; want re-verified from memory", c, err, HashCount()-before)
	}
	b := v.Batch()
	if err := b.Add(p, r); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("a copied file read by the views: %v", err)
	}

	// One byte flipped in the copy, its size and time kept: damage, found
	// by every reader, naming the digest expected and found.
	flipped := append([]byte(nil), data...)
	flipped[7] ^= 0x10
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt(flipped[7:8], 7)
	f.Close()
	os.Chtimes(p, later, later)
	wantCorrupt(t, open(), "sha256")
	_, err = v.Check(ctx, lb, "l", r, false)
	wantCorrupt(t, err, "sha256")
	if ce := err.(*CorruptFragmentError); ce.Want != r.Digest || ce.Got != digestOf(flipped) {
		t.Fatalf("the damage names %q, found %q; want %q and %q", ce.Want, ce.Got, r.Digest, digestOf(flipped))
	}
	b = v.Batch()
	if err := b.Add(p, r); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, b.Wait(ctx), "sha256")
	bad := mem.New(mem.Options{})
	bad.Create(ctx, "pad", nil)
	bad.Create(ctx, name, flipped)
	fresh, err := Open(t.TempDir(), Options{}) // d holds the right bytes, by digest, and would serve them
	if err != nil {
		t.Fatal(err)
	}
	_, err = fresh.VerifiedPath(ctx, bad, "bad", r)
	wantCorrupt(t, err, "sha256")
	_, err = v.Check(ctx, bad, "bad", r, false)
	wantCorrupt(t, err, "sha256")

	// Another size: damage from the attributes alone.
	short := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	short.Bucket.Create(ctx, name, data[1:])
	_, err = v.Check(ctx, short, "short", r, false)
	wantCorrupt(t, err, "size")
	if short.Gets.Load() != 0 {
		t.Fatal("a copy of another size was read")
	}
	// No digest recorded: nothing decides by the bytes, so the generation
	// does.
	_, err = v.Check(ctx, remote, "copy", Record{Name: name, Size: r.Size, Generation: r.Generation}, false)
	wantCorrupt(t, err, "generation")
}
