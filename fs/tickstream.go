package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"syscall"
	"time"
	"unsafe"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/index"
)

// tickStream is an open listing of ticks/ or of tables/<t>/: it reads the
// run's tick records a batch at a time as the kernel asks for entries, so
// a listing costs what it returns (a step and no allocation per entry, one
// descent of the catalog per batch), never a list of the whole history
// held at once. It reads the run's lineage a world at a time, as
// index.View.Ticks does (a fork's ancestors up to its fork point, then
// its own ticks): each world through the catalog the mount holds open,
// else, if it has a checkpoint, read cold (see cold.go) from a partial
// state loaded at the open, adding the checkpoint's parts as the listing
// reaches them, so the first entries reach the kernel before the rest of
// the history is decoded, and a fork's listing never loads its ancestors'
// whole catalogs. A READDIRPLUS lookup in ticks/ of the entry it just
// returned uses that entry's record instead of resolving the tick again.
type tickStream struct {
	d *ticksDir
	// table, if set, is the tables/<t>/ listed instead of d (d then only
	// carries the mount, world and run), and has reports whether a tick
	// has the table.
	table *tableDir
	has   func(tickRef) (bool, error)
	segs  []*streamSeg // the lineage, oldest first (see openStream)
	seg   int          // the segment being read
	next  int64        // the first tick not yet read
	pos   uint64       // entries returned since the start

	batch []tickRef // read, not yet returned
	names []byte    // the batch's names; never modified once a name is cut
	last  tickRef   // the entry returned last
	de    fuse.DirEntry
}

// streamSeg is one world's part of a listing: its run's ticks up to upTo,
// from p (a state read cold, or its catalog's, whole).
type streamSeg struct {
	world, run string
	upTo       int64
	p          *index.Partial
	// loadedTo: p holds every tick up to it; parts: how many parts the
	// next step adds.
	loadedTo, parts int64
}

var (
	_ = (gofs.FileReaddirenter)((*tickStream)(nil))
	_ = (gofs.FileSeekdirer)((*tickStream)(nil))
	_ = (gofs.FileLookuper)((*tickStream)(nil))
)

// tickBatch is how many tick records a stream reads at once.
const tickBatch = 512

// openStream opens a listing of the visible ticks of d's run: the
// lineage's worlds, each through the catalog the mount holds open or
// read cold (listingState), oldest first.
func (m *Mount) openStream(ctx context.Context, d *ticksDir) (*tickStream, error) {
	s := &tickStream{d: d, next: math.MinInt64}
	world, run, upTo := d.world, d.run, int64(math.MaxInt64)
	for {
		p, err := m.listingState(ctx, world, run)
		if len(s.segs) > 0 && (errors.Is(err, index.ErrNoWorld) || err == nil && !p.World().Created) {
			return nil, fmt.Errorf("world %s: ancestor %s does not exist: %w", d.world, world, index.ErrCorrupt)
		}
		if err != nil {
			return nil, err
		}
		s.segs = append(s.segs, &streamSeg{world: world, run: run, upTo: upTo, p: p, loadedTo: index.PartTicks - 1, parts: 2})
		w := p.World()
		if w.Parent == "" {
			break
		}
		if slices.ContainsFunc(s.segs, func(sg *streamSeg) bool { return sg.world == w.Parent }) {
			return nil, fmt.Errorf("world %s: lineage loops through %s: %w", d.world, w.Parent, index.ErrCorrupt)
		}
		world, run, upTo = w.Parent, w.ForkRun, min(upTo, w.ForkTick)
	}
	slices.Reverse(s.segs)
	return s, nil
}

// listingState is world's state for a listing of run: its catalog's, if
// the mount holds it open or world has no checkpoint, else read cold from
// the part holding run's first ticks (more are added as the listing goes).
func (m *Mount) listingState(ctx context.Context, world, run string) (*index.Partial, error) {
	p, err := m.loadCold(ctx, world, index.Want{Run: run, From: 0, To: index.PartTicks - 1})
	if err != nil || p != nil {
		return p, err
	}
	st, err := m.state(ctx, world, false)
	if err != nil {
		return nil, err
	}
	return index.PartialOf(st), nil
}

// fill reads the next batch, with a fresh buffer for its names (go-fuse
// keeps the entries of its last reply, so a name outlives the batch):
// from each segment in turn its ticks after the ones listed (a fork's own
// follow its fork point), adding parts of a state read cold as the
// listing reaches them: one, then twice as many at each step up to
// coldParts (read at once), so that the first entries wait for one part
// and the whole listing for few steps.
func (s *tickStream) fill(ctx context.Context) error {
	s.batch = s.batch[:0]
	from := max(s.next, 0) // ticks are numbered from 0
	for len(s.batch) < tickBatch && s.seg < len(s.segs) {
		sg := s.segs[s.seg]
		r, published := sg.p.Run(sg.run)
		head := min(r.Head, sg.upTo)
		if !published || from > head {
			s.seg++
			continue
		}
		if from > sg.loadedTo {
			parts := max(sg.parts, 1)
			to := (from/index.PartTicks+parts)*index.PartTicks - 1
			err := sg.p.Load(ctx, index.Want{Run: sg.run, From: from, To: to})
			if errors.Is(err, index.ErrSuperseded) {
				// A listing held open past the collection of its
				// checkpoint goes on from a state loaded anew: the
				// ticks it listed never change.
				if sg.p, err = s.d.m.listingState(ctx, sg.world, sg.run); err == nil {
					sg.loadedTo, sg.parts = -1, 1
					continue
				}
			}
			if err != nil {
				return err
			}
			sg.loadedTo, sg.parts = to, min(2*parts, coldParts)
		}
		var kerr error
		err := sg.p.Ticks(sg.run, from, min(sg.loadedTo, head), func(t *index.Tick) bool {
			from = t.Tick + 1
			var keep bool
			if keep, kerr = s.keep(tickRef{World: sg.world, Run: sg.run, Tick: t}); kerr != nil {
				return false
			}
			return !keep || len(s.batch) < tickBatch
		})
		if err != nil || kerr != nil {
			return cmp.Or(err, kerr)
		}
		if len(s.batch) < tickBatch {
			from = min(sg.loadedTo, head) + 1
		}
	}
	s.next = from
	s.names = make([]byte, 0, len(s.batch)*28) // 28: the longest name
	return nil
}

// keep adds t to the batch if the listing shows it.
func (s *tickStream) keep(t tickRef) (bool, error) {
	if s.has != nil {
		if ok, err := s.has(t); err != nil || !ok {
			return false, err
		}
	}
	s.batch = append(s.batch, t)
	return true, nil
}

// coldParts is the most checkpoint parts a cold listing adds at once.
const coldParts = 64

func (s *tickStream) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if len(s.batch) == 0 {
		if err := s.fill(ctx); err != nil {
			return nil, s.d.m.errno("ticks of "+s.d.world, err)
		}
		if len(s.batch) == 0 {
			return nil, 0
		}
	}
	s.last, s.batch = s.batch[0], s.batch[1:]
	at := len(s.names)
	s.names = appendTickName(s.names, s.last.Tick.Tick)
	if s.table != nil {
		s.names = append(s.names, ".parquet"...)
	}
	name := unsafe.String(&s.names[at], len(s.names)-at)
	s.pos++
	if s.table != nil {
		s.de = fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: ino(s.d.world, "runs", s.d.run, "tables", s.table.name, name), Off: s.pos}
	} else {
		s.de = fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ino(s.d.world, "runs", s.d.run, "ticks", name), Off: s.pos}
	}
	return &s.de, 0
}

// Seekdir restarts the listing and skips off entries (offsets are
// positions; the kernel seeks only to an offset it was given). A segment
// loaded anew mid-listing holds its first part and those read since, not
// the ones between: each goes on from its first part, adding (Load reads
// only what it lacks) the parts it reaches.
func (s *tickStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	s.next, s.seg, s.pos, s.batch = math.MinInt64, 0, 0, s.batch[:0]
	for _, sg := range s.segs {
		sg.loadedTo = min(sg.loadedTo, index.PartTicks-1)
	}
	for s.pos < off {
		if de, errno := s.Readdirent(ctx); errno != 0 || de == nil {
			return errno
		}
	}
	return 0
}

// Lookup answers a READDIRPLUS lookup of the entry just returned from its
// record; any other name is looked up in the directory.
func (s *tickStream) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if s.table != nil {
		return s.table.Lookup(ctx, name, out)
	}
	if s.pos == 0 || name != s.de.Name {
		return s.d.Lookup(ctx, name, out)
	}
	start := time.Now()
	defer s.d.m.stats.op("lookup", start)
	return s.d.m.snapshot(ctx, s.d.EmbeddedInode(), place{s.d.world, s.d.run}, s.last, s.de.Ino, out)
}
