package iceberg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// An export is incremental when it can be: each table's current snapshot
// records what it was planned from (summary worldfs.tick: the pinned tick;
// worldfs.seq.<world>: the catalog sequence read of every world of the
// run's lineage). If, since those sequences, the catalogs only published
// later ticks and completed claims landing after that tick (read from
// the change feed, so the cost is the changes, not the history), the
// files of ticks up to it are the ones the snapshot holds: the export
// plans only the ticks after it and appends their files as one new
// manifest, reusing the previous manifests by reference (Iceberg's fast
// append), without reading them. Anything else since (a compaction of
// those ticks, a claim landing at or before it, an entry this code does
// not know) makes the table's export full: it reads the previous
// manifests and diffs the whole file list, as a first export does.

// seqKey is the summary key recording the sequence of world's catalog.
func seqKey(world string) string { return "worldfs.seq." + world }

// previous is a table's newest metadata version, read when planning.
type previous struct {
	ver int
	m   *metadata
	// sum is the sha256 of the version's bytes (which names its reference
	// list); base the URI its registration says it names objects by.
	sum  [32]byte
	base string
	// last is the tick the current snapshot was planned up to and seqs
	// the catalog sequences it read; ok when they are recorded and fit
	// this export (same world and run, a pin not before last).
	last int64
	seqs map[string]uint64
	ok   bool
}

// readPrevious reads the newest version of every table exported under
// the prefix, by its registration.
func (e *exporter) readPrevious(ctx context.Context) (map[string]*previous, error) {
	regs, err := registrations(ctx, e.b, e.opts.World)
	if err != nil {
		return nil, err
	}
	out := map[string]*previous{}
	for _, r := range regs {
		if !strings.HasPrefix(r.Table, e.opts.Prefix+"/") || strings.Contains(strings.TrimPrefix(r.Table, e.opts.Prefix+"/"), "/") {
			continue
		}
		ver, m, sum, err := latest(ctx, e.b, r.Table)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", r.Table, err)
		}
		p := &previous{ver: ver, m: m, sum: sum, base: r.Base}
		out[r.Table] = p
		if m == nil || r.Base != e.opts.Base {
			continue
		}
		s := m.current()
		if s == nil || s.Summary["worldfs.world"] != e.opts.World || s.Summary["worldfs.run"] != e.opts.Run {
			continue
		}
		last, err := strconv.ParseInt(s.Summary["worldfs.tick"], 10, 64)
		if err != nil || last > e.pin.Tick.Tick {
			continue
		}
		p.last, p.seqs, p.ok = last, map[string]uint64{}, true
		for w, cur := range e.seqs {
			n, err := strconv.ParseUint(s.Summary[seqKey(w)], 10, 64)
			if err != nil || n > cur {
				p.ok = false
				break
			}
			p.seqs[w] = n
		}
	}
	return out, nil
}

// stale reports whether snapshot s was planned from another pin or other
// catalog sequences than this export: a full plan that finds its files
// unchanged still commits a snapshot (a replace of nothing), recording
// that they are current, so that the next export can be incremental.
// Sequences that differ by intents and tags only (an export's own, a
// compaction's: they change no row; the refs of tags are set apart) are
// the same.
func (e *exporter) stale(ctx context.Context, s *snapshot) (bool, error) {
	if s.Summary["worldfs.tick"] != strconv.FormatInt(e.pin.Tick.Tick, 10) {
		return true, nil
	}
	for w, seq := range e.seqs {
		was, err := strconv.ParseUint(s.Summary[seqKey(w)], 10, 64)
		if err != nil || was > seq {
			return true, nil
		}
		if was == seq {
			continue
		}
		quiet, err := onlyIntents(ctx, e.b, w, was+1, seq)
		if err != nil || !quiet {
			return true, err
		}
	}
	return false, nil
}

// onlyIntents reports whether world's entries from..to are all intent or
// tag entries (false if its slots were collected: the feed cannot tell).
func onlyIntents(ctx context.Context, b bucket.Bucket, world string, from, to uint64) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c, err := range index.Changes(ctx, b, world, from, time.Second) {
		if errors.Is(err, index.ErrResync) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if c.Seq > to {
			break
		}
		if k := c.Entry.Kind; k != index.KindIntentOpen && k != index.KindIntentClose && k != index.KindTagCreate && k != index.KindTagDelete {
			return false, nil
		}
		if c.Seq == to {
			break
		}
	}
	return true, nil
}

// disruption is a change since an export that may change the files of
// ticks from tick on (math.MinInt64: any), of the tables of world with
// the ids in tables (nil: any).
type disruption struct {
	world  string
	seq    uint64
	tick   int64
	tables []string
}

// frontier decides, from the previous versions, which tables export
// incrementally (e.inc, by table location: the tick their snapshot holds
// files up to) and returns the first tick to plan: the tick after the
// least of those, or math.MinInt64 (every tick) when a table exported
// under the prefix must be planned in full.
func (e *exporter) frontier(ctx context.Context) (int64, error) {
	e.inc = map[string]int64{}
	if e.opts.Full {
		return math.MinInt64, nil
	}
	receipts := index.IcebergTable(e.opts.Prefix, frame.ReceiptTableName)
	// The least sequence any table read, per world: the feed is read once
	// from there.
	least := map[string]uint64{}
	for loc, p := range e.prevs {
		if !p.ok || loc == receipts {
			continue
		}
		for w, n := range p.seqs {
			if l, ok := least[w]; !ok || n < l {
				least[w] = n
			}
		}
	}
	var ds []disruption
	for w, from := range least {
		got, err := e.disruptions(ctx, w, from+1)
		if errors.Is(err, index.ErrResync) {
			return math.MinInt64, nil // the slots are gone: plan in full
		}
		if err != nil {
			return 0, err
		}
		ds = append(ds, got...)
	}
	from, full := int64(math.MaxInt64), false
	for loc, p := range e.prevs {
		if loc == receipts {
			continue // receipts are planned in full (see plan)
		}
		ok := p.ok
		for _, d := range ds {
			if !ok || d.seq <= p.seqs[d.world] || d.tick > p.last {
				continue
			}
			hit, err := e.touches(ctx, d, strings.TrimPrefix(loc, e.opts.Prefix+"/"))
			if err != nil {
				return 0, err
			}
			ok = !hit
		}
		if !ok {
			full = true
			continue
		}
		e.inc[loc] = p.last
		from = min(from, p.last+1)
	}
	if full || len(e.inc) == 0 {
		return math.MinInt64, nil
	}
	return from, nil
}

// touches reports whether disruption d is of the table named name.
func (e *exporter) touches(ctx context.Context, d disruption, name string) (bool, error) {
	if d.tables == nil {
		return true, nil
	}
	for _, id := range d.tables {
		ti, err := frame.ReadTableInfo(ctx, e.b, d.world, id)
		if err != nil {
			return false, fmt.Errorf("world %s: table %s has no description: %w", d.world, id, err)
		}
		if ti.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// disruptions reads world's change feed from sequence from to the
// sequence the export read, and returns the changes that may change the
// files of ticks already exported.
func (e *exporter) disruptions(ctx context.Context, world string, from uint64) ([]disruption, error) {
	to := e.seqs[world]
	if from > to {
		return nil, nil
	}
	// The runs of world the export reads, each up to the tick it is read
	// to (a fork's ancestor up to the fork point).
	runs := map[string]int64{}
	var state *index.State
	for _, seg := range e.view.Segments {
		if seg.World == world {
			runs[seg.Run] = seg.UpTo
			state = seg.State
		}
	}
	if world == e.opts.World {
		state = e.own
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []disruption
	for c, err := range index.Changes(ctx, e.b, world, from, time.Second) {
		if err != nil {
			return nil, err
		}
		if c.Seq > to {
			break
		}
		if d, ok := disrupts(c.Entry, runs, state); ok {
			d.world, d.seq = world, c.Seq
			out = append(out, d)
		}
		if c.Seq == to {
			break
		}
	}
	return out, nil
}

// disrupts reports whether entry e may change the visible files of a run
// in runs (each read up to its tick), and from which tick. Entries that
// only publish later ticks, or do not change visible files, do not.
func disrupts(e index.Entry, runs map[string]int64, s *index.State) (disruption, bool) {
	at := func(run string, tick int64, tables ...[]index.TableFragments) (disruption, bool) {
		upTo, ok := runs[run]
		if !ok || tick > upTo {
			return disruption{}, false
		}
		d := disruption{tick: tick}
		for _, tfs := range tables {
			d.tables = append(d.tables, ids(tfs)...)
		}
		return d, true
	}
	switch e.Kind {
	case index.KindWorldCreate, index.KindFenceAcquire, index.KindWorldStatus, index.KindClaimAcquire,
		index.KindClaimTakeover, index.KindClaimRelease, index.KindCommandEnqueue, index.KindIntentOpen, index.KindIntentClose,
		index.KindTagCreate, index.KindTagDelete:
		return disruption{}, false
	case index.KindTickPublish:
		if e.TickPublish != nil {
			return at(e.TickPublish.Run, e.TickPublish.Tick)
		}
	case index.KindClaimComplete:
		// A fact is visible from the tick it lands at (its claim's).
		if e.Claim != nil && s != nil {
			if c, ok := s.Claim(e.Claim.Key); ok {
				return at(e.Claim.Key.Run, c.Tick, e.Claim.Fragments)
			}
			return at(e.Claim.Key.Run, math.MinInt64)
		}
	case index.KindFragmentsRewrite:
		if r := e.Rewrite; r != nil {
			tables := r.Tables
			if r.Table != "" {
				tables = append(slices.Clone(tables), index.TableFragments{Table: r.Table})
			}
			switch {
			case len(tables) == 0:
				return at(r.Run, math.MinInt64)
			case r.Facts:
				return at(r.Run, math.MinInt64, tables)
			case r.Span != nil:
				return at(r.Run, r.Span.From, tables)
			default:
				return at(r.Run, r.Tick, tables)
			}
		}
	}
	return disruption{tick: math.MinInt64}, true // unknown: plan in full
}

// ids are the table ids of tfs (nil: none named, which means any).
func ids(tfs []index.TableFragments) []string {
	var out []string
	for _, tf := range tfs {
		out = append(out, tf.Table)
	}
	return out
}
