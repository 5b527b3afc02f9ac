package fs

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Ranged reads of a compacted file. On a remote bucket the first open of a
// compacted tick reads, by ranges (bucket.Bucket.GetRange), the file's
// tail (its footer and page index) and the pages of the tick's rows, not
// the whole file: a reader of one tick of a long compacted history pays
// for that tick. The pieces are kept in memory, a few per file, not in the
// disk cache: a piece cannot be checked by itself (only the tick file
// rebuilt from it is, against its tick index), so it has no place among
// the cache's verified copies, and it serves the neighbouring ticks of the
// same pages within moments, for which memory is enough. Integrity is the
// tick file's: its bytes must be the size and sha256 its tick index
// records, and the index names the compacted file's sha256 the catalog
// records, so a byte that differs in a piece, whichever object generation
// it came from, is EIO (TickFileMismatchError or a decoding error), never
// other rows. A reader of many ticks reads the file from a whole verified
// copy in the cache instead (cache.Disk.VerifiedPath: one request, and
// later ticks cost none): a glob over tables/<t>/, which starts by listing
// it (compactedFiles.list), from its first tick; any other reader once the
// ranges have cost wholeAfter of the file or served wholeAfterTicks of its
// ticks (see Mount.rebuilt). A compacted file without a tick index is
// never read by ranges: nothing would check its pieces, so its ticks are
// read from the whole copy, checked against its catalog digest.

// rangedFetch is the least a read outside the pieces kept fetches: one
// request costs much more than a few KiB more of it.
const rangedFetch = 64 << 10

// rangedTail is what the first read of a file's end fetches: the footer
// and page index of most files, in one request (a larger page index is
// fetched when read).
const rangedTail = 64 << 10

// rangedGap is the widest gap between two ranges a prefetch fetches in one
// request rather than two.
const rangedGap = 32 << 10

// maxRangedBytes bounds the bytes of the pieces kept per file, the least
// recently used dropped first.
const maxRangedBytes = 4 << 20

// rangedParallel bounds the requests one prefetch makes at once.
const rangedParallel = 8

// rangedObject is an object of a remote bucket read by ranges, as an
// io.ReaderAt and a frame.Prefetcher, keeping what it fetched.
type rangedObject struct {
	// Immutable.
	ctx     context.Context // the bucket calls' (the opener's, never canceled)
	b       bucket.Bucket
	name    string
	size    int64
	counted *atomic.Int64 // the mount's count of the bytes fetched, of all files

	// fetched counts the bytes read from the bucket (added to counted
	// too); ticks, the tick files rebuilt from the object (Mount.rebuilt).
	fetched, ticks atomic.Int64

	mu struct {
		sync.Mutex
		use    int64
		pieces []*piece // INVARIANT: their data sum to bytes
		bytes  int64    // INVARIANT: at most maxRangedBytes after every fetch but of one piece
	}
}

type piece struct {
	off  int64
	data []byte
	used int64
}

var (
	_ io.ReaderAt      = (*rangedObject)(nil)
	_ frame.Prefetcher = (*rangedObject)(nil)
)

func newRangedObject(ctx context.Context, b bucket.Bucket, name string, size int64, counted *atomic.Int64) *rangedObject {
	return &rangedObject{ctx: ctx, b: b, name: name, size: size, counted: counted}
}

// Fetched returns the bytes read from the bucket so far.
func (r *rangedObject) Fetched() int64 { return r.fetched.Load() }

// ReadAt reads from the pieces kept, fetching what they lack: at least
// rangedFetch bytes, and rangedTail at the file's end.
func (r *rangedObject) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: read at offset %d", r.name, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	if n, ok := r.copyKept(p, off, end); ok {
		return r.done(n, len(p))
	}
	lo, hi := off, min(r.size, max(end, off+rangedFetch))
	if hi == r.size {
		lo = min(off, max(0, r.size-rangedTail))
	}
	if err := r.fetch(lo, hi); err != nil {
		return 0, err
	}
	if n, ok := r.copyKept(p, off, end); ok {
		return r.done(n, len(p))
	}
	// Dropped at once by another fetch: read this one alone.
	data, err := r.get(off, end)
	if err != nil {
		return 0, err
	}
	return r.done(copy(p, data), len(p))
}

func (r *rangedObject) done(n, want int) (int, error) {
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// copyKept copies bytes off..end into p from the pieces kept, if they
// hold them all (one piece or several that meet).
func (r *rangedObject) copyKept(p []byte, off, end int64) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for pos := off; pos < end; {
		pc := r.pieceAt(pos)
		if pc == nil {
			return 0, false
		}
		r.mu.use++
		pc.used = r.mu.use
		k := copy(p[pos-off:], pc.data[pos-pc.off:min(end, pc.off+int64(len(pc.data)))-pc.off])
		n += k
		pos += int64(k)
	}
	return n, true
}

// pieceAt returns the piece that holds byte pos, or nil. Called with r.mu
// held.
func (r *rangedObject) pieceAt(pos int64) *piece {
	for _, pc := range r.mu.pieces {
		if pc.off <= pos && pos < pc.off+int64(len(pc.data)) {
			return pc
		}
	}
	return nil
}

// missing returns the parts of bytes lo..hi no piece holds.
func (r *rangedObject) missing(lo, hi int64) [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]int64
	for pos := lo; pos < hi; {
		if pc := r.pieceAt(pos); pc != nil {
			pos = pc.off + int64(len(pc.data))
			continue
		}
		next := hi // the start of the next piece kept
		for _, pc := range r.mu.pieces {
			if pc.off > pos && pc.off < next {
				next = pc.off
			}
		}
		out = append(out, [2]int64{pos, next})
		pos = next
	}
	return out
}

// Prefetch fetches the parts of the ranges not kept, those less than
// rangedGap apart in one request, rangedParallel requests at a time.
func (r *rangedObject) Prefetch(ranges []frame.ByteRange) error {
	var want [][2]int64
	ranges = slices.SortedFunc(slices.Values(ranges), func(a, b frame.ByteRange) int { return cmp.Compare(a.Off, b.Off) })
	for _, br := range ranges { // in order, so that a range meets only the one before it
		for _, m := range r.missing(max(0, br.Off), min(r.size, br.Off+br.Len)) {
			if k := len(want) - 1; k >= 0 && m[0]-want[k][1] < rangedGap {
				want[k][1] = max(want[k][1], m[1])
				continue
			}
			want = append(want, m)
		}
	}
	var g errgroup.Group
	g.SetLimit(rangedParallel)
	for _, w := range want {
		g.Go(func() error { return r.fetch(w[0], w[1]) })
	}
	return g.Wait()
}

// get reads bytes lo..hi of the object, which must all be there: the
// object is its catalog record's size, checked when it was opened, so a
// short answer is a damaged or replaced object.
func (r *rangedObject) get(lo, hi int64) ([]byte, error) {
	data, err := r.b.GetRange(r.ctx, r.name, lo, hi-lo)
	if err != nil {
		return nil, fmt.Errorf("reading %s bytes %d..%d: %w", r.name, lo, hi, err)
	}
	r.fetched.Add(int64(len(data)))
	r.counted.Add(int64(len(data)))
	if int64(len(data)) != hi-lo {
		return nil, fmt.Errorf("%s: bytes %d..%d: the bucket returned %d bytes of %d: %w", r.name, lo, hi, len(data), hi-lo, index.ErrCorrupt)
	}
	return data, nil
}

// fetch reads bytes lo..hi and keeps them, dropping the pieces used least
// recently past maxRangedBytes.
func (r *rangedObject) fetch(lo, hi int64) error {
	data, err := r.get(lo, hi)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.use++
	r.mu.pieces = append(r.mu.pieces, &piece{off: lo, data: data, used: r.mu.use})
	r.mu.bytes += int64(len(data))
	for r.mu.bytes > maxRangedBytes && len(r.mu.pieces) > 1 {
		i := 0
		for k, pc := range r.mu.pieces {
			if pc.used < r.mu.pieces[i].used {
				i = k
			}
		}
		r.mu.bytes -= int64(len(r.mu.pieces[i].data))
		r.mu.pieces = slices.Delete(r.mu.pieces, i, i+1)
	}
	return nil
}
