package frame

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/index"
)

// CompactedFile is a compacted file opened to rebuild its ticks' files
// (see TickFile) many times: its footer and page index are read once, and
// once a second tick of a block (blockRows rows of whole ticks) is asked
// for, the block's rows are decoded together and kept for the neighbouring
// ticks (a page holds the rows of many ticks, so a reader of each tick in
// turn, such as a glob over tables/<t>/, would otherwise decompress each
// page once per tick); the first tick of a block asked for is decoded
// alone, so that reading one tick here and there costs no more than its
// own rows. A reader that sweeps the file (Sweep: a glob over
// tables/<t>/ reads every tick in order) has larger blocks (sweepRows, a
// few pages of each column) decoded at once, the first tick of each
// included, so that each page is decompressed about once for all the
// ticks it holds (only for ticks asked for near the one before: see
// sweepGap). A file without a tick index (written before tick indexes)
// is opened too: its ticks' rows are found from its tick column, and each
// tick's entry is derived the first time it is asked for (Entry). It is
// safe for concurrent use.
type CompactedFile struct {
	t       *Table
	src     io.ReaderAt
	file    *parquet.File
	x       *TickIndex   // for a file without one: its ticks' rows alone (Version 0, no sizes)
	decoded atomic.Int64 // blocks decoded so far
	swept   atomic.Bool  // Sweep was called: blocks of sweepRows, none read alone

	mu struct {
		sync.Mutex
		blocks *simplelru.LRU[blockID, *tickBlock] // at most keptBlocks
		// asked: blocks one tick of which was decoded alone (not kept:
		// at most maxAsked, forgotten all at once past it).
		asked map[int]bool
		// derived: the entries derived so far of a file without a tick
		// index, by tick (about 100 bytes each, one per tick of the file).
		derived map[int64]TickEntry
		// last: the index of the tick asked for last (asks: whether one
		// was), to tell a sweep from reads here and there.
		last int
		asks bool
	}
}

// blockRows is the rows of one decoded block (fewer where a tick would be
// cut: a block holds the ticks whose first row falls in it); keptBlocks,
// how many decoded blocks a CompactedFile keeps (about 1 MiB each for
// ticks of eight 8-byte columns).
const (
	blockRows  = 2048
	keptBlocks = 2
	maxAsked   = 1024
)

// sweepRows is the rows of one decoded block of a swept file: two pages
// of an 8-byte column (pageBytes), four of a 4-byte one, so that a page
// cut off at a block's end is decompressed at most twice (about 2 MiB
// decoded for ticks of eight 8-byte columns and their stamps).
const sweepRows = 2 * pageBytes / 8

// sweepGap is how far (in ticks of the index) a tick asked for may be
// from the one asked for before for the two to be read in a sweep (a
// glob's readers, and the mount's read-ahead, ask for neighbours in
// about their order): only then is a block of sweepRows decoded for it.
// A reader of a listed table that asks for ticks far apart (cp -r, in
// inode order) has each decoded as an unswept file does.
const sweepGap = 8

// blockID names a decoded block: its size and its number among the
// blocks of that size.
type blockID struct{ rows, n int64 }

// tickBlock is the decoded rows of the ticks x.Ticks[lo:hi].
type tickBlock struct {
	once   sync.Once
	lo, hi int   // ticks of the index
	row    int64 // the first row
	frame  *Frame
	stamps []Stamp
	err    error
}

// OpenCompactedFile opens the compacted file src (size bytes) of t, whose
// tick index (ReadTickIndex) is x; x nil: the file has none, and its
// tick column is read now to find each tick's rows. A src that is a
// Prefetcher is told the byte ranges of the pages each decoding reads
// before it reads them.
func OpenCompactedFile(t *Table, src io.ReaderAt, size int64, x *TickIndex) (*CompactedFile, error) {
	file, err := openCompacted(t, src, size)
	if err != nil {
		return nil, err
	}
	if x == nil {
		runs, err := tickRunsOf(t, file, src)
		if err != nil {
			return nil, err
		}
		x = &TickIndex{Rows: file.NumRows(), Ticks: runs}
	}
	if file.NumRows() != x.Rows {
		return nil, fmt.Errorf("table %s: the compacted file has %d rows, its tick index %d: %w", t.Name, file.NumRows(), x.Rows, index.ErrCorrupt)
	}
	c := &CompactedFile{t: t, src: src, file: file, x: x}
	c.mu.blocks, _ = simplelru.NewLRU[blockID, *tickBlock](keptBlocks, nil)
	c.mu.asked, c.mu.derived = map[int]bool{}, map[int64]TickEntry{}
	return c, nil
}

// Sweep marks the file as read tick after tick from now on (a glob over
// its table's files): each block of ticks decoded is larger and decoded
// whole from its first tick asked for (see CompactedFile).
func (c *CompactedFile) Sweep() { c.swept.Store(true) }

// Following returns the entries of the tick index after tick n (at most
// max): the ticks a sweep reads next. Nil for a file without a tick
// index, whose entries are derived one by one (Entry).
func (c *CompactedFile) Following(n int64, max int) []TickEntry {
	if !c.Indexed() {
		return nil
	}
	i, ok := slices.BinarySearchFunc(c.x.Ticks, n, func(a TickEntry, n int64) int { return cmp.Compare(a.Tick, n) })
	if ok {
		i++
	}
	return slices.Clone(c.x.Ticks[i:min(len(c.x.Ticks), i+max)])
}

// Indexed reports whether the file was opened with its tick index.
func (c *CompactedFile) Indexed() bool { return c.x.Version > 0 }

// Entry returns tick n's entry (false: the file holds no row of n): its
// tick index's, or, for a file without one, derived as compaction
// measures a tick for the index it writes (the canonical file of the
// tick's rows, its footer recording its CSV size), once, from the block
// of ticks that holds it (see TickFile); file is then that tick file (nil
// when the entry was known).
func (c *CompactedFile) Entry(n int64) (e TickEntry, file []byte, ok bool, err error) {
	if c.Indexed() {
		e, ok = c.x.Entry(n)
		return e, nil, ok, nil
	}
	c.mu.Lock()
	e, ok = c.mu.derived[n]
	c.mu.Unlock()
	if ok {
		return e, nil, true, nil
	}
	i, ok := slices.BinarySearchFunc(c.x.Ticks, n, func(a TickEntry, n int64) int { return cmp.Compare(a.Tick, n) })
	if !ok {
		return TickEntry{}, nil, false, nil
	}
	e = c.x.Ticks[i]
	err = c.rows(i, func(f *Frame, stamps []Stamp) error {
		file, err = e.measure(f, stamps, true)
		return err
	})
	if err != nil {
		return TickEntry{}, nil, false, fmt.Errorf("table %s tick %d: %w", c.t.Name, n, err)
	}
	c.mu.Lock()
	c.mu.derived[n] = e
	c.mu.Unlock()
	return e, file, true, nil
}

// TickFile returns the canonical file of tick e.Tick (an entry of the
// file's tick index, or one Entry derived), as the package function
// TickFile does, decoding the block of ticks that holds it unless it is
// kept.
func (c *CompactedFile) TickFile(e TickEntry) ([]byte, error) {
	i, ok := slices.BinarySearchFunc(c.x.Ticks, e.Tick, func(a TickEntry, n int64) int { return cmp.Compare(a.Tick, n) })
	if ok && c.Indexed() {
		ok = c.x.Ticks[i] == e
	} else if ok {
		ok = c.x.Ticks[i].Row == e.Row && c.x.Ticks[i].Rows == e.Rows
	}
	if !ok {
		return nil, fmt.Errorf("table %s: tick %d is not in the compacted file's tick index", c.t.Name, e.Tick)
	}
	var data []byte
	err := c.rows(i, func(f *Frame, stamps []Stamp) error {
		var err error
		data, _, err = Encode(f, func(i int) Stamp { return stamps[i] }, e.csvMode(), e.CSVSize)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("table %s tick %d: %w", c.t.Name, e.Tick, err)
	}
	if int64(len(data)) != e.Size || sha256.Sum256(data) != e.Digest {
		return nil, fmt.Errorf("table %s: %w", c.t.Name, &TickFileMismatchError{Tick: e.Tick, Size: int64(len(data)), Want: e.Size})
	}
	return data, nil
}

// rows calls fn with the rows of tick i of the index and their stamps
// (fn must not keep them): from the block of ticks that holds it, decoded
// unless it is kept, or read alone (see block).
func (c *CompactedFile) rows(i int, fn func(f *Frame, stamps []Stamp) error) error {
	e := c.x.Ticks[i]
	b := c.block(i)
	if b == nil {
		if err := c.prefetch(e.Row, e.Rows); err != nil {
			return err
		}
		n := 0
		err := ScanTicks(c.t, c.file, e.Row, e.Rows, func(tick, row int64, f *Frame, stamps []Stamp) error {
			n++
			if tick != e.Tick || row != e.Row || int64(f.Len()) != e.Rows {
				return fmt.Errorf("rows %d..%d hold tick %d, the tick index says tick %d: %w", e.Row, e.Row+e.Rows, tick, e.Tick, index.ErrCorrupt)
			}
			return fn(f, stamps)
		})
		if err == nil && n != 1 {
			err = fmt.Errorf("rows %d..%d hold %d ticks, the tick index says one: %w", e.Row, e.Row+e.Rows, n, index.ErrCorrupt)
		}
		return err
	}
	b.once.Do(func() {
		c.decoded.Add(1)
		last := c.x.Ticks[b.hi-1]
		if b.err = c.prefetch(b.row, last.Row+last.Rows-b.row); b.err == nil {
			b.frame, b.stamps, b.err = c.decode(b)
		}
	})
	if b.err != nil {
		return b.err
	}
	from, to := int(e.Row-b.row), int(e.Row-b.row+e.Rows)
	stamps := b.stamps[from:to]
	for _, s := range stamps {
		if s.Tick != e.Tick {
			return fmt.Errorf("rows %d..%d hold tick %d, the tick index says tick %d: %w", e.Row, e.Row+e.Rows, s.Tick, e.Tick, index.ErrCorrupt)
		}
	}
	return fn(b.frame.Slice(from, to), stamps)
}

// BlocksDecoded returns how many blocks of rows the file has decoded.
func (c *CompactedFile) BlocksDecoded() int64 { return c.decoded.Load() }

// block returns the block of tick i of the index (kept, or new and not
// yet decoded), dropping the least recently used past keptBlocks; nil the
// first time a tick of the block is asked for (decoded alone). In a
// swept file a tick near the one asked for before (sweepGap) has a block
// of sweepRows, decoded at once.
func (c *CompactedFile) block(i int) *tickBlock {
	row := c.x.Ticks[i].Row
	c.mu.Lock()
	defer c.mu.Unlock()
	near := c.mu.asks && i-c.mu.last <= sweepGap && c.mu.last-i <= sweepGap
	c.mu.last, c.mu.asks = i, true
	if c.swept.Load() {
		id := blockID{sweepRows, row / sweepRows}
		if b, ok := c.mu.blocks.Get(id); ok {
			return b
		}
		if near {
			return c.newBlock(id)
		}
	}
	size := int64(blockRows)
	id := blockID{size, row / size}
	if b, ok := c.mu.blocks.Get(id); ok {
		return b
	}
	if !c.mu.asked[int(id.n)] {
		if len(c.mu.asked) >= maxAsked {
			clear(c.mu.asked)
		}
		c.mu.asked[int(id.n)] = true
		return nil
	}
	delete(c.mu.asked, int(id.n))
	return c.newBlock(id)
}

// newBlock adds block id, not yet decoded, to those kept (dropping the
// least recently used past keptBlocks). Called with c.mu held.
func (c *CompactedFile) newBlock(id blockID) *tickBlock {
	// The ticks whose first row falls in block id.
	start := id.n * id.rows
	lo, _ := slices.BinarySearchFunc(c.x.Ticks, start, func(a TickEntry, row int64) int { return cmp.Compare(a.Row, row) })
	hi, _ := slices.BinarySearchFunc(c.x.Ticks, start+id.rows, func(a TickEntry, row int64) int { return cmp.Compare(a.Row, row) })
	b := &tickBlock{lo: lo, hi: hi, row: c.x.Ticks[lo].Row}
	c.mu.blocks.Add(id, b)
	return b
}

// decode reads the rows of b's ticks, checking them against the index.
func (c *CompactedFile) decode(b *tickBlock) (*Frame, []Stamp, error) {
	ticks := c.x.Ticks[b.lo:b.hi]
	last := ticks[len(ticks)-1]
	all, stamps := NewFrame(c.t), []Stamp(nil)
	next := 0
	err := ScanTicks(c.t, c.file, b.row, last.Row+last.Rows-b.row, func(tick, row int64, f *Frame, s []Stamp) error {
		if next >= len(ticks) || tick != ticks[next].Tick || row != ticks[next].Row || int64(f.Len()) != ticks[next].Rows {
			return fmt.Errorf("rows from %d hold tick %d, not what the tick index says: %w", row, tick, index.ErrCorrupt)
		}
		next++
		all.AppendFrame(f)
		stamps = append(stamps, s...)
		return nil
	})
	if err == nil && next != len(ticks) {
		err = fmt.Errorf("rows %d..%d hold %d ticks, the tick index says %d: %w", b.row, last.Row+last.Rows, next, len(ticks), index.ErrCorrupt)
	}
	return all, stamps, err
}

// Prefetcher is a source of a compacted file whose reads are costly one by
// one (an object of a remote bucket, read by ranges): CompactedFile calls
// Prefetch with every byte range a decoding will read, at once, before it
// reads them, so that the source fetches them together. Prefetch MUST
// leave the bytes it returns nil for readable by ReadAt; it may fetch more
// than asked, and a read outside the ranges MUST still succeed (fetched
// then).
type Prefetcher interface {
	io.ReaderAt
	Prefetch(ranges []ByteRange) error
}

// ByteRange is Len bytes of a file from offset Off.
type ByteRange struct{ Off, Len int64 }

// prefetchSlack is how far past a page a decoding may read: the buffer a
// page reader fills from its column chunk (parquet-go's default
// ReadBufferSize, which openCompacted keeps).
const prefetchSlack = 4096

// prefetch tells a Prefetcher source the pages that the decoding of rows
// from..from+n reads (see pageRanges).
func (c *CompactedFile) prefetch(from, n int64) error {
	p, ok := c.src.(Prefetcher)
	if !ok {
		return nil
	}
	ranges := pageRanges(c.file, from, n)
	if len(ranges) == 0 {
		return nil
	}
	return p.Prefetch(ranges)
}

// pageRanges returns the byte ranges of file that hold rows from..from+n
// by its offset index: in every column chunk of the row groups that hold
// them, the dictionary page and the data pages of those rows (each with
// prefetchSlack bytes after it, within the chunk), adjacent ranges
// merged; nil without an offset index (every read is then fetched as it
// comes).
func pageRanges(file *parquet.File, from, n int64) []ByteRange {
	md, oi := file.Metadata(), file.OffsetIndexes()
	if len(md.RowGroups) == 0 || len(oi) != len(md.RowGroups)*len(md.RowGroups[0].Columns) {
		return nil
	}
	var out []ByteRange
	add := func(lo, hi, end int64) {
		out = append(out, ByteRange{lo, min(hi+prefetchSlack, end) - lo})
	}
	to, base := from+n, int64(0)
	for g, rg := range md.RowGroups {
		lo, hi := base, base+rg.NumRows
		base = hi
		if hi <= from || lo >= to {
			continue
		}
		for j, cc := range rg.Columns {
			pages := oi[g*len(rg.Columns)+j].PageLocations
			if len(pages) == 0 {
				return nil
			}
			start := cc.MetaData.DataPageOffset
			if d := cc.MetaData.DictionaryPageOffset; d > 0 && d < start {
				start = d
			}
			end := start + cc.MetaData.TotalCompressedSize
			if start < pages[0].Offset {
				// The dictionary page (frame's encoder writes none today; a
				// read the ranges miss is still served, fetched then).
				add(start, pages[0].Offset, end)
			}
			for k, p := range pages {
				first, next := lo+p.FirstRowIndex, hi
				if k+1 < len(pages) {
					next = lo + pages[k+1].FirstRowIndex
				}
				if next <= from || first >= to {
					continue
				}
				add(p.Offset, p.Offset+int64(p.CompressedPageSize), end)
			}
		}
	}
	slices.SortFunc(out, func(a, b ByteRange) int { return cmp.Compare(a.Off, b.Off) })
	merged := out[:0]
	for _, r := range out {
		if k := len(merged) - 1; k >= 0 && merged[k].Off+merged[k].Len >= r.Off {
			merged[k].Len = max(merged[k].Off+merged[k].Len, r.Off+r.Len) - merged[k].Off
			continue
		}
		merged = append(merged, r)
	}
	return merged
}
