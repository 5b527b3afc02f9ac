package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// canonical is a compacted tick's Parquet file as the writer published it
// (frame.TickFile): served when the compacted file holding the tick's
// rows has a tick index, which gives the file's size at lookup, without a
// row read. The bytes are rebuilt from the tick's rows when opened: a
// small file in memory from the rows the mount keeps decoded (see
// compactedFile), a larger one into the cache under its sha256, so every
// plan of the tick (a later, larger compaction included) finds the same
// file.
type canonical struct {
	world  string
	table  *engine.Table
	holder *index.Fragment // the compacted file of the tick's rows; nil: it has none
	entry  frame.TickEntry
}

func (c *canonical) size() int64 { return c.entry.Size }

// key names the file in the cache: its content's sha256.
func (c *canonical) key() string {
	return "ticks/" + hex.EncodeToString(c.entry.Digest[:]) + ".parquet"
}

// canonicalOf returns the canonical form of tick t's table tf when every
// fragment is a compacted file; nil when the file is derived from the
// tick's rows (see rowSet): a split tick. The one holding the tick (if
// any) sizes it from its tick index, or, written before tick indexes,
// from the tick's file derived from its rows there (see derivedEntry). A
// damaged tick index is an error (EIO), never a fallback.
func (m *Mount) canonicalOf(ctx context.Context, t tickRef, tf index.TableFragments) (*canonical, error) {
	if len(tf.Fragments) == 0 {
		return nil, nil
	}
	n := t.Tick.Tick
	var holder *index.Fragment
	for i := range tf.Fragments {
		f := &tf.Fragments[i]
		if f.Span == nil {
			return nil, nil
		}
		if f.Span.From <= n && n <= f.Span.To {
			holder = f
		}
	}
	table, err := m.table(ctx, t.World, tf.Table)
	if err != nil {
		return nil, err
	}
	if holder != nil {
		x, err := m.tickIndex(ctx, *holder)
		var e frame.TickEntry
		ok := false
		switch {
		case errors.Is(err, frame.ErrNoTickIndex):
			e, ok, err = m.derivedEntry(ctx, t.World, table, *holder, n)
		case err == nil:
			e, ok = x.Entry(n)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			return &canonical{world: t.World, table: table, holder: holder, entry: e}, nil
		}
	}
	// No compacted file holds a row of the tick: its file is the empty one.
	data, err := frame.EmptyTickFile(table)
	if err != nil {
		return nil, err
	}
	return &canonical{world: t.World, table: table, entry: frame.TickEntry{Tick: n, Size: int64(len(data)), Digest: sha256.Sum256(data)}}, nil
}

// derivedEntry returns the entry of tick n in the compacted file f of
// table t, a file without a tick index (false: f holds no row of n): the
// tick's canonical file derived from its rows there (as compaction
// measures it for an index: frame.CompactedFile.Entry) through the
// file the mount keeps open for rebuilding its ticks (compactedFile), so
// that a listing of many of its ticks reads its footer and page index
// once and decodes each block of neighbouring ticks once. The file, if it
// is small, is kept for the open that follows (rebuiltFiles).
func (m *Mount) derivedEntry(ctx context.Context, world string, t *engine.Table, f index.Fragment, n int64) (frame.TickEntry, bool, error) {
	whole := m.compactedFiles.swept(world, t.Name)
	o, release, err := m.compactedFile(ctx, t, f, whole)
	if err != nil {
		return frame.TickEntry{}, false, err
	}
	defer release()
	e, data, ok, err := o.cf.Entry(n)
	if err != nil {
		return frame.TickEntry{}, false, fmt.Errorf("%s: %w", f.Path, err)
	}
	if data != nil {
		m.stats.gathered.Add(1)
		if int64(len(data)) <= maxInMemory {
			m.rebuiltFiles.put(e.Digest, data)
		}
		m.compactedUsed(o, f, whole)
	}
	return e, ok, nil
}

// compactedUsed notes that one tick of o, the compacted file f opened
// (whole: as listed), was read: a file read by ranges is fetched whole
// once it was listed or its ticks' ranges cost enough (see wholeAfter).
func (m *Mount) compactedUsed(o *openCompactedFile, f index.Fragment, whole bool) {
	if o.ranged != nil && (whole || o.ranged.ticks.Add(1) >= wholeAfterTicks || o.ranged.Fetched() > int64(float64(f.Bytes)*wholeAfter)) {
		// Listed since it was opened, or read enough by ranges.
		m.compactedFiles.fetchWhole(o)
	}
}

// maxInMemory is the largest compacted tick's file served from memory:
// rebuilt on each open from the rows the mount keeps decoded (see
// compactedFile), with no file of its own in the cache. A larger one is
// rebuilt into the cache under its sha256.
const maxInMemory = 1 << 20

// rebuilt returns c's bytes: the tick's rows read from its compacted file
// (on a local bucket the bucket's own file, else by ranges or a verified
// copy in the cache: see compactedFile) and encoded again, checked
// against the tick index.
// Files up to maxInMemory are kept (rebuiltFiles) for the next open: a
// reader such as DuckDB opens a file twice, for its schema and its rows.
func (m *Mount) rebuilt(ctx context.Context, c *canonical) ([]byte, error) {
	if c.holder == nil {
		return frame.EmptyTickFile(c.table)
	}
	return m.rebuild(ctx, c, m.opened(c))
}

// opened notes that c, a compacted tick's file, is being opened: in a
// listed table, for the read-ahead (see readAhead). It returns whether
// the table was listed.
func (m *Mount) opened(c *canonical) (whole bool) {
	whole = m.compactedFiles.swept(c.world, c.table.Name)
	if whole && c.holder != nil && c.entry.Size <= maxInMemory {
		m.readAhead(c)
	}
	return whole
}

// rebuild returns c's bytes (see rebuilt) kept, or rebuilt once however
// many want them at once (whole: c's table was listed).
func (m *Mount) rebuild(ctx context.Context, c *canonical, whole bool) ([]byte, error) {
	r := &m.rebuiltFiles
	if data, ok := r.get(c.entry.Digest); ok {
		return data, nil
	}
	v, err, _ := r.group.Do(string(c.entry.Digest[:]), func() (any, error) {
		m.stats.rebuilt.Add(1)
		o, release, err := m.compactedFile(ctx, c.table, *c.holder, whole)
		if err != nil {
			return nil, err
		}
		defer release()
		data, err := o.cf.TickFile(c.entry)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.holder.Path, err)
		}
		m.compactedUsed(o, *c.holder, whole)
		if int64(len(data)) <= maxInMemory {
			r.put(c.entry.Digest, data)
		}
		return data, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// maxRebuiltBytes bounds the bytes of the rebuilt files a mount keeps in
// memory.
const maxRebuiltBytes = 32 << 20

// rebuiltFiles keeps the compacted ticks' files rebuilt last, by sha256,
// the least recently used dropped first past maxRebuiltBytes; each is
// rebuilt once however many opens want it at once.
type rebuiltFiles struct {
	group singleflight.Group
	mu    sync.Mutex
	files *simplelru.LRU[[sha256.Size]byte, []byte] // nil until the first put
	bytes int64                                     // INVARIANT: the sum of the data in files
}

func (r *rebuiltFiles) get(digest [sha256.Size]byte) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files == nil {
		return nil, false
	}
	return r.files.Get(digest)
}

func (r *rebuiltFiles) put(digest [sha256.Size]byte, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files == nil {
		// Bounded by bytes, not by count.
		r.files, _ = simplelru.NewLRU(math.MaxInt, func(_ [sha256.Size]byte, data []byte) { r.bytes -= int64(len(data)) })
	}
	if r.files.Contains(digest) {
		return
	}
	r.files.Add(digest, data)
	r.bytes += int64(len(data))
	for r.bytes > maxRebuiltBytes {
		r.files.RemoveOldest()
	}
}

// aheadTicks is how many ticks of a compacted file the mount rebuilds
// ahead of a reader of a listed table (a glob over tables/<t>/, which
// opens tick after tick), aheadBytes the most bytes of their files: the
// reader's next opens find them kept (rebuiltFiles), rebuilt meanwhile
// on another core while it reads the files before.
const (
	aheadTicks = 64
	aheadBytes = 8 << 20
)

// aheadFiles is the read-ahead of compacted ticks' files (see
// Mount.readAhead): at most one worker per compacted file, and how far
// each went.
type aheadFiles struct {
	mu   sync.Mutex
	busy map[string]bool  // compacted files a worker rebuilds ticks of
	to   map[string]int64 // by compacted file, the last tick rebuilt ahead (or being)
	last map[string]int64 // by compacted file, the tick opened last
	// ctx ends when the mount closes (stop): the workers stop, none
	// starts, and Close waits for them (workers).
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	workers sync.WaitGroup
}

// stop ends the read-ahead: its workers are told to stop and waited for,
// and none starts after.
func (a *aheadFiles) stop() {
	a.mu.Lock()
	a.stopped = true
	if a.cancel != nil {
		a.cancel()
	}
	a.mu.Unlock()
	a.workers.Wait()
}

// aheadGap is how far apart (in ticks) two ticks opened one after the
// other may be for the reader to be reading tick after tick (a glob's
// readers open neighbours in about their order), and so for the ticks
// after them to be rebuilt ahead: a reader of ticks far apart (cp -r
// opens them in inode order) gets none.
const aheadGap = 8

// readAhead starts rebuilding the ticks' files that follow c in its
// compacted file into rebuiltFiles, in the background, if the tick opened
// before c in that file was near it (aheadGap), unless a worker does so
// for that file already or the ticks rebuilt ahead reach far enough past
// c. Each is rebuilt once (rebuild: an open that wants one
// being rebuilt waits for it) and checked as any other; a failure is the
// open's to meet and report, if one wants the tick.
func (m *Mount) readAhead(c *canonical) {
	a, path := &m.ahead, c.holder.Path
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	if a.ctx == nil {
		a.ctx, a.cancel = context.WithCancel(context.Background())
	}
	if a.busy == nil || len(a.last) >= maxWholeWanted {
		a.busy, a.to, a.last = map[string]bool{}, map[string]int64{}, map[string]int64{}
	}
	n := c.entry.Tick
	last, opened := a.last[path]
	a.last[path] = n
	to, seen := a.to[path]
	if !opened || n-last > aheadGap || last-n > aheadGap || a.busy[path] || seen && to >= n+aheadTicks/2 {
		a.mu.Unlock()
		return
	}
	a.busy[path] = true
	from := c.entry.Tick
	if seen && to > from {
		from = to
	}
	a.workers.Add(1)
	ctx, cancel := context.WithTimeout(a.ctx, m.opts.ReadTimeout)
	a.mu.Unlock()
	go func() {
		defer a.workers.Done()
		defer cancel()
		defer func() {
			a.mu.Lock()
			delete(a.busy, path)
			a.mu.Unlock()
		}()
		o, release, err := m.compactedFile(ctx, c.table, *c.holder, true)
		if err != nil {
			return
		}
		next := o.cf.Following(from, aheadTicks)
		release()
		// The ticks within aheadBytes, each small enough to keep.
		n, bytes := 0, int64(0)
		for _, e := range next {
			if e.Size > maxInMemory || bytes+e.Size > aheadBytes {
				break
			}
			n, bytes = n+1, bytes+e.Size
		}
		if next = next[:n]; len(next) == 0 {
			return
		}
		a.mu.Lock()
		a.to[path] = max(a.to[path], next[len(next)-1].Tick)
		a.mu.Unlock()
		for _, e := range next {
			if ctx.Err() != nil {
				return
			}
			m.stats.rebuiltAhead.Add(1)
			if _, err := m.rebuild(ctx, &canonical{world: c.world, table: c.table, holder: c.holder, entry: e}, true); err != nil {
				return
			}
		}
	}()
}

// maxCompactedFiles bounds the compacted files a mount keeps open for
// rebuilding their ticks (each with its footer, page index and at most a
// few blocks of decoded rows: see frame.CompactedFile).
const maxCompactedFiles = 16

// minRanged is the smallest compacted file of a remote bucket read by
// ranges (see rangedObject): a smaller one is fetched whole into the
// cache, as one request costs less than the few ranged reads of a tick.
const minRanged = 1 << 20

// wholeAfter is the share of a compacted file that the ranged reads of
// its ticks may cost, and wholeAfterTicks how many of its ticks may be
// rebuilt from them, before the mount fetches it whole into the cache: a
// reader asking for tick after tick of it then pays at most that share
// more than the file, and at most that many ticks' requests (on GCS two
// round trips each, tens of ms, where the whole download of a file of
// tens of MB takes a few hundred) before its ticks cost no request.
const (
	wholeAfter      = 0.25
	wholeAfterTicks = 8
)

// maxWholeWanted bounds the compacted files remembered as wanted whole,
// and the tables as listed (forgotten all at once past it: their files
// are only read by ranges again).
const maxWholeWanted = 4096

// compactedFiles keeps compacted files open for rebuilding their ticks'
// files, the least recently used closed first (once no rebuild uses it);
// each is opened once however many opens want it at once.
type compactedFiles struct {
	group singleflight.Group
	mu    sync.Mutex
	// open: the files open, by path, at most maxCompactedFiles (nil
	// until the first open); one evicted is closed once no rebuild uses
	// it.
	open *simplelru.LRU[string, *openCompactedFile]
	// whole: the remote compacted files that were read by ranges past
	// wholeAfter, opened from a whole copy in the cache from then on.
	whole map[string]bool // INVARIANT: at most maxWholeWanted
	// listed: the tables (world and name) whose tables/<t>/ was listed,
	// whose compacted files are opened from a whole copy in the cache:
	// a listing is how a glob over tables/<t>/ starts, which reads every
	// tick (one whole download costs it less than ranges per tick).
	listed map[[2]string]bool // INVARIANT: at most maxWholeWanted
}

// openCompactedFile is a compacted file open for rebuilding its ticks:
// a local file (the bucket's own, or a verified copy in the cache), or a
// remote object read by ranges.
type openCompactedFile struct {
	path   string
	cf     *frame.CompactedFile
	file   *os.File      // nil: read by ranges
	ranged *rangedObject // nil: a local file
	refs   int           // rebuilds using it (guarded by compactedFiles.mu)
	gone   bool          // dropped from the list: closed when refs reaches 0
}

func (o *openCompactedFile) close() {
	if o.file != nil {
		o.file.Close()
	}
}

// drop marks o no longer kept, closing it if no rebuild uses it (the
// last to release it closes it otherwise). The caller holds
// compactedFiles.mu.
func (o *openCompactedFile) drop() {
	o.gone = true
	if o.refs == 0 {
		o.close()
	}
}

// compactedFile returns the compacted file f of table t opened (see
// frame.OpenCompactedFile; whole: from a whole copy, not by ranges,
// if it is not open yet) and a function to call once done with it.
func (m *Mount) compactedFile(ctx context.Context, t *engine.Table, f index.Fragment, whole bool) (*openCompactedFile, func(), error) {
	c := &m.compactedFiles
	for {
		c.mu.Lock()
		if c.open == nil {
			c.open, _ = simplelru.NewLRU(maxCompactedFiles, func(_ string, o *openCompactedFile) { o.drop() })
		}
		if o, ok := c.open.Get(f.Path); ok {
			o.refs++
			c.mu.Unlock()
			if whole {
				o.cf.Sweep() // its table was listed: a glob reads tick after tick
			}
			return o, func() { c.release(o) }, nil
		}
		c.mu.Unlock()
		_, err, _ := c.group.Do(f.Path, func() (any, error) {
			o, err := m.openCompactedFile(ctx, t, f, whole)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.open.Add(f.Path, o) // past maxCompactedFiles, the least recently used is dropped
			return nil, nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
}

// close drops every file, closing those no rebuild uses (the others when
// their rebuilds end).
func (c *compactedFiles) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open != nil {
		c.open.Purge() // drops each
	}
}

func (c *compactedFiles) release(o *openCompactedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o.refs--
	if o.gone && o.refs == 0 {
		o.close()
	}
}

// fetchWhole drops o, a file read by ranges, so that its next use opens
// it from a whole copy in the cache.
func (c *compactedFiles) fetchWhole(o *openCompactedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.whole == nil || len(c.whole) >= maxWholeWanted {
		c.whole = map[string]bool{}
	}
	c.whole[o.path] = true
	if cur, ok := c.open.Peek(o.path); ok && cur == o {
		c.open.Remove(o.path) // dropped: closed once its rebuilds end
	}
}

// wantsWhole reports whether the compacted file path is to be opened from
// a whole copy in the cache.
func (c *compactedFiles) wantsWhole(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.whole[path]
}

// list records that tables/<table>/ of world was listed.
func (c *compactedFiles) list(world, table string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed == nil || len(c.listed) >= maxWholeWanted {
		c.listed = map[[2]string]bool{}
	}
	c.listed[[2]string{world, table}] = true
}

// swept reports whether tables/<table>/ of world was listed.
func (c *compactedFiles) swept(world, table string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed[[2]string{world, table}]
}

// openCompactedFile opens the compacted file f of table t, checking its
// size against its catalog record: on a local bucket the bucket's own
// file; on a remote one a verified copy in the cache if there is one (or
// whole is set, or the file is small, or its ticks were read by ranges
// past wholeAfter, or it has no tick index to check ranged bytes by), else
// the object read by ranges; with its tick index, or, if it has none, its
// ticks found from its tick column.
func (m *Mount) openCompactedFile(ctx context.Context, t *engine.Table, f index.Fragment, whole bool) (*openCompactedFile, error) {
	x, err := m.tickIndex(ctx, f)
	if errors.Is(err, frame.ErrNoTickIndex) {
		x, err = nil, nil // its ticks' rows are found from its tick column
	}
	if err != nil {
		return nil, err
	}
	m.stats.compactedOpened.Add(1)
	if m.local == nil && !m.opts.Cache.HasVerified(record(f)) {
		// Ranged bytes are checked by the tick index's sha256 of each
		// tick's file; a file without one is read only from a copy
		// checked whole against its catalog digest.
		if x != nil && !whole && f.Bytes >= minRanged && !m.compactedFiles.wantsWhole(f.Path) {
			return m.openRanged(ctx, t, f, x)
		}
		m.stats.compactedFetched.Add(f.Bytes) // fetched whole just below
	}
	p, err := m.fragmentPath(ctx, f)
	if err != nil {
		return nil, err
	}
	file, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	info, err := file.Stat()
	if err == nil && info.Size() != f.Bytes {
		err = fmt.Errorf("%s holds %d bytes, its catalog record %d: %w", f.Path, info.Size(), f.Bytes, index.ErrCorrupt)
	}
	var cf *frame.CompactedFile
	if err == nil {
		cf, err = frame.OpenCompactedFile(t, file, info.Size(), x)
	}
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return &openCompactedFile{path: f.Path, cf: cf, file: file}, nil
}

// openRanged opens the compacted file f of a remote bucket read by ranges
// (see rangedObject): its attributes are checked against its catalog
// record as the cache checks a fragment's (cache.Record.CheckAttrs: its
// size must be the recorded one; another generation is decided by the
// bytes, here those of each tick file rebuilt), while its tail (footer
// and page index) is fetched.
func (m *Mount) openRanged(ctx context.Context, t *engine.Table, f index.Fragment, x *frame.TickIndex) (*openCompactedFile, error) {
	ctx = finish(ctx)
	r := record(f)
	ro := newRangedObject(ctx, m.b, f.Path, f.Bytes, &m.stats.compactedFetched)
	var g errgroup.Group
	g.Go(func() error {
		a, err := m.b.Stat(ctx, f.Path)
		if errors.Is(err, bucket.ErrNotExist) {
			return &cache.CorruptFragmentError{Name: f.Path, What: "presence", Want: "present", Got: "absent"}
		}
		if err != nil {
			return err
		}
		_, err = r.CheckAttrs(a)
		return err
	})
	g.Go(func() error {
		// The magic number at the start, the footer and page index at the end.
		return ro.Prefetch([]frame.ByteRange{{Off: 0, Len: 8}, {Off: max(0, f.Bytes-rangedTail), Len: rangedTail}})
	})
	err := g.Wait()
	var cf *frame.CompactedFile
	if err == nil {
		cf, err = frame.OpenCompactedFile(t, ro, f.Bytes, x)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return &openCompactedFile{path: f.Path, cf: cf, ranged: ro}, nil
}

// table returns world's table id, rebuilt from its description (kept).
func (m *Mount) table(ctx context.Context, world, id string) (*engine.Table, error) {
	key := world + "/" + id
	m.mu.Lock()
	t, ok := m.mu.tables[key]
	m.mu.Unlock()
	if ok {
		return t, nil
	}
	info, err := m.tableInfo(ctx, world, id)
	if err != nil {
		return nil, err
	}
	if t, err = engine.TableFromInfo(info); err != nil {
		return nil, fmt.Errorf("world %s: table %s: %w", world, id, err)
	}
	m.mu.Lock()
	m.mu.tables[key] = t
	m.mu.Unlock()
	return t, nil
}

// maxTickIndexes bounds the tick indexes a mount keeps decoded (about
// 256 KiB each for a 4,096-tick file): enough for the files of a few
// hundred thousand ticks.
const maxTickIndexes = 256

// tickIndexes keeps decoded tick indexes, and which compacted files have
// none, the least recently used dropped first; each is read once however
// many lookups want it at once. Compaction writes an index before any
// tick names its file; a file written before tick indexes gets one only
// from worldfs optimize (maintenance.WriteTickIndexes), which a mount
// that found it without one uses once the entry is dropped (or at its
// next start): until then it derives the file's ticks (derivedEntry), the
// same bytes.
type tickIndexes struct {
	group singleflight.Group
	mu    sync.Mutex
	// read: by path, at most maxTickIndexes (nil until the first
	// read); a nil index: the file has no usable tick index.
	read *simplelru.LRU[string, *frame.TickIndex]
}

// tickIndex returns the tick index of the compacted file f (see
// frame.ReadTickIndex; frame.ErrNoTickIndex if it has none).
func (m *Mount) tickIndex(ctx context.Context, f index.Fragment) (*frame.TickIndex, error) {
	c := &m.tickIndexes
	found := func(x *frame.TickIndex) (*frame.TickIndex, error) {
		if x == nil {
			return nil, fmt.Errorf("%s: %w", f.Path, frame.ErrNoTickIndex)
		}
		return x, nil
	}
	c.mu.Lock()
	if c.read == nil {
		c.read, _ = simplelru.NewLRU[string, *frame.TickIndex](maxTickIndexes, nil)
	}
	if x, ok := c.read.Get(f.Path); ok {
		c.mu.Unlock()
		return found(x)
	}
	c.mu.Unlock()
	v, err, _ := c.group.Do(f.Path, func() (any, error) {
		x, err := frame.ReadTickIndex(finish(ctx), m.b, f)
		if err != nil && !errors.Is(err, frame.ErrNoTickIndex) {
			return nil, err // damaged or unreadable: asked again next time
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.read.Contains(f.Path) {
			c.read.Add(f.Path, x)
		}
		return x, nil
	})
	if err != nil {
		return nil, err
	}
	return found(v.(*frame.TickIndex))
}
