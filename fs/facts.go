package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// <world>/facts/ holds the facts and receipts whose claims are complete:
//
//	receipts.parquet, receipts.csv   the world's evaluation receipts (worldfs_receipts)
//	<run>/<table>.parquet, .csv      the visible facts of each fact table of a run
//
// The files change as facts are completed: a name is looked up at each
// use and leads to the current version, derived (once per set of visible
// facts, in Go: see rowSet) when first stat'ed or read. Each version is
// an inode of its own, whose bytes never change (factFile).

const receiptsFile = "receipts"

// factsDir is <world>/facts.
type factsDir struct {
	dirBase
	world string
}

var (
	_ = (gofs.NodeLookuper)((*factsDir)(nil))
	_ = (gofs.NodeReaddirer)((*factsDir)(nil))
)

func (d *factsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	runs, err := d.m.factRuns(ctx, d.world)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	receipts, err := d.m.factTables(ctx, d.world, engine.EvaluationRun)
	if err != nil {
		return nil, d.m.errno("receipts of "+d.world, err)
	}
	var out []fuse.DirEntry
	for _, f := range formats {
		out = append(out, dirEntry(receiptsFile+"."+f, syscall.S_IFREG, factIno(d.world, engine.EvaluationRun, frame.ReceiptsView, f, factSum(receipts[frame.ReceiptsView]))))
	}
	for _, run := range runs {
		out = append(out, dirEntry(run, syscall.S_IFDIR, ino(d.world, "facts", run)))
	}
	return list(out)
}

func (d *factsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if base, format, ok := splitFormat(name); ok && base == receiptsFile {
		return d.m.factChild(ctx, d.EmbeddedInode(), d.world, engine.EvaluationRun, frame.ReceiptsView, format, out)
	}
	id := ino(d.world, "facts", name)
	runs, err := d.m.factRuns(ctx, d.world)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	if !slices.Contains(runs, name) {
		return nil, syscall.ENOENT
	}
	return d.m.child(ctx, d.EmbeddedInode(), &factRunDir{dirBase{m: d.m, ino: id}, d.world, name}, out)
}

// factRunDir is <world>/facts/<run>: a file per fact table and format.
type factRunDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*factRunDir)(nil))
	_ = (gofs.NodeReaddirer)((*factRunDir)(nil))
)

func (d *factRunDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	tables, err := d.m.factTables(ctx, d.world, d.run)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	var out []fuse.DirEntry
	for _, name := range sortedKeys(tables) {
		for _, f := range formats {
			out = append(out, dirEntry(name+"."+f, syscall.S_IFREG, factIno(d.world, d.run, name, f, factSum(tables[name]))))
		}
	}
	return list(out)
}

func (d *factRunDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	base, format, ok := splitFormat(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	tables, err := d.m.factTables(ctx, d.world, d.run)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	if _, ok := tables[base]; !ok {
		return nil, syscall.ENOENT
	}
	return d.m.factChild(ctx, d.EmbeddedInode(), d.world, d.run, base, format, out)
}

// factChild looks up the facts file of table (the receipts: run
// engine.EvaluationRun) in format: its current version's inode.
func (m *Mount) factChild(ctx context.Context, parent *gofs.Inode, world, run, table, format string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	f, err := m.factFile(ctx, world, run, table, format)
	if err != nil {
		return nil, m.errno(fmt.Sprintf("facts %s of %s", table, world), err)
	}
	return m.child(ctx, parent, f, out)
}

func splitFormat(name string) (base, format string, ok bool) {
	for _, f := range formats {
		if b, found := strings.CutSuffix(name, "."+f); found && b != "" {
			return b, f, true
		}
	}
	return "", "", false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// factRuns returns the runs of world with visible facts: its own (with or
// without ticks) and, for a fork, those it inherits.
func (m *Mount) factRuns(ctx context.Context, world string) ([]string, error) {
	s, err := m.claimsState(ctx, world)
	if err != nil {
		return nil, err
	}
	runs, err := m.runs(ctx, world)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, run := range s.ClaimRuns() {
		if !slices.Contains(runs, run) {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	for _, run := range runs {
		if run == engine.EvaluationRun {
			continue
		}
		tables, err := m.factTables(ctx, world, run)
		if err != nil {
			return nil, err
		}
		if len(tables) > 0 {
			out = append(out, run)
		}
	}
	return out, nil
}

// factTables returns the fact tables with visible facts in run of world,
// by name, each with the completed claim tokens of its facts, sorted: the
// same lineage walk as the SQL views (a fork shows its ancestors' facts up
// to its fork point). Run engine.EvaluationRun gives the receipts, which
// are the world's own.
func (m *Mount) factTables(ctx context.Context, world, run string) (map[string][]string, error) {
	var v *index.Plan
	if run == engine.EvaluationRun {
		s, err := m.claimsState(ctx, world)
		if err != nil {
			return nil, err
		}
		v = index.OwnPlan(s, run)
	} else {
		var err error
		if v, err = m.factsView(ctx, world, run); err != nil {
			return nil, err
		}
	}
	return m.factTablesOf(ctx, v, run)
}

// factsView is the plan of (world, run) that facts/ reads: its lineage,
// each world's state from claimsState. Only its facts are asked (Plan.Facts
// reads the claims, which a partial state holds whole), never its ticks.
func (m *Mount) factsView(ctx context.Context, world, run string) (*index.Plan, error) {
	return index.OpenPlan(ctx, m.claimsState, world, run)
}

// claimsState returns world's state at most Freshness old, for its record,
// runs and claims: of a world the mount reads cold, a copy of its partial
// state (withCold: the checkpoint's record, runs, claims and commands and
// the log after it, no tick part more than it holds already), so that a
// listing or read of facts/ of a long world never loads its history; else
// its catalog's, as ticks/ reads it. The copy (Partial.Clone) is the
// caller's: the state the mount holds grows in place (Partial.Load) while
// the caller reads it.
func (m *Mount) claimsState(ctx context.Context, world string) (*index.Partial, error) {
	var s *index.Partial
	cold, err := m.withCold(ctx, world, index.Want{From: 1, To: 0}, m.opts.Freshness, func(p *index.Partial) error {
		s = p.Clone()
		return nil
	})
	if err != nil || cold {
		return s, err
	}
	st, err := m.state(ctx, world, false)
	if err != nil {
		return nil, err
	}
	return index.PartialOf(st), nil
}

// factTablesOf is factTables of the facts v shows.
func (m *Mount) factTablesOf(ctx context.Context, v *index.Plan, run string) (map[string][]string, error) {
	out := map[string][]string{}
	var ferr error
	v.Facts(math.MaxInt64, func(c index.FactRef) bool {
		for _, tf := range c.Tables {
			ti, err := m.tableInfo(ctx, c.World, tf.Table)
			if err != nil {
				ferr = err
				return false
			}
			name := ti.Name
			if run == engine.EvaluationRun {
				name = frame.ReceiptsView
			}
			out[name] = append(out[name], c.CommitToken)
		}
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	for _, tokens := range out {
		slices.Sort(tokens)
	}
	return out, nil
}

// factFile is one version of a facts file: the visible facts of table
// (or the receipts) at its lookup, derived once per set of visible facts.
// A version is an inode of its own, numbered by the facts' claim tokens:
// its bytes, and so its size and the pages the kernel caches of it, never
// change, and a file opened before a new fact completed reads its
// version to the end while the name leads to the next (the kernel caches
// pages per inode: two versions under one would mix in a reader's
// reads). Its size is true at lookup: a stat derives the version if the
// cache does not hold it yet (from the facts' fragments, in Go, never
// with DuckDB: see rowSet), so that tar and readers that trust st_size
// read the facts whole. The name is looked up anew at each use
// (entryTimeout), since facts change as claims complete.
type factFile struct {
	gofs.Inode
	m                         *Mount
	ino                       uint64
	world, run, table, format string
	ver                       version
}

var (
	_ = (gofs.NodeGetattrer)((*factFile)(nil))
	_ = (gofs.NodeSetattrer)((*factFile)(nil))
	_ = (gofs.NodeOpener)((*factFile)(nil))
)

// factFile returns the current version of the facts file of table (the
// receipts: run engine.EvaluationRun) of world's run in format: catalog
// only (the claims of the lineage's states, factsView).
func (m *Mount) factFile(ctx context.Context, world, run, table, format string) (*factFile, error) {
	f := &factFile{m: m, world: world, run: run, table: table, format: format}
	v, err := m.factsView(ctx, world, f.viewRun())
	if err != nil {
		return nil, err
	}
	if run == engine.EvaluationRun {
		v = v.Own(run)
	}
	rs, tokens, err := m.factRows(ctx, v, run, table)
	if err != nil {
		return nil, err
	}
	// Under derived/facts2/: earlier builds kept DuckDB's copies (other
	// columns first) under facts/, and of tables whose schemas give a
	// column several types under derived/facts/, in a cache this mount
	// may share.
	sum := factSum(tokens)
	f.ver = version{rs, fmt.Sprintf("derived/facts2/%s/%s/%s-%s.%s", world, run, table, hex.EncodeToString(sum[:12]), format)}
	f.ino = factIno(world, run, table, format, sum)
	return f, nil
}

// factSum names a version of a facts file by its claim tokens, sorted.
func factSum(tokens []string) [32]byte { return sha256.Sum256([]byte(strings.Join(tokens, "\n"))) }

// factIno is the inode number of the version of a facts file that sum
// (factSum) names.
func factIno(world, run, table, format string, sum [32]byte) uint64 {
	return ino(world, "facts", run, table+"."+format, string(sum[:]))
}

func (f *factFile) immutable() bool { return false }
func (f *factFile) inode() uint64   { return f.ino }

// attrTimeout: a version's attributes never change.
func (f *factFile) attrTimeout() time.Duration { return f.m.timeout(true) }

// entryTimeout: the name is looked up again at every use, so that it
// leads to the current version (a fact this mount's ctl just completed
// shows at once, as the size at a stat did when one inode held every
// version).
func (f *factFile) entryTimeout() time.Duration { return 0 }

func (f *factFile) viewRun() string {
	if f.run == engine.EvaluationRun {
		return index.DefaultRun // receipts are the world's: any run's views show them
	}
	return f.run
}

// version is one version of a facts file: its rows and its cache key
// (named by the facts' claim tokens).
type version struct {
	rows *rowSet
	key  string
}

// factRows returns the rowSet of the visible facts of the fact table
// called name that v shows (with run engine.EvaluationRun, the receipts),
// and their claim tokens, sorted: the rows of the claims' fragments that
// a claim published (index.RowRule against the completed claims'
// (tick, token) pairs, as the views keep them), entity ids descending (as
// sql.CopyFacts orders them), encoded as the fact table's file (the union
// of its schemas by column name, NULL where a schema lacks a column, as
// <name>_raw shows them: a column the schemas give several types has the
// type the view gives it, each value cast as the view casts it, see
// frame.UnionType) or, for the receipts, as frame.ReceiptsView's columns.
func (m *Mount) factRows(ctx context.Context, v *index.Plan, run, name string) (*rowSet, []string, error) {
	rs := &rowSet{published: pairs{}, desc: true}
	parts := map[string]*rowPart{}
	if run == engine.EvaluationRun {
		t := engine.ReceiptTable() // the file has the view's columns, with receipts or none
		parts[t.ID] = &rowPart{table: t}
	}
	var tokens []string
	var ferr error
	v.Facts(math.MaxInt64, func(c index.FactRef) bool {
		for _, tf := range c.Tables {
			t, err := m.table(ctx, c.World, tf.Table)
			if err != nil {
				ferr = err
				return false
			}
			if run != engine.EvaluationRun && t.Name != name {
				continue
			}
			p := parts[t.ID]
			if p == nil {
				p = &rowPart{table: t}
				parts[t.ID] = p
			}
			p.frags = append(p.frags, tf.Fragments...)
			rs.published[index.Stamp{Tick: c.Claim.Tick, Token: c.CommitToken}] = true
			tokens = append(tokens, c.CommitToken)
		}
		return true
	})
	if ferr != nil {
		return nil, nil, ferr
	}
	if len(parts) == 0 {
		return nil, nil, fmt.Errorf("no visible facts of table %s in world %s: %w", name, v.World, errGone)
	}
	slices.Sort(tokens)
	var tables []*engine.Table
	for _, id := range sortedKeys(parts) {
		rs.parts = append(rs.parts, *parts[id])
		tables = append(tables, parts[id].table)
	}
	switch {
	case run == engine.EvaluationRun:
		rs.encode = func(g []frame.Gathered) ([]byte, error) { return frame.EncodeView(g, frame.ReceiptColumns, true) }
	case len(rs.parts) == 1:
		rs.encode = func(g []frame.Gathered) ([]byte, error) {
			data, _, err := frame.EncodeGathered(g[0], false)
			return data, err
		}
	default:
		cols, err := frame.UnionColumns(tables...)
		if err != nil {
			return nil, nil, fmt.Errorf("fact table %s: %w", name, err)
		}
		rs.encode = func(g []frame.Gathered) ([]byte, error) { return frame.EncodeView(g, cols, true) }
	}
	return rs, tokens, nil
}

func (f *factFile) fill(ctx context.Context, a *fuse.Attr) syscall.Errno {
	what := fmt.Sprintf("facts %s of %s", f.table, f.world)
	size, err := bounded(ctx, f.m, what, nil, f.size)
	if err != nil {
		return f.m.errno(what, err)
	}
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(size)
	a.Blocks = (a.Size + 511) / 512
	a.Ino = f.ino
	setTimes(a, f.m.worldTime(f.world)(ctx))
	return 0
}

// size returns the size of the file's version, deriving it in Go if the
// cache does not hold it; never with DuckDB.
func (f *factFile) size(ctx context.Context) (int64, error) {
	p, err := f.m.gathered(ctx, f.ver.key, f.format, f.ver.rows)
	if err != nil {
		return 0, err
	}
	info, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

func (f *factFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.SetTimeout(f.attrTimeout())
	return f.fill(ctx, &out.Attr)
}

func (f *factFile) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (f *factFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	what := fmt.Sprintf("facts %s of %s", f.table, f.world)
	file, err := bounded(ctx, f.m, what, closeFile, f.open)
	if err != nil {
		return nil, 0, f.m.errno(what, err)
	}
	h, err := f.m.handle(body{f: file})
	if err != nil {
		return nil, 0, f.m.errno(what, err)
	}
	// The version's bytes never change: the kernel may keep its pages.
	return factHandle{h}, noFlush | fuse.FOPEN_KEEP_CACHE, 0
}

// open opens the file's version, deriving it into the cache if it is not
// there (any more).
func (f *factFile) open(ctx context.Context) (*os.File, error) {
	p, err := f.m.gathered(ctx, f.ver.key, f.format, f.ver.rows)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// factHandle is an open facts file, read through Read.
type factHandle struct{ r *roFile }

var (
	_ = (gofs.FileReader)(factHandle{})
	_ = (gofs.FileReleaser)(factHandle{})
)

func (h factHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.r.Read(ctx, dest, off)
}

func (h factHandle) Release(ctx context.Context) syscall.Errno { return h.r.Release(ctx) }
