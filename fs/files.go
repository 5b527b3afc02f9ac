package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Extended attributes of snapshot entries: the commit identity.
const (
	XattrToken = "user.worldfs.commit_token"
	XattrEpoch = "user.worldfs.writer_epoch"
	XattrTick  = "user.worldfs.tick"
)

// identity serves the commit-identity xattrs of one tick.
type identity struct{ t tickRef }

func (i identity) attrs() map[string]string {
	return map[string]string{
		XattrToken: i.t.CommitToken,
		XattrEpoch: strconv.FormatInt(i.t.WriterEpoch, 10),
		XattrTick:  strconv.FormatInt(i.t.Tick.Tick, 10),
	}
}

func (i identity) Getxattr(_ context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	v, ok := i.attrs()[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (i identity) Listxattr(_ context.Context, dest []byte) (uint32, syscall.Errno) {
	var names []byte
	for _, n := range []string{XattrToken, XattrEpoch, XattrTick} {
		names = append(append(names, n...), 0)
	}
	if len(dest) < len(names) {
		return uint32(len(names)), syscall.ERANGE
	}
	return uint32(copy(dest, names)), 0
}

// snapshotDir is one published tick, reached as ticks/<N> or
// tokens/<token>: manifest.json and two files per table.
type snapshotDir struct {
	dirBase
	identity
	at place // the view the tick was found through

	// The tables by readable name, read on first use (not at lookup, so
	// that listing ticks/ reads nothing but the catalog).
	once   sync.Once
	tables map[string]index.TableFragments
	err    error
}

func (d *snapshotDir) load(ctx context.Context) error {
	d.once.Do(func() { d.tables, d.err = d.m.tickTables(ctx, d.t) })
	return d.err
}

var (
	_ = (gofs.NodeLookuper)((*snapshotDir)(nil))
	_ = (gofs.NodeReaddirer)((*snapshotDir)(nil))
	_ = (gofs.NodeGetxattrer)((*snapshotDir)(nil))
	_ = (gofs.NodeListxattrer)((*snapshotDir)(nil))
)

// Snapshot file formats.
var formats = []string{frame.FormatParquet, frame.FormatCSV}

// snapshot makes the node of a tick's snapshot directory.
func (m *Mount) snapshot(ctx context.Context, parent *gofs.Inode, at place, t tickRef, ino uint64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ms := t.PublishedUnixMs
	d := &snapshotDir{dirBase: dirBase{m: m, ino: ino, imm: true, when: func(context.Context) int64 { return ms }}, identity: identity{t}, at: at}
	return m.child(ctx, parent, d, out)
}

func (d *snapshotDir) names() []string {
	var names []string
	for name := range d.tables {
		for _, f := range formats {
			names = append(names, name+"."+f)
		}
	}
	slices.Sort(names)
	return append([]string{"manifest.json"}, names...)
}

func (d *snapshotDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	if err := d.load(ctx); err != nil {
		return nil, d.m.errno(fmt.Sprintf("tick %d of %s", d.t.Tick.Tick, d.t.World), err)
	}
	var out []fuse.DirEntry
	for _, n := range d.names() {
		out = append(out, dirEntry(n, syscall.S_IFREG, ino(strconv.FormatUint(d.ino, 16), n)))
	}
	return list(out)
}

func (d *snapshotDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	start := time.Now()
	defer d.m.stats.op("lookup", start)
	id := ino(strconv.FormatUint(d.ino, 16), name)
	if err := d.load(ctx); err != nil {
		return nil, d.m.errno(fmt.Sprintf("tick %d of %s", d.t.Tick.Tick, d.t.World), err)
	}
	if name == "manifest.json" {
		data, err := d.m.manifestJSON(ctx, d.at, d.t)
		if err != nil {
			return nil, d.m.errno("manifest", err)
		}
		f := &bytesFile{m: d.m, ino: id, imm: true, identity: &d.identity,
			content: func(context.Context) ([]byte, error) { return data, nil }}
		return d.m.child(ctx, d.EmbeddedInode(), f, out)
	}
	if table, format, ok := splitFormat(name); ok {
		if _, found := d.tables[table]; found {
			f := &snapFile{m: d.m, ino: id, at: d.at, t: d.t, table: table, format: format}
			// Where the rows live now, not when the directory was read.
			err := f.sizeAtLookup(ctx, func(ctx context.Context) (content, error) { return f.plan(ctx, false) })
			if err != nil {
				return nil, d.m.errno(fmt.Sprintf("%s of tick %d of %s", table, d.t.Tick.Tick, d.t.World), err)
			}
			return d.m.child(ctx, d.EmbeddedInode(), f, out)
		}
	}
	return nil, syscall.ENOENT
}

// snapFile is one table of one tick as a file. A tick never changes, but
// where its rows live does: maintenance moves them into compacted files
// and collection later deletes the files they left. So the file keeps the
// tick's identity (world, run, tick, token), not a plan: every open
// resolves the tick against the catalog as it is now (plan) and serves the
// fragment itself when it is exactly the tick's visible rows, a compacted
// tick's Parquet file as its writer published it (canonical), else a file
// derived once into the cache. A file that vanished under a plan within
// the mount's freshness is planned again at the catalog's tip; only a
// file the current catalog still names and the bucket lacks is an error.
//
// A stat runs no DuckDB: the size is the fragment's as the catalog
// records it, a compacted tick's as its tick index records it (or, for a
// compacted file without one, as derived from its rows: derivedEntry), a .csv's
// as its fragment's footer or its tick index records it (size; data
// written before CSV sizes: rendered at lookup), or a split tick's as the
// file derived from its rows at lookup (see rowSet; or by an earlier
// mount sharing the cache) is. A node made without a lookup's sizing
// reports 0 with an attribute timeout of 0 until an open learns the size,
// so the kernel asks again as soon as a reader looks at the size of the
// open file (fstat, lseek to the end, a read past the size it knew).
type snapFile struct {
	gofs.Inode
	m      *Mount
	ino    uint64
	at     place   // the view the tick was found through
	t      tickRef // the tick as first resolved: its identity never changes
	table  string  // readable name
	format string
	keyed  string // the derived file's name in the cache (see key)

	mu struct {
		sync.Mutex
		// size is the size last reported to the kernel: the content's
		// under the newest plan; -1 until known.
		size int64
		// exact: the newest plan serves the fragment's own bytes.
		exact bool
		// canon: the compacted tick's file under the newest plan, if it
		// is rebuilt in memory (see canonical); nil otherwise.
		canon *canonical
	}
}

// content is where a tick's table file comes from under one plan of the
// catalog: the tick's record and fragments as the catalog names them.
type content struct {
	t    tickRef
	tf   index.TableFragments
	asIs bool // the table's fragment is exactly the tick's rows (see isExact)
	// canon, for a compacted tick whose compacted file has a tick index:
	// its Parquet file as its writer published it, rebuilt (see canonical).
	canon *canonical
	// split, for a split tick (neither of the above): the tick's visible
	// rows of its fragments, derived in Go (see rowSet).
	split *rowSet
}

// contentOf returns where tick t's table tf comes from: the fragment as it is, the canonical file of a compacted
// tick, or (neither: a split tick) the tick's visible rows of its
// fragments.
func (m *Mount) contentOf(ctx context.Context, t tickRef, tf index.TableFragments) (content, error) {
	c := content{t: t, tf: tf, asIs: isExact(t, tf)}
	if c.asIs {
		return c, nil
	}
	var err error
	if c.canon, err = m.canonicalOf(ctx, t, tf); err != nil || c.canon != nil {
		return c, err
	}
	c.split, err = m.tickRows(ctx, t, tf)
	return c, err
}

// tickRows is the rowSet of tick t's table tf: the rows of its fragments
// stamped with the tick (index.RowRule against the tick's own
// publication, as <table>_at(t) keeps them), in entity order, encoded as
// the fragment its writer publishes (frame.EncodeFragment's bytes, its
// footer recording the CSV size).
func (m *Mount) tickRows(ctx context.Context, t tickRef, tf index.TableFragments) (*rowSet, error) {
	table, err := m.table(ctx, t.World, tf.Table)
	if err != nil {
		return nil, err
	}
	n := t.Tick.Tick
	return &rowSet{
		parts: []rowPart{{table, tf.Fragments}}, tick: &n,
		published: pairs{{Tick: n, Token: t.CommitToken}: true},
		encode: func(g []frame.Gathered) ([]byte, error) {
			data, _, err := frame.EncodeGathered(g[0], true)
			return data, err
		},
	}, nil
}

// plan resolves the file's tick in the view it was found through
// (lineageTick; exact: at the catalog's tip, else within the mount's
// freshness, falling back to the tip if the tick is not there yet) and
// returns where its table's rows live now.
func (f *snapFile) plan(ctx context.Context, exact bool) (content, error) {
	t, ok, err := f.m.lineageTick(ctx, f.at.world, f.at.run, f.t.Tick.Tick, false, exact)
	if err != nil {
		return content{}, err
	}
	return f.planned(ctx, t, ok)
}

// planned is where the rows of the file's table live as tick t (ok: found)
// says.
func (f *snapFile) planned(ctx context.Context, t tickRef, ok bool) (content, error) {
	n := f.t.Tick.Tick
	if !ok || t.CommitToken != f.t.CommitToken {
		return content{}, fmt.Errorf("tick %d of %s run %s (token %s) is no longer visible: %w", n, f.at.world, f.at.run, f.t.CommitToken, errGone)
	}
	tables, err := f.m.tickTables(ctx, t)
	if err != nil {
		return content{}, err
	}
	tf, ok := tables[f.table]
	if !ok {
		return content{}, fmt.Errorf("tick %d of %s has no table %s: %w", n, f.at.world, f.table, errGone)
	}
	return f.m.contentOf(ctx, t, tf)
}

// errGone: a file's tick (or its table) is not visible any more. Visible
// ticks never go away, so this is a damaged or replaced catalog (EIO).
var errGone = errors.New("gone from the catalog")

// sizeAtLookup plans f (planned) and sizes it. A file the plan names may
// have vanished since the catalog state it came from was read (maintenance
// moved the tick's rows and collection deleted it): then the tick is
// planned again at the catalog's tip, as an open does.
func (f *snapFile) sizeAtLookup(ctx context.Context, planned func(context.Context) (content, error)) error {
	c, err := planned(ctx)
	if err == nil {
		err = f.init(c).size(ctx, c)
	}
	if !vanished(err) {
		return err
	}
	f.m.stats.replanned.Add(1)
	if c, err = f.plan(ctx, true); err != nil {
		return err
	}
	return f.init(c).size(ctx, c)
}

// init fixes the file's cache key and takes c's plan for its first size.
func (f *snapFile) init(c content) *snapFile {
	f.keyed = f.keyOf(f.format)
	f.mu.size = -1
	f.mu.exact = f.format == frame.FormatParquet && c.asIs
	switch {
	case f.mu.exact && c.tf.Fragments[0].Bytes > 0:
		f.mu.size = c.tf.Fragments[0].Bytes
	case f.format == frame.FormatParquet && c.canon != nil:
		f.mu.size = c.canon.size()
	}
	f.mu.canon = canonDigest(f.format, c)
	return f
}

// canonDigest returns the file of format under c if it is a compacted
// tick's file rebuilt in memory (see canonical), else nil.
func canonDigest(format string, c content) *canonical {
	if format != frame.FormatParquet || c.canon == nil || c.canon.holder == nil || c.canon.size() > maxInMemory {
		return nil
	}
	return c.canon
}

// kept returns the file's bytes if they are a compacted tick's file the
// mount keeps rebuilt (rebuiltFiles, by sha256): they are the tick's
// whatever file its rows live in now, so an open (DuckDB opens each file
// twice) or an open after the read-ahead needs no plan.
func (f *snapFile) kept(ctx context.Context) ([]byte, bool) {
	f.mu.Lock()
	c := f.mu.canon
	f.mu.Unlock()
	if c == nil {
		return nil, false
	}
	data, ok := f.m.rebuiltFiles.get(c.entry.Digest)
	if !ok {
		return nil, false
	}
	// Still the tick the file shows, as an open's plan checks first (from
	// the catalogs the mount keeps fresh): a world deleted, or made again
	// under its name, keeps no node's bytes.
	t, ok, err := f.m.lineageTick(ctx, f.at.world, f.at.run, f.t.Tick.Tick, false, false)
	if err != nil || !ok || t.CommitToken != f.t.CommitToken {
		return nil, false
	}
	f.m.opened(c) // a reader of tick after tick: the read-ahead keeps ahead
	return data, true
}

var (
	_ = (gofs.NodeGetattrer)((*snapFile)(nil))
	_ = (gofs.NodeSetattrer)((*snapFile)(nil))
	_ = (gofs.NodeOpener)((*snapFile)(nil))
	_ = (gofs.NodeGetxattrer)((*snapFile)(nil))
	_ = (gofs.NodeListxattrer)((*snapFile)(nil))
	_ = (gofs.NodeSetxattrer)((*snapFile)(nil))
	_ = (gofs.NodeRemovexattrer)((*snapFile)(nil))
)

func (f *snapFile) immutable() bool { return true }
func (f *snapFile) inode() uint64   { return f.ino }

// attrTimeout: long once the size is known, 0 before (see snapFile).
func (f *snapFile) attrTimeout() time.Duration {
	if _, ok := f.knownSize(); ok {
		return f.m.timeout(true)
	}
	return 0
}

// key names the derived file in the cache: the tick's identity, so every
// plan of the same tick derives the same file.
func (f *snapFile) key() string { return f.keyed }

// keyOf is key for the file of the same table and tick in format.
func (f *snapFile) keyOf(format string) string { return derivedKey(f.t, f.table, format) }

// derivedKey names in the cache the file of tick t's table (by readable
// name) in format, derived from the tick's fragments.
func derivedKey(t tickRef, table, format string) string {
	return fmt.Sprintf("derived/%s/%s/%d-%s/%s.%s", t.World, t.Run, t.Tick.Tick, t.CommitToken, table, format)
}

// knownSize returns the content's size if it is known without deriving
// anything: the catalog's record of a fragment served as is, or a derived
// file already in the cache.
func (f *snapFile) knownSize() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.size >= 0 {
		return f.mu.size, true
	}
	if f.mu.exact {
		return 0, false // the catalog did not record its size: learned at open
	}
	if size, ok := f.m.opts.Cache.DerivedSize(f.key()); ok {
		f.mu.size = size
		return size, true
	}
	return 0, false
}

// body is the bytes of an open snapshot file: a local file (the bucket's
// own, or one in the cache), or bytes in memory (a small compacted tick's
// rebuilt file).
type body struct {
	f    *os.File
	data []byte
}

func (b body) ReadAt(p []byte, off int64) (int, error) {
	if b.f != nil {
		return b.f.ReadAt(p, off)
	}
	return bytes.NewReader(b.data).ReadAt(p, off)
}

// size returns the body's size.
func (b body) size() (int64, error) {
	if b.f == nil {
		return int64(len(b.data)), nil
	}
	info, err := b.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

func (b body) Close() error {
	if b.f == nil {
		return nil
	}
	return b.f.Close()
}

func closeBody(b body) { b.Close() }

// openContent opens the file's bytes under c: for Parquet, openParquet's;
// for CSV, the tick's Parquet rendered as CSV (frame.WriteCSV): in memory
// from a small file (see small), else into the cache, once.
func (f *snapFile) openContent(ctx context.Context, c content) (body, error) {
	if f.format == frame.FormatParquet {
		return f.openParquet(ctx, c)
	}
	if c.split != nil {
		p, err := f.m.gathered(ctx, f.key(), frame.FormatCSV, c.split)
		if err != nil {
			return body{}, err
		}
		return openBody(p)
	}
	if small(c) {
		// Rendered in memory on each open: no file of its own in the cache.
		start := time.Now()
		defer f.m.stats.op("materialize", start)
		src, err := f.openParquet(ctx, c)
		if err != nil {
			return body{}, err
		}
		defer src.Close()
		size, err := src.size()
		if err != nil {
			return body{}, err
		}
		f.m.stats.rendered.Add(1)
		var out bytes.Buffer
		if err := frame.WriteCSV(&out, src, size); err != nil {
			return body{}, fmt.Errorf("%s of tick %d of %s as CSV: %w", f.table, c.t.Tick.Tick, c.t.World, err)
		}
		return body{data: out.Bytes()}, nil
	}
	p, err := f.m.derive(ctx, f.key(), &f.m.stats.rendered, func(ctx context.Context, tmp string) error {
		src, err := f.openParquet(ctx, c)
		if err != nil {
			return err
		}
		defer src.Close()
		return writeCSVFile(tmp, src, fmt.Sprintf("%s of tick %d of %s", f.table, c.t.Tick.Tick, c.t.World))
	})
	if err != nil {
		return body{}, err
	}
	return openBody(p)
}

// writeCSVFile writes the CSV rendering (frame.WriteCSV) of the Parquet
// file src, which what names in errors, as the file tmp.
func writeCSVFile(tmp string, src body, what string) error {
	size, err := src.size()
	if err != nil {
		return err
	}
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := frame.WriteCSV(out, src, size); err != nil {
		out.Close()
		return fmt.Errorf("%s as CSV: %w", what, err)
	}
	return out.Close()
}

// small reports whether the Parquet file of c is one whose CSV is
// rendered in memory: a fragment served as is or a compacted tick's file
// of at most maxInMemory bytes.
func small(c content) bool {
	if c.canon != nil {
		return c.canon.size() <= maxInMemory
	}
	return c.asIs && c.tf.Fragments[0].Bytes > 0 && c.tf.Fragments[0].Bytes <= maxInMemory
}

// openBody opens the local file p.
func openBody(p string) (body, error) {
	file, err := os.Open(p)
	return body{f: file}, err
}

// openParquet opens the tick's table as Parquet under c: the fragment
// itself when it is exactly the tick's rows (on a local bucket the
// bucket's own file, else a verified copy in the cache), checked against
// its record through the open file; a compacted tick's file rebuilt from
// its rows (see canonical: in memory if small, else into the cache); else
// (a split tick) the file derived into the cache from its rows (see
// rowSet), derived again if the cache does not hold it (any more).
func (f *snapFile) openParquet(ctx context.Context, c content) (body, error) {
	if c.asIs {
		p, err := f.m.fragmentPath(ctx, c.tf.Fragments[0])
		if err != nil {
			return body{}, err
		}
		file, err := os.Open(p)
		if err != nil {
			return body{}, err
		}
		if err := f.m.checkOpen(file, c.tf.Fragments[0]); err != nil {
			file.Close()
			return body{}, err
		}
		return body{f: file}, nil
	}
	if c.canon != nil {
		if c.canon.size() <= maxInMemory {
			start := time.Now()
			data, err := f.m.rebuilt(ctx, c.canon)
			f.m.stats.op("materialize", start)
			return body{data: data}, err
		}
		p, err := f.m.derive(ctx, c.canon.key(), &f.m.stats.rebuilt, func(ctx context.Context, tmp string) error {
			data, err := f.m.rebuilt(ctx, c.canon)
			if err != nil {
				return err
			}
			return os.WriteFile(tmp, data, 0o444)
		})
		if err != nil {
			return body{}, err
		}
		return openBody(p)
	}
	p, err := f.m.gathered(ctx, f.keyOf(frame.FormatParquet), frame.FormatParquet, c.split)
	if err != nil {
		return body{}, err
	}
	return openBody(p)
}

// size sizes the file when it is looked up, if init could not. A CSV
// whose Parquet source is a fragment served as is or a compacted tick's
// canonical file is sized as its writer recorded it in the fragment's
// footer, or its tick index does for a compacted tick (recordedCSV),
// reading no row; a tick written (or compacted) before CSV sizes were
// recorded is rendered (its rows are read and written as CSV) to learn
// it. A split tick's file (either format) is derived into the cache from
// its rows (see rowSet), once, and sized there: no DuckDB either way.
func (f *snapFile) size(ctx context.Context, c content) error {
	if f.format != frame.FormatCSV && c.split == nil {
		return nil
	}
	if _, ok := f.knownSize(); ok {
		return nil
	}
	if c.split == nil {
		size, ok, err := f.recordedCSV(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			f.mu.Lock()
			f.mu.size = size
			f.mu.Unlock()
			return nil
		}
	}
	what := fmt.Sprintf("rendering %s of tick %d of %s as %s", f.table, f.t.Tick.Tick, f.t.World, f.format)
	file, err := bounded(ctx, f.m, what, closeBody, func(ctx context.Context) (body, error) { return f.openContent(ctx, c) })
	if err != nil {
		return err
	}
	defer file.Close()
	size, err := file.size()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.size = size
	f.mu.Unlock()
	return nil
}

// recordedCSV returns the size of the CSV of c's Parquet file as recorded
// beside its rows: by the writer in the footer of a fragment served as is
// (frame.ReadCSVSize: the footer alone is read), by compaction in the
// tick index for a compacted tick; a tick without rows of the table has
// the header alone. ok is false when nothing records it.
func (f *snapFile) recordedCSV(ctx context.Context, c content) (int64, bool, error) {
	switch {
	case c.canon != nil && c.canon.holder == nil:
		return frame.EmptyCSVSize(c.canon.table), true, nil
	case c.canon != nil:
		return c.canon.entry.CSVSize, c.canon.entry.CSVSize > 0, nil
	}
	frag := c.tf.Fragments[0]
	what := fmt.Sprintf("reading the CSV size of %s of tick %d of %s", f.table, f.t.Tick.Tick, f.t.World)
	type sized struct {
		n  int64
		ok bool
	}
	r, err := bounded(ctx, f.m, what, nil, func(ctx context.Context) (sized, error) {
		n, ok, err := frame.ReadCSVSize(ctx, f.m.b, frag)
		return sized{n, ok}, err
	})
	if err == nil && r.ok {
		f.m.stats.csvSized.Add(1)
	}
	return r.n, r.ok, err
}

// vanished reports whether err says a file a plan named is not in the
// bucket (any more): collection deleted it after maintenance moved its rows.
func vanished(err error) bool {
	var corrupt *cache.CorruptFragmentError
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, bucket.ErrNotExist) ||
		(errors.As(err, &corrupt) && corrupt.What == "presence")
}

// derive returns the cache file called key, made once by fill; each fill
// adds one to count (the mount's stats of DuckDB materializations, of
// files derived in Go, of rebuilt compacted ticks' files or of CSV
// renderings), and the latency is the "materialize" op's.
func (m *Mount) derive(ctx context.Context, key string, count *atomic.Int64, fill func(ctx context.Context, tmp string) error) (string, error) {
	start := time.Now()
	p, err := m.opts.Cache.Derived(ctx, key, func(tmp string) error {
		count.Add(1)
		return fill(ctx, tmp)
	})
	m.stats.op("materialize", start)
	return p, err
}

// fillSnapshotFile fills a snapshot file's attributes.
func fillSnapshotFile(a *fuse.Attr, ino uint64, size int64, publishedMs int64) {
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(size)
	a.Blocks = (a.Size + 511) / 512
	a.Ino = ino
	setTimes(a, publishedMs)
}

func (f *snapFile) fill(_ context.Context, a *fuse.Attr) syscall.Errno {
	size, _ := f.knownSize() // 0 until known
	fillSnapshotFile(a, f.ino, size, f.t.PublishedUnixMs)
	return 0
}

func (f *snapFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.SetTimeout(f.attrTimeout())
	if h, ok := fh.(*roFile); ok { // an open file: its own content's size
		fillSnapshotFile(&out.Attr, f.ino, h.size, f.t.PublishedUnixMs)
		return 0
	}
	return f.fill(ctx, &out.Attr)
}

func (f *snapFile) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// A snapshot is immutable: its extended attributes too.
func (f *snapFile) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (f *snapFile) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

func (f *snapFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return identity{f.t}.Getxattr(ctx, attr, dest)
}

func (f *snapFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return identity{f.t}.Listxattr(ctx, dest)
}

func (f *snapFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	defer f.m.stats.op("open", start)
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	if data, ok := f.kept(ctx); ok {
		h, err := f.m.handle(body{data: data})
		if err != nil {
			return nil, 0, f.m.errno("opening a kept file", err)
		}
		return h, fuse.FOPEN_KEEP_CACHE | noFlush, 0
	}
	what := fmt.Sprintf("opening %s of tick %d of %s", f.table, f.t.Tick.Tick, f.t.World)
	var c content
	file, err := bounded(ctx, f.m, what, closeBody, func(ctx context.Context) (body, error) {
		var err error
		for _, exact := range []bool{false, true} {
			if c, err = f.plan(ctx, exact); err != nil {
				return body{}, err
			}
			var file body
			if file, err = f.openContent(ctx, c); err == nil || !vanished(err) {
				return file, err
			}
			f.m.stats.replanned.Add(1)
		}
		return body{}, err
	})
	if err != nil {
		return nil, 0, f.m.errno(what, err)
	}
	h, err := f.m.handle(file)
	if err != nil {
		return nil, 0, f.m.errno(what, err)
	}
	f.mu.Lock()
	prev := f.mu.size
	f.mu.size, f.mu.exact = h.size, f.format == frame.FormatParquet && c.asIs
	f.mu.canon = canonDigest(f.format, c)
	f.mu.Unlock()
	if prev >= 0 && prev != h.size {
		// The rows moved to a file of another size than the kernel was
		// told: drop its attributes and pages, so that stat and reads
		// see this file whole.
		f.NotifyContent(0, 0)
		return h, noFlush, 0
	}
	return h, fuse.FOPEN_KEEP_CACHE | noFlush, 0
}

// noFlush opens a file the mount serves read-only: closing it has
// nothing to flush, so the kernel sends no FLUSH (one round trip less
// for every close; a glob over ten thousand ticks closes each file twice).
const noFlush = fuse.FOPEN_NOFLUSH

func closeFile(f *os.File) { f.Close() }

// handle makes the open file of bytes the mount serves.
func (m *Mount) handle(b body) (*roFile, error) {
	size, err := b.size()
	if err != nil {
		b.Close()
		return nil, err
	}
	m.stats.opens.Add(1)
	m.stats.bytesOpened.Add(size)
	return &roFile{m: m, f: b.f, data: b.data, size: size}, nil
}

// roFile is an open snapshot or facts file: a local file, which the kernel
// reads directly through passthrough where it can, and through Read
// otherwise (each read bounded by the read timeout), or bytes in memory.
// It offers nothing that could change the file (no write, no setattr).
type roFile struct {
	m    *Mount
	f    *os.File // nil: data
	data []byte
	size int64 // the file's size when it was opened (its content never changes)
}

var (
	_ = (gofs.FileReader)((*roFile)(nil))
	_ = (gofs.FileReleaser)((*roFile)(nil))
	_ = (gofs.FilePassthroughFder)((*roFile)(nil))
)

func (r *roFile) PassthroughFd() (int, bool) {
	if r.f == nil {
		return 0, false
	}
	r.m.stats.passthrough.Add(1)
	return int(r.f.Fd()), true
}

func (r *roFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if r.f == nil {
		data := r.data[min(off, int64(len(r.data))):]
		data = data[:min(len(dest), len(data))]
		r.m.stats.bytesRead.Add(int64(len(data)))
		return fuse.ReadResultData(data), 0
	}
	// A buffer of its own: a read given up on may still write into it.
	buf, err := bounded(ctx, r.m, "reading "+r.f.Name(), nil, func(context.Context) ([]byte, error) {
		buf := make([]byte, len(dest))
		n, err := r.f.ReadAt(buf, off)
		if err == io.EOF {
			err = nil
		}
		return buf[:n], err
	})
	if err != nil {
		return nil, r.m.errno("reading a file", err)
	}
	r.m.stats.bytesRead.Add(int64(len(buf)))
	return fuse.ReadResultData(buf), 0
}

func (r *roFile) Release(context.Context) syscall.Errno {
	if r.f == nil {
		return 0
	}
	return gofs.ToErrno(r.f.Close())
}

// bytesFile is a small generated file (world.json, manifest.json, stats):
// its content is taken when it is opened. Immutable ones may be cached by
// the kernel; the others are read directly each time.
type bytesFile struct {
	gofs.Inode
	m        *Mount
	ino      uint64
	imm      bool
	identity *identity // commit identity xattrs (nil: none)
	// when returns the modification time (Unix ms); nil: the commit time
	// of identity's tick, or without one the mount's start.
	when    func(context.Context) int64
	content func(ctx context.Context) ([]byte, error)
}

var (
	_ = (gofs.NodeGetattrer)((*bytesFile)(nil))
	_ = (gofs.NodeSetattrer)((*bytesFile)(nil))
	_ = (gofs.NodeOpener)((*bytesFile)(nil))
	_ = (gofs.NodeGetxattrer)((*bytesFile)(nil))
	_ = (gofs.NodeListxattrer)((*bytesFile)(nil))
	_ = (gofs.NodeSetxattrer)((*bytesFile)(nil))
	_ = (gofs.NodeRemovexattrer)((*bytesFile)(nil))
)

func (f *bytesFile) immutable() bool { return f.imm }
func (f *bytesFile) inode() uint64   { return f.ino }

func (f *bytesFile) fill(ctx context.Context, a *fuse.Attr) syscall.Errno {
	data, err := f.content(ctx)
	if err != nil {
		return f.m.errno("generating a file", err)
	}
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(len(data))
	a.Ino = f.ino
	switch {
	case f.when != nil:
		setTimes(a, f.when(ctx))
	case f.identity != nil:
		setTimes(a, f.identity.t.PublishedUnixMs)
	default:
		setTimes(a, f.m.startedMs)
	}
	return 0
}

func (f *bytesFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.m.setAttrTimeout(out, f.imm)
	return f.fill(ctx, &out.Attr)
}

func (f *bytesFile) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (f *bytesFile) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (f *bytesFile) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

func (f *bytesFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if f.identity == nil {
		return 0, syscall.ENODATA
	}
	return f.identity.Getxattr(ctx, attr, dest)
}

func (f *bytesFile) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if f.identity == nil {
		return 0, 0
	}
	return f.identity.Listxattr(ctx, dest)
}

func (f *bytesFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	data, err := f.content(ctx)
	if err != nil {
		return nil, 0, f.m.errno("generating a file", err)
	}
	mode := uint32(fuse.FOPEN_DIRECT_IO)
	if f.imm {
		mode = fuse.FOPEN_KEEP_CACHE
	}
	return bytesHandle(data), mode | noFlush, 0
}

// bytesHandle is an open generated file.
type bytesHandle []byte

var _ = (gofs.FileReader)((bytesHandle)(nil))

func (h bytesHandle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h[off:min(int64(len(h)), off+int64(len(dest)))]), 0
}

// manifestJSON is a tick's manifest as a file. Like every file of a tick
// it is the same bytes for as long as the tick is visible: it describes
// the tick and the files beside it, never where maintenance has moved
// their rows (worldfs_manifests in SQL names those objects). A file the
// mount's state named that vanished since (maintenance moved the tick's
// rows again and collection deleted it) is planned again at the
// catalog's tip, as an open does (snapFile.Open).
func (m *Mount) manifestJSON(ctx context.Context, at place, t tickRef) ([]byte, error) {
	data, err := m.manifestAt(ctx, at, t, false)
	if vanished(err) {
		m.stats.replanned.Add(1)
		data, err = m.manifestAt(ctx, at, t, true)
	}
	return data, err
}

// manifestAt is tick t's manifest, its tables' files described where the
// catalog's state says they are now (exact: at its tip, else within the
// mount's freshness).
func (m *Mount) manifestAt(ctx context.Context, at place, t tickRef, exact bool) ([]byte, error) {
	man := frame.TickManifest{World: t.World, Run: t.Run, Tick: t.Tick.Tick, CommitToken: t.CommitToken, WriterEpoch: t.WriterEpoch, Tables: []frame.ManifestTable{}}
	// Where the rows live now: a plan of the lookup may name files
	// collected since (the description is the same either way).
	if now, ok, err := m.lineageTick(ctx, at.world, at.run, t.Tick.Tick, false, exact); err != nil {
		return nil, err
	} else if ok && now.CommitToken == t.CommitToken {
		t = now
	}
	tables, err := t.Tables()
	if err != nil {
		return nil, err
	}
	for _, tf := range tables {
		info, err := m.tableInfo(ctx, t.World, tf.Table)
		if err != nil {
			return nil, err
		}
		c, err := m.contentOf(ctx, t, tf)
		if err != nil {
			return nil, err
		}
		p := c.parquet()
		if c.split != nil {
			// A split tick's file is derived from its fragments' rows;
			// once compacted, the same bytes are its canonical file, which
			// the manifest describes. So it describes the derived file too
			// (derived into the cache, as a lookup of it does).
			if p, err = m.derivedParquet(ctx, derivedKey(t, info.Name, frame.FormatParquet), c.split); err != nil {
				return nil, err
			}
		}
		man.Tables = append(man.Tables, frame.ManifestTable{ID: tf.Table, Name: info.Name, Rows: c.rows(), Parquet: p})
	}
	return json.MarshalIndent(man, "", "  ")
}

// derivedParquet describes the Parquet file of a split tick, derived
// into the cache under key from rs.
func (m *Mount) derivedParquet(ctx context.Context, key string, rs *rowSet) (*frame.ManifestFile, error) {
	path, err := m.gathered(ctx, key, frame.FormatParquet, rs)
	if err != nil {
		return nil, err
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return nil, err
	}
	return &frame.ManifestFile{Bytes: n, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}

// parquet describes the tick's Parquet file of c's table where the
// catalog or a tick index records it: the tick's own fragment, served as
// it is, or a compacted tick's canonical file, which is that fragment's
// bytes again. So a tick's description is the same before and after
// compaction. A compacted file without a tick index gives the tick's
// file derived from its rows there (derivedEntry). Nil for a split tick:
// its file is derived from its fragments (see derivedParquet).
func (c content) parquet() *frame.ManifestFile {
	switch {
	case c.asIs:
		f := c.tf.Fragments[0]
		return &frame.ManifestFile{Bytes: f.Bytes, Digest: f.Digest}
	case c.canon != nil:
		return &frame.ManifestFile{Bytes: c.canon.entry.Size, Digest: "sha256:" + hex.EncodeToString(c.canon.entry.Digest[:])}
	}
	return nil
}

// rows returns the tick's rows of c's table, if the catalog or a tick
// index tells them.
func (c content) rows() *int64 {
	var n int64
	switch {
	case c.canon != nil:
		n = c.canon.entry.Rows
	default:
		for _, f := range c.tf.Fragments {
			if f.Span != nil {
				return nil // a split tick with rows in a compacted file
			}
			n += f.Rows
		}
	}
	return &n
}

// worldJSON is world.json: identity, parent, lineage, fence, heads. It
// reads each world of the lineage as a lookup does (worldInfo), never a
// whole history it does not hold already.
func (m *Mount) worldJSON(ctx context.Context, world string) ([]byte, error) {
	me, err := m.worldInfo(ctx, world, index.DefaultRun)
	if err != nil {
		return nil, err
	}
	doc := frame.WorldJSON{WorldRecord: frame.RecordOf(me.world, me.seq), Runs: map[string]frame.RunHead{}}
	runs, err := m.runs(ctx, world)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		var rr frame.RunHead
		if i := slices.IndexFunc(me.runs, func(own index.Run) bool { return own.Name == r }); i >= 0 {
			rr.Published = me.runs[i].Published
		}
		if h, ok, err := m.head(ctx, world, r); err != nil {
			return nil, err
		} else if ok {
			rr.Head = &h.Tick.Tick
		}
		doc.Runs[r] = rr
		if r == index.DefaultRun {
			doc.Head = rr.Head
		}
	}
	// The lineage of the main run, as index.Lineage reads it: each
	// ancestor's fork run up to the nearest fork point below it.
	info, segRun, upTo := me, index.DefaultRun, int64(math.MaxInt64)
	for {
		sg := frame.LineageSegment{World: info.world.ID, Run: segRun, Mode: info.mode.String()}
		if info.world.ID != world {
			sg.UpTo = new(int64)
			*sg.UpTo = upTo
		}
		doc.Lineage = append(doc.Lineage, sg)
		if info.world.Parent == "" {
			break
		}
		if slices.ContainsFunc(doc.Lineage, func(s frame.LineageSegment) bool { return s.World == info.world.Parent }) {
			return nil, fmt.Errorf("world %s: lineage loops through %s: %w", world, info.world.Parent, index.ErrCorrupt)
		}
		parent := info.world.Parent
		segRun, upTo = info.world.ForkRun, min(upTo, info.world.ForkTick)
		if info, err = m.worldInfo(ctx, parent, segRun); errors.Is(err, index.ErrNoWorld) || err == nil && !info.world.Created {
			return nil, fmt.Errorf("world %s: ancestor %s does not exist: %w", world, parent, index.ErrCorrupt)
		} else if err != nil {
			return nil, err
		}
	}
	slices.Reverse(doc.Lineage)
	data, err := json.MarshalIndent(doc, "", "  ")
	return append(data, '\n'), err
}

// worldRecord is what world.json says of one world: its record, its runs
// with published ticks, its catalog's sequence, and the visibility of one
// run of it (index.Allowlist's mode).
type worldRecord struct {
	world index.World
	runs  []index.Run
	seq   uint64
	mode  index.Visibility
}

// worldInfo returns world's record, with the visibility of run: read cold
// if the mount has not opened world's catalog (the checkpoint, no tick
// part), else from the catalog.
func (m *Mount) worldInfo(ctx context.Context, world, run string) (worldRecord, error) {
	var r worldRecord
	read := func(p *index.Partial) {
		r = worldRecord{world: p.World(), runs: p.Runs(), seq: p.Seq(), mode: p.Visibility(run)}
	}
	if cold, err := m.withCold(ctx, world, index.Want{From: 1, To: 0}, m.opts.Freshness, func(p *index.Partial) error {
		read(p)
		return nil
	}); err != nil || cold {
		return r, err
	}
	s, err := m.state(ctx, world, false)
	if err != nil {
		return r, err
	}
	read(index.PartialOf(s))
	return r, nil
}

// statsJSON is the body of .worldfs/stats.
func (m *Mount) statsJSON() ([]byte, error) {
	st := m.stats.Snapshot(m.opts.Cache)
	m.mu.Lock()
	st.CatalogsOpen = m.cats.Len()
	m.mu.Unlock()
	data, err := json.MarshalIndent(st, "", "  ")
	return append(data, '\n'), err
}
