package fs

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// node is every node of the tree: it knows its attributes and whether
// they can ever change.
type node interface {
	gofs.InodeEmbedder
	fill(ctx context.Context, a *fuse.Attr) syscall.Errno
	// immutable: the entry and its attributes never change (snapshots).
	immutable() bool
	inode() uint64
}

// dirBase is what every directory shares: the mount, a stable inode
// number, and EROFS for every namespace change.
type dirBase struct {
	gofs.Inode
	m   *Mount
	ino uint64
	imm bool
	// when returns the directory's modification time (Unix ms; nil: the
	// mount's start).
	when func(context.Context) int64
}

func (d *dirBase) immutable() bool { return d.imm }
func (d *dirBase) inode() uint64   { return d.ino }

func (d *dirBase) fill(ctx context.Context, a *fuse.Attr) syscall.Errno {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	a.Ino = d.ino
	ms := d.m.startedMs
	if d.when != nil {
		ms = d.when(ctx)
	}
	setTimes(a, ms)
	return 0
}

// setTimes sets a node's modification, change and access times to ms
// (Unix milliseconds): what was committed when, not when it was read.
func setTimes(a *fuse.Attr, ms int64) {
	if ms < 0 {
		ms = 0
	}
	sec, nsec := uint64(ms/1000), uint32(ms%1000)*1e6
	a.Mtime, a.Mtimensec = sec, nsec
	a.Ctime, a.Ctimensec = sec, nsec
	a.Atime, a.Atimensec = sec, nsec
}

// headTime is when the newest visible tick of (world, run) was published
// (the mount's start if that is unknown): the time of a directory that
// changes when a tick is published.
func (m *Mount) headTime(world, run string) func(context.Context) int64 {
	return func(ctx context.Context) int64 {
		if t, ok, err := m.head(ctx, world, run); err == nil && ok && t.PublishedUnixMs > 0 {
			return t.PublishedUnixMs
		}
		return m.startedMs
	}
}

// worldTime is when world last changed as far as its catalog records: its
// newest published tick of any run, or its creation.
func (m *Mount) worldTime(world string) func(context.Context) int64 {
	return func(ctx context.Context) int64 {
		if ms, ok, err := m.coldTime(ctx, world); err != nil {
			return m.startedMs
		} else if ok && ms > 0 {
			return ms
		} else if ok {
			return m.startedMs
		}
		s, err := m.state(ctx, world, false)
		if err != nil {
			return m.startedMs
		}
		ms := s.World.CreatedUnixMs
		for _, r := range s.Runs() {
			if t, ok := s.Tick(r.Name, r.Head); ok {
				ms = max(ms, t.PublishedUnixMs)
			}
		}
		if ms <= 0 {
			return m.startedMs
		}
		return ms
	}
}

func (d *dirBase) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.setAttrTimeout(out, d.imm)
	return d.fill(ctx, &out.Attr)
}

// Every change to the namespace goes through a ctl file instead.
func (d *dirBase) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (d *dirBase) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *dirBase) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *dirBase) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (d *dirBase) Symlink(context.Context, string, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *dirBase) Link(context.Context, gofs.InodeEmbedder, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (d *dirBase) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (d *dirBase) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }
func (d *dirBase) Rename(context.Context, string, gofs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}
func (d *dirBase) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (d *dirBase) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

var (
	_ = (gofs.NodeGetattrer)((*dirBase)(nil))
	_ = (gofs.NodeSetattrer)((*dirBase)(nil))
	_ = (gofs.NodeMkdirer)((*dirBase)(nil))
	_ = (gofs.NodeMknoder)((*dirBase)(nil))
	_ = (gofs.NodeCreater)((*dirBase)(nil))
	_ = (gofs.NodeSymlinker)((*dirBase)(nil))
	_ = (gofs.NodeLinker)((*dirBase)(nil))
	_ = (gofs.NodeUnlinker)((*dirBase)(nil))
	_ = (gofs.NodeRmdirer)((*dirBase)(nil))
	_ = (gofs.NodeRenamer)((*dirBase)(nil))
	_ = (gofs.NodeSetxattrer)((*dirBase)(nil))
	_ = (gofs.NodeRemovexattrer)((*dirBase)(nil))
)

// Kernel cache policy, in one place: snapshot entries never change and are
// kept long; everything that grows or moves is revalidated within the
// mount's freshness (so within a second of a publish).
func (m *Mount) timeout(immutable bool) time.Duration {
	if immutable {
		return m.opts.Immutable
	}
	return m.opts.Freshness / 2
}

func (m *Mount) setAttrTimeout(out *fuse.AttrOut, immutable bool) {
	out.SetTimeout(m.timeout(immutable))
}

// child makes the inode of a looked-up child and fills its entry.
func (m *Mount) child(ctx context.Context, parent *gofs.Inode, n node, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := n.fill(ctx, &out.Attr); errno != 0 {
		return nil, errno
	}
	t := m.timeout(n.immutable())
	if e, ok := n.(interface{ entryTimeout() time.Duration }); ok {
		out.SetEntryTimeout(e.entryTimeout())
	} else {
		out.SetEntryTimeout(t)
	}
	if a, ok := n.(interface{ attrTimeout() time.Duration }); ok {
		t = a.attrTimeout()
	}
	out.SetAttrTimeout(t)
	return parent.NewInode(ctx, n, gofs.StableAttr{Mode: out.Attr.Mode & syscall.S_IFMT, Ino: n.inode()}), 0
}

// list returns a directory stream of entries.
func list(entries []fuse.DirEntry) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream(entries), 0
}

func dirEntry(name string, mode uint32, ino uint64) fuse.DirEntry {
	return fuse.DirEntry{Name: name, Mode: mode, Ino: ino}
}

// rootDir lists the bucket's worlds, the root ctl and .worldfs.
type rootDir struct{ dirBase }

var (
	_ = (gofs.NodeLookuper)((*rootDir)(nil))
	_ = (gofs.NodeReaddirer)((*rootDir)(nil))
)

const statsDirName = ".worldfs"

func (r *rootDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	start := time.Now()
	defer r.m.stats.op("readdir", start)
	ws, err := r.m.worlds(ctx)
	if err != nil {
		return nil, r.m.errno("listing worlds", err)
	}
	out := []fuse.DirEntry{
		dirEntry(statsDirName, syscall.S_IFDIR, ino(statsDirName)),
		dirEntry("ctl", syscall.S_IFREG, ino("ctl")),
		dirEntry(ctlErrorsName, syscall.S_IFREG, ino(ctlErrorsName)),
	}
	for _, w := range ws {
		out = append(out, dirEntry(w.ID, syscall.S_IFDIR, ino(w.ID)))
	}
	return list(out)
}

func (r *rootDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	start := time.Now()
	defer r.m.stats.op("lookup", start)
	switch name {
	case statsDirName:
		return r.m.child(ctx, r.EmbeddedInode(), &statsDir{dirBase{m: r.m, ino: ino(name)}}, out)
	case "ctl":
		return r.m.child(ctx, r.EmbeddedInode(), &ctlFile{m: r.m, ino: ino(name)}, out)
	case ctlErrorsName:
		return r.m.child(ctx, r.EmbeddedInode(), r.m.ctlErrors("", ino(name)), out)
	}
	e, ok, err := r.m.world(ctx, name)
	if err != nil {
		return nil, r.m.errno("world "+name, err)
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	created := e.Created.UnixMilli()
	return r.m.child(ctx, r.EmbeddedInode(), &worldDir{dirBase{m: r.m, ino: ino(name), imm: true, when: func(context.Context) int64 { return created }}, name}, out)
}

// worldDir is one world: world.json, ctl, runs/, tokens/.
type worldDir struct {
	dirBase
	world string
}

var (
	_ = (gofs.NodeLookuper)((*worldDir)(nil))
	_ = (gofs.NodeReaddirer)((*worldDir)(nil))
)

func (w *worldDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return list([]fuse.DirEntry{
		dirEntry("world.json", syscall.S_IFREG, ino(w.world, "world.json")),
		dirEntry("ctl", syscall.S_IFREG, ino(w.world, "ctl")),
		dirEntry(ctlErrorsName, syscall.S_IFREG, ino(w.world, ctlErrorsName)),
		dirEntry("runs", syscall.S_IFDIR, ino(w.world, "runs")),
		dirEntry("tokens", syscall.S_IFDIR, ino(w.world, "tokens")),
		dirEntry("facts", syscall.S_IFDIR, ino(w.world, "facts")),
	})
}

func (w *worldDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var n node
	switch name {
	case "world.json":
		n = &bytesFile{m: w.m, ino: ino(w.world, name), when: w.m.worldTime(w.world), content: func(ctx context.Context) ([]byte, error) {
			return w.m.worldJSON(ctx, w.world)
		}}
	case "ctl":
		n = &ctlFile{m: w.m, ino: ino(w.world, name), world: w.world}
	case ctlErrorsName:
		n = w.m.ctlErrors(w.world, ino(w.world, name))
	case "runs":
		n = &runsDir{dirBase{m: w.m, ino: ino(w.world, name), when: w.m.worldTime(w.world)}, w.world}
	case "tokens":
		n = &tokensDir{dirBase{m: w.m, ino: ino(w.world, name), when: w.m.worldTime(w.world)}, w.world}
	case "facts":
		n = &factsDir{dirBase{m: w.m, ino: ino(w.world, name)}, w.world}
	default:
		return nil, syscall.ENOENT
	}
	return w.m.child(ctx, w.EmbeddedInode(), n, out)
}

// runsDir lists a world's runs.
type runsDir struct {
	dirBase
	world string
}

var (
	_ = (gofs.NodeLookuper)((*runsDir)(nil))
	_ = (gofs.NodeReaddirer)((*runsDir)(nil))
)

func (r *runsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	runs, err := r.m.runs(ctx, r.world)
	if err != nil {
		return nil, r.m.errno("runs of "+r.world, err)
	}
	var out []fuse.DirEntry
	for _, run := range runs {
		out = append(out, dirEntry(run, syscall.S_IFDIR, ino(r.world, "runs", run)))
	}
	return list(out)
}

func (r *runsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	runs, cold, err := r.m.coldRuns(ctx, r.world, false)
	if err == nil && cold && !slices.Contains(runs, name) {
		runs, cold, err = r.m.coldRuns(ctx, r.world, true) // a run's first publish a moment ago
	}
	if err == nil && !cold {
		runs, err = r.m.runs(ctx, r.world)
	}
	if err == nil && !cold && !slices.Contains(runs, name) {
		if _, err = r.m.state(ctx, r.world, true); err == nil {
			runs, err = r.m.runs(ctx, r.world)
		}
	}
	if err != nil {
		return nil, r.m.errno("runs of "+r.world, err)
	}
	if !slices.Contains(runs, name) {
		return nil, syscall.ENOENT
	}
	return r.m.child(ctx, r.EmbeddedInode(), &runDir{dirBase{m: r.m, ino: ino(r.world, "runs", name), when: r.m.headTime(r.world, name)}, r.world, name}, out)
}

// runDir is one run: head, ticks/, tables/, tags/.
type runDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*runDir)(nil))
	_ = (gofs.NodeReaddirer)((*runDir)(nil))
)

func (r *runDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	out := []fuse.DirEntry{
		dirEntry("ticks", syscall.S_IFDIR, ino(r.world, "runs", r.run, "ticks")),
		dirEntry("tables", syscall.S_IFDIR, ino(r.world, "runs", r.run, "tables")),
		dirEntry("tags", syscall.S_IFDIR, ino(r.world, "runs", r.run, "tags")),
	}
	if _, ok, err := r.m.head(ctx, r.world, r.run); err != nil {
		return nil, r.m.errno("head of "+r.world, err)
	} else if ok {
		out = append(out, dirEntry("head", syscall.S_IFLNK, ino(r.world, "runs", r.run, "head")))
	}
	return list(out)
}

func (r *runDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	id := ino(r.world, "runs", r.run, name)
	var n node
	switch name {
	case "ticks":
		n = &ticksDir{dirBase{m: r.m, ino: id, when: r.m.headTime(r.world, r.run)}, r.world, r.run}
	case "tables":
		n = &tablesDir{dirBase{m: r.m, ino: id, when: r.m.headTime(r.world, r.run)}, r.world, r.run}
	case "tags":
		n = &tagsDir{dirBase{m: r.m, ino: id}, r.world, r.run}
	case "head":
		if _, ok, err := r.m.head(ctx, r.world, r.run); err != nil {
			return nil, r.m.errno("head of "+r.world, err)
		} else if !ok {
			return nil, syscall.ENOENT
		}
		n = &headLink{m: r.m, ino: id, world: r.world, run: r.run}
	default:
		return nil, syscall.ENOENT
	}
	return r.m.child(ctx, r.EmbeddedInode(), n, out)
}

// ticksDir lists a run's visible ticks, inherited ones included.
type ticksDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*ticksDir)(nil))
	_ = (gofs.NodeOpendirHandler)((*ticksDir)(nil))
)

// OpendirHandle opens a listing of the run's visible ticks: a stream of
// the view's tick records (see tickStream), not a list of them.
func (d *ticksDir) OpendirHandle(ctx context.Context, _ uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	defer d.m.stats.op("readdir", start)
	s, err := d.m.openStream(ctx, d)
	if err != nil {
		return nil, 0, d.m.errno("ticks of "+d.world, err)
	}
	return s, 0, 0
}

// Lookup finds tick N by its name (TickName) or, for scripts written
// before names were padded, by N in plain decimal: a symbolic link to the
// padded name, which listings never show.
func (d *ticksDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	start := time.Now()
	defer d.m.stats.op("lookup", start)
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return nil, syscall.ENOENT
	}
	canonical := TickName(n)
	if name != canonical && name != strconv.FormatInt(n, 10) {
		return nil, syscall.ENOENT
	}
	t, ok, err := d.m.tick(ctx, d.world, d.run, n)
	if err != nil {
		return nil, d.m.errno("tick "+name+" of "+d.world, err)
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	id := ino(d.world, "runs", d.run, "ticks", name)
	if name != canonical {
		return d.m.child(ctx, d.EmbeddedInode(), &link{m: d.m, ino: id, target: []byte(canonical), ms: t.PublishedUnixMs}, out)
	}
	return d.m.snapshot(ctx, d.EmbeddedInode(), place{d.world, d.run}, t, id, out)
}

// TickName is the name of tick n in ticks/ (and, with ".parquet", in
// tables/<t>/): n zero-padded to 12 digits, so that lexical order is tick
// order up to tick 999,999,999,999.
func TickName(n int64) string { return string(appendTickName(nil, n)) }

// appendTickName appends TickName(n) to dst.
func appendTickName(dst []byte, n int64) []byte {
	const width = 12
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], n, 10)
	for range width - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// link is an immutable symbolic link: a tick's plain-decimal name, which
// points at its padded one.
type link struct {
	gofs.Inode
	m      *Mount
	ino    uint64
	target []byte
	ms     int64 // modification time (Unix ms)
}

var (
	_ = (gofs.NodeReadlinker)((*link)(nil))
	_ = (gofs.NodeGetattrer)((*link)(nil))
)

func (l *link) immutable() bool { return true }
func (l *link) inode() uint64   { return l.ino }

func (l *link) fill(_ context.Context, a *fuse.Attr) syscall.Errno {
	a.Mode = syscall.S_IFLNK | 0o777
	a.Nlink = 1
	a.Size = uint64(len(l.target))
	a.Ino = l.ino
	setTimes(a, l.ms)
	return 0
}

func (l *link) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.m.setAttrTimeout(out, true)
	return l.fill(ctx, &out.Attr)
}

func (l *link) Readlink(context.Context) ([]byte, syscall.Errno) { return l.target, 0 }

// tokensDir lists the commit tokens of a world's runs.
type tokensDir struct {
	dirBase
	world string
}

var (
	_ = (gofs.NodeLookuper)((*tokensDir)(nil))
	_ = (gofs.NodeOpendirHandler)((*tokensDir)(nil))
)

// OpendirHandle opens a listing of the tokens of every run's visible
// ticks (each run's in token order): a tokenList.
func (d *tokensDir) OpendirHandle(ctx context.Context, _ uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	defer d.m.stats.op("readdir", start)
	runs, err := d.m.runs(ctx, d.world)
	if err != nil {
		return nil, 0, d.m.errno("tokens of "+d.world, err)
	}
	var all []tokenEntry
	for i, run := range runs {
		v, err := d.m.view(ctx, d.world, run, false)
		if err != nil {
			return nil, 0, d.m.errno("tokens of "+d.world, err)
		}
		v.Ticks(math.MinInt64, math.MaxInt64, func(t tickRef) bool {
			all = append(all, tokenEntry{run: run, order: i, t: t})
			return true
		})
	}
	return &tokenList{d: d, entries: onePerToken(all)}, 0, 0
}

// tokenEntry is one entry of tokens/: a token, the run and the tick it
// names there.
type tokenEntry struct {
	run   string
	order int // the run's place in the world's runs, which a lookup tries in order
	t     tickRef
}

// onePerToken sorts entries by token and keeps one entry per token: the
// one a lookup of the token answers (tokensDir.Lookup), so that a token
// published at several ticks (or in several runs) is listed once, as the
// tick a stat of it shows. That is the first run, in the world's order,
// whose tick the token names carries it (index.TokenTick), else the first
// run's lowest tick carrying it.
func onePerToken(entries []tokenEntry) []tokenEntry {
	slices.SortFunc(entries, func(a, b tokenEntry) int {
		return cmp.Or(strings.Compare(a.t.CommitToken, b.t.CommitToken), cmp.Compare(a.order, b.order), cmp.Compare(a.t.Tick.Tick, b.t.Tick.Tick))
	})
	out := entries[:0]
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].t.CommitToken == entries[i].t.CommitToken {
			j++
		}
		pick := entries[i]
		if n, named := index.TokenTick(pick.t.CommitToken); named {
			if k := slices.IndexFunc(entries[i:j], func(e tokenEntry) bool { return e.t.Tick.Tick == n }); k >= 0 {
				pick = entries[i+k]
			}
		}
		out = append(out, pick)
		i = j
	}
	return out
}

// tokenList is an open listing of tokens/ that keeps each entry's tick
// record, so that a READDIRPLUS lookup of the entry it just returned uses
// that record instead of searching the catalog for the token again (ls -l
// of a long tokens/ costs no search per entry).
type tokenList struct {
	d       *tokensDir
	entries []tokenEntry // in listing order, one per token
	pos     int          // entries returned since the start
	de      fuse.DirEntry
}

var (
	_ = (gofs.FileReaddirenter)((*tokenList)(nil))
	_ = (gofs.FileSeekdirer)((*tokenList)(nil))
	_ = (gofs.FileLookuper)((*tokenList)(nil))
)

func (l *tokenList) Readdirent(context.Context) (*fuse.DirEntry, syscall.Errno) {
	if l.pos >= len(l.entries) {
		return nil, 0
	}
	tok := l.entries[l.pos].t.CommitToken
	l.pos++
	l.de = fuse.DirEntry{Name: tok, Mode: syscall.S_IFDIR, Ino: ino(l.d.world, "tokens", tok), Off: uint64(l.pos)}
	return &l.de, 0
}

// Seekdir goes to position off (offsets are positions).
func (l *tokenList) Seekdir(_ context.Context, off uint64) syscall.Errno {
	l.pos, l.de = int(min(off, uint64(len(l.entries)))), fuse.DirEntry{}
	return 0
}

// Lookup answers a READDIRPLUS lookup of the entry just returned from its
// record; any other name is looked up in the directory.
func (l *tokenList) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if l.pos == 0 || name != l.de.Name {
		return l.d.Lookup(ctx, name, out)
	}
	e := l.entries[l.pos-1]
	return l.d.m.snapshot(ctx, l.d.EmbeddedInode(), place{l.d.world, e.run}, e.t, l.de.Ino, out)
}

func (d *tokensDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	runs, err := d.m.runs(ctx, d.world)
	if err != nil {
		return nil, d.m.errno("tokens of "+d.world, err)
	}
	if !slices.Contains(runs, index.DefaultRun) {
		runs = append(runs, index.DefaultRun) // a first publish a moment ago
	}
	// A token that names its tick is looked for at that tick first: a
	// lookup of one tick in each run, which reads the part holding it.
	if n, named := index.TokenTick(name); named {
		for _, run := range runs {
			t, ok, err := d.m.tick(ctx, d.world, run, n)
			if err != nil {
				return nil, d.m.errno("token "+name, err)
			}
			if ok && t.CommitToken == name {
				return d.m.snapshot(ctx, d.EmbeddedInode(), place{d.world, run}, t, ino(d.world, "tokens", name), out)
			}
		}
	}
	for _, run := range runs {
		t, ok, err := d.m.token(ctx, d.world, run, name)
		if err != nil {
			return nil, d.m.errno("token "+name, err)
		}
		if ok {
			return d.m.snapshot(ctx, d.EmbeddedInode(), place{d.world, run}, t, ino(d.world, "tokens", name), out)
		}
	}
	return nil, syscall.ENOENT
}

// tablesDir lists the tables of a run's visible history.
type tablesDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*tablesDir)(nil))
	_ = (gofs.NodeReaddirer)((*tablesDir)(nil))
)

// tableNames returns the readable names of the tables visible ticks of
// (world, run) published: those of the files the view plans (not facts),
// planned as the SQL views plan them (planningState), so that a listing
// of tables/ of a long world read cold reads the summaries of its
// compacted history, not every tick. Where a summary cannot tell (a fork
// point inside a compacted stretch) it plans from every tick.
func (m *Mount) tableNames(ctx context.Context, world, run string, exact bool) ([]string, error) {
	ids := map[[2]string]bool{}
	plan := func(load index.PartLoader) error {
		p, err := index.OpenPlan(ctx, load, world, run)
		if err != nil {
			return err
		}
		return p.Files(math.MinInt64, math.MaxInt64, func(f index.File) bool {
			if !f.Fact {
				ids[[2]string{f.World, f.Table}] = true
			}
			return true
		})
	}
	err := plan(func(ctx context.Context, w string) (*index.Partial, error) { return m.planningState(ctx, w, exact) })
	if errors.Is(err, index.ErrNotLoaded) {
		clear(ids)
		err = plan(func(ctx context.Context, w string) (*index.Partial, error) {
			s, err := m.state(ctx, w, exact)
			if err != nil {
				return nil, err
			}
			return index.PartialOf(s), nil
		})
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for id := range ids {
		info, err := m.tableInfo(ctx, id[0], id[1])
		if err != nil {
			return nil, err
		}
		if !slices.Contains(names, info.Name) {
			names = append(names, info.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// planningState is world's state for planning its files: if the mount
// does not hold its catalog open, its compacted history as the summaries
// of its checkpoint's parts, read now and not kept
// (index.LoadSummarizedAtMost, decoding at most coldKeepParts parts
// without one); else, or for a world without a checkpoint or whose
// history is mostly not summarized, its catalog's, opened and kept.
func (m *Mount) planningState(ctx context.Context, world string, exact bool) (*index.Partial, error) {
	m.mu.Lock()
	open := m.cats.Contains(world)
	m.mu.Unlock()
	if !open {
		p, _, err := index.LoadSummarizedAtMost(finish(ctx), m.b, world, coldKeepParts)
		if !errors.Is(err, index.ErrUnsummarized) {
			return p, err
		}
	}
	s, err := m.state(ctx, world, exact)
	if err != nil {
		return nil, err
	}
	return index.PartialOf(s), nil
}

func (d *tablesDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	names, err := d.m.tableNames(ctx, d.world, d.run, false)
	if err != nil {
		return nil, d.m.errno("tables of "+d.world, err)
	}
	var out []fuse.DirEntry
	for _, n := range names {
		out = append(out, dirEntry(n, syscall.S_IFDIR, ino(d.world, "runs", d.run, "tables", n)))
	}
	return list(out)
}

func (d *tablesDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	// A table the head published is visible: the head's part answers (of
	// a world read cold; any other name is looked for in every tick).
	if t, ok, err := d.m.head(ctx, d.world, d.run); err != nil {
		return nil, d.m.errno("tables of "+d.world, err)
	} else if ok {
		tables, err := d.m.tickTables(ctx, t)
		if err != nil {
			return nil, d.m.errno("tables of "+d.world, err)
		}
		if _, found := tables[name]; found {
			return d.m.child(ctx, d.EmbeddedInode(), &tableDir{dirBase{m: d.m, ino: ino(d.world, "runs", d.run, "tables", name), when: d.m.headTime(d.world, d.run)}, d.world, d.run, name}, out)
		}
	}
	for _, exact := range []bool{false, true} {
		names, err := d.m.tableNames(ctx, d.world, d.run, exact)
		if err != nil {
			return nil, d.m.errno("tables of "+d.world, err)
		}
		if slices.Contains(names, name) {
			return d.m.child(ctx, d.EmbeddedInode(), &tableDir{dirBase{m: d.m, ino: ino(d.world, "runs", d.run, "tables", name), when: d.m.headTime(d.world, d.run)}, d.world, d.run, name}, out)
		}
	}
	return nil, syscall.ENOENT
}

// tableDir holds one file per visible tick of one table: <tick>.parquet,
// zero-padded so that names sort in tick order.
type tableDir struct {
	dirBase
	world, run, name string
}

var (
	_ = (gofs.NodeLookuper)((*tableDir)(nil))
	_ = (gofs.NodeOpendirHandler)((*tableDir)(nil))
)

func tickFileName(tick int64) string { return TickName(tick) + ".parquet" }

// OpendirHandle opens a listing of the files of the run's visible ticks
// that have the table: a stream of the view's tick records, as ticks/
// (see tickStream).
func (d *tableDir) OpendirHandle(ctx context.Context, _ uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	defer d.m.stats.op("readdir", start)
	d.m.compactedFiles.list(d.world, d.name)
	s, err := d.m.openStream(ctx, &ticksDir{dirBase{m: d.m}, d.world, d.run})
	if err != nil {
		return nil, 0, d.m.errno("table "+d.name, err)
	}
	s.table, s.has = d, d.hasTable(ctx)
	return s, 0, 0
}

// hasTable returns a test of whether a tick has the table, for ticks
// given in order: decided once per list of tables (the ticks of a
// compacted span share one) and once per table id.
func (d *tableDir) hasTable(ctx context.Context) func(tickRef) (bool, error) {
	named := map[[2]string]bool{}
	var prev *index.Tick
	has := false
	return func(t tickRef) (bool, error) {
		if t.SameTables(prev) {
			return has, nil
		}
		prev, has = t.Tick, false
		tables, err := t.Tables()
		if err != nil {
			return false, err
		}
		for _, tf := range tables {
			key := [2]string{t.World, tf.Table}
			is, ok := named[key]
			if !ok {
				info, err := d.m.tableInfo(ctx, t.World, tf.Table)
				if err != nil {
					return false, err
				}
				is = info.Name == d.name
				named[key] = is
			}
			has = has || is
		}
		return has, nil
	}
}

func (d *tableDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n, err := strconv.ParseInt(strings.TrimSuffix(name, ".parquet"), 10, 64)
	if err != nil || tickFileName(n) != name {
		return nil, syscall.ENOENT
	}
	// A tick's file never changes: one looked up before (a listing's
	// READDIRPLUS asks again for every entry) is answered as it is.
	if ch := d.GetChild(name); ch != nil {
		if f, ok := ch.Operations().(*snapFile); ok {
			if _, sized := f.knownSize(); sized {
				return d.m.child(ctx, d.EmbeddedInode(), f, out)
			}
		}
	}
	defer d.m.stats.op("lookup", time.Now())
	t, ok, err := d.m.tick(ctx, d.world, d.run, n)
	if err != nil {
		return nil, d.m.errno("table "+d.name, err)
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	tables, err := d.m.tickTables(ctx, t)
	if err != nil {
		return nil, d.m.errno("table "+d.name, err)
	}
	tf, ok := tables[d.name]
	if !ok {
		return nil, syscall.ENOENT
	}
	f := &snapFile{m: d.m, ino: ino(d.world, "runs", d.run, "tables", d.name, name), at: place{d.world, d.run}, t: t, table: d.name, format: frame.FormatParquet}
	err = f.sizeAtLookup(ctx, func(ctx context.Context) (content, error) { return d.m.contentOf(ctx, t, tf) })
	if err != nil {
		return nil, d.m.errno("table "+d.name, err)
	}
	return d.m.child(ctx, d.EmbeddedInode(), f, out)
}

// headLink points at the run's newest visible tick.
type headLink struct {
	gofs.Inode
	m          *Mount
	ino        uint64
	world, run string
}

var (
	_ = (gofs.NodeReadlinker)((*headLink)(nil))
	_ = (gofs.NodeGetattrer)((*headLink)(nil))
)

func (h *headLink) immutable() bool { return false }
func (h *headLink) inode() uint64   { return h.ino }

func (h *headLink) target(ctx context.Context) ([]byte, syscall.Errno) {
	target, _, errno := h.resolve(ctx)
	return target, errno
}

// resolve returns the link's target and when its tick was published.
func (h *headLink) resolve(ctx context.Context) ([]byte, int64, syscall.Errno) {
	t, ok, err := h.m.head(ctx, h.world, h.run)
	if err != nil {
		return nil, 0, h.m.errno("head of "+h.world, err)
	}
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	return appendTickName([]byte("ticks/"), t.Tick.Tick), t.PublishedUnixMs, 0
}

func (h *headLink) fill(ctx context.Context, a *fuse.Attr) syscall.Errno {
	target, ms, errno := h.resolve(ctx)
	if errno != 0 {
		return errno
	}
	a.Mode = syscall.S_IFLNK | 0o777
	a.Nlink = 1
	a.Size = uint64(len(target))
	a.Ino = h.ino
	setTimes(a, ms)
	return 0
}

func (h *headLink) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	h.m.setAttrTimeout(out, false)
	return h.fill(ctx, &out.Attr)
}

func (h *headLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) { return h.target(ctx) }

// statsDir holds the stats file.
type statsDir struct{ dirBase }

var (
	_ = (gofs.NodeLookuper)((*statsDir)(nil))
	_ = (gofs.NodeReaddirer)((*statsDir)(nil))
)

func (d *statsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return list([]fuse.DirEntry{dirEntry("stats", syscall.S_IFREG, ino(statsDirName, "stats"))})
}

func (d *statsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name != "stats" {
		return nil, syscall.ENOENT
	}
	f := &bytesFile{m: d.m, ino: ino(statsDirName, name), content: func(context.Context) ([]byte, error) {
		return d.m.statsJSON()
	}}
	return d.m.child(ctx, d.EmbeddedInode(), f, out)
}
