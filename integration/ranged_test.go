package integration

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// gcsWideWorld returns a fake GCS bucket holding a wide world whose ticks
// 0..63 are compacted into one file, that file, and its tick index.
func gcsWideWorld(t testing.TB) (bucket.Bucket, index.Fragment, *frame.TickIndex) {
	t.Helper()
	gcstest.Start(t, "worlds")
	return compactedWideWorld(t, "gs://worlds/ranged")
}

// compactedWideWorld opens the bucket at url and makes it hold a wide world
// whose ticks 0..63 are compacted into one file; it returns the bucket,
// that file and its tick index.
func compactedWideWorld(t testing.TB, url string) (bucket.Bucket, index.Fragment, *frame.TickIndex) {
	t.Helper()
	b, err := bucketurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	w := enginetest.Wide(t, b, "w", 2000, 74)
	if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	f := fragmentOf(t, b, 10)
	if f.Span == nil || f.Span.From != 0 || f.Span.To != 63 {
		t.Fatalf("tick 10 is in %s, not a compacted file of ticks 0..63; the test proves nothing", f.Path)
	}
	if f.Bytes < 2<<20 {
		t.Fatalf("the compacted file holds %d bytes: too few to tell a tick's pages from the whole file", f.Bytes)
	}
	x, err := frame.ReadTickIndex(ctxT(t), b, f)
	if err != nil {
		t.Fatal(err)
	}
	return b, f, x
}

// compactedTick returns the path of tick n's particle file through mt.
func compactedTick(mt *mounted, n int64) string {
	return mt.path("w", "runs", "main", "ticks", fmt.Sprintf("%012d", n), "particle.parquet")
}

// checkTickFile checks that data is tick n's file as its tick index
// records it (the file its writer published: see
// TestMountServesCompactedTicksAsPublished).
func checkTickFile(t testing.TB, x *frame.TickIndex, n int64, data []byte) {
	t.Helper()
	e, ok := x.Entry(n)
	if !ok {
		t.Fatalf("tick %d is not in the tick index", n)
	}
	if int64(len(data)) != e.Size || sha256.Sum256(data) != e.Digest {
		t.Fatalf("tick %d: read %d bytes, not the %d bytes of its file", n, len(data), e.Size)
	}
}

// On a remote bucket, the first open of a compacted tick (and a head of
// another) reads the compacted file's footer, page index and the tick's
// pages by ranges: far fewer bytes than the file, and never the file
// whole; a glob over tables/<t>/, or any reader of every tick, gets the
// file fetched whole once.
func TestMountReadsACompactedTickByRanges(t *testing.T) {
	b, f, x := gcsWideWorld(t)
	counted := &buckettest.Counting{Bucket: b}
	mt := testMount(t, counted)

	data, err := os.ReadFile(compactedTick(mt, 10))
	if err != nil {
		t.Fatal(err)
	}
	checkTickFile(t, x, 10, data)
	one := counted.BytesOf(f.Path)
	t.Logf("tick 10 (%d bytes): %d bytes read of the compacted file's %d (%.1f%%)", len(data), one, f.Bytes, 100*float64(one)/float64(f.Bytes))
	if counted.GetsOf(f.Path) != 0 || one == 0 || one > f.Bytes/4 {
		t.Fatalf("the first open of one tick read %d bytes of its compacted file (%d whole reads) of %d; want a part far below a quarter",
			one, counted.GetsOf(f.Path), f.Bytes)
	}

	// head of a tick elsewhere in the file: its pages only.
	file, err := os.Open(compactedTick(mt, 50))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 16)
	_, err = file.Read(head)
	file.Close()
	if err != nil || !bytes.HasPrefix(head, []byte("PAR1")) {
		t.Fatalf("head of tick 50: %q, %v", head, err)
	}
	two := counted.BytesOf(f.Path)
	if counted.GetsOf(f.Path) != 0 || two-one > f.Bytes/4 {
		t.Fatalf("a head of a second tick read %d more bytes of its compacted file (%d whole reads) of %d", two-one, counted.GetsOf(f.Path), f.Bytes)
	}
	if st := mountStats(t, mt); st.CompactedFetched != two {
		t.Fatalf("the mount's stats count %d compacted bytes fetched, the bucket served %d", st.CompactedFetched, two)
	}

	// A glob over tables/<t>/ lists it first: the compacted files of its
	// ticks are read from a whole copy from then on, fetched once, even
	// one already open by ranges (after the tick it serves then).
	counted = &buckettest.Counting{Bucket: b}
	mt = testMount(t, counted)
	if data, err := os.ReadFile(compactedTick(mt, 10)); err != nil {
		t.Fatal(err)
	} else {
		checkTickFile(t, x, 10, data)
	}
	table := mt.path("w", "runs", "main", "tables", "particle")
	if _, err := os.ReadDir(table); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{11, 12} { // ticks of the pages of tick 10: a few bytes more by ranges
		data, err := os.ReadFile(filepath.Join(table, fmt.Sprintf("%012d.parquet", n)))
		if err != nil {
			t.Fatal(err)
		}
		checkTickFile(t, x, n, data)
	}
	if got := counted.BytesOf(f.Path); counted.GetsOf(f.Path) != 1 || got > f.Bytes*3/2 {
		t.Fatalf("a tick, a listing of tables/particle/, two ticks: %d bytes of their compacted file read (%d whole reads) of %d; want it fetched whole once",
			got, counted.GetsOf(f.Path), f.Bytes)
	}

	// Any other reader of tick after tick gets the file fetched whole
	// once its ranges cost a quarter of it: at most that share (and one
	// block's pages) more than the file.
	counted = &buckettest.Counting{Bucket: b}
	mt = testMount(t, counted)
	for n := int64(0); n <= 63; n++ {
		data, err := os.ReadFile(compactedTick(mt, n))
		if err != nil {
			t.Fatal(err)
		}
		checkTickFile(t, x, n, data)
	}
	all := counted.BytesOf(f.Path)
	t.Logf("ticks 0..63: %d bytes read of the compacted file's %d (%.2fx), %d whole reads", all, f.Bytes, float64(all)/float64(f.Bytes), counted.GetsOf(f.Path))
	if counted.GetsOf(f.Path) != 1 || all > f.Bytes+f.Bytes/4+4<<20 {
		t.Fatalf("reading every tick of the compacted file read %d bytes of it (%d whole reads) of %d; want it fetched whole once, at most a quarter more",
			all, counted.GetsOf(f.Path), f.Bytes)
	}
}

// A compacted file replaced on the bucket by one with a byte flipped in
// the pages of one tick (same size, another generation): that tick is
// EIO, never other bytes; a tick whose pages it does not touch still
// reads as its file, as on a local bucket. A damaged tick index is EIO.
func TestMountFailsClosedOnDamagedRangesOfGCS(t *testing.T) {
	b, f, x := gcsWideWorld(t)
	ctx := ctxT(t)
	replace := func(name string, data []byte) { buckettest.Replace(t, b, name, data) }
	good, _, err := b.Get(ctx, f.Path)
	if err != nil {
		t.Fatal(err)
	}
	const damaged, whole = 10, 50
	at := pageOfRow(t, good, "position_x", mustEntry(t, x, damaged).Row, mustEntry(t, x, whole))
	bad := bytes.Clone(good)
	bad[at] ^= 0x20
	replace(f.Path, bad)

	mt := testMount(t, b)
	if _, err := os.ReadFile(compactedTick(mt, damaged)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a tick whose pages hold a flipped byte: read %v, want EIO", err)
	}
	data, err := os.ReadFile(compactedTick(mt, whole))
	if err != nil {
		t.Fatalf("a tick whose pages are whole: %v (the damage is in another tick's pages)", err)
	}
	checkTickFile(t, x, whole, data)

	// The tick index, in a fresh mount: the lookup is EIO.
	replace(f.Path, good)
	name := index.TickIndexPath(f.Path)
	ix, _, err := b.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ix[100] ^= 0x20
	replace(name, ix)
	mt = testMount(t, b)
	if _, err := os.ReadFile(compactedTick(mt, whole)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a damaged tick index: read %v, want EIO", err)
	}
}

func mustEntry(t *testing.T, x *frame.TickIndex, n int64) frame.TickEntry {
	t.Helper()
	e, ok := x.Entry(n)
	if !ok {
		t.Fatalf("tick %d is not in the tick index", n)
	}
	return e
}

// pageOfRow returns the offset of the middle of the page of column col
// of the Parquet file data that holds row, checking that no row of spare
// is in that page.
func pageOfRow(t *testing.T, data []byte, col string, row int64, spare frame.TickEntry) int {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata()
	ncol := len(md.RowGroups[0].Columns)
	j := -1
	for i, path := range f.Schema().Columns() {
		if path[len(path)-1] == col {
			j = i
		}
	}
	if j < 0 {
		t.Fatalf("the file has no column %s", col)
	}
	base := int64(0)
	for g, rg := range md.RowGroups {
		if row >= base+rg.NumRows {
			base += rg.NumRows
			continue
		}
		pages := f.OffsetIndexes()[g*ncol+j].PageLocations
		for k, p := range pages {
			first, next := base+p.FirstRowIndex, base+rg.NumRows
			if k+1 < len(pages) {
				next = base + pages[k+1].FirstRowIndex
			}
			if row < first || row >= next {
				continue
			}
			if spare.Row < next && first < spare.Row+spare.Rows {
				t.Fatalf("tick %d has rows in the page of row %d; the test proves nothing", spare.Tick, row)
			}
			return int(p.Offset + int64(p.CompressedPageSize)/2)
		}
	}
	t.Fatalf("no page of column %s holds row %d", col, row)
	return 0
}

// slowReads models a remote bucket's reads: each Get or GetRange waits
// latency plus its bytes at bytesPerSec (one download stream).
type slowReads struct {
	bucket.Bucket
	latency     time.Duration
	bytesPerSec float64
}

// wait is the model's time for n bytes (bucket.Sleep, as the mem bucket's
// latency model waits: a call whose context ends stops waiting).
func (s *slowReads) wait(ctx context.Context, n int) error {
	return bucket.Sleep(ctx, s.latency+time.Duration(float64(n)/s.bytesPerSec*float64(time.Second)))
}

func (s *slowReads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	data, a, err := s.Bucket.Get(ctx, name)
	if werr := s.wait(ctx, len(data)); err == nil {
		err = werr
	}
	return data, a, err
}

func (s *slowReads) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	data, err := s.Bucket.GetRange(ctx, name, offset, length)
	if werr := s.wait(ctx, len(data)); err == nil {
		err = werr
	}
	return data, err
}

func (s *slowReads) Unwrap() bucket.Bucket { return s.Bucket }

// BenchmarkCompactedTickRemote measures, through a fresh mount each time,
// the open and first byte of one compacted tick (first-open) and a cold
// DuckDB glob of tables/particle/*.parquet (glob) of the wide world's
// compacted file (2.7 MB, 64 ticks of 2,000 rows), with the compacted
// bytes the mount fetched: on fake-gcs-server in process (no latency), on
// the mem bucket's GCS model (12 ms a read, whatever its size), and on a
// model of GCS reads with throughput (fake GCS + 12 ms + 100 MB/s a read).
//
//	go test ./integration -run '^$' -bench BenchmarkCompactedTickRemote -benchtime 5x
func BenchmarkCompactedTickRemote(b *testing.B) {
	for _, bk := range []struct {
		name string
		open func(b *testing.B) bucket.Bucket
	}{
		{"fake-gcs", func(b *testing.B) bucket.Bucket { bk, _, _ := gcsWideWorld(b); return bk }},
		{"mem-gcs", func(b *testing.B) bucket.Bucket {
			bk, _, _ := compactedWideWorld(b, "mem://ranged?profile=gcs")
			return bk
		}},
		{"fake-gcs+12ms+100MBps", func(b *testing.B) bucket.Bucket {
			bk, _, _ := gcsWideWorld(b)
			return &slowReads{Bucket: bk, latency: 12 * time.Millisecond, bytesPerSec: 100e6}
		}},
	} {
		b.Run(bk.name, func(b *testing.B) {
			bb := bk.open(b)
			b.Run("first-open", func(b *testing.B) {
				var fetched int64
				for b.Loop() {
					b.StopTimer()
					mt := testMount(b, bb)
					p := compactedTick(mt, 10)
					if _, err := os.Stat(p); err != nil { // the catalog and tick index load here
						b.Fatal(err)
					}
					b.StartTimer()
					f, err := os.Open(p)
					if err != nil {
						b.Fatal(err)
					}
					var one [1]byte
					_, err = f.Read(one[:])
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					fetched += mountStats(b, mt).CompactedFetched
					b.StartTimer()
				}
				b.ReportMetric(float64(fetched)/float64(b.N), "fetched-B/op")
			})
			b.Run("glob", func(b *testing.B) {
				db := duck(b)
				var fetched int64
				for b.Loop() {
					b.StopTimer()
					mt := testMount(b, bb)
					glob := mt.path("w", "runs", "main", "tables", "particle", "*.parquet")
					if _, err := os.Stat(mt.path("w", "runs", "main", "tables", "particle")); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					var rows int64
					if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", glob)).Scan(&rows); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if rows != 75*2000 {
						b.Fatalf("the glob read %d rows, not %d", rows, 75*2000)
					}
					fetched += mountStats(b, mt).CompactedFetched
					b.StartTimer()
				}
				b.ReportMetric(float64(fetched)/float64(b.N), "fetched-B/op")
			})
		})
	}
}

// A compacted file without a tick index has nothing to check ranged bytes
// by (the index's sha256 of each tick's file), so on a remote bucket its
// ticks are read from a copy checked whole against its catalog digest:
// sizing tick 10 fetches the file whole, once, and the file served is the
// tick's. A page of tick 10 damaged on the server with its CRC made to
// match (which parquet-go cannot notice) is then EIO, never other rows.
func TestMountReadsATickWithoutIndexFromAVerifiedCopy(t *testing.T) {
	b, f, x := gcsWideWorld(t)
	ctx := ctxT(t)
	replace := func(name string, data []byte) { buckettest.Replace(t, b, name, data) }
	good, _, err := b.Get(ctx, f.Path)
	if err != nil {
		t.Fatal(err)
	}
	replace(index.TickIndexPath(f.Path), nil)
	e := mustEntry(t, x, 10)

	counted := &buckettest.Counting{Bucket: b}
	mt := testMount(t, counted)
	info, err := os.Stat(compactedTick(mt, 10))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != e.Size {
		t.Fatalf("tick 10 without its tick index: %d bytes at lookup, its index said %d", info.Size(), e.Size)
	}
	if whole, got := counted.GetsOf(f.Path), counted.BytesOf(f.Path); whole != 1 || got != f.Bytes {
		t.Fatalf("sizing tick 10 read %d bytes of its compacted file in %d whole reads; want the %d bytes in one, checked whole", got, whole, f.Bytes)
	}
	data, err := os.ReadFile(compactedTick(mt, 10))
	if err != nil {
		t.Fatal(err)
	}
	checkTickFile(t, x, 10, data)

	replace(f.Path, damagedPageOf(t, good, "position_x", e.Row))
	mt = testMount(t, b)
	data, err = os.ReadFile(compactedTick(mt, 10))
	if err == nil && (int64(len(data)) != e.Size || sha256.Sum256(data) != e.Digest) {
		t.Fatalf("served %d bytes that are not tick 10's file from a damaged compacted file, with no error", len(data))
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("tick 10 of a damaged compacted file without its tick index: %v, want EIO", err)
	}
}

// damagedPageOf returns file with one byte flipped in the data of the page
// of column col that holds row, the page's CRC made to match, so that only
// a check of the whole file's digest can tell.
func damagedPageOf(t *testing.T, file []byte, col string, row int64) []byte {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	j := slices.IndexFunc(pf.Schema().Columns(), func(path []string) bool { return path[len(path)-1] == col })
	if j < 0 {
		t.Fatalf("no column %s", col)
	}
	// The row group that holds row, and row within it.
	g, groups := 0, pf.Metadata().RowGroups
	for ; g < len(groups) && row >= groups[g].NumRows; g++ {
		row -= groups[g].NumRows
	}
	pages := pf.OffsetIndexes()[g*len(groups[g].Columns)+j].PageLocations
	k, _ := slices.BinarySearchFunc(pages, row+1, func(p format.PageLocation, r int64) int { return cmp.Compare(p.FirstRowIndex, r) })
	loc := pages[k-1]
	bad := bytes.Clone(file)
	page := bad[loc.Offset : loc.Offset+int64(loc.CompressedPageSize)]
	for try := 0; try < 200; try++ {
		var h format.PageHeader
		r := (&thrift.CompactProtocol{}).NewReaderFromBytes(slices.Clone(page))
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			t.Fatal(err)
		}
		n := r.BytesRead()
		data := page[n:]
		pos := len(data)/2 + try*7
		data[pos] ^= 1
		h.CRC = int32(crc32.ChecksumIEEE(data))
		out, err := thrift.Marshal(&thrift.CompactProtocol{}, &h)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == n { // the header keeps its length
			copy(page, out)
			return bad
		}
		data[pos] ^= 1
	}
	t.Fatal("no page header of the same length with the CRC rewritten")
	return nil
}
