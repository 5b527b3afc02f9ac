package index

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// ErrNotLoaded: a question about ticks that a partial state (LoadFor) did
// not load. It is never answered from the ticks it holds: load what the
// question reads, or the whole state (Load).
var ErrNotLoaded = errors.New("not loaded")

// Want is what a reader will read of a world's state: LoadFor decodes
// only the checkpoint shards that hold it.
type Want struct {
	// Run's ticks From..To (inclusive; From > To: none).
	Run      string
	From, To int64
	// Head: Run's newest tick too (as the checkpoint records it; ticks
	// published after the checkpoint are always held).
	Head bool
	// Token: what Partial.TickByToken reads to answer for this commit
	// token in Run: the tick it names (TokenTick), if it names one and
	// that tick carries it; else the run's token filters
	// (tokenfilter.go) and the shards that may hold it.
	Token string
	// TokenTo, if positive, bounds Token's lookup: only the ticks up to
	// it (a fork's ancestor is read up to its fork point) are looked
	// for, and only the filters and shards of those ticks read.
	TokenTo int64
	// CheckpointOnly: a world without a checkpoint, which a partial load
	// would read whole, is not loaded at all: LoadFor returns a nil
	// Partial (for a reader that then reads it another way).
	CheckpointOnly bool
}

// PartTicks is how many ticks of a run one checkpoint part holds: part k
// holds ticks k·PartTicks to (k+1)·PartTicks-1, so a reader that walks a
// run's ticks a part at a time (Partial.Load, then Partial.Ticks) decodes
// one part per step.
const PartTicks = tickShardSpan

// partial is what a partial state holds of its checkpoint's ticks: the
// tick shards the checkpoint lists, by run, and which of them are loaded.
// A tick shard the checkpoint does not list held no tick at the
// checkpoint: whatever the state holds of it is all of it. Nil on a whole
// state.
type partial struct {
	b      bucket.Bucket
	name   string // the checkpoint
	cp     *checkpoint
	shards map[string][]int64 // run → the numbers of its tick shards, ascending
	loaded map[shardKey]bool
	// sums: the summaries of the tick shards a state for planning
	// (LoadSummarized) holds instead of their ticks. A shard is loaded or
	// summarized, never both: loading one drops its summary.
	sums map[shardKey]*tickSummary
	// filters: the token filters of the tick shards a lookup of a token
	// read (loadToken), nil for a shard that has none.
	filters map[shardKey]*tokenFilter
	// fetch, while the load replays the log after the checkpoint, loads
	// a shard an entry touches before it is applied; nil afterwards.
	fetch func(s *State, r shardRef) error
}

// covers reports whether s holds every tick of run's shards n0..n1.
func (p *partial) covers(run string, n0, n1 int64) error {
	ns := p.shards[run]
	i, _ := slices.BinarySearch(ns, n0)
	for ; i < len(ns) && ns[i] <= n1; i++ {
		if !p.loaded[shardKey{'t', run, ns[i]}] {
			return fmt.Errorf("ticks %d..%d of run %s (checkpoint %s): %w", ns[i]*tickShardSpan, (ns[i]+1)*tickShardSpan-1, run, p.name, ErrNotLoaded)
		}
	}
	return nil
}

// coversTicks is nil if s (whose partial p is) holds every tick of run
// from..to: those past the run's head are none.
func (p *partial) coversTicks(s *State, run string, from, to int64) error {
	r, _ := s.Run(run)
	if to = min(to, r.Head); from > to {
		return nil
	}
	return p.covers(run, tickShard(run, from).N, tickShard(run, to).N)
}

// held is coversTicks for a planner's walk (Segment.steps): a shard held
// as its summary counts as held.
func (p *partial) held(s *State, run string, from, to int64) error {
	r, _ := s.Run(run)
	if to = min(to, r.Head); from > to {
		return nil
	}
	ns := p.shards[run]
	n1 := tickShard(run, to).N
	i, _ := slices.BinarySearch(ns, tickShard(run, from).N)
	for ; i < len(ns) && ns[i] <= n1; i++ {
		k := shardKey{'t', run, ns[i]}
		if !p.loaded[k] && p.sums[k] == nil {
			return fmt.Errorf("ticks %d..%d of run %s (checkpoint %s): %w", ns[i]*tickShardSpan, (ns[i]+1)*tickShardSpan-1, run, p.name, ErrNotLoaded)
		}
	}
	return nil
}

// refuse panics with err (ErrNotLoaded): a whole state's tick question
// (State's, View's, Allowlist's, which return no error) asked of a state
// loaded in part that does not hold the ticks it reads, whose answer
// would silently miss them. No caller can ask one: a state loaded in part
// is a Partial, whose questions return ErrNotLoaded, or a Plan's, which
// asks only Files, Visible and Facts; only a bug of this package could.
// It is an invariant assertion, checked in builds that check them
// (internal/invariants: tag invariants, or -race). The panic's value is
// an error wrapping err.
func refuse(method string, err error) {
	panic(fmt.Errorf("index: invariant: %s asked of a state loaded in part: %w", method, err))
}

// cover makes sure that n, a state being loaded for part of its history,
// holds the tick shards entry e reads or changes, loading those it lacks
// while the load replays the log (fetch); after it, it refuses the entry
// (ErrNotLoaded). Claims and commands are always loaded whole.
func (n *State) cover(e *Entry) error {
	p := n.part
	var run string
	var from, to int64
	switch {
	case e.Kind == KindTickPublish:
		run, from, to = e.TickPublish.Run, e.TickPublish.Tick, e.TickPublish.Tick
	case e.Kind == KindFragmentsRewrite && e.Rewrite.Facts:
		return nil
	case e.Kind == KindFragmentsRewrite && e.Rewrite.Span != nil:
		run, from, to = e.Rewrite.Run, e.Rewrite.Span.From, e.Rewrite.Span.To
	case e.Kind == KindFragmentsRewrite:
		run, from, to = e.Rewrite.Run, e.Rewrite.Tick, e.Rewrite.Tick
	default:
		return nil
	}
	n0, n1 := tickShard(run, from).N, tickShard(run, to).N
	if p.fetch == nil {
		return p.covers(run, n0, n1)
	}
	ns := p.shards[run]
	i, _ := slices.BinarySearch(ns, n0)
	for ; i < len(ns) && ns[i] <= n1; i++ {
		k := shardKey{'t', run, ns[i]}
		if p.loaded[k] {
			continue
		}
		j, _ := slices.BinarySearchFunc(p.cp.Shards, k, func(r shardRef, k shardKey) int { return shardKeyCompare(r.key(), k) })
		if err := p.fetch(n, p.cp.Shards[j]); err != nil {
			return err
		}
		p.loaded[k] = true
		delete(p.sums, k)
	}
	return nil
}

// LoadFor reads what a reader of want needs of world's state: the newest
// checkpoint's world, runs, claims and commands, the tick shards that hold
// want's ticks, and the slots after the checkpoint (each tick shard they
// touch is loaded too, so that they apply as to the whole state). The
// checkpoint's other shards are not read: a corrupt one is not noticed
// until a reader loads it (ErrCorrupt then). A world without a checkpoint
// loads whole (with want.CheckpointOnly: not at all, and the Partial is
// nil).
func LoadFor(ctx context.Context, b bucket.Bucket, world string, want Want) (*Partial, LoadInfo, error) {
	start := time.Now()
	newest, _, err := newestCheckpoint(ctx, b, world)
	if err != nil {
		return nil, LoadInfo{}, fmt.Errorf("world %s: listing checkpoints: %w", world, err)
	}
	if newest == "" {
		if want.CheckpointOnly {
			return nil, LoadInfo{}, nil
		}
		s, info, err := Load(ctx, b, world)
		if err != nil {
			return nil, LoadInfo{}, err
		}
		return &Partial{s: s, b: b, confirmed: start}, info, nil
	}
	s, info, err := loadPart(ctx, b, world, newest, func(ctx context.Context, p *partial) (func(shardRef) bool, error) {
		head := int64(math.MinInt64)
		for _, r := range p.cp.Runs {
			if r.Name == want.Run && want.Head {
				head = r.Head
			}
		}
		named, hasNamed := TokenTick(want.Token)
		return func(r shardRef) bool {
			n := r.N
			return r.Run == want.Run && (want.From <= want.To && tickShard(r.Run, want.From).N <= n && n <= tickShard(r.Run, want.To).N ||
				head != math.MinInt64 && n == tickShard(r.Run, head).N ||
				hasNamed && n == tickShard(r.Run, named).N)
		}, nil
	})
	if err != nil {
		return nil, LoadInfo{}, err
	}
	if want.Token != "" {
		if err := s.part.loadToken(ctx, s, want); err != nil {
			return nil, LoadInfo{}, err
		}
	}
	return &Partial{s: s, b: b, confirmed: start}, info, nil
}

// loadPart loads world's state from checkpoint newest and the slots after
// it, decoding of the checkpoint's tick shards those pick selects (pick
// sees the partial state before any shard is read) and those the slots
// touch.
func loadPart(ctx context.Context, b bucket.Bucket, world, newest string, pick func(context.Context, *partial) (func(shardRef) bool, error)) (*State, LoadInfo, error) {
	state, cp, err := loadFrom(ctx, b, world, newest, func(ctx context.Context) (*State, *checkpoint, error) {
		cp, err := readCheckpoint(ctx, b, world, newest)
		if err != nil {
			return nil, nil, err
		}
		p := &partial{b: b, name: newest, cp: cp, shards: map[string][]int64{}, loaded: map[shardKey]bool{}}
		want, err := pick(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		s, err := loadShards(ctx, b, newest, cp, func(r shardRef) bool {
			if r.Kind != "t" {
				return true
			}
			p.shards[r.Run] = append(p.shards[r.Run], r.N) // cp.Shards is in key order
			if !want(r) {
				return false
			}
			p.loaded[r.key()] = true
			return true
		})
		if err != nil {
			return nil, nil, err
		}
		if err := p.checkRuns(s); err != nil {
			return nil, nil, err
		}
		p.fetch = p.fetcher(ctx)
		s.part = p
		return s, cp, nil
	})
	if err != nil {
		return nil, LoadInfo{}, err
	}
	state.part.fetch = nil
	return state, LoadInfo{CheckpointSeq: cp.Seq, SlotsReplayed: state.Slots - cp.Slots}, nil
}

// checkRuns checks the runs checkpoint p.cp records against the ticks s,
// its state as loaded in part, holds of them (decoded or summarized), as
// LoadCheckpoint checks them against every tick: a run's head is in its
// last tick shard, and is its newest tick if that shard is held; a run
// whose every shard is held has the head and count its ticks say. It
// reads no tick, only the ends of the shards held.
func (p *partial) checkRuns(s *State) error {
	runs := map[string]*Run{}
	for _, r := range p.cp.Runs {
		runs[r.Name] = &Run{Name: r.Name, Head: -1}
	}
	add := func(run string, head, n int64) error {
		r := runs[run]
		if r == nil {
			return corruptCheckpoint(p.name, "ticks of runs the checkpoint does not list")
		}
		r.Head, r.Published = max(r.Head, head), r.Published+n
		return nil
	}
	for _, ts := range s.tickParts {
		if err := add(ts[0].Run, ts[len(ts)-1].Tick, int64(len(ts))); err != nil {
			return err
		}
	}
	for k, sum := range p.sums {
		if err := add(k.Run, sum.spans[len(sum.spans)-1].To, sum.ticks); err != nil {
			return err
		}
	}
	for _, r := range p.cp.Runs {
		got, ns := runs[r.Name], p.shards[r.Name]
		whole := true
		for _, n := range ns {
			k := shardKey{'t', r.Name, n}
			whole = whole && (p.loaded[k] || p.sums[k] != nil)
		}
		switch {
		case whole && *got != r:
			return corruptCheckpoint(p.name, "run %s records %+v, its ticks say %+v", r.Name, r, *got)
		case whole:
		case ns[len(ns)-1] != tickShard(r.Name, r.Head).N:
			return corruptCheckpoint(p.name, "run %s records head %d, its last tick shard is %d", r.Name, r.Head, ns[len(ns)-1])
		case p.held(s, r.Name, r.Head, r.Head) == nil && got.Head != r.Head:
			return corruptCheckpoint(p.name, "run %s records head %d, its ticks say %d", r.Name, r.Head, got.Head)
		}
	}
	return nil
}

// LoadSummarized reads world's state for planning its views: as Load
// does, but each tick shard of the newest checkpoint that has a summary
// (summary.go: its ticks name only compacted files) is held as its
// summary, not decoded; shards without one, and those the slots after the
// checkpoint touch, are decoded. A damaged summary is ErrCorrupt.
//
// The state is a Partial: of the ticks of summarized shards, only a
// Plan's Files and Visible answer (and fail with ErrNotLoaded where a
// summary does not say what they ask: a plan bounded inside one of its
// spans); the Partial's tick questions refuse them (ErrNotLoaded), and
// LoadAll decodes them.
func LoadSummarized(ctx context.Context, b bucket.Bucket, world string) (*Partial, LoadInfo, error) {
	return loadSummarized(ctx, b, world, -1)
}

// ErrUnsummarized: LoadSummarizedAtMost found that more of the history
// than it was to decode has no summary (or there is no checkpoint): a
// reader that keeps a whole state should load that instead.
var ErrUnsummarized = errors.New("history without summaries")

// LoadSummarizedAtMost is LoadSummarized that decodes at most decode tick
// shards of the checkpoint (those without a summary): past that, or for a
// world without a checkpoint, it fails with ErrUnsummarized after reading
// the summaries only, before decoding any shard.
func LoadSummarizedAtMost(ctx context.Context, b bucket.Bucket, world string, decode int) (*Partial, LoadInfo, error) {
	return loadSummarized(ctx, b, world, decode)
}

// loadSummarized is LoadSummarized, decoding at most decode shards of the
// checkpoint if decode is not negative (see LoadSummarizedAtMost).
func loadSummarized(ctx context.Context, b bucket.Bucket, world string, decode int) (*Partial, LoadInfo, error) {
	start := time.Now()
	newest, _, err := newestCheckpoint(ctx, b, world)
	if err != nil {
		return nil, LoadInfo{}, fmt.Errorf("world %s: listing checkpoints: %w", world, err)
	}
	if newest == "" && decode >= 0 {
		return nil, LoadInfo{}, fmt.Errorf("world %s: no checkpoint: %w", world, ErrUnsummarized)
	}
	var s *State
	var info LoadInfo
	if newest == "" {
		s, info, err = Load(ctx, b, world)
	} else {
		s, info, err = loadPart(ctx, b, world, newest, pickUnsummarized(b, world, newest, decode))
	}
	if s == nil {
		return nil, info, err
	}
	return &Partial{s: s, b: b, confirmed: start}, info, err
}

// pickUnsummarized is the pick of loadSummarized's loadPart: it reads the
// summaries of checkpoint newest's tick shards and picks those without
// one, at most decode of them if decode is not negative.
func pickUnsummarized(b bucket.Bucket, world, newest string, decode int) func(context.Context, *partial) (func(shardRef) bool, error) {
	return func(ctx context.Context, p *partial) (func(shardRef) bool, error) {
		// The checkpoint's summaries object first (one read, not one a
		// tick shard: summary.go), then the summary objects of the
		// shards it has no entry for.
		all, none, _, _, err := readSummaries(ctx, b, world, newest, p.cp)
		if err != nil {
			return nil, err
		}
		var ticks, lack []shardRef
		for _, r := range p.cp.Shards {
			if r.Kind == "t" {
				ticks = append(ticks, r)
				if all[r.key()] == nil && !none[r.key()] {
					lack = append(lack, r)
				}
			}
		}
		sums := make([]*tickSummary, len(lack))
		err = parallelReads(ctx, len(lack), func(i int) error {
			var err error
			sums[i], err = readSummary(ctx, b, world, newest, lack[i])
			return err
		})
		if err != nil {
			return nil, err
		}
		if p.sums = all; all == nil {
			p.sums = map[shardKey]*tickSummary{}
		}
		for i, sum := range sums {
			if sum != nil {
				p.sums[lack[i].key()] = sum
			}
		}
		if unsummarized := len(ticks) - len(p.sums); decode >= 0 && unsummarized > decode {
			return nil, fmt.Errorf("world %s: %d of checkpoint %s's %d tick parts have no summary: %w", world, unsummarized, newest, len(ticks), ErrUnsummarized)
		}
		return func(r shardRef) bool { return p.sums[r.key()] == nil }, nil
	}
}

// A Partial is the part of a world's catalog state a reader asked for
// (LoadFor): the world, its runs, claims and commands whole; of the ticks,
// those of the checkpoint shards it loaded and every tick published or
// changed after the checkpoint. It answers every question about what it
// holds exactly as the whole state does, and refuses the others with
// ErrNotLoaded, never answering them from the ticks it holds.
type Partial struct {
	s *State
	b bucket.Bucket
	// confirmed: when the load or refresh that brought s to the log's
	// tip began.
	confirmed time.Time
}

// PartialOf returns s, a whole state, as a Partial that holds all of it:
// a reader of states whole or loaded in part takes one type (a Plan over
// both, OpenPlan). Refresh needs a Partial from LoadFor.
func PartialOf(s *State) *Partial { return &Partial{s: s} }

// World is the world's record.
func (p *Partial) World() World { return p.s.World }

// Seq is the last sequence applied.
func (p *Partial) Seq() uint64 { return p.s.Seq }

// Run returns run's summary.
func (p *Partial) Run(name string) (Run, bool) { return p.s.Run(name) }

// Runs returns every run with at least one publication, by name.
func (p *Partial) Runs() []Run { return p.s.Runs() }

// Tags returns the world's tags (a state loaded in part holds them whole).
func (p *Partial) Tags() []Tag { return p.s.Tags() }

// Hash is the hash of the slot holding the last sequence applied.
func (p *Partial) Hash() string { return p.s.Hash }

// Claims calls fn for each claim of run, until fn returns false: a state
// loaded in part holds every claim.
func (p *Partial) Claims(run string, fn func(*Claim) bool) { p.s.Claims(run, fn) }

// ClaimRuns returns the runs that have claims, sorted (State.ClaimRuns).
func (p *Partial) ClaimRuns() []string { return p.s.ClaimRuns() }

// Visibility is how run's rows are filtered (State.Allowlist's mode).
func (p *Partial) Visibility(run string) Visibility { return p.s.visibility(run) }

// Whole returns the whole state, if the partial state holds all of it.
func (p *Partial) Whole() (*State, bool) {
	if p.s.part == nil {
		return p.s, true
	}
	for k := range p.s.part.shards {
		if p.s.part.covers(k, math.MinInt64, math.MaxInt64) != nil {
			return nil, false
		}
	}
	return p.s, true
}

// Load adds to p the checkpoint parts that hold want's ticks (want.Head:
// the head's part as the checkpoint records it) and that it does not hold
// yet, read from the bucket LoadFor read: a reader of a long range loads
// it a part at a time. p stays at the sequence LoadFor loaded it at; the
// log after the checkpoint touched none of the parts it adds (LoadFor
// loaded those), so each is added as the checkpoint holds it, as LoadFor
// would have. A corrupt part fails closed (ErrCorrupt). Load must not be
// called while another goroutine reads p.
func (p *Partial) Load(ctx context.Context, want Want) error {
	part := p.s.part
	if part == nil {
		return nil // the whole state
	}
	all := part.shards[want.Run]
	var ns []int64
	if want.From <= want.To {
		i, _ := slices.BinarySearch(all, tickShard(want.Run, want.From).N)
		for ; i < len(all) && all[i] <= tickShard(want.Run, want.To).N; i++ {
			ns = append(ns, all[i])
		}
	}
	for _, r := range part.cp.Runs {
		if r.Name == want.Run && want.Head {
			if h := tickShard(r.Name, r.Head).N; slices.Contains(all, h) {
				ns = append(ns, h)
			}
		}
	}
	if n, ok := TokenTick(want.Token); ok {
		if k := tickShard(want.Run, n).N; slices.Contains(all, k) {
			ns = append(ns, k)
		}
	}
	slices.Sort(ns)
	var refs []shardRef
	for _, n := range slices.Compact(ns) {
		if k := (shardKey{'t', want.Run, n}); !part.loaded[k] {
			refs = append(refs, part.ref(k))
		}
	}
	if err := part.add(ctx, p.s, refs); err != nil {
		return err
	}
	if want.Token != "" {
		return part.loadToken(ctx, p.s, want)
	}
	return nil
}

// ref returns the checkpoint's reference of shard k, which it lists.
func (p *partial) ref(k shardKey) shardRef {
	j, _ := slices.BinarySearchFunc(p.cp.Shards, k, func(r shardRef, k shardKey) int { return shardKeyCompare(r.key(), k) })
	return p.cp.Shards[j]
}

// add reads the shards refs of p's checkpoint and adds them to s (whose
// partial p is), as the checkpoint holds them.
func (p *partial) add(ctx context.Context, s *State, refs []shardRef) error {
	out, err := p.readShards(ctx, refs)
	if err != nil {
		return err
	}
	for i, d := range out {
		if err := s.addShard(p.name, p.cp, d); err != nil {
			return err
		}
		p.loaded[refs[i].key()] = true
		delete(p.sums, refs[i].key())
	}
	return nil
}

// ErrReload: a partial state too far behind to refresh from the log
// (Partial.Refresh); load it anew.
var ErrReload = errors.New("too far behind to refresh from the log; load it anew")

// Refresh brings p to the log's tip, in place: it applies the slots
// created after p, in order, as a load reads the log after its
// checkpoint (followLog: a slot lost before others is ErrCorrupt, never
// the log's end), reading first each checkpoint part a
// slot touches that p does not hold, so that every part p holds, or adds
// later (Load), is as the state at the tip holds it. It reads the log's
// tail, never the checkpoint again: a reader that keeps a world's state
// and asks it for new ticks pays for what was published since, not for
// the history.
//
// A state is refreshed only while the log after it is sure to be there
// and its tail is short. One brought to the tip longer ago than
// DefaultReloadAfter (collection may have deleted the slots after it), or
// that would hold a checkpoint interval of slots past its checkpoint
// (CheckpointSlots or CheckpointEntries at their defaults: a newer
// checkpoint holds them more compactly), is refused with ErrReload, the
// latter once the refresh reaches that many: load it anew (LoadFor). After any error p is half refreshed: drop it.
// Refresh must not be called while another goroutine reads p.
func (p *Partial) Refresh(ctx context.Context) error {
	if p.b == nil {
		return errors.New("index: Refresh of a Partial not loaded by LoadFor")
	}
	start := time.Now()
	if age := start.Sub(p.confirmed); age > DefaultReloadAfter {
		return fmt.Errorf("world %s: a state brought to the tip %v ago: %w", p.s.World.ID, age.Round(time.Second), ErrReload)
	}
	budget := uint64(defaultCheckpointSlots)
	if part := p.s.part; part != nil {
		past := p.s.Slots - part.cp.Slots
		if past >= defaultCheckpointSlots || p.s.Seq-part.cp.Seq >= DefaultCheckpointEntries {
			return fmt.Errorf("world %s: %d slots past checkpoint %s: %w", p.s.World.ID, past, part.name, ErrReload)
		}
		budget -= past
		part.fetch = part.fetcher(ctx)
		defer func() { part.fetch = nil }()
	}
	s, err := followLog(ctx, p.b, p.s, int(budget))
	if err != nil {
		return err
	}
	p.s, p.confirmed = s, start
	return nil
}

// Clone returns a copy of p that Refresh and Load change without
// changing p, so that p may be read meanwhile: the copy shares with p
// what neither changes in place (the checkpoint's parts, the trees'
// nodes, copied on write).
func (p *Partial) Clone() *Partial {
	s := p.s.clone()
	if part := s.part; part != nil {
		c := *part
		c.loaded, c.sums, c.filters, c.fetch = maps.Clone(part.loaded), maps.Clone(part.sums), maps.Clone(part.filters), nil
		s.part = &c
	}
	return &Partial{s: s, b: p.b, confirmed: p.confirmed}
}

// Parts returns how many tick parts of its checkpoint p holds decoded
// (0 for a whole state loaded without a checkpoint).
func (p *Partial) Parts() int {
	if p.s.part == nil {
		return 0
	}
	return len(p.s.part.loaded)
}

// covers is nil if p holds every tick of run from..to.
func (p *Partial) covers(run string, from, to int64) error {
	if p.s.part == nil || from > to {
		return nil
	}
	return p.s.part.covers(run, tickShard(run, from).N, tickShard(run, to).N)
}

// Tick returns the manifest of (run, tick), or ErrNotLoaded.
func (p *Partial) Tick(run string, tick int64) (*Tick, bool, error) {
	if err := p.covers(run, tick, tick); err != nil {
		return nil, false, err
	}
	t, ok := p.s.tick(run, tick)
	return t, ok, nil
}

// Ticks calls fn for each published tick of run from..to in tick order,
// until fn returns false; ErrNotLoaded, before any call, if p does not
// hold them all.
func (p *Partial) Ticks(run string, from, to int64, fn func(*Tick) bool) error {
	r, _ := p.s.Run(run)
	if err := p.covers(run, from, min(to, r.Head)); err != nil {
		return err
	}
	p.s.ticksFrom(run, from, func(t *Tick) bool { return t.Tick <= to && fn(t) })
	return nil
}

// Last returns run's newest published tick at or below upTo, or
// ErrNotLoaded if p does not hold the ticks between it and upTo.
func (p *Partial) Last(run string, upTo int64) (*Tick, bool, error) {
	t, ok := p.s.last(run, upTo)
	if err := p.s.lastHeld(run, upTo, t, ok); err != nil {
		return nil, false, err
	}
	return t, ok, nil
}

// TickByToken returns the tick of run that commit token published, as
// State.TickByToken: the tick the token names (TokenTick), if p holds it
// (Want.Token) and it carries the token; else the lowest tick that
// carries it, which needs every tick shard of run that may hold it (the
// shards p loaded, those whose token filter Want.Token read says they
// do not; ErrNotLoaded otherwise).
func (p *Partial) TickByToken(run, token string) (*Tick, bool, error) {
	if t, ok := p.s.namedTick(run, token); ok {
		return t, true, nil
	}
	if part := p.s.part; part != nil {
		if err := part.coversToken(run, token, math.MaxInt64); err != nil {
			return nil, false, err
		}
	}
	t, ok := p.s.tickByToken(run, token)
	return t, ok, nil
}

// LoadAll returns the whole state at p's sequence: p's own if it holds
// every tick, else a new state with the tick parts p lacks (held as
// summaries, LoadSummarized, or not loaded, LoadFor) decoded from its
// checkpoint, as Load would have returned it then. p is unchanged. A
// corrupt part, or a missing one of the newest checkpoint, is
// ErrCorrupt; one collected since a newer checkpoint replaced p's is
// ErrSuperseded.
func (p *Partial) LoadAll(ctx context.Context) (*State, error) { return p.s.loadAll(ctx) }

// loadAll is Partial.LoadAll of the Partial whose state s is.
func (s *State) loadAll(ctx context.Context) (*State, error) {
	p := s.part
	if p == nil {
		return s, nil
	}
	var refs []shardRef
	for _, r := range p.cp.Shards {
		if r.Kind == "t" && !p.loaded[r.key()] {
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		return s, nil
	}
	out, err := p.readShards(ctx, refs)
	if err != nil {
		return nil, err
	}
	n := s.clone()
	for _, d := range out {
		if err := n.addShard(p.name, p.cp, d); err != nil {
			return nil, err
		}
	}
	n.part = nil
	return n, nil
}

// readShards reads and decodes the shards refs of p's checkpoint, several
// at once. A shard collected since a newer checkpoint replaced p's is
// ErrSuperseded; a corrupt one, or a missing one of the newest
// checkpoint, is ErrCorrupt.
func (p *partial) readShards(ctx context.Context, refs []shardRef) ([]*decodedShard, error) {
	out := make([]*decodedShard, len(refs))
	err := parallel(ctx, len(refs), func(i int) error {
		var err error
		out[i], err = readShard(ctx, p.b, p.name, p.cp, refs[i])
		return err
	})
	if errors.Is(err, ErrCorrupt) && p.collected(ctx, refs) {
		return nil, fmt.Errorf("checkpoint %s: %w", p.name, ErrSuperseded)
	}
	return out, err
}

// fetcher returns a partial.fetch that reads with ctx.
func (p *partial) fetcher(ctx context.Context) func(s *State, r shardRef) error {
	return func(s *State, r shardRef) error {
		d, err := p.readShards(ctx, []shardRef{r})
		if err != nil {
			return err
		}
		return s.addShard(p.name, p.cp, d[0])
	}
}

// ErrSuperseded: a state loaded from a checkpoint reads a part of it that
// collection deleted since, once a newer checkpoint replaced it: the
// catalog moved on (load it again), it is not damaged.
var ErrSuperseded = errors.New("replaced by a newer checkpoint, and its parts collected")

// collected reports whether a shard of refs is gone from the bucket and
// p's checkpoint is no longer the newest: collection may delete the
// shards of a replaced checkpoint (the newest one's missing shard is
// corruption).
func (p *partial) collected(ctx context.Context, refs []shardRef) bool {
	world := p.cp.World.ID
	newest, _, err := newestCheckpoint(ctx, p.b, world)
	if err != nil || newest == "" || newest == p.name {
		return false
	}
	for _, r := range refs {
		if _, err := p.b.Stat(ctx, ShardName(world, r.Hash)); errors.Is(err, bucket.ErrNotExist) {
			return true
		}
	}
	return false
}

// View returns the view of the very catalog states p plans from, each
// whole (Partial.LoadAll): every tick question answers.
func (p *Plan) View(ctx context.Context) (*View, error) {
	v := &p.v
	done := map[*State]*State{}
	out := &View{World: v.World, Run: v.Run}
	for _, seg := range v.Segments {
		st, ok := done[seg.State]
		if !ok {
			var err error
			if st, err = seg.State.loadAll(ctx); err != nil {
				return nil, err
			}
			done[seg.State] = st
		}
		a := *seg.Allowlist
		if a.state == seg.State {
			a.state = st
		}
		out.Segments = append(out.Segments, Segment{Allowlist: &a, State: st})
	}
	return out, nil
}
