package index

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Options configure a Catalog. The zero value is usable: Validate fills in
// the defaults.
type Options struct {
	// Store identifies this committer in the slots it writes (default:
	// random). Two live catalogs of one world MUST NOT share it.
	Store string
	// MaxBatch entries per slot while the queue is shallow (16). While it
	// stays deep, batches grow past that, up to DeepBatch entries
	// (MaxSlotEntries) or SlotBytes of encoded slot (DefaultSlotBytes),
	// whichever comes first. A lone request larger than SlotBytes still
	// gets a slot of its own, since a request is never split.
	MaxBatch, DeepBatch int
	SlotBytes           int
	// Ahead is how many further batches are built while a slot is in
	// flight (2).
	Ahead int
	// Freshness bounds how old a snapshot a listing-type read may be
	// served (DefaultFreshness).
	Freshness time.Duration
	// SlotTimeout bounds a slot create whose members set no deadline (10 s).
	SlotTimeout time.Duration
	// After a win, a committer that saw another store's slot within
	// YieldRecency waits before its next attempt (3 s), which keeps
	// several writers fair: a jitter of up to YieldJitter (10 ms). If it
	// also lost a slot within YieldRecency, it first waits for as long as
	// its lost round trips outlast its won ones, and the jitter doubles
	// for each further slot won in a row, up to 8 times, in the first 4
	// wins after the loss and on every 8th win past those; so a writer
	// beside a light store, which makes it lose a slot now and then, pays
	// the doubled jitter a few times per slot of the neighbour's rather
	// than after every win (see fairness).
	// The design allows up to 30 ms of jitter; on the GCS model 10 ms kept
	// three writers at 96% of one writer's throughput with none under
	// 30%, where 30 ms gave 85%.
	YieldRecency, YieldJitter time.Duration
	// Checkpoints: written once the tip is CheckpointSlots slots,
	// CheckpointEntries entries or CheckpointInterval past the last one
	// (1024, DefaultCheckpointEntries, 60 s), after a random wait of up to
	// CheckpointDelay (5 s). The newest KeepCheckpoints (3) and any younger
	// than KeepCheckpointAge (1 h) are kept.
	CheckpointSlots    uint64
	CheckpointEntries  uint64
	CheckpointInterval time.Duration
	CheckpointDelay    time.Duration
	// CheckpointTimeout bounds one automatic checkpoint, its writes and
	// the collection of old checkpoints after it (5 min).
	CheckpointTimeout time.Duration
	KeepCheckpoints   int
	KeepCheckpointAge time.Duration
	// NoCompactor turns off automatic checkpoints (tests, read-only tools).
	NoCompactor bool
	// ReloadAfter: a catalog whose tip went unconfirmed this long reloads
	// from the newest checkpoint before reading or committing, since the
	// slots after its tip may have been collected (12 h; CollectSlots'
	// retention must be longer).
	ReloadAfter time.Duration
}

// DefaultFreshness is Options.Freshness' default.
const DefaultFreshness = time.Second

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Store == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.Store = hex.EncodeToString(b[:])
	}
	def(&o.MaxBatch, 16)
	def(&o.DeepBatch, MaxSlotEntries)
	def(&o.SlotBytes, DefaultSlotBytes)
	def(&o.Ahead, 2)
	def(&o.KeepCheckpoints, 3)
	defd(&o.Freshness, DefaultFreshness)
	defd(&o.SlotTimeout, 10*time.Second)
	defd(&o.YieldRecency, 3*time.Second)
	defd(&o.YieldJitter, 10*time.Millisecond)
	defd(&o.CheckpointInterval, 60*time.Second)
	defd(&o.CheckpointDelay, 5*time.Second)
	defd(&o.CheckpointTimeout, 5*time.Minute)
	defd(&o.KeepCheckpointAge, time.Hour)
	defd(&o.ReloadAfter, DefaultReloadAfter)
	if o.CheckpointSlots == 0 {
		o.CheckpointSlots = defaultCheckpointSlots
	}
	if o.CheckpointEntries == 0 {
		o.CheckpointEntries = DefaultCheckpointEntries
	}
	return o
}

// DefaultReloadAfter is Options.ReloadAfter's default.
const DefaultReloadAfter = 12 * time.Hour

// defaultCheckpointSlots is Options.CheckpointSlots' default.
const defaultCheckpointSlots = 1024

// DefaultCheckpointEntries is Options.CheckpointEntries' default: 1024
// slots of the 32 entries a slot held before batches grew with the queue,
// so a cold start replays no more than it did then, however full slots are.
const DefaultCheckpointEntries = 32 << 10

// Validate checks the options once their defaults are in (Open calls
// EnsureDefaults, then Validate).
func (o *Options) Validate() error {
	if o.MaxBatch < 1 || o.DeepBatch < o.MaxBatch || o.DeepBatch > MaxSlotEntries || o.Ahead < 0 || o.SlotBytes < 0 {
		return fmt.Errorf("catalog options: batch %d/%d (at most %d), slot bytes %d, ahead %d", o.MaxBatch, o.DeepBatch, MaxSlotEntries, o.SlotBytes, o.Ahead)
	}
	return nil
}

// DefaultSlotBytes is Options.SlotBytes' default: the encoded size up to
// which a batch grows while the queue stays deep. On GCS a create of
// 256 KiB costs a few milliseconds more than one of 1 KiB (see the gcs
// profile of bucket/mem), while it carries thousands of entries.
const DefaultSlotBytes = 256 << 10

// Failpoints of the commit path (see internal/failpoint).
const (
	FailpointBeforeSlot  = "index.slot.before-create" // a batch is built, its slot not yet created
	FailpointSlotCreated = "index.slot.created"       // the slot exists, nobody is acknowledged yet
)

// ErrClosed: the catalog was closed.
var ErrClosed = errors.New("catalog closed")

// Stats counts what a catalog's committer did.
type Stats struct {
	Slots       int64 // slots this committer created
	LostSlots   int64 // slot creates that lost the race
	Entries     int64 // entries committed in them
	Refused     int64 // entries refused (typed errors)
	Ambiguous   int64 // slot creates whose outcome stayed unknown
	Checkpoints int64 // checkpoints this catalog wrote
	// After a lost slot, the members of the batch tried again on the new
	// tip: carried as built (nothing they check changed) or rebuilt.
	Carried, Rebuilt int64
	// Yielded is the time the committer waited after its wins (the yield
	// rule for several writers; see Options.YieldRecency).
	Yielded time.Duration
}

// Catalog is one world's control catalog in one process: it reads the log
// into snapshots and commits entries through one committer (group commit,
// pipelining, rebase on lost slots). Open at most one per world per
// process; any number of processes may open the same world.
type Catalog struct {
	// immutable
	b     bucket.Bucket
	world string
	opts  Options

	mu struct {
		sync.Mutex
		// INVARIANT: tip is the fold of a prefix of the log as stored in the
		// bucket, never a state no slot holds.
		tip       *State
		confirmed time.Time // when tip was last known to be the log's tip
		otherSeen time.Time // when a slot of another store was last seen
		queue     []*request
		closed    bool
	}
	wake chan struct{}
	done chan struct{}
	// closing is closed by Close: it cuts the committer's waits short.
	closing chan struct{}
	ops     atomic.Uint64
	// deep and perEntry are the committer's own. deep: the queue has
	// stayed deep, so batches grow up to the deep bounds. perEntry: the
	// encoded bytes per entry of the last slot built, which turns
	// SlotBytes into a count of entries to take.
	deep     bool
	perEntry int
	// fair is the committer's own: the round trips the yield after a win
	// is sized from.
	fair fairness
	// unread is the committer's own: how long it waits before building
	// again after a lost or unknown slot whose log it could not read.
	unread time.Duration

	stats struct {
		slots, lost, entries, refused, ambiguous, checkpoints atomic.Int64
		carried, rebuilt, rebaseMisses, yielded               atomic.Int64
	}
	ckpt struct {
		sync.Mutex
		last    *checkpoint // the newest checkpoint this catalog knows
		lastAt  time.Time
		running bool
	}
	bg sync.WaitGroup
}

// request is one caller's entries, committed together or not at all.
type request struct {
	ctx     context.Context
	entries []Entry
	// json is the entries' canonical JSON (marshalEntries), made once by
	// the caller: every slot the request is built into reuses it.
	json []byte
	res  chan outcome // buffered 1
}

type outcome struct {
	r   []Result
	err error
}

// Open loads world's catalog: the newest checkpoint, then every slot after
// it (see listLog and probeLog). A world with no log opens empty
// (World.Created is false). A corrupt log or checkpoint fails closed.
func Open(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Catalog, error) {
	if err := ValidateWorldID(world); err != nil {
		return nil, err
	}
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	state, cp, err := load(ctx, b, world)
	if err != nil {
		return nil, err
	}
	c := &Catalog{b: b, world: world, opts: opts, wake: make(chan struct{}, 1), done: make(chan struct{}), closing: make(chan struct{})}
	c.mu.tip, c.mu.confirmed = state, time.Now()
	c.ckpt.last, c.ckpt.lastAt = cp, time.Now()
	go c.commitLoop()
	return c, nil
}

// LoadInfo says how a state was loaded.
type LoadInfo struct {
	// CheckpointSeq is the sequence of the checkpoint it started from (0:
	// none, the whole log was replayed).
	CheckpointSeq uint64
	// SlotsReplayed counts the slots applied after it.
	SlotsReplayed uint64
}

// Load reads world's state from the bucket: the newest checkpoint and the
// slots after it (see listLog and probeLog). A world with no log loads
// empty; corrupt data is ErrCorrupt.
func Load(ctx context.Context, b bucket.Bucket, world string) (*State, LoadInfo, error) {
	s, cp, err := load(ctx, b, world)
	if err != nil {
		return nil, LoadInfo{}, err
	}
	var info LoadInfo
	if cp != nil {
		info.CheckpointSeq = cp.Seq
		info.SlotsReplayed = s.Slots - cp.Slots
	} else {
		info.SlotsReplayed = s.Slots
	}
	return s, info, nil
}

// load is Load, also returning the checkpoint it started from (nil if none).
// The slots after the checkpoint are read ahead (logReader) from the
// start, while the checkpoint itself is read: its name says where it ends.
func load(ctx context.Context, b bucket.Bucket, world string) (*State, *checkpoint, error) {
	newest, _, err := newestCheckpoint(ctx, b, world)
	if err != nil {
		return nil, nil, fmt.Errorf("world %s: listing checkpoints: %w", world, err)
	}
	return loadFrom(ctx, b, world, newest, func(ctx context.Context) (*State, *checkpoint, error) {
		return LoadCheckpoint(ctx, b, world, newest)
	})
}

// loadFrom is load from the checkpoint called newest ("": none), which
// readCheckpointState reads (all of it, or the part a reader asked for:
// LoadFor).
func loadFrom(ctx context.Context, b bucket.Bucket, world, newest string, readCheckpointState func(context.Context) (*State, *checkpoint, error)) (*State, *checkpoint, error) {
	state := Empty(world)
	var err error
	after := checkpointSeq(world, newest)
	_, byName := bucket.As[bucket.Local](b)
	var slots *logReader
	if byName {
		slots = readByName(ctx, b, world, after)
	} else {
		startAfter := ""
		if after > 0 {
			startAfter = SlotName(world, after)
		}
		slots = readListed(ctx, b, world, startAfter)
	}
	var cp *checkpoint
	if newest != "" {
		if state, cp, err = readCheckpointState(ctx); err != nil {
			slots.stop()
			return nil, nil, err
		}
	}
	if byName {
		state, err = probeLog(ctx, b, state, slots)
	} else {
		state, err = listLog(ctx, b, state, slots)
	}
	if err != nil {
		return nil, nil, err
	}
	return state, cp, nil
}

// followLog applies to s, in place (it is the caller's own), the slots
// after it, found as a load finds them (probeLog or listLog, as the
// bucket lists): a slot lost before slots that exist is ErrCorrupt, not
// the end of the log. Past limit slots (if positive) it fails with
// ErrReload.
func followLog(ctx context.Context, b bucket.Bucket, s *State, limit int) (*State, error) {
	world := s.World.ID
	if _, byName := bucket.As[bucket.Local](b); byName {
		r := readByName(ctx, b, world, s.Seq)
		r.limit = limit
		return probeLog(ctx, b, s, r)
	}
	r := readListed(ctx, b, world, SlotName(world, s.Seq))
	r.limit = limit
	return listLog(ctx, b, s, r)
}

// The log after a state is found in one of two ways, chosen by the bucket.
// Slots are contiguous (each starts right after its predecessor's last
// sequence, ApplySlot) and every state, checkpoints included, ends at a
// slot's end, so the slots after s are SlotName(s.Seq+1), then the name
// after that slot, and so on up to the first name absent (follow). On a
// bucket whose listing reads a whole directory whatever its start (a local
// bucket, bucket.Local) that is what a cold start does: its cost follows
// the slots after the checkpoint, not the slots the log still keeps. Where
// a listing from a start name is cheap (GCS, memory) the log is listed
// from s instead, which also shows every slot after a gap.

// listLog applies to state, in order, the slots that listed, a reader of
// the log listed after state (readListed), finds, and stops it. A listed slot
// that does not continue the log (a gap, a broken chain) is ErrCorrupt.
// state is load's own: the slots are applied to it in place.
func listLog(ctx context.Context, b bucket.Bucket, state *State, listed *logReader) (*State, error) {
	defer listed.stop()
	world := state.World.ID
	for {
		a, err := listed.next()
		if err != nil || a == nil {
			return state, err
		}
		err = readSkipped(world, a.name, state.Seq+1, func(name string) (uint64, error) {
			n, _, err := readSlotTo(ctx, b, state, name, true)
			if err == nil {
				state = n
			}
			return state.Seq + 1, err
		})
		if err != nil {
			return nil, err
		}
		if state, err = a.applyTo(state, true); err != nil {
			return nil, err
		}
	}
}

// gapProbes is how many names past the first absent one probeLog tries:
// a lost slot of up to this many entries (a tick's publish is a few) then
// fails closed instead of ending the log early.
const gapProbes = 32

// probeLog applies to state, in place (it is load's own), the slots that
// slots, a reader of the log by name after state (readByName), finds
// (follow), then checks the gapProbes names past the first absent one. A
// slot there is followed on if the absent name now reads (both were
// created meanwhile: a slot is created only after the one before it); if
// it still does not, a slot in between was lost, which is ErrCorrupt.
func probeLog(ctx context.Context, b bucket.Bucket, state *State, slots *logReader) (*State, error) {
	world := state.World.ID
	later := "" // a slot found past the end the last time round
	for {
		at := state.Seq
		var err error
		if state, err = follow(ctx, b, state, slots, nil); err != nil {
			return nil, err
		}
		if later != "" && state.Seq == at {
			return nil, fmt.Errorf("world %s: slot %s is missing, yet slot %s after it exists: %w", world, SlotName(world, at+1), later, ErrCorrupt)
		}
		later, slots = "", nil
		for seq := state.Seq + 2; seq <= state.Seq+1+gapProbes && later == ""; seq++ {
			_, err := b.Stat(ctx, SlotName(world, seq))
			switch {
			case err == nil:
				later = SlotName(world, seq)
			case !errors.Is(err, bucket.ErrNotExist):
				return nil, fmt.Errorf("world %s: reading the log: %w", world, err)
			}
		}
		if later == "" {
			return state, nil
		}
	}
}

// follow applies to s, in order, the slots found by name after it, up to
// the first name absent, and returns the state there. slots, if not nil,
// is a reader of those slots (readByName after s) already started; follow
// stops it. each, if not nil, is told of every slot applied, on a copy,
// and returns the state to go on from: that state, or a newer one read
// meanwhile. Without each, s is the caller's own and nobody sees the
// states in between: the slots are applied to s in place.
func follow(ctx context.Context, b bucket.Bucket, s *State, slots *logReader, each func(n *State, slot *Slot) *State) (*State, error) {
	world := s.World.ID
	if slots == nil {
		slots = readByName(ctx, b, world, s.Seq)
	}
	defer func() { slots.stop() }()
	for {
		a, err := slots.next()
		if err != nil {
			return nil, fmt.Errorf("world %s: reading the log: %w", world, err)
		}
		if a.name != SlotName(world, s.Seq+1) { // each moved s past the slots read
			slots.stop()
			slots = readByName(ctx, b, world, s.Seq)
			continue
		}
		if errors.Is(a.err, bucket.ErrNotExist) {
			return s, nil
		}
		n, err := a.applyTo(s, each == nil)
		if err != nil {
			return nil, fmt.Errorf("world %s: reading the log: %w", world, err)
		}
		if s = n; each != nil {
			s = each(n, a.slot)
		}
	}
}

// readSkipped reads, in order, the slots a listing skipped before the one
// it listed, the slot expected next starting at next: bucket.List promises
// only the objects created before it was called, so a listing that runs
// while slots are created (a local bucket reads its directory in hash
// order) may show one and miss the one before it. read reads and applies
// the slot called name and returns the sequence that comes next. A name
// not in the bucket ends the reading: the log has a true gap, and the
// listed slot fails closed when it does not continue the log.
func readSkipped(world, listed string, next uint64, read func(name string) (uint64, error)) error {
	for name := SlotName(world, next); name < listed; name = SlotName(world, next) {
		n, err := read(name)
		if errors.Is(err, bucket.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		next = n
	}
	return nil
}

// readSlot reads the slot called name and applies it to a copy of s. A
// missing slot is bucket.ErrNotExist; anything that does not decode or
// continue s is ErrCorrupt.
func readSlot(ctx context.Context, b bucket.Bucket, s *State, name string) (*State, *Slot, error) {
	return readSlotTo(ctx, b, s, name, false)
}

// readSlotTo is readSlot, applying the slot to s itself if inPlace (s is
// the caller's alone, see applySlot).
func readSlotTo(ctx context.Context, b bucket.Bucket, s *State, name string, inPlace bool) (*State, *Slot, error) {
	a := &aheadSlot{name: name}
	a.slot, a.hash, a.err = fetchSlot(ctx, b, s.World.ID, name)
	n, err := a.applyTo(s, inPlace)
	if err != nil {
		return nil, nil, err
	}
	return n, a.slot, nil
}

// World returns the world id.
func (c *Catalog) World() string { return c.world }

// Store returns this committer's store id.
func (c *Catalog) Store() string { return c.opts.Store }

// Tip returns the newest state this catalog holds, without reading the
// bucket.
func (c *Catalog) Tip() *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.tip
}

// Exact returns a snapshot that includes every slot created before the call:
// it probes the next slot names and applies what it finds. Path-exact reads
// use it.
func (c *Catalog) Exact(ctx context.Context) (*State, error) { return c.advance(ctx) }

// Fresh returns a snapshot confirmed current within Options.Freshness,
// probing the bucket only if the last confirmation is older. Listing-type
// reads use it.
func (c *Catalog) Fresh(ctx context.Context) (*State, error) {
	c.mu.Lock()
	tip, at := c.mu.tip, c.mu.confirmed
	c.mu.Unlock()
	if time.Since(at) < c.opts.Freshness {
		return tip, nil
	}
	return c.advance(ctx)
}

// advance applies every slot after the tip, in order, until the next slot
// name is absent.
func (c *Catalog) advance(ctx context.Context) (*State, error) {
	// No lock is held across bucket I/O: concurrent advances may read the
	// same slots, and the tip only ever moves forward (setTip), so a slow
	// reader never holds up a commit.
	c.mu.Lock()
	tip, confirmed := c.mu.tip, c.mu.confirmed
	c.mu.Unlock()
	if time.Since(confirmed) > c.opts.ReloadAfter {
		s, _, err := load(ctx, c.b, c.world)
		if err != nil {
			return nil, err
		}
		if s.Seq < tip.Seq {
			return nil, fmt.Errorf("world %s: the log ends at %d, behind this catalog's %d: %w", c.world, s.Seq, tip.Seq, ErrCorrupt)
		}
		tip = c.setTip(s, "", false)
	}
	if cur := c.Tip(); cur.Seq > tip.Seq {
		tip = cur // installed or read meanwhile
	}
	tip, err := follow(ctx, c.b, tip, nil, func(n *State, slot *Slot) *State {
		return c.setTip(n, slot.Store, false) // or the tip installed meanwhile
	})
	if err != nil {
		return nil, err
	}
	return c.setTip(tip, "", true), nil
}

// setTip makes s the tip if it is newer, notes a slot written by another
// store, and marks the tip confirmed if asked. It returns the tip.
func (c *Catalog) setTip(s *State, store string, confirmed bool) *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Seq > c.mu.tip.Seq {
		c.mu.tip = s
	}
	if store != "" && store != c.opts.Store {
		c.mu.otherSeen = time.Now()
	}
	if confirmed && c.mu.tip.Seq == s.Seq {
		c.mu.confirmed = time.Now()
	}
	return c.mu.tip
}

// stale reports whether the tip went unconfirmed for ReloadAfter.
func (c *Catalog) stale() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.mu.confirmed) > c.opts.ReloadAfter
}

// install makes a state this committer just committed the tip, unless the
// tip already moved past it (a reader applied the slot first).
func (c *Catalog) install(s *State) { c.setTip(s, "", true) }

// Commit checks e against the tip (plus the entries queued before it) and
// commits it in a slot. It returns only after the slot create is confirmed,
// with the entry's result, or with the typed error that refused it
// (StaleWriterError, CatalogConflictError, ClaimConflictError,
// ClaimPendingError, ErrRefused, …). If ctx ends first, or the slot
// create's outcome stays unknown, the error matches bucket.ErrAmbiguous:
// the entry may or may not be committed; read the state to find out.
func (c *Catalog) Commit(ctx context.Context, e Entry) (Result, error) {
	rs, err := c.CommitAll(ctx, e)
	if err != nil {
		return Result{}, err
	}
	return rs[0], nil
}

// CommitAll commits entries atomically, in order, in one slot: all of them
// or, with the error of the first that does not apply, none.
func (c *Catalog) CommitAll(ctx context.Context, entries ...Entry) ([]Result, error) {
	if len(entries) == 0 || len(entries) > c.opts.DeepBatch {
		return nil, refused("a commit holds 1 to %d entries, not %d", c.opts.DeepBatch, len(entries))
	}
	r, err := c.newRequest(ctx, entries)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.mu.queue = append(c.mu.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case o := <-r.res:
		return o.r, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("world %s: commit %s: %w: %w", c.world, entries[0].Kind, bucket.ErrAmbiguous, ctx.Err())
	}
}

// newRequest validates entries and makes them a request: its own copies,
// each with an operation id, and their JSON.
func (c *Catalog) newRequest(ctx context.Context, entries []Entry) (*request, error) {
	r := &request{ctx: ctx, entries: make([]Entry, len(entries)), res: make(chan outcome, 1)}
	for i, e := range entries {
		if err := e.validate(); err != nil {
			return nil, refused("%v", err)
		}
		e = e.clone() // the caller may reuse its entry; the log's is ours
		e.Op = fmt.Sprintf("%s-%d", c.opts.Store, c.ops.Add(1))
		r.entries[i] = e
	}
	var err error
	if r.json, err = marshalEntries(r.entries); err != nil {
		return nil, refused("%v", err)
	}
	return r, nil
}

// Stats returns the committer's counters.
func (c *Catalog) Stats() Stats {
	return Stats{
		Slots: c.stats.slots.Load(), LostSlots: c.stats.lost.Load(), Entries: c.stats.entries.Load(),
		Refused: c.stats.refused.Load(), Ambiguous: c.stats.ambiguous.Load(), Checkpoints: c.stats.checkpoints.Load(),
		Carried: c.stats.carried.Load(), Rebuilt: c.stats.rebuilt.Load(),
		Yielded: time.Duration(c.stats.yielded.Load()),
	}
}

// Close stops the committer once a slot already being created is decided;
// queued entries are refused with ErrClosed. It waits for a running
// checkpoint.
func (c *Catalog) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	c.mu.Unlock()
	close(c.closing)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
	c.bg.Wait()
	c.checkpointAtRest()
	return nil
}

// batch is one slot's worth of requests, built on a base state.
type batch struct {
	base    *State
	reqs    []*request
	results [][]Result
	errs    []error
	entries int
	slot    *Slot
	data    []byte
	state   *State // the state after the slot (nil if nothing was accepted)
	// tooLarge: the accepted entries decode to more than MaxSlotBytes.
	tooLarge bool
}

// take removes the next batch of requests from the queue. The limit is
// MaxBatch, or while the queue stays deep (the requests waiting behind the
// slot in flight, queued or in batches built ahead, fill two MaxBatch
// batches) as many entries as fit SlotBytes at the last slot's bytes per
// entry, at most DeepBatch. With no slot in flight it takes whatever is
// queued, so an idle world commits a lone write at once; behind a slot in
// flight it builds a batch ahead only once a full one is queued, so that
// batches fill while the slot is out instead of splitting into small ones.
func (c *Catalog) take(pipeline []*batch) []*request {
	waiting := 0
	for _, b := range pipeline[min(1, len(pipeline)):] {
		waiting += entriesOf(b.reqs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.mu.queue
	queued := entriesOf(q)
	switch {
	case waiting+queued >= 2*c.opts.MaxBatch:
		c.deep = true
	case len(pipeline) == 0 && queued < c.opts.MaxBatch:
		c.deep = false // the queue drained
	}
	limit := c.opts.MaxBatch
	if c.deep {
		limit = c.opts.DeepBatch
		if c.perEntry > 0 {
			limit = min(max(c.opts.SlotBytes/c.perEntry, c.opts.MaxBatch), c.opts.DeepBatch)
		}
	}
	if len(pipeline) > 0 && queued < limit {
		return nil
	}
	// Up to limit entries; a request is never split.
	n, entries := 0, 0
	for n < len(q) && (n == 0 || entries+len(q[n].entries) <= limit) {
		entries += len(q[n].entries)
		n++
	}
	reqs := q[:n:n]
	c.mu.queue = q[n:]
	return reqs
}

func entriesOf(reqs []*request) int {
	n := 0
	for _, r := range reqs {
		n += len(r.entries)
	}
	return n
}

// requeue puts requests back at the front of the queue, in order.
func (c *Catalog) requeue(reqs []*request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.queue = append(reqs[:len(reqs):len(reqs)], c.mu.queue...)
}

// buildBounded builds reqs as the next slot on base, keeping it within
// SlotBytes: a slot over the bound (the bytes per entry were
// underestimated) keeps the share of its requests that fits and puts the
// rest back at the front of the queue, in order.
func (c *Catalog) buildBounded(base *State, reqs []*request) *batch {
	for {
		b := c.build(base, reqs)
		if b.entries > 0 {
			c.perEntry = max(1, len(b.data)/b.entries)
		}
		if (len(b.data) <= c.opts.SlotBytes && !b.tooLarge) || len(reqs) == 1 {
			return b
		}
		keep := len(reqs) / 2 // too large to encode: halve
		if !b.tooLarge {
			keep = min(max(1, len(reqs)*c.opts.SlotBytes/len(b.data)), len(reqs)-1)
		}
		c.requeue(reqs[keep:])
		reqs = reqs[:keep]
	}
}

// build checks each request in queue order against base plus the members
// accepted before it, and encodes the accepted ones as the next slot. The
// slot is replayed on its base before it can be created.
func (c *Catalog) build(base *State, reqs []*request) *batch {
	b := &batch{base: base, reqs: reqs, results: make([][]Result, len(reqs)), errs: make([]error, len(reqs))}
	for i, r := range reqs {
		b.errs[i] = r.ctx.Err()
	}
	// Usually every member applies: then one copy of base takes them all,
	// in order, exactly as replaying the slot does, so that state is the
	// slot's. Otherwise each member is checked on a copy of its own, so
	// that a refused one leaves no trace, and the slot is replayed.
	fast := b.applyAll()
	if fast == nil {
		b.checkEach()
	}
	_ = c.seal(b, fast)
	return b
}

// seal encodes b's accepted members (errs[i] == nil), in order, as the
// next slot on b.base, from their requests' JSON, and sets the state after
// it: after, if the caller has it (the fold of exactly those members on
// the base), else the slot replayed on its base. A slot that cannot be
// created (too large to read back, or, a bug, one that does not replay)
// is dropped, its members refused with the error, which seal returns.
func (c *Catalog) seal(b *batch, after *State) error {
	var entries []Entry
	var parts [][]byte
	for i, r := range b.reqs {
		if b.errs[i] == nil {
			entries = append(entries, r.entries...)
			parts = append(parts, r.json)
		}
	}
	b.entries = len(entries)
	if b.entries == 0 {
		return nil
	}
	b.slot = &Slot{Format: SlotFormat, World: c.world, FirstSeq: b.base.Seq + 1, Prev: b.base.Hash, Store: c.opts.Store, Entries: entries}
	err := b.slot.validateHeader()
	var data []byte
	var hash string
	if err == nil {
		data, hash, err = encodeSlot(b.slot, parts)
	}
	switch {
	case err == nil && after != nil:
		after.Seq, after.Hash, after.Slots = b.slot.LastSeq(), hash, b.base.Slots+1
		b.state = after
	case err == nil:
		b.state, err = b.base.ApplySlot(b.slot, hash)
	}
	if err != nil {
		b.tooLarge = errors.Is(err, errSlotTooLarge)
		for i, r := range b.reqs {
			switch {
			case b.errs[i] != nil:
			case b.tooLarge:
				b.errs[i] = refused("world %s: commit of %d entries: %v", c.world, len(r.entries), err)
			default: // a bug: nothing that does not replay is ever created
				b.errs[i] = fmt.Errorf("world %s: slot does not replay on its base: %w", c.world, err)
			}
		}
		b.entries, b.slot, b.state = 0, nil, nil
		return err
	}
	b.data = data
	return nil
}

// applyAll applies the entries of every member whose context is live, in
// order, on one copy of the base, filling in their results. It returns
// that state, or nil if any entry does not apply.
func (b *batch) applyAll() *State {
	n, seq := b.base.clone(), b.base.Seq
	for i, r := range b.reqs {
		if b.errs[i] != nil {
			continue
		}
		results := make([]Result, len(r.entries))
		for j := range r.entries {
			seq++
			res, err := n.apply(&r.entries[j], seq)
			if err != nil {
				return nil
			}
			results[j] = res
		}
		b.results[i] = results
	}
	return n
}

// checkEach checks each member whose context is live against the base
// plus the members accepted before it, on copies, refusing those that do
// not apply.
func (b *batch) checkEach() {
	st := b.base
	for i, r := range b.reqs {
		b.results[i] = nil
		if b.errs[i] != nil {
			continue
		}
		n, _, results, err := checkAll(st, st.Seq, r.entries)
		if err != nil {
			b.errs[i] = err
			continue
		}
		st, b.results[i] = n, results
	}
}

// checkAll checks a request's entries, in order, from sequence seq+1 on
// copies of st: the state after them, the last sequence, their results,
// or the error of the first that does not apply (st is unchanged).
func checkAll(st *State, seq uint64, entries []Entry) (*State, uint64, []Result, error) {
	results := make([]Result, 0, len(entries))
	for j := range entries {
		seq++
		n, res, err := st.Check(&entries[j], seq)
		if err != nil {
			return nil, 0, nil, err
		}
		st, results = n, append(results, res)
	}
	return st, seq, results, nil
}

// abandon answers every member of a batch that will never be created with
// err, refused members included: their refusals were judged on a state no
// slot holds.
func (c *Catalog) abandon(b *batch, err error) {
	for i := range b.errs {
		b.errs[i] = err
	}
	c.answer(b, nil)
}

// answer sends each request of b its outcome.
func (c *Catalog) answer(b *batch, slotErr error) {
	for i, r := range b.reqs {
		o := outcome{r: b.results[i], err: b.errs[i]}
		if o.err == nil && slotErr != nil {
			o = outcome{err: slotErr}
		}
		if o.err != nil && !errors.Is(o.err, bucket.ErrAmbiguous) && r.ctx.Err() == nil {
			c.stats.refused.Add(1)
		}
		r.res <- o
	}
}

type created struct {
	b   *batch
	err error
}

// commitLoop is the committer: it keeps a pipeline of batches, the first
// being created in the bucket and up to Ahead more built on the candidate
// state before it. Slot k+1 is created only after slot k is confirmed.
func (c *Catalog) commitLoop() {
	defer close(c.done)
	var pipeline []*batch
	var inflight chan created
	// start creates the head batch's slot if none is in flight. A head
	// batch with nothing to create is answered first: its refusals stand
	// only if its base is still the log's tip, so the next slot is probed.
	start := func() {
		for inflight == nil && len(pipeline) > 0 && pipeline[0].entries == 0 {
			pipeline = c.refuseAtTip(pipeline)
		}
		if inflight == nil && len(pipeline) > 0 {
			inflight = make(chan created, 1)
			c.fair.sending(time.Now())
			go c.create(pipeline[0], inflight)
		}
	}
	for {
		// Build batches while there is room in the pipeline, creating the
		// head's slot as soon as it is built (after a lost slot, before
		// the batches behind it are built again).
		for len(pipeline) < 1+c.opts.Ahead {
			start()
			reqs := c.take(pipeline)
			if len(reqs) == 0 {
				break
			}
			base := c.Tip()
			if len(pipeline) == 0 && c.stale() {
				// The slots after a long-unconfirmed tip may be collected,
				// and a collected name looks free: reload before building.
				ctx, cancel := context.WithTimeout(context.Background(), c.opts.SlotTimeout)
				s, err := c.advance(ctx)
				cancel()
				if err != nil {
					// Nothing of theirs was sent: they fail, definitely
					// uncommitted, rather than wait on a bucket that may
					// not answer for long.
					err = fmt.Errorf("world %s: reloading the log before a commit: %w", c.world, err)
					if !errors.Is(err, bucket.ErrUnavailable) {
						err = fmt.Errorf("%w: %w", bucket.ErrUnavailable, err)
					}
					c.abandon(&batch{reqs: reqs, results: make([][]Result, len(reqs)), errs: make([]error, len(reqs))}, err)
					break
				}
				base = s
			}
			if len(pipeline) > 0 {
				base = pipeline[len(pipeline)-1].candidate()
			}
			pipeline = append(pipeline, c.buildBounded(base, reqs))
		}
		start()
		if inflight == nil {
			c.mu.Lock()
			closed, empty := c.mu.closed, len(c.mu.queue) == 0
			c.mu.Unlock()
			if closed {
				c.failQueued()
				return
			}
			if !empty {
				continue
			}
		}
		select {
		case <-c.wake:
			c.mu.Lock()
			closed := c.mu.closed
			c.mu.Unlock()
			if closed && inflight == nil {
				for _, b := range pipeline {
					c.abandon(b, ErrClosed)
				}
				c.failQueued()
				return
			}
		case res := <-inflight:
			inflight = nil
			pipeline = c.decided(res, pipeline)
			c.mu.Lock()
			closed := c.mu.closed
			c.mu.Unlock()
			if closed {
				for _, b := range pipeline {
					c.abandon(b, ErrClosed)
				}
				c.failQueued()
				return
			}
		}
	}
}

// refuseAtTip answers the head batch, which accepted nothing, once the log
// shows its base is the tip (a refusal judged on a stale base would be
// wrong). If the tip moved, every batch is rebuilt on it.
func (c *Catalog) refuseAtTip(pipeline []*batch) []*batch {
	head := pipeline[0]
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.SlotTimeout)
	defer cancel()
	tip, err := c.advance(ctx)
	switch {
	case err != nil:
		// Nothing was committed, but no refusal can be trusted either.
		err = fmt.Errorf("world %s: confirming the tip: %w", c.world, err)
		if !errors.Is(err, bucket.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", bucket.ErrUnavailable, err)
		}
		for i := range head.errs {
			head.errs[i] = err
		}
		c.answer(head, nil)
		return pipeline[1:]
	case tip.Seq == head.base.Seq:
		c.answer(head, nil)
		return pipeline[1:]
	}
	var reqs []*request
	for _, b := range pipeline {
		reqs = append(reqs, b.reqs...)
	}
	c.requeue(reqs)
	return nil
}

// candidate is the state after b: its slot's state, or its base if it
// accepted nothing.
func (b *batch) candidate() *State {
	if b.state != nil {
		return b.state
	}
	return b.base
}

// create creates b's slot, resolving an unknown outcome by reading it
// back, within the latest deadline of its members.
func (c *Catalog) create(b *batch, out chan<- created) {
	deadline := time.Now().Add(c.opts.SlotTimeout)
	for i, r := range b.reqs {
		if d, ok := r.ctx.Deadline(); ok && b.errs[i] == nil && d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	failpoint.Hit(FailpointBeforeSlot)
	// A first create that finds the name taken lost the race: no earlier
	// attempt of these bytes exists, so it goes straight to reading the
	// winners (decided) without reading the slot back first. An unknown
	// outcome is resolved by CreateOnce, which reads back.
	name := SlotName(c.world, b.slot.FirstSeq)
	_, err := c.b.Create(ctx, name, b.data)
	if err != nil && !errors.Is(err, bucket.ErrExist) && errors.Is(err, bucket.ErrAmbiguous) {
		_, err = bucket.CreateOnce(ctx, c.b, name, b.data)
	}
	if err == nil {
		failpoint.Hit(FailpointSlotCreated)
	}
	out <- created{b, err}
}

// decided handles the outcome of the head batch's create and returns the
// pipeline that remains.
func (c *Catalog) decided(res created, pipeline []*batch) []*batch {
	head, rest := res.b, pipeline[1:]
	switch {
	case res.err == nil:
		c.fair.decided(time.Now(), true)
		c.unread = 0
		c.install(head.state)
		c.stats.slots.Add(1)
		c.stats.entries.Add(int64(head.entries))
		c.answer(head, nil)
		c.maybeCheckpoint()
		c.yieldAfterWin()
		return rest
	case errors.Is(res.err, bucket.ErrExist):
		// Lost the slot: read the winners and move the head batch onto
		// the new tip (see rebase.go); failing that, rebuild every batch,
		// in queue order, on the new tip.
		c.stats.lost.Add(1)
		c.fair.decided(time.Now(), false)
		if p, ok := c.rebaseLost(pipeline); ok {
			return p
		}
	default:
		// Unknown outcome (or a failing bucket): the members in the slot
		// get it. Members it refused were judged on a base never confirmed
		// as the tip, so they are rebuilt with the batches behind it.
		c.stats.ambiguous.Add(1)
		err := res.err
		if !errors.Is(err, bucket.ErrAmbiguous) {
			err = fmt.Errorf("%w: %w", bucket.ErrAmbiguous, err)
		}
		err = fmt.Errorf("world %s: slot %d: %w", c.world, head.slot.FirstSeq, err)
		var refusedReqs []*request
		for i, r := range head.reqs {
			if head.errs[i] != nil && r.ctx.Err() == nil {
				refusedReqs = append(refusedReqs, r)
				continue
			}
			o := outcome{err: err}
			if head.errs[i] != nil {
				o.err = head.errs[i] // its own context ended
			}
			r.res <- o
		}
		pipeline = append([]*batch{{reqs: refusedReqs}}, rest...)
	}
	var reqs []*request
	for _, b := range pipeline {
		reqs = append(reqs, b.reqs...)
	}
	c.requeue(reqs)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.SlotTimeout)
	defer cancel()
	// If the log cannot be read now, the next batch is built on a stale
	// tip; its slot then loses the name race and we read again. A stale
	// tip costs a lost slot, never a wrong commit. While the log stays
	// unreadable every such round loses at once, so the committer waits
	// before the next, doubling from 1 ms up to maxUnreadWait, rather than
	// spin on the CPU until its members' contexts end.
	if _, err := c.advance(ctx); err != nil {
		c.unread = min(max(2*c.unread, time.Millisecond), maxUnreadWait)
		c.pause(c.unread)
	} else {
		c.unread = 0
	}
	return nil
}

// maxUnreadWait bounds the committer's wait between rounds while its log
// cannot be read.
const maxUnreadWait = 100 * time.Millisecond

func (c *Catalog) yieldAfterWin() {
	c.mu.Lock()
	other := c.mu.otherSeen
	c.mu.Unlock()
	if !other.IsZero() && time.Since(other) < c.opts.YieldRecency {
		d := c.fair.yield(time.Now(), c.opts.YieldRecency, c.opts.YieldJitter, mrand.Int64N)
		c.stats.yielded.Add(int64(d))
		c.pause(d)
	}
}

// pause waits d, or until the catalog is closed.
func (c *Catalog) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.closing:
	}
}

// fairness sizes a committer's yield after a win (docs/ARCHITECTURE.md,
// "The catalog", several writers). A pipelining winner sends its next create as soon as its
// create returns, while a loser first reads the winning slots, decodes
// and rebases its batch: when that takes longer than the winner's head
// start, as on a starved CPU, a fixed jitter no longer covers it and a
// loser can lose every race. So the winner waits out the difference it
// measures itself, between its lost round trips (sent to the next create
// sent) and its won ones (sent to answered), which brings its next
// attempt level with the losers'; the jitter after it doubles for each
// further slot won in a row, so a store that keeps winning gives way more
// and more. Only the timing of creates changes: every store still races
// for the same slot name, and a store alone in a world never yields.
//
// The winner owes that only while the contention is real, which it
// cannot see directly: a loser's failed create leaves no trace, and a
// light neighbour (a store writing a slot a second, which costs the
// writer beside it a lost slot now and then) looks just like a starved
// contender, both showing a slot now and then. What the winner does see
// is its own losses. So it waits out the losers' round trip only while it
// lost a slot within the recency; a store that did not (beside an idle
// store) yields the base jitter alone. The offset then stays for every
// win: it is what levels a starved loser, whose catch-up the winner
// measured on itself, and a winner that dropped it after a few wins
// outran such a loser for good. The doubling of the jitter, which is most
// of what a writer beside a light store pays, is kept to the first
// contendedWins wins after a loss, which takes it to its cap once and
// gives a contender that just took a slot rising chances to take
// another, and to every probeEvery-th win past those, so that a
// contender whose chances all failed still gets a wide one while the
// winner keeps winning; between, the jitter is the base one.
type fairness struct {
	sent     time.Time // when the create in flight was sent
	lostSent time.Time // when the last create, which lost, was sent (zero: it did not lose)
	// won and lost are moving averages (1/8 per sample) of the round
	// trips, zero until sampled.
	won, lost time.Duration
	streak    int       // slots won in a row
	lostAt    time.Time // when a slot was last lost (zero: never)
}

// contendedWins and probeEvery bound the doubling of the jitter to the
// wins right after a loss and, past them, to one win in probeEvery.
const (
	contendedWins = 4
	probeEvery    = 8
)

// maxYieldOffset bounds the waiting out of slow losers, so that a freak
// round trip (a stalled bucket read after a loss) cannot pause a winner
// for long.
const maxYieldOffset = 500 * time.Millisecond

// sending notes a create sent at now; the round trip of a lost create
// ends here.
func (f *fairness) sending(now time.Time) {
	if !f.lostSent.IsZero() {
		f.lost = movingAverage(f.lost, now.Sub(f.lostSent))
		f.lostSent = time.Time{}
	}
	f.sent = now
}

// decided notes the create in flight won or lost its slot at now.
func (f *fairness) decided(now time.Time, won bool) {
	if won {
		f.won = movingAverage(f.won, now.Sub(f.sent))
		f.streak++
		return
	}
	f.lostSent, f.streak, f.lostAt = f.sent, 0, now
}

// yield is the wait at now after a win, with a jitter drawn by rand (as
// rand.Int64N). If this store lost a slot within recency: the measured
// lead over the losers, plus the jitter doubled per further slot won in
// a row (at most 8 times) on the first contendedWins wins after the loss
// and every probeEvery-th past them, the jitter alone on the others.
// Otherwise the jitter alone.
func (f *fairness) yield(now time.Time, recency, jitter time.Duration, rand func(int64) int64) time.Duration {
	if now.Sub(f.lostAt) >= recency { // never lost: lostAt is long ago
		return time.Duration(rand(int64(jitter))) + 1
	}
	var offset time.Duration
	if f.won > 0 && f.lost > f.won {
		offset = min(f.lost-f.won, maxYieldOffset)
	}
	spread := jitter
	if f.streak <= contendedWins || (f.streak-contendedWins)%probeEvery == 0 {
		spread <<= min(max(f.streak-1, 0), 3)
	}
	return offset + time.Duration(rand(int64(spread))) + 1
}

func movingAverage(avg, sample time.Duration) time.Duration {
	if avg == 0 {
		return sample
	}
	return avg + (sample-avg)/8
}

// failQueued refuses everything queued: the catalog is closing.
func (c *Catalog) failQueued() {
	c.mu.Lock()
	q := c.mu.queue
	c.mu.queue = nil
	c.mu.Unlock()
	for _, r := range q {
		r.res <- outcome{err: ErrClosed}
	}
}
