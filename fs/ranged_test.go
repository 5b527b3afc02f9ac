package fs

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A ranged object fetches each byte once while it keeps it: a prefetch
// asks only for the parts of its ranges no piece holds, and a read that
// spans pieces that meet is served from them; what it fetched is counted
// for the mount. An object shorter than its record is corruption, never
// a short read.
func TestRangedObjectFetchesWhatItLacks(t *testing.T) {
	ctx := enginetest.Context(t)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	if _, err := b.Create(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	var counted atomic.Int64
	r := newRangedObject(ctx, b, "obj", int64(len(data)), &counted)
	if err := r.Prefetch([]frame.ByteRange{{Off: 0, Len: 100 << 10}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Prefetch([]frame.ByteRange{{Off: 50 << 10, Len: 100 << 10}, {Off: 400 << 10, Len: 10}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.BytesOf("obj"), int64(150<<10+10); got != want || r.Fetched() != want || counted.Load() != want {
		t.Fatalf("two prefetches of 100 KiB overlapping by half, and 10 bytes: %d bytes fetched (%d, %d counted); want %d",
			got, r.Fetched(), counted.Load(), want)
	}
	p := make([]byte, 60<<10)
	if n, err := r.ReadAt(p, 70<<10); err != nil || n != len(p) || !bytes.Equal(p, data[70<<10:130<<10]) {
		t.Fatalf("a read across two pieces: %d bytes, %v", n, err)
	}
	if got := b.BytesOf("obj"); got != 150<<10+10 {
		t.Fatalf("a read of bytes kept fetched %d more", got-(150<<10+10))
	}

	short := newRangedObject(ctx, b, "obj", int64(len(data))+100, &counted)
	if _, err := short.ReadAt(make([]byte, 200), int64(len(data))-100); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("a read past the end of an object shorter than its record: %v, want corruption", err)
	}
}

// A prefetch of ranges out of order fetches each of them (near ones in
// one request), so that a read of any of them then fetches nothing.
func TestRangedPrefetchOutOfOrder(t *testing.T) {
	ctx := enginetest.Context(t)
	data := make([]byte, 1<<20)
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	if _, err := b.Create(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	var counted atomic.Int64
	r := newRangedObject(ctx, b, "obj", int64(len(data)), &counted)
	ranges := []frame.ByteRange{{Off: 500 << 10, Len: 10 << 10}, {Off: 100 << 10, Len: 10 << 10}, {Off: 505 << 10, Len: 10 << 10}}
	if err := r.Prefetch(ranges); err != nil {
		t.Fatal(err)
	}
	before := b.BytesOf("obj")
	for _, br := range ranges {
		if _, err := r.ReadAt(make([]byte, br.Len), br.Off); err != nil {
			t.Fatal(err)
		}
	}
	if more := b.BytesOf("obj") - before; more != 0 {
		t.Fatalf("reads of the ranges prefetched fetched %d bytes more", more)
	}
}
