package index

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/worldfs/worldfs/internal/invariants"
)

// FactIDBase is the top of the negative id band facts are allocated from:
// the nth claim of a world (n = 1, 2, …) gets FactIDBase - n. Lineage rows
// use small negative ids above it, entities use ids ≥ 0.
const FactIDBase = -(int64(1) << 40)

// Tick is one published tick's manifest.
type Tick struct {
	Run         string
	Tick        int64
	CommitToken string
	WriterEpoch int64
	NextEntity  int64
	// PublishedUnixMs is when the writer published it (0: not recorded).
	PublishedUnixMs int64
	// Seq is the sequence of the entry that last changed it (its
	// publication, or a later rewrite of its fragments).
	Seq uint64
	// frags is its fragment lists (see Tables); ticks of a compacted span
	// share one.
	frags *fragList
}

// Tables returns the tick's fragment lists, one per table. A tick loaded
// from a checkpoint has its lists decoded when they are first read, with
// the rest of its checkpoint shard's (never at load): a list that does not
// decode is ErrCorrupt, so a reader fails closed rather than seeing no
// files. Ticks that name the very same lists (a compacted span) share
// them: see SameTables.
func (t *Tick) Tables() ([]TableFragments, error) { return t.frags.get() }

// SameTables reports whether t and o name one fragment list (as the ticks
// of a compacted span share it), not merely equal ones: a step, not a
// comparison of paths. It compares the ticks' shared record, never the
// slices Tables returns: a checkpoint shard's lists are decoded again, as
// new slices, once the decoded-list cache has dropped them.
func (t *Tick) SameTables(o *Tick) bool {
	return t != nil && o != nil && t.frags != nil && t.frags == o.frags
}

// fragList is a publication's fragment lists: held, or a list of a
// checkpoint shard, decoded on first use.
type fragList struct {
	tables []TableFragments
	lazy   *shardLists // nil: tables is the list
	i      int         // the list's index in lazy
}

func heldList(tables []TableFragments) *fragList { return &fragList{tables: tables} }

func (l *fragList) get() ([]TableFragments, error) {
	switch {
	case l == nil:
		return nil, nil
	case l.lazy == nil:
		return l.tables, nil
	}
	lists, err := l.lazy.decode()
	if err != nil {
		return nil, err
	}
	return lists[l.i], nil
}

// Claim states.
const (
	ClaimPending  = "pending"
	ClaimComplete = "complete"
	// ClaimReleased: its holder gave it up before appending anything. The
	// claim keeps its digest (the same id with another digest is a
	// conflict forever after, invariant 4); an acquire of the same digest
	// claims it afresh, under a new token.
	ClaimReleased = "released"
)

// Claim is a fact's claim (docs/ARCHITECTURE.md, "A fact, a receipt, an
// asset").
type Claim struct {
	Key          ClaimKey
	Digest       string
	CommitToken  string
	State        string
	Holder       string
	LeaseUntilMs int64
	// Epoch is the world's fence epoch when the claim was acquired.
	Epoch int64
	// Tick is where the fact lands: the run's head when acquired (-1: the
	// run had no visible tick).
	Tick int64
	// FactID is the fact's entity id, from the negative band.
	FactID int64
	// Tables hold the rows appended under the token (set on completion).
	Tables []TableFragments
	Seq    uint64

	shard int64 // claimBucket(Key), the claim's checkpoint shard
}

// CommandState is a durable command and whether it is settled.
type CommandState struct {
	Command
	// Settled is the tick whose publish settled it (-1: pending).
	Settled int64
	Seq     uint64
	shard   int64
}

func commandLess(a, b *CommandState) bool {
	return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.ID, b.ID)) < 0
}

// Command returns the command called id.
func (s *State) Command(id string) (*CommandState, bool) {
	return s.commands.Get(&CommandState{Command: Command{ID: id}, shard: commandBucket(id)})
}

// DueCommands returns run's pending commands due at or before tick, by
// due tick then id.
func (s *State) DueCommands(run string, tick int64) []*CommandState {
	var out []*CommandState
	s.commands.Ascend(func(c *CommandState) bool {
		if c.Run == run && c.Settled < 0 && c.Due <= tick {
			out = append(out, c)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *CommandState) int { return cmp.Or(cmp.Compare(a.Due, b.Due), cmp.Compare(a.ID, b.ID)) })
	return out
}

// Run summarizes one run of a world.
type Run struct {
	Name string
	// Head is the newest published tick (-1: none).
	Head      int64
	Published int64 // number of published ticks
}

// World is the catalog's record of the world itself.
type World struct {
	ID            string
	Created       bool
	Parent        string
	ForkRun       string
	ForkTick      int64
	WriterMode    string
	Status        string
	CreatedUnixMs int64
	// Epoch is the fence epoch (0: no writer ever fenced it) and
	// FenceHolder the writer that holds it.
	Epoch       int64
	FenceHolder string
	Claims      int64 // claims ever acquired; allocates fact ids
	// Meta is the world's run parameters (WorldCreate.Meta), immutable
	// once created; nil: none. Shared by every state of the world: never
	// written in place.
	Meta map[string]string `json:",omitempty"`
}

// State is a world's catalog state after sequence Seq. A State is
// immutable once returned: Apply derives a new one, sharing structure
// copy-on-write, at a cost proportional to the change.
type State struct {
	World World
	// Seq is the last applied sequence, Hash the hash of the slot that
	// holds it, Slots the number of slots applied since the log began.
	Seq   uint64
	Hash  string
	Slots uint64

	// The published ticks: tickParts (the ticks a checkpoint loaded, one
	// sorted slice per tick shard, the list ordered by run then tick, the
	// parts disjoint; shared by every state derived from it and never
	// modified) and ticks (the ticks published or replaced since). An
	// entry of ticks shadows the part entry of the same run and tick (a
	// rewrite replaces a tick): read them through Tick, Last and
	// ascendTicks, never one alone.
	tickParts [][]*Tick
	ticks     *btree.BTreeG[*Tick]
	// The token index: tokens (one sorted part per shard a checkpoint
	// loaded, built when first searched, and one per tokenPart ticks
	// published since; shared by every state derived from it and never
	// modified once built) and byToken (the ticks published since, not
	// yet folded into a part).
	// INVARIANT: every published tick has an entry in one of them (see
	// putTick).
	tokens   []*tokenIndex
	byToken  *btree.BTreeG[tokenEntry]
	runs     *btree.BTreeG[*Run]
	claims   *btree.BTreeG[*Claim]
	commands *btree.BTreeG[*CommandState]
	// shardSeq records, per checkpoint shard, the last sequence that
	// changed it, so a checkpoint rewrites only shards changed since the
	// previous one.
	shardSeq *btree.BTreeG[shardMark]
	// intents are the open intents, by id (intent.go); shared between
	// clones and copied on change.
	intents []Intent
	// tags are the world's tags, by name (tag.go); shared between clones
	// and copied on change.
	tags []Tag
	// part is what a state loaded for part of its history (LoadFor)
	// holds of its checkpoint's ticks; nil: all of them.
	part *partial
	// cloneMu serializes clones of this state: btree's Clone updates the
	// source tree's copy-on-write context, so two readers advancing from
	// one tip at once must not clone it together.
	cloneMu *sync.Mutex
}

func tickLess(a, b *Tick) bool {
	if a.Run != b.Run {
		return a.Run < b.Run
	}
	return a.Tick < b.Tick
}

// tokenEntry indexes a published tick by a hash of its run and commit
// token. A tick's token never changes once published (a rewrite keeps it,
// nothing unpublishes a tick), so the index only grows, and an entry names
// its tick by number: a lookup compares the tick's token, which also
// settles hash collisions. Sixteen bytes a tick, kept inline, compared as
// integers: a cold start sorts them instead of building a tree of strings.
type tokenEntry struct {
	key  uint64
	tick int64
}

func tokenKey(run, token string) uint64 {
	var h maphash.Hash
	h.SetSeed(tokenSeed)
	h.WriteString(run)
	h.WriteByte(0)
	h.WriteString(token)
	return h.Sum64()
}

// tokenSeed seeds tokenKey: the keys live only in this process's memory
// (a cold start computes them), so any seed serves, and maphash is
// several times faster than a byte-at-a-time hash.
var tokenSeed = maphash.MakeSeed()

func tokenCompare(a, b tokenEntry) int {
	if a.key != b.key { // nearly always: the tick decides only on a collision
		if a.key < b.key {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.tick, b.tick)
}

func tokenLess(a, b tokenEntry) bool { return tokenCompare(a, b) < 0 }

// tokenIndex is a sorted part of the token index. The part of a tick
// shard a checkpoint loaded is built from its ticks when it is first
// searched: a cold start hashes and sorts no token until a reader looks
// one up, and then only once for every state that shares the part.
type tokenIndex struct {
	once    sync.Once
	ticks   []*Tick // the ticks to index (nil: entries is built)
	entries []tokenEntry
}

// tokenBuilds counts the token index parts built from a shard's ticks
// (tests).
var tokenBuilds atomic.Int64

// get returns the part's entries, building them on first use.
func (p *tokenIndex) get() []tokenEntry {
	p.once.Do(func() {
		if p.ticks == nil {
			return
		}
		tokenBuilds.Add(1)
		p.entries = make([]tokenEntry, len(p.ticks))
		for i, t := range p.ticks {
			p.entries[i] = tokenEntry{tokenKey(t.Run, t.CommitToken), t.Tick}
		}
		slices.SortFunc(p.entries, tokenCompare)
		p.ticks = nil
	})
	return p.entries
}

func runLess(a, b *Run) bool { return a.Name < b.Name }

// Claims sort by run, then checkpoint shard, then key, so that each shard is
// one contiguous range.
// It stops at the first field that differs (a lookup of a fact's claim
// runs it some twenty times).
func claimLess(a, b *Claim) bool {
	switch {
	case a.Key.Run != b.Key.Run:
		return a.Key.Run < b.Key.Run
	case a.shard != b.shard:
		return a.shard < b.shard
	case a.Key.Producer != b.Key.Producer:
		return a.Key.Producer < b.Key.Producer
	}
	return a.Key.ExternalID < b.Key.ExternalID
}

const btreeDegree = 32

// Empty returns the state of a world with an empty log.
func Empty(world string) *State {
	return &State{
		World:    World{ID: world},
		ticks:    btree.NewG(btreeDegree, tickLess),
		byToken:  btree.NewG(btreeDegree, tokenLess),
		runs:     btree.NewG(btreeDegree, runLess),
		claims:   btree.NewG(btreeDegree, claimLess),
		commands: btree.NewG(btreeDegree, commandLess),
		shardSeq: btree.NewG(btreeDegree, shardMarkLess),
		cloneMu:  new(sync.Mutex),
	}
}

// clone returns a mutable copy sharing structure with s.
func (s *State) clone() *State {
	s.cloneMu.Lock()
	defer s.cloneMu.Unlock()
	c := *s
	c.cloneMu = new(sync.Mutex)
	c.ticks = s.ticks.Clone()
	c.byToken = s.byToken.Clone()
	c.runs = s.runs.Clone()
	c.claims = s.claims.Clone()
	c.commands = s.commands.Clone()
	c.shardSeq = s.shardSeq.Clone()
	return &c
}

// Tick returns the manifest of (run, tick). A state loaded in part
// (LoadFor, LoadSummarized) is a Partial, whose Tick returns ErrNotLoaded
// for a tick it does not hold.
func (s *State) Tick(run string, tick int64) (*Tick, bool) {
	if invariants.Enabled && s.part != nil {
		if err := s.part.covers(run, tickShard(run, tick).N, tickShard(run, tick).N); err != nil {
			refuse("Tick", err)
		}
	}
	return s.tick(run, tick)
}

// tick is Tick on the ticks s holds.
func (s *State) tick(run string, tick int64) (*Tick, bool) {
	k := &Tick{Run: run, Tick: tick}
	if t, ok := s.ticks.Get(k); ok {
		return t, true
	}
	return s.partTick(k)
}

func tickCompare(a, b *Tick) int {
	return cmp.Or(strings.Compare(a.Run, b.Run), cmp.Compare(a.Tick, b.Tick))
}

// partAt returns the index of the first part whose last tick is at or
// after k (len(tickParts): none).
func (s *State) partAt(k *Tick) int {
	i, _ := slices.BinarySearchFunc(s.tickParts, k, func(p []*Tick, k *Tick) int { return tickCompare(p[len(p)-1], k) })
	return i
}

// partTick returns the tick k names in the parts, shadowed or not.
func (s *State) partTick(k *Tick) (*Tick, bool) {
	if i := s.partAt(k); i < len(s.tickParts) {
		p := s.tickParts[i]
		if j, ok := slices.BinarySearchFunc(p, k, tickCompare); ok {
			return p[j], true
		}
	}
	return nil, false
}

// ascendTicks calls fn for each tick from `from` on, by run then tick,
// until fn returns false: the parts and the overlay merged, part by part
// (the overlay's ticks before a part, then those within its range merged
// with it), the overlay's tick winning over the part's of the same run and
// tick.
func (s *State) ascendTicks(from *Tick, fn func(*Tick) bool) {
	i := s.partAt(from)
	for ; i < len(s.tickParts); i++ {
		p := s.tickParts[i]
		j, _ := slices.BinarySearchFunc(p, from, tickCompare)
		end := tickAfter(p[len(p)-1])
		stop := false
		s.ticks.AscendRange(from, end, func(o *Tick) bool {
			for ; j < len(p) && tickLess(p[j], o); j++ {
				if !fn(p[j]) {
					stop = true
					return false
				}
			}
			if j < len(p) && !tickLess(o, p[j]) {
				j++ // shadowed
			}
			if !fn(o) {
				stop = true
			}
			return !stop
		})
		if stop {
			return
		}
		for ; j < len(p); j++ {
			if !fn(p[j]) {
				return
			}
		}
		from = end
	}
	s.ticks.AscendGreaterOrEqual(from, fn)
}

// tickAfter is the least key after t's.
func tickAfter(t *Tick) *Tick {
	if t.Tick == math.MaxInt64 {
		return &Tick{Run: t.Run + "\x00", Tick: math.MinInt64}
	}
	return &Tick{Run: t.Run, Tick: t.Tick + 1}
}

// putTick inserts or replaces a tick, keeping the token index in step (a
// replacement keeps its token, so its entry stays).
func (s *State) putTick(t *Tick) {
	old, ok := s.ticks.ReplaceOrInsert(t)
	if !ok && len(s.tickParts) > 0 {
		old, ok = s.partTick(t)
	}
	if !ok || old.CommitToken != t.CommitToken {
		s.byToken.ReplaceOrInsert(tokenEntry{tokenKey(t.Run, t.CommitToken), t.Tick})
		if s.byToken.Len() >= tokenPart {
			s.foldTokens()
		}
	}
}

// tokenPart is how many publications the token index keeps in its tree
// before it folds them into a sorted part: a replayed state then holds the
// index as a loaded one does (sixteen bytes a tick), not as a tree of
// half-filled nodes, at a cost per publication that does not grow.
const tokenPart = tickShardSpan

// foldTokens moves the tree of the token index into a new sorted part.
// Parts are shared with the states this one was derived from: the list of
// them is copied, never appended to in place.
func (s *State) foldTokens() {
	part := make([]tokenEntry, 0, s.byToken.Len())
	s.byToken.Ascend(func(e tokenEntry) bool { part = append(part, e); return true })
	s.tokens = append(slices.Clip(s.tokens), &tokenIndex{entries: part})
	s.byToken = btree.NewG(btreeDegree, tokenLess)
}

// Last returns run's newest published tick at or below upTo (of a state
// loaded in part: Partial.Last).
func (s *State) Last(run string, upTo int64) (*Tick, bool) {
	t, ok := s.last(run, upTo)
	if invariants.Enabled && s.part != nil {
		if err := s.lastHeld(run, upTo, t, ok); err != nil {
			refuse("Last", err)
		}
	}
	return t, ok
}

// lastHeld is nil if s holds every tick of run between t (the newest it
// holds at or below upTo; ok false: none) and upTo.
func (s *State) lastHeld(run string, upTo int64, t *Tick, ok bool) error {
	if s.part == nil {
		return nil
	}
	from := int64(math.MinInt64)
	if ok {
		from = t.Tick
	}
	return s.part.coversTicks(s, run, from, upTo)
}

// last is Last on the ticks s holds.
func (s *State) last(run string, upTo int64) (*Tick, bool) {
	k := &Tick{Run: run, Tick: upTo}
	var out *Tick
	s.ticks.DescendLessOrEqual(k, func(t *Tick) bool {
		out = t
		return false
	})
	// The part's newest at or below k, unless the overlay's is as new.
	if len(s.tickParts) > 0 {
		i := s.partAt(k)
		var p []*Tick
		j := 0
		if i < len(s.tickParts) {
			p = s.tickParts[i]
			j, _ = slices.BinarySearchFunc(p, k, func(t, k *Tick) int { return cmp.Or(tickCompare(t, k), -1) })
		}
		if j == 0 && i > 0 {
			p = s.tickParts[i-1]
			j = len(p)
		}
		if j > 0 && (out == nil || tickLess(out, p[j-1])) {
			out = p[j-1]
		}
	}
	if out == nil || out.Run != run {
		return nil, false
	}
	return out, true
}

// TickByToken returns the tick of run that commit token published: the
// tick the token names (TokenTick), if that tick carries it; else the
// lowest that does (a token worldfs minted publishes one tick; a log may
// hold a token published at several). A token that names no tick, or
// one its named tick does not carry, is looked for in every tick (of a
// state loaded in part: Partial.TickByToken).
func (s *State) TickByToken(run, token string) (*Tick, bool) {
	if t, ok := s.namedTick(run, token); ok {
		return t, true
	}
	return s.lowestByToken("TickByToken", run, token)
}

// lowestByToken returns the lowest tick of run that carries token. A
// state loaded in part must hold every tick of run that may carry it
// (those of the shards it loaded, and of those whose token filter says
// they do not: Want.Token): an invariant (see refuse), naming method.
func (s *State) lowestByToken(method, run, token string) (*Tick, bool) {
	if invariants.Enabled && s.part != nil {
		if err := s.part.coversToken(run, token, math.MaxInt64); err != nil {
			refuse(method, err)
		}
	}
	return s.tickByToken(run, token)
}

// namedTick returns the tick token names (TokenTick), if s holds that
// tick and it carries token: TickByToken's answer, which a state loaded
// in part gives without every tick. ok false tells nothing of where
// token is.
func (s *State) namedTick(run, token string) (*Tick, bool) {
	n, ok := TokenTick(token)
	if !ok {
		return nil, false
	}
	if s.part != nil {
		if k := tickShard(run, n).N; s.part.covers(run, k, k) != nil {
			return nil, false
		}
	}
	if t, ok := s.tick(run, n); ok && t.CommitToken == token {
		return t, true
	}
	return nil, false
}

// tickByToken is TickByToken on the ticks s holds.
func (s *State) tickByToken(run, token string) (*Tick, bool) {
	// The first tick of the token in each part, in tick order; the lowest
	// wins.
	key := tokenKey(run, token)
	var out *Tick
	check := func(e tokenEntry) bool {
		if e.key != key || out != nil && out.Tick <= e.tick {
			return false
		}
		if t, ok := s.tick(run, e.tick); ok && t.CommitToken == token {
			out = t
			return false
		}
		return true // another run's, or a collision
	}
	for _, p := range s.tokens {
		part := p.get()
		i, _ := slices.BinarySearchFunc(part, tokenEntry{key, math.MinInt64}, tokenCompare)
		for ; i < len(part) && check(part[i]); i++ {
		}
	}
	s.byToken.AscendGreaterOrEqual(tokenEntry{key, math.MinInt64}, check)
	return out, out != nil
}

// Ticks calls fn for each published tick of run in tick order from `from`,
// until fn returns false (of a state loaded in part: Partial.Ticks,
// bounded, which checks what it will read before the first call).
func (s *State) Ticks(run string, from int64, fn func(*Tick) bool) {
	p := s.part
	if p == nil || !invariants.Enabled {
		s.ticksFrom(run, from, fn)
		return
	}
	ns := p.shards[run]
	i, _ := slices.BinarySearch(ns, tickShard(run, from).N)
	// held refuses a shard before n (inclusive) that s does not hold.
	held := func(n int64) {
		for ; i < len(ns) && ns[i] <= n; i++ {
			if err := p.covers(run, ns[i], ns[i]); err != nil {
				refuse("Ticks", err)
			}
		}
	}
	done := true
	s.ticksFrom(run, from, func(t *Tick) bool {
		held(tickShard(run, t.Tick).N)
		if !fn(t) {
			done = false
			return false
		}
		return true
	})
	if done {
		held(math.MaxInt64)
	}
}

// ticksIn calls fn for each published tick of run from..to in tick
// order, until fn returns false; a state loaded in part must hold them
// all (an invariant: see refuse, as method).
func (s *State) ticksIn(method, run string, from, to int64, fn func(*Tick) bool) {
	if invariants.Enabled && s.part != nil {
		if err := s.part.coversTicks(s, run, from, to); err != nil {
			refuse(method, err)
		}
	}
	s.ticksFrom(run, from, func(t *Tick) bool { return t.Tick <= to && fn(t) })
}

// ticksFrom is Ticks on the ticks s holds.
func (s *State) ticksFrom(run string, from int64, fn func(*Tick) bool) {
	s.ascendTicks(&Tick{Run: run, Tick: from}, func(t *Tick) bool {
		return t.Run == run && fn(t)
	})
}

// Run returns run's summary.
func (s *State) Run(name string) (Run, bool) {
	r, ok := s.runs.Get(&Run{Name: name})
	if !ok {
		return Run{Name: name, Head: -1}, false
	}
	return *r, true
}

// Runs returns every run with at least one publication, by name.
func (s *State) Runs() []Run {
	var out []Run
	s.runs.Ascend(func(r *Run) bool { out = append(out, *r); return true })
	return out
}

// Claim returns the claim on key.
func (s *State) Claim(key ClaimKey) (*Claim, bool) {
	return s.claims.Get(&Claim{Key: key, shard: claimBucket(key)})
}

// ClaimRuns returns the runs that have claims, sorted (a run may have
// facts before it has ticks).
func (s *State) ClaimRuns() []string {
	var runs []string
	s.claims.Ascend(func(c *Claim) bool {
		if len(runs) == 0 || runs[len(runs)-1] != c.Key.Run {
			runs = append(runs, c.Key.Run)
		}
		return true
	})
	return runs
}

// Claims calls fn for each claim of run, until fn returns false.
func (s *State) Claims(run string, fn func(*Claim) bool) {
	s.claims.AscendGreaterOrEqual(&Claim{Key: ClaimKey{Run: run}, shard: -1}, func(c *Claim) bool {
		return c.Key.Run == run && fn(c)
	})
}

// Result is what one applied entry produced, for its caller.
type Result struct {
	Seq uint64
	// Epoch: fence.acquire's new epoch.
	Epoch int64
	// Republished: tick.publish found the identical attempt already
	// published (an idempotent no-op).
	Republished bool
	// Claim: the claim after a claim entry.
	// Existing reports an acquire that found the same fact complete (the
	// original receipt).
	Claim    *Claim
	Existing bool
}

// ApplySlot applies a slot to s and returns the new state, or ErrCorrupt if
// the slot does not continue s's log or an entry does not apply (a slot in
// the log never holds a refused entry: each is checked before the slot is
// created).
func (s *State) ApplySlot(slot *Slot, hash string) (*State, error) {
	return s.clone().applySlot(slot, hash)
}

// applySlot is ApplySlot on n itself, a state nobody else holds (a fresh
// clone, or one a load has not returned yet): replaying many slots then
// copies no tree path per slot. After an error n is half applied: drop it.
func (n *State) applySlot(slot *Slot, hash string) (*State, error) {
	if slot.World != n.World.ID {
		return nil, fmt.Errorf("slot of world %q applied to world %q: %w", slot.World, n.World.ID, ErrCorrupt)
	}
	if slot.FirstSeq != n.Seq+1 {
		return nil, fmt.Errorf("world %s: slot starts at sequence %d after sequence %d: %w", n.World.ID, slot.FirstSeq, n.Seq, ErrCorrupt)
	}
	if slot.Prev != n.Hash {
		return nil, fmt.Errorf("world %s: slot %d names predecessor %.12s, the log has %.12s: %w", n.World.ID, slot.FirstSeq, slot.Prev, n.Hash, ErrCorrupt)
	}
	for i := range slot.Entries {
		// A state loaded for part of its history reads first the tick
		// shards the entry touches: a failure to read one is that
		// failure (a corrupt shard is ErrCorrupt), not a refused entry.
		if n.part != nil {
			if err := n.cover(&slot.Entries[i]); err != nil {
				return nil, fmt.Errorf("world %s: entry at sequence %d: %w", n.World.ID, slot.FirstSeq+uint64(i), err)
			}
		}
		if _, err := n.applyLogged(&slot.Entries[i], slot.FirstSeq+uint64(i)); err != nil {
			return nil, fmt.Errorf("world %s: entry at sequence %d: %w: %w", n.World.ID, slot.FirstSeq+uint64(i), ErrCorrupt, err)
		}
	}
	n.Seq, n.Hash, n.Slots = slot.LastSeq(), hash, n.Slots+1
	return n, nil
}

// Check applies e at sequence seq on a copy of s: the new state and the
// entry's result, or the typed error refusing it. s is unchanged.
func (s *State) Check(e *Entry, seq uint64) (*State, Result, error) {
	if err := e.validate(); err != nil {
		return nil, Result{}, refused("%v", err)
	}
	n := s.clone()
	r, err := n.apply(e, seq)
	if err != nil {
		return nil, Result{}, err
	}
	n.Seq = seq
	return n, r, nil
}

// checkNew refuses what a new entry may not do though a log written by
// an earlier version may hold it (a replay applies it, see applySlot): a
// fork's publish at or before its fork point; a compaction under an
// intent that is not open, or naming files not written under it
// (checkIntent); a tag of a tick of the world's own history that is not
// published (checkTag: a state loaded in part replays a tag without the
// tick's part). Readers take a fork's ticks
// up to the fork point from its parent (Lineage), so one of its own there
// would be a second tick of that number, listed as one (View.Ticks) and
// looked up as the other (View.Tick).
func (s *State) checkNew(e *Entry) error {
	w := &s.World
	if p := e.TickPublish; e.Kind == KindTickPublish && w.Parent != "" && p.Tick <= w.ForkTick {
		return refused("world %s forked from %s at tick %d: its own ticks follow the fork point, tick %d is its parent's", w.ID, w.Parent, w.ForkTick, p.Tick)
	}
	if e.Kind == KindFragmentsRewrite {
		return s.checkIntent(e.Rewrite)
	}
	if e.Kind == KindTagCreate {
		return s.checkTag(e.Tag)
	}
	return nil
}

// apply mutates n (a fresh clone) with e, a new entry, at sequence seq
// (checkNew, then applyLogged).
func (n *State) apply(e *Entry, seq uint64) (Result, error) {
	if err := n.checkNew(e); err != nil {
		return Result{Seq: seq}, err
	}
	return n.applyLogged(e, seq)
}

// applyLogged mutates n with e, an entry of the log, at sequence seq: one
// method per kind of entry.
func (n *State) applyLogged(e *Entry, seq uint64) (Result, error) {
	r := Result{Seq: seq}
	if n.part != nil {
		if err := n.cover(e); err != nil {
			return r, err
		}
	}
	if e.Kind != KindWorldCreate && !n.World.Created {
		return r, fmt.Errorf("%s on world %s: %w", e.Kind, n.World.ID, ErrNoWorld)
	}
	switch e.Kind {
	case KindWorldCreate:
		return r, n.applyWorldCreate(e.WorldCreate)
	case KindFenceAcquire:
		return n.applyFenceAcquire(e.FenceAcquire, seq)
	case KindTickPublish:
		return n.applyPublish(e.TickPublish, seq)
	case KindWorldStatus:
		n.applyWorldStatus(e.WorldStatus)
		return r, nil
	case KindClaimAcquire, KindClaimTakeover, KindClaimComplete, KindClaimRelease:
		return n.applyClaim(e, seq)
	case KindCommandEnqueue:
		return r, n.applyCommand(e.Command, seq)
	case KindIntentOpen, KindIntentClose:
		return r, n.applyIntent(e.Kind, e.Intent, seq)
	case KindTagCreate, KindTagDelete:
		return r, n.applyTag(e.Kind, e.Tag, seq)
	case KindFragmentsRewrite:
		switch {
		case e.Rewrite.Facts:
			return r, n.applyFactCompaction(e.Rewrite, seq)
		case e.Rewrite.Span != nil:
			return r, n.applyCompaction(e.Rewrite, seq)
		default:
			return r, n.applyRewrite(e.Rewrite, seq)
		}
	default:
		return r, refused("unknown entry kind %q", e.Kind)
	}
}

func (n *State) applyWorldCreate(c *WorldCreate) error {
	w := &n.World
	if w.Created {
		return fmt.Errorf("world %s: %w", w.ID, ErrWorldExists)
	}
	*w = World{ID: w.ID, Created: true, Parent: c.Parent, ForkRun: c.ForkRun, ForkTick: c.ForkTick,
		WriterMode: c.WriterMode, Status: StatusActive, CreatedUnixMs: c.CreatedUnixMs, Meta: metaOf(c.Meta)}
	return nil
}

func (n *State) applyFenceAcquire(f *FenceAcquire, seq uint64) (Result, error) {
	w := &n.World
	if f.Resume && w.WriterMode == ModeCleanupOnly {
		return Result{Seq: seq}, refused("world %s is %s: it can never be resumed mutably", w.ID, ModeCleanupOnly)
	}
	w.Epoch++
	w.FenceHolder = f.Holder
	return Result{Seq: seq, Epoch: w.Epoch}, nil
}

func (n *State) applyWorldStatus(st *WorldStatus) {
	n.World.Status = st.Status
	if st.WriterMode != "" {
		n.World.WriterMode = st.WriterMode
	}
}

// applyPublish publishes a tick, settling the commands it names.
func (n *State) applyPublish(p *TickPublish, seq uint64) (Result, error) {
	w := &n.World
	r := Result{Seq: seq}
	if p.WriterEpoch != w.Epoch {
		return r, &StaleWriterError{World: w.ID, Held: p.WriterEpoch, Current: w.Epoch}
	}
	if old, ok := n.Tick(p.Run, p.Tick); ok {
		if old.CommitToken != p.CommitToken {
			return r, &CatalogConflictError{World: w.ID, Run: p.Run, Tick: p.Tick, Published: old.CommitToken, Attempted: p.CommitToken}
		}
		r.Republished = true
		return r, nil
	}
	if w.Status != StatusActive {
		return r, refused("world %s is %s", w.ID, w.Status)
	}
	for _, id := range p.Settle {
		c, ok := n.Command(id)
		switch {
		case !ok:
			return r, refused("tick %d settles command %s, which was never enqueued", p.Tick, id)
		case c.Settled >= 0:
			return r, refused("tick %d settles command %s, already settled by tick %d", p.Tick, id, c.Settled)
		case c.Run != p.Run || c.Due > p.Tick:
			return r, refused("tick %d of run %s cannot settle command %s (run %s, due %d)", p.Tick, p.Run, id, c.Run, c.Due)
		}
		nc := *c
		nc.Settled, nc.Seq = p.Tick, seq
		n.commands.ReplaceOrInsert(&nc)
		n.mark(commandShard(id), seq)
	}
	t := &Tick{Run: p.Run, Tick: p.Tick, CommitToken: p.CommitToken, WriterEpoch: p.WriterEpoch,
		frags: heldList(cloneTables(p.Tables)), NextEntity: p.NextEntity, PublishedUnixMs: p.PublishedUnixMs, Seq: seq}
	n.putTick(t)
	run, _ := n.Run(p.Run)
	run.Head = max(run.Head, p.Tick)
	run.Published++
	n.runs.ReplaceOrInsert(&run)
	n.mark(tickShard(p.Run, p.Tick), seq)
	return r, nil
}

// applyCommand enqueues a durable command; the identical enqueue again is
// a no-op.
func (n *State) applyCommand(c *Command, seq uint64) error {
	if old, ok := n.Command(c.ID); ok {
		if old.Command != *c {
			return refused("command %s was enqueued with other contents", c.ID)
		}
		return nil
	}
	n.commands.ReplaceOrInsert(&CommandState{Command: *c, Settled: -1, Seq: seq, shard: commandBucket(c.ID)})
	n.mark(commandShard(c.ID), seq)
	return nil
}

// applyRewrite applies the one-tick form of fragments.rewrite: see
// FragmentsRewrite.
func (n *State) applyRewrite(rw *FragmentsRewrite, seq uint64) error {
	t, ok := n.Tick(rw.Run, rw.Tick)
	if !ok {
		return refused("rewrite of run %s tick %d: not published", rw.Run, rw.Tick)
	}
	tables, err := t.Tables()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(tables, func(tf TableFragments) bool { return tf.Table == rw.Table })
	if i < 0 {
		return refused("rewrite of run %s tick %d: no table %s", rw.Run, rw.Tick, rw.Table)
	}
	var oldPaths []string
	var oldRows, newRows int64
	for _, f := range tables[i].Fragments {
		oldPaths = append(oldPaths, f.Path)
		oldRows += f.Rows
	}
	for _, f := range rw.New {
		newRows += f.Rows
	}
	if !slices.Equal(oldPaths, rw.Old) {
		return refused("rewrite of run %s tick %d table %s: the fragments moved since they were read", rw.Run, rw.Tick, rw.Table)
	}
	if oldRows != newRows {
		return refused("rewrite of run %s tick %d table %s: %d rows become %d; a rewrite keeps every row", rw.Run, rw.Tick, rw.Table, oldRows, newRows)
	}
	nt := *t
	nt.Seq = seq
	nt.frags = heldList(cloneTables(tables))
	nt.frags.tables[i] = TableFragments{Table: rw.Table, Fragments: slices.Clone(rw.New)}
	n.putTick(&nt)
	n.mark(tickShard(rw.Run, rw.Tick), seq)
	return nil
}

func (n *State) applyClaim(e *Entry, seq uint64) (Result, error) {
	w := &n.World
	c := e.Claim
	r := Result{Seq: seq}
	old, exists := n.Claim(c.Key)
	if exists && old.Digest != c.Digest {
		return r, &ClaimConflictError{World: w.ID, Key: c.Key, Claimed: old.Digest, Attempted: c.Digest}
	}
	var nc Claim
	switch e.Kind {
	case KindClaimAcquire:
		switch {
		case exists && old.State == ClaimComplete:
			r.Claim, r.Existing = old, true
			return r, nil
		case exists && old.State != ClaimReleased:
			return r, &ClaimPendingError{World: w.ID, Key: c.Key, Holder: old.Holder, LeaseUntilMs: old.LeaseUntilMs}
		}
		w.Claims++
		run, _ := n.Run(c.Key.Run)
		nc = Claim{Key: c.Key, Digest: c.Digest, CommitToken: c.CommitToken, State: ClaimPending,
			Holder: c.Holder, LeaseUntilMs: c.LeaseUntilMs, Epoch: w.Epoch, Tick: run.Head,
			FactID: FactIDBase - w.Claims, shard: claimBucket(c.Key)}
	case KindClaimTakeover:
		switch {
		case !exists:
			return r, refused("takeover of fact %s: no claim", c.Key)
		case old.State == ClaimReleased:
			return r, refused("takeover of fact %s: the claim was released", c.Key)
		case old.State == ClaimComplete:
			r.Claim, r.Existing = old, true
			return r, nil
		case c.NowMs < old.LeaseUntilMs && c.Holder != old.Holder:
			return r, &ClaimPendingError{World: w.ID, Key: c.Key, Holder: old.Holder, LeaseUntilMs: old.LeaseUntilMs}
		}
		nc = *old
		nc.Holder, nc.LeaseUntilMs = c.Holder, c.LeaseUntilMs
	case KindClaimComplete:
		switch {
		case !exists:
			return r, refused("completion of fact %s: no claim", c.Key)
		case old.State == ClaimReleased:
			return r, refused("completion of fact %s under token %s: the claim was released", c.Key, c.CommitToken)
		case old.CommitToken != c.CommitToken:
			return r, refused("completion of fact %s under token %s: the claim's token is %s", c.Key, c.CommitToken, old.CommitToken)
		case old.State == ClaimComplete:
			r.Claim, r.Existing = old, true
			return r, nil
		}
		nc = *old
		nc.State = ClaimComplete
		nc.Tables = cloneTables(c.Fragments)
	case KindClaimRelease:
		switch {
		case !exists:
			return r, refused("release of fact %s: no claim", c.Key)
		case old.State == ClaimComplete:
			return r, refused("release of fact %s: the claim is complete, and a complete claim is never released", c.Key)
		case old.State == ClaimReleased && old.CommitToken == c.CommitToken:
			r.Claim = old
			return r, nil // released already: the same release again is a no-op
		case old.CommitToken != c.CommitToken || old.Holder != c.Holder:
			return r, refused("release of fact %s by %s under token %s: the claim is %s's under token %s", c.Key, c.Holder, c.CommitToken, old.Holder, old.CommitToken)
		}
		nc = *old
		nc.State, nc.Holder, nc.LeaseUntilMs = ClaimReleased, "", 0
	}
	nc.Seq = seq
	n.claims.ReplaceOrInsert(&nc)
	n.mark(claimShard(c.Key), seq)
	r.Claim = &nc
	return r, nil
}

// applyCompaction applies the span form of fragments.rewrite: see
// FragmentsRewrite. Its cost is that of the ticks it rewrites.
func (n *State) applyCompaction(rw *FragmentsRewrite, seq uint64) error {
	at := func(format string, args ...any) error {
		return refused("compaction of run %s ticks %d..%d: %s", rw.Run, rw.Span.From, rw.Span.To, fmt.Sprintf(format, args...))
	}
	into := map[string]*TableFragments{}
	newRows := map[string]int64{}
	compacted := cloneTables(rw.Tables)
	for i := range compacted {
		tf := &compacted[i]
		if into[tf.Table] != nil {
			return at("table %s listed twice", tf.Table)
		}
		into[tf.Table] = tf
		for _, f := range tf.Fragments {
			newRows[tf.Table] += f.Rows
		}
	}
	var ticks []*Tick
	var lists [][]TableFragments
	n.ticksIn("Apply", rw.Run, rw.Span.From, rw.Span.To, func(t *Tick) bool {
		ticks = append(ticks, t)
		return true
	})
	if len(ticks) == 0 {
		return at("no tick is published there")
	}
	for _, t := range ticks {
		tables, err := t.Tables()
		if err != nil {
			return err
		}
		lists = append(lists, tables)
	}
	// Each old file counts once: a compacted file is named by every tick
	// of its span.
	oldRows := map[string]int64{}
	seen := map[string]bool{}
	for i, t := range ticks {
		if t.Seq > rw.ReadSeq {
			return at("tick %d changed at sequence %d, after the compactor read sequence %d", t.Tick, t.Seq, rw.ReadSeq)
		}
		for _, tf := range lists[i] {
			if into[tf.Table] == nil {
				continue
			}
			for _, f := range tf.Fragments {
				if f.Span != nil {
					if f.Span.From < rw.Span.From || f.Span.To > rw.Span.To {
						return at("file %s spans ticks %d..%d, beyond the compaction", f.Path, f.Span.From, f.Span.To)
					}
					if seen[f.Path] {
						continue
					}
					seen[f.Path] = true
				}
				oldRows[tf.Table] += f.Rows
			}
		}
	}
	for table, rows := range newRows {
		if oldRows[table] != rows {
			return at("table %s: %d rows become %d; a rewrite keeps every row", table, oldRows[table], rows)
		}
	}
	// Ticks whose other tables are alike share one fragment list, so a
	// compacted history costs a tick record per tick and little more. The
	// new records and their tokens are carved from one allocation each:
	// a replayed history is as compact as a loaded one, and the records
	// and strings each publication left behind are freed whole.
	shared := map[string]*fragList{}
	var key strings.Builder
	recs := make([]Tick, len(ticks))
	var tokens strings.Builder
	size := 0
	for _, t := range ticks {
		size += len(t.CommitToken)
	}
	tokens.Grow(size)
	for _, t := range ticks {
		tokens.WriteString(t.CommitToken)
	}
	all, at0 := tokens.String(), 0
	for i, t := range ticks {
		key.Reset()
		for _, tf := range lists[i] {
			key.WriteString(tf.Table)
			key.WriteByte(0)
			if into[tf.Table] == nil {
				for _, f := range tf.Fragments {
					key.WriteString(f.Path)
					key.WriteByte(0)
				}
			}
		}
		fl, ok := shared[key.String()]
		if !ok {
			tables := make([]TableFragments, len(lists[i]))
			for j, tf := range lists[i] {
				if c := into[tf.Table]; c != nil {
					tables[j] = *c
				} else {
					tables[j] = tf
				}
			}
			fl = heldList(tables)
			shared[key.String()] = fl
		}
		nt := &recs[i]
		*nt = *t
		nt.Run, nt.CommitToken = rw.Run, all[at0:at0+len(t.CommitToken)]
		at0 += len(t.CommitToken)
		nt.frags, nt.Seq = fl, seq
		n.putTick(nt)
		n.mark(tickShard(rw.Run, t.Tick), seq)
	}
	return nil
}

// applyFactCompaction applies the facts form of fragments.rewrite: see
// FragmentsRewrite. Its cost is that of the claims it rewrites.
func (n *State) applyFactCompaction(rw *FragmentsRewrite, seq uint64) error {
	at := func(format string, args ...any) error {
		return refused("compaction of the facts of run %s, claim shard %d: %s", rw.Run, rw.ClaimShard, fmt.Sprintf(format, args...))
	}
	compacted := cloneTables(rw.Tables)
	into := map[string][]TableFragments{}
	newRows := map[string]int64{}
	for i := range compacted {
		tf := compacted[i]
		if into[tf.Table] != nil {
			return at("table %s listed twice", tf.Table)
		}
		into[tf.Table] = []TableFragments{tf} // shared by every claim it holds
		for _, f := range tf.Fragments {
			newRows[tf.Table] += f.Rows
		}
	}
	var claims []*Claim
	oldRows := map[string]int64{}
	seen := map[string]bool{}
	n.claims.AscendGreaterOrEqual(&Claim{Key: ClaimKey{Run: rw.Run}, shard: rw.ClaimShard}, func(c *Claim) bool {
		if c.Key.Run != rw.Run || c.shard != rw.ClaimShard {
			return false
		}
		if c.State != ClaimComplete || c.Seq > rw.ReadSeq || len(c.Tables) != 1 || into[c.Tables[0].Table] == nil {
			return true
		}
		claims = append(claims, c)
		for _, f := range c.Tables[0].Fragments {
			// A compacted file is shared by its claims; a batch's
			// fragment too, but each claim counts its own rows there.
			k := f.Path
			if f.Span == nil {
				k += "\x00" + c.CommitToken
			}
			if !seen[k] {
				seen[k] = true
				oldRows[c.Tables[0].Table] += f.Rows
			}
		}
		return true
	})
	if len(claims) == 0 {
		return at("no complete claim is there")
	}
	for table, rows := range newRows {
		if oldRows[table] != rows {
			return at("table %s: %d rows become %d; a rewrite keeps every row", table, oldRows[table], rows)
		}
	}
	for _, c := range claims {
		nc := *c
		nc.Tables, nc.Seq = into[c.Tables[0].Table], seq
		n.claims.ReplaceOrInsert(&nc)
	}
	n.mark(shardKey{'c', rw.Run, rw.ClaimShard}, seq)
	return nil
}
