package fs

import (
	"cmp"
	"context"
	"errors"
	"math"
	"syscall"
	"time"
	"unsafe"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/index"
)

// tickStream is an open listing of ticks/ or of tables/<t>/: it reads the
// view's tick records a batch at a time as the kernel asks for entries, so
// a listing costs what it returns (a step and no allocation per entry, one
// descent of the catalog per batch), never a list of the whole history
// held at once. Of a world read cold (see cold.go) it reads a partial
// state loaded at the open, adding the checkpoint's parts as the listing
// reaches them: the first entries reach the kernel before the rest of the
// history is decoded. A READDIRPLUS lookup in ticks/ of the entry it just
// returned uses that entry's record instead of resolving the tick again.
type tickStream struct {
	d *ticksDir
	// table, if set, is the tables/<t>/ listed instead of d (d then only
	// carries the mount, world and run), and has reports whether a tick
	// has the table.
	table *tableDir
	has   func(tickRef) (bool, error)
	v     *index.View    // nil: read cold, from p
	p     *index.Partial // loaded at the open, parts added as the listing goes
	// loadedTo: p holds every tick up to it; parts: how many parts the
	// next step adds.
	loadedTo int64
	parts    int64
	next     int64  // the first tick not yet read from the view
	pos      uint64 // entries returned since the start

	batch []tickRef // read, not yet returned
	names []byte    // the batch's names; never modified once a name is cut
	last  tickRef   // the entry returned last
	de    fuse.DirEntry
}

var (
	_ = (gofs.FileReaddirenter)((*tickStream)(nil))
	_ = (gofs.FileSeekdirer)((*tickStream)(nil))
	_ = (gofs.FileLookuper)((*tickStream)(nil))
)

// tickBatch is how many tick records a stream reads from the view at once.
const tickBatch = 512

// fill reads the next batch from the view, with a fresh buffer for its
// names (go-fuse keeps the entries of its last reply, so a name outlives
// the batch).
func (s *tickStream) fill(ctx context.Context) error {
	s.batch = s.batch[:0]
	if s.next == math.MaxInt64 {
		return nil
	}
	if s.v == nil {
		return s.fillCold(ctx)
	}
	var err error
	s.v.Ticks(s.next, math.MaxInt64, func(t tickRef) bool {
		s.next = t.Tick.Tick + 1
		var keep bool
		if keep, err = s.keep(t); err != nil {
			return false
		}
		return !keep || len(s.batch) < tickBatch
	})
	if err != nil {
		return err
	}
	if len(s.batch) < tickBatch {
		s.next = math.MaxInt64 // the view has no more
	}
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

// fillCold reads the next batch from the partial state, adding parts of
// the checkpoint as the listing reaches them: one, then twice as many at
// each step up to coldParts (read at once), so that the first entries
// wait for one part and the whole listing for few steps.
func (s *tickStream) fillCold(ctx context.Context) error {
	run := s.d.run
	r, _ := s.p.Run(run)
	from := max(s.next, 0) // ticks are numbered from 0
	for len(s.batch) < tickBatch && from <= r.Head {
		if from > s.loadedTo {
			parts := max(s.parts, 1)
			to := (from/index.PartTicks+parts)*index.PartTicks - 1
			want := index.Want{Run: run, From: from, To: to}
			err := s.p.Load(ctx, want)
			if errors.Is(err, index.ErrSuperseded) {
				// A listing held open past the collection of its
				// checkpoint goes on from a state loaded anew: the
				// ticks it listed never change.
				return s.reload(ctx, want)
			}
			if err != nil {
				return err
			}
			s.loadedTo, s.parts = to, min(2*parts, coldParts)
		}
		var kerr error
		err := s.p.Ticks(run, from, s.loadedTo, func(t *index.Tick) bool {
			from = t.Tick + 1
			var keep bool
			if keep, kerr = s.keep(tickRef{World: s.d.world, Run: run, Tick: t}); kerr != nil {
				return false
			}
			return !keep || len(s.batch) < tickBatch
		})
		if err != nil || kerr != nil {
			return cmp.Or(err, kerr)
		}
		if len(s.batch) < tickBatch {
			from = s.loadedTo + 1
		}
	}
	if len(s.batch) == tickBatch {
		s.next = from
	} else {
		s.next = math.MaxInt64 // the state has no more
	}
	s.names = make([]byte, 0, len(s.batch)*28)
	return nil
}

// reload replaces the stream's partial state, whose checkpoint was
// replaced and collected, with one loaded at the tip for want (or, if the
// world is read through its catalog by now, the view), and fills the
// batch again from it, from where the batch began (s.next).
func (s *tickStream) reload(ctx context.Context, want index.Want) error {
	p, err := s.d.m.loadCold(ctx, s.d.world, want, false)
	if err != nil {
		return err
	}
	if p == nil {
		if s.v, err = s.d.m.view(ctx, s.d.world, s.d.run, false); err != nil {
			return err
		}
		return s.fill(ctx)
	}
	s.p, s.loadedTo, s.parts, s.batch = p, math.MinInt64, 1, s.batch[:0]
	return s.fillCold(ctx)
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
// positions; the kernel seeks only to an offset it was given).
func (s *tickStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	s.next, s.pos, s.batch = math.MinInt64, 0, s.batch[:0]
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
