package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
	"github.com/worldfs/worldfs/maintenance"
	"golang.org/x/sync/errgroup"
)

// Failpoints of the tick commit protocol, in the order a tick passes them.
const (
	FailpointMaterialized = "engine.tick.materialized" // step 1 done
	FailpointComputed     = "engine.tick.computed"     // step 2 done: frames computed
	FailpointAppended     = "engine.tick.appended"     // step 4: after each fragment append
	FailpointFlushed      = "engine.tick.flushed"      // step 5 done
	FailpointPublished    = "engine.tick.published"    // step 6 done: the manifest is in the catalog
	FailpointConsumed     = "engine.tick.consumed"     // step 8 done: caches consumed
	FailpointAdvanced     = "engine.tick.advanced"     // step 9 done: receipt recorded
)

// Failpoints lists the protocol's failpoints in order.
var Failpoints = []string{FailpointMaterialized, FailpointComputed, FailpointAppended, FailpointFlushed,
	FailpointPublished, FailpointConsumed, FailpointAdvanced}

// Errors of the runtime.
var (
	// ErrFrozen: a publish's outcome is unknown; the world admits no
	// other operation until reconciliation proves it committed or absent.
	ErrFrozen = errors.New("world frozen: a tick's publish is unreconciled")
	// ErrNotPublished: reconciliation proved the publish had no effect;
	// the next Step recomputes the tick under a fresh token.
	ErrNotPublished = errors.New("publish had no effect")
)

// CommittedTickReceipt is the durable outcome of one committed tick.
type CommittedTickReceipt struct {
	World string `json:"world"`
	Run   string `json:"run"`
	Tick  int64  `json:"tick"`
	// Token is the visibility token: the commit token the tick was
	// published under ("" in uncoordinated mode).
	Token   string          `json:"token"`
	Appends []AppendReceipt `json:"appends"`
}

// Processor computes the next frame of the world in place, on copies of
// the last visible frames; it must not have effects outside them.
type Processor func(tc *TickContext) error

// Hook is an advisory PreTick or PostTick callback. A PreTick error leaves
// the tick retryable; PostTick runs after the receipt is recorded.
type Hook func(ctx context.Context, tick int64) error

// Materializer applies one durable command to the tick being computed.
// It runs against the working frames only; an error leaves the tick, the
// caches and the command retryable.
type Materializer func(tc *TickContext, c index.Command) error

// TickContext is what processors see of the tick being computed.
type TickContext struct {
	Tick   int64
	frames map[string]*Frame
}

// Frame returns the archetype's frame being computed.
func (tc *TickContext) Frame(archetype string) *Frame { return tc.frames[archetype] }

// Options configure a World.
type Options struct {
	// Run names the run this writer extends (default index.DefaultRun).
	Run string
	// Holder names this writer in fence entries (default "engine").
	Holder string
	// Legacy tables of a world continued from v0.2 history: ResumeWorld
	// reads them (the legacy-name fallback) when the run has published no
	// tick of its own.
	Legacy []*Table
	// WriterMode of a new world: index.ModeResumable (default) or
	// index.ModeCleanupOnly, which no mutable resume will ever take.
	WriterMode string
	// Meta is a new world's run parameters (immutable key-value metadata,
	// within index.ValidateMeta's bounds): CreateWorld records them,
	// ForkWorld records its parent's with these keys over them. Other
	// calls ignore it.
	Meta map[string]string
	// Catalog options for the world's control catalog.
	Catalog index.Options
	// Ingest configures World.Ingest and World.Evaluate.
	Ingest IngestOptions
	// Compaction tunes the compaction a coordinated world runs by itself
	// while it is open: once a window's worth of ticks (64) has been
	// published past the recent ones, a background maintenance.Compact of
	// the run rewrites what is due (one at a time), so the small fragments
	// of a table stay bounded without anyone running optimize. Its Run is
	// the world's.
	Compaction maintenance.CompactOptions
	// Collection tunes the collection that background maintenance runs
	// after every Collection.Every-th compaction (see maintenance.Collect);
	// its Run is the world's.
	Collection maintenance.CollectOptions
	// NoMaintenance turns that background compaction off.
	NoMaintenance bool
	// NoCSVSizes stops recording in each fragment's footer the size of
	// its CSV rendering, which lets a mount size a fresh tick's .csv
	// without reading its rows (without it, the mount renders that .csv
	// when it is looked up, reading the tick's rows, until compaction
	// records the size in its tick index). Measuring counts each float's
	// shortest digits without writing them; `worldfs bench ticks
	// --no-csv-sizes` measures what it costs a writer.
	NoCSVSizes bool
	// Depth bounds the ticks in flight (DefaultDepth; 1 to MaxDepth):
	// computed, and appending or publishing, not yet published. Submit
	// computes tick k+1 while tick k appends and publishes; publishes land
	// in tick order, several in one slot when they are ready together.
	// Depth 1 is the serial writer: a tick is computed only once the one
	// before it is published. Step always waits for its own tick.
	Depth int
}

// DefaultDepth is Options.Depth's default, and MaxDepth its bound. On the
// GCS model (4 archetypes × 1,000 entities) depth 4 commits about three
// times as many ticks a second as depth 1; deeper helps less and holds more
// frames in memory (docs/INTERNALS.md, "Pipelined ticks").
const (
	DefaultDepth = 8
	MaxDepth     = 64
)

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Run == "" {
		o.Run = index.DefaultRun
	}
	if o.Holder == "" {
		o.Holder = "engine"
	}
	if o.Depth == 0 {
		o.Depth = DefaultDepth
	}
	return o
}

// Validate checks the options once their defaults are in: the run is a
// user's (names starting with _ are worldfs's own, see ValidateUserRun),
// the writer mode is known, the catalog's, the ingestion's and background
// maintenance's options are valid. Every constructor of a World calls EnsureDefaults, then Validate,
// and refuses invalid options with ErrInvalid before it touches the
// bucket.
func (o *Options) Validate() error {
	if err := ValidateUserRun(o.Run); err != nil {
		return fmt.Errorf("world options: %w", err)
	}
	if o.WriterMode != "" && o.WriterMode != index.ModeResumable && o.WriterMode != index.ModeCleanupOnly {
		return fmt.Errorf("world options: writer mode %q (want %q or %q)", o.WriterMode, index.ModeResumable, index.ModeCleanupOnly)
	}
	if o.Depth < 1 || o.Depth > MaxDepth {
		return fmt.Errorf("world options: depth %d (want 1 to %d ticks in flight)", o.Depth, MaxDepth)
	}
	if err := index.ValidateMeta(o.Meta); err != nil {
		return fmt.Errorf("world options: Meta: %w", err)
	}
	// The catalog's and the ingestion's defaults are filled in where the
	// catalog opens and the service starts: check copies.
	cat := o.Catalog
	if err := cat.EnsureDefaults().Validate(); err != nil {
		return err
	}
	in := o.Ingest
	if err := in.EnsureDefaults().Validate(); err != nil {
		return err
	}
	// Background maintenance runs compaction and collection under the
	// world's run: check copies as it does.
	compaction := o.Compaction
	compaction.Run = o.Run
	if err := compaction.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("world options: Compaction: %w", err)
	}
	collection := o.Collection
	collection.Run = o.Run
	if err := collection.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("world options: Collection: %w", err)
	}
	return nil
}

type spawn struct {
	archetype string
	entity    int64
	values    Values
}

// prepared is a computed tick on its way to publication: appending, then
// appended and flushed, then publishing; once its publish outcome is
// unknown it is the retained prepared commit of step 7 (docs/ARCHITECTURE.md,
// "A tick write").
type prepared struct {
	tick       int64
	token      string
	frames     map[string]*Frame
	settled    []string // durable commands this tick materialized
	nextEntity int64    // the entity ids handed out when it was computed
	// spawns and despawns count the cache entries the tick applied; only
	// those are consumed, once it is published.
	spawns, despawns int

	// appended is closed once the appends ended: appends and err are
	// then set (by the goroutine appending) and no longer change.
	appended chan struct{}
	appends  []AppendReceipt
	err      error
}

// World is a live world: its visible state in memory, and the writer that
// commits its ticks. It is not safe for concurrent use.
type World struct {
	id     string
	b      bucket.Bucket
	cat    *index.Catalog // nil: uncoordinated
	opts   Options
	epoch  int64
	tables []*Table // by archetype name
	// The state the next tick is computed from, and the tick it is at
	// (-1: none): the newest tick computed, published or in flight. With
	// nothing in flight it is the last visible state.
	frames map[string]*Frame
	tick   int64

	nextEntity int64
	spawns     []spawn
	despawns   []int64
	processors []Processor
	pre, post  []Hook
	commands   map[string]Materializer // by command kind

	// The pipeline (pipeline.go). INVARIANT: flight holds consecutive
	// ticks ending at tick, oldest first, none published; base is the
	// published state under them (meaningful while flight or uncertain is
	// not empty); the cache entries they applied are the first ones of
	// spawns and despawns.
	flight []*prepared
	base   struct {
		frames map[string]*Frame
		tick   int64
	}
	pub *publisher
	// encoding bounds the fragments being encoded at once, over every
	// tick in flight, to GOMAXPROCS: encoding is CPU work, and more at
	// once would only hold more encoders in memory. The creates that
	// follow overlap freely.
	encoding chan struct{}
	// uncertain: ticks whose publish outcome is unknown, one slot's worth
	// (step 7 of a tick write); nothing else runs until they are reconciled.
	uncertain []*prepared
	stopped   error
	last      *CommittedTickReceipt

	ingestOnce sync.Once
	ingest     *IngestionService

	maint maintainer
}

// ID returns the world id.
func (w *World) ID() string { return w.id }

// Tick returns the tick the world's state is at (-1 before the first): the
// newest tick computed, which the next Submit builds on. It is the last
// visible tick whenever no tick is in flight: always between Steps, and
// after Flush.
func (w *World) Tick() int64 { return w.tick }

// Published returns the last tick this writer published (or found
// published when it opened the world; -1: none).
func (w *World) Published() int64 {
	if len(w.flight) > 0 || len(w.uncertain) > 0 {
		return w.base.tick
	}
	return w.tick
}

// InFlight returns how many ticks are computed and not yet published.
func (w *World) InFlight() int { return len(w.flight) }

// NextEntity returns the next entity id Spawn hands out.
func (w *World) NextEntity() int64 { return w.nextEntity }

// Epoch returns the writer's fence epoch (0 uncoordinated).
func (w *World) Epoch() int64 { return w.epoch }

// Catalog returns the world's catalog (nil uncoordinated).
func (w *World) Catalog() *index.Catalog { return w.cat }

// LastReceipt returns the receipt of the last committed tick.
func (w *World) LastReceipt() *CommittedTickReceipt { return w.last }

// Frame returns an archetype's frame at Tick (read-only).
func (w *World) Frame(archetype string) *Frame { return w.frames[archetype] }

// Tables returns the world's tables, by archetype name.
func (w *World) Tables() []*Table { return slices.Clone(w.tables) }

// AddProcessor adds a processor; processors run in the order added.
// Refused while a publish is unreconciled.
func (w *World) AddProcessor(p Processor) error {
	if err := w.mutable(); err != nil {
		return err
	}
	w.processors = append(w.processors, p)
	return nil
}

// OnCommand registers the materializer of a durable command kind.
func (w *World) OnCommand(kind string, m Materializer) {
	if w.commands == nil {
		w.commands = map[string]Materializer{}
	}
	w.commands[kind] = m
}

// Enqueue records a durable command in the catalog; the writer
// materializes it at the first tick at or after c.Due, and that tick's
// publish settles it. Enqueuing the identical command again is a no-op.
func (w *World) Enqueue(ctx context.Context, c index.Command) error {
	if err := w.mutable(); err != nil {
		return err
	}
	if w.cat == nil {
		return fmt.Errorf("world %s: an uncoordinated world has no durable commands", w.id)
	}
	if c.Run == "" {
		c.Run = w.opts.Run
	}
	_, err := w.cat.Commit(ctx, index.Entry{Kind: index.KindCommandEnqueue, Command: &c})
	return err
}

// OnPreTick and OnPostTick add advisory hooks.
func (w *World) OnPreTick(h Hook)  { w.pre = append(w.pre, h) }
func (w *World) OnPostTick(h Hook) { w.post = append(w.post, h) }

// Spawn queues a new entity of archetype for the next tick and returns its
// id. The spawn takes effect in the tick that publishes it; a failed tick
// keeps it queued.
func (w *World) Spawn(archetype string, v Values) (int64, error) {
	if err := w.mutable(); err != nil {
		return 0, err
	}
	f, ok := w.frames[archetype]
	if !ok {
		return 0, fmt.Errorf("world %s: no archetype %s", w.id, archetype)
	}
	// Check the values now, against a scratch frame.
	if err := NewFrame(f.Table).Append(0, v); err != nil {
		return 0, err
	}
	id := w.nextEntity
	w.nextEntity++
	w.spawns = append(w.spawns, spawn{archetype, id, v})
	return id, nil
}

// Despawn queues an entity's removal for the next tick.
func (w *World) Despawn(entity int64) error {
	if err := w.mutable(); err != nil {
		return err
	}
	w.despawns = append(w.despawns, entity)
	return nil
}

// mutable refuses mutations while a publish is unreconciled (step 7 of a
// tick write: all entity, processor, hook and resource mutation stays frozen)
// or after the writer stopped.
func (w *World) mutable() error {
	switch {
	case w.stopped != nil:
		return w.stopped
	case len(w.uncertain) > 0:
		return fmt.Errorf("world %s: %w (tick %d)", w.id, ErrFrozen, w.uncertain[0].tick)
	}
	return nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newTickToken returns a fresh commit token for an attempt at tick, one
// that names its tick (index.TickToken): a reader of the token reads the
// one catalog part that holds the tick.
func newTickToken(tick int64) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return index.TickToken(tick, b)
}

func newWorld(id string, b bucket.Bucket, cat *index.Catalog, epoch int64, tables []*Table, opts Options) (*World, error) {
	w := &World{id: id, b: b, cat: cat, opts: opts, epoch: epoch, frames: map[string]*Frame{}, tick: -1,
		encoding: make(chan struct{}, runtime.GOMAXPROCS(0))}
	ids := map[string]string{}
	for _, t := range tables {
		if _, dup := w.frames[t.Name]; dup {
			return nil, fmt.Errorf("world %s: archetype %s declared twice", id, t.Name)
		}
		if other, dup := ids[t.ID]; dup {
			return nil, fmt.Errorf("world %s: archetypes %s and %s have the same schema, so the same table %s; give one a distinguishing component", id, other, t.Name, t.ID)
		}
		ids[t.ID] = t.Name
		w.tables = append(w.tables, t)
		w.frames[t.Name] = NewFrame(t)
	}
	slices.SortFunc(w.tables, func(a, b *Table) int { return strings.Compare(a.Name, b.Name) })
	return w, nil
}

// Step commits one tick: steps 1 to 10 of docs/ARCHITECTURE.md, "A tick
// write", in that order. Ticks
// submitted before it are published first; it returns its own tick's
// receipt once that tick is published, whatever Options.Depth is.
func (w *World) Step(ctx context.Context) (CommittedTickReceipt, error) {
	if w.stopped != nil {
		return CommittedTickReceipt{}, w.stopped
	}
	if len(w.uncertain) > 0 {
		// Step 7 from an earlier call: nothing else runs until the
		// prepared publish is proven committed or absent.
		rs, err := w.reconcile(ctx)
		if err != nil {
			return CommittedTickReceipt{}, err
		}
		return rs[len(rs)-1], nil
	}
	if _, err := w.Flush(ctx); err != nil {
		return CommittedTickReceipt{}, err
	}
	if _, err := w.Submit(ctx); err != nil {
		return CommittedTickReceipt{}, err
	}
	rs, err := w.Flush(ctx)
	if err != nil {
		return CommittedTickReceipt{}, err
	}
	return rs[len(rs)-1], nil
}

// compute runs steps 1 and 2 of the next tick on working copies of the
// frames at Tick: nothing is written and no cache is consumed. It may run
// while the ticks before it are still in flight (see pipeline.go for what
// it may read of them).
func (w *World) compute(ctx context.Context) (*prepared, error) {
	tick := w.tick + 1

	// 1. Materialize due durable commands against the locked world (the
	// working copies of its frames), then fire PreTick hooks.
	frames := make(map[string]*Frame, len(w.frames))
	for name, f := range w.frames {
		frames[name] = f.Clone()
	}
	tc := &TickContext{Tick: tick, frames: frames}
	settled, err := w.materialize(ctx, tc)
	if err != nil {
		return nil, err
	}
	for _, h := range w.pre {
		if err := h(ctx, tick); err != nil {
			return nil, fmt.Errorf("world %s tick %d: pre-tick hook: %w", w.id, tick, err)
		}
	}
	failpoint.Hit(FailpointMaterialized)

	// 2. Compute every frame: the queued spawns and despawns the ticks in
	// flight have not applied, then the processors. No writes, no cache
	// consumption.
	spawns, despawns := w.taken()
	for _, s := range w.spawns[spawns:] {
		if err := frames[s.archetype].Insert(s.entity, s.values); err != nil {
			return nil, fmt.Errorf("world %s tick %d: spawn: %w", w.id, tick, err)
		}
	}
	for _, e := range w.despawns[despawns:] {
		for _, f := range frames {
			f.Remove(e)
		}
	}
	for _, p := range w.processors {
		if err := p(tc); err != nil {
			return nil, fmt.Errorf("world %s tick %d: processor: %w", w.id, tick, err)
		}
	}
	failpoint.Hit(FailpointComputed)
	// 3. One commit context for the whole tick.
	token := newTickToken(tick)
	if w.cat == nil {
		token = "" // uncoordinated: the implicit epoch-0 identity
	}
	return &prepared{tick: tick, token: token, frames: frames, settled: settled, nextEntity: w.nextEntity,
		spawns: len(w.spawns) - spawns, despawns: len(w.despawns) - despawns, appended: make(chan struct{})}, nil
}

// taken counts the cache entries the ticks in flight (and an uncertain
// publish) applied: the first ones of each cache.
func (w *World) taken() (spawns, despawns int) {
	for _, p := range w.uncertain {
		spawns, despawns = spawns+p.spawns, despawns+p.despawns
	}
	for _, p := range w.flight {
		spawns, despawns = spawns+p.spawns, despawns+p.despawns
	}
	return spawns, despawns
}

// appendTick runs steps 4 and 5 for p under its commit context: every
// frame appended, and every append durable.
func (w *World) appendTick(ctx context.Context, p *prepared) ([]AppendReceipt, error) {
	epoch := w.epoch
	if w.cat == nil {
		epoch = 0
	}
	// 4. Append every frame, stamped with the tick's commit identity.
	appends, err := w.appendFrames(ctx, p.tick, p.token, epoch, p.frames)
	if err != nil {
		return nil, err
	}
	// 5. Flush: bucket creates are durable when they return, so nothing
	// is staged; every receipt says so.
	for _, a := range appends {
		if !a.Durable {
			return nil, fmt.Errorf("world %s tick %d: fragment %s is not durable", w.id, p.tick, a.Path)
		}
	}
	failpoint.Hit(FailpointFlushed)
	return appends, nil
}

// publishEntry is step 6's entry for p: fence check, put-if-absent, head
// advance, and the commands it settles.
func (w *World) publishEntry(p *prepared) index.Entry {
	return index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
		Run: w.opts.Run, Tick: p.tick, CommitToken: p.token, WriterEpoch: w.epoch, Tables: manifestTables(p.appends),
		NextEntity: p.nextEntity, PublishedUnixMs: time.Now().UnixMilli(), Settle: p.settled}}
}

// settle acts on the outcome of publishing group, the oldest ticks in
// flight (step 6's answer; step 7 if it is unknown). It returns the
// receipts of the ticks it proves published.
func (w *World) settle(ctx context.Context, group []*prepared, err error) ([]CommittedTickReceipt, error) {
	var stale *index.StaleWriterError
	var conflict *index.CatalogConflictError
	if err == nil {
		w.flight = w.flight[len(group):]
		out := make([]CommittedTickReceipt, 0, len(group))
		for _, p := range group {
			failpoint.Hit(FailpointPublished)
			out = append(out, w.finish(ctx, p))
		}
		return out, nil
	}
	// Whatever went wrong, no tick behind the group may publish past it:
	// they are discarded, and their fragments are dead attempts.
	w.discard()
	first := group[0].tick
	switch {
	case errors.As(err, &stale):
		w.stopped = fmt.Errorf("world %s: this writer lost the fence and stops: %w", w.id, err)
		return nil, w.stopped
	case errors.Is(err, bucket.ErrAmbiguous):
		// 7. Reconcile before admitting anything else.
		w.uncertain = group
		return w.reconcile(ctx)
	case errors.As(err, &conflict):
		// Another attempt holds this tick: this writer's state is not the
		// visible one. It stops; resume rebuilds from visible rows.
		w.stopped = fmt.Errorf("world %s: tick %d was published by another attempt; this writer stops (resume to continue): %w", w.id, conflict.Tick, err)
		return nil, w.stopped
	default:
		// A failed append, a definite refusal or an unconfirmable tip:
		// nothing was published, and the caches are intact.
		return nil, fmt.Errorf("world %s tick %d: %w", w.id, first, err)
	}
}

// materialize applies the durable commands due at tc.Tick, in due order,
// and returns their ids for the publish to settle.
func (w *World) materialize(ctx context.Context, tc *TickContext) ([]string, error) {
	if w.cat == nil {
		return nil, nil
	}
	// With nothing in flight, an exact read. With ticks in flight, the
	// catalog's tip: the slot of the newest published tick confirmed every
	// slot before it, and the next one will confirm the tip again, so a
	// command enqueued elsewhere meanwhile is taken at most one slot later
	// than an exact read would take it (never before it is due, and
	// once), and the pipeline is spared a bucket read per tick.
	s := w.cat.Tip()
	if len(w.flight) == 0 {
		var err error
		if s, err = w.cat.Exact(ctx); err != nil {
			return nil, fmt.Errorf("world %s tick %d: reading due commands: %w", w.id, tc.Tick, err)
		}
	}
	// A tick in flight settles its commands when it publishes; the ticks
	// behind it must not take them again.
	inFlight := map[string]bool{}
	for _, p := range w.flight {
		for _, id := range p.settled {
			inFlight[id] = true
		}
	}
	var ids []string
	for _, c := range s.DueCommands(w.opts.Run, tc.Tick) {
		if inFlight[c.ID] {
			continue
		}
		m, ok := w.commands[c.Kind]
		if !ok {
			return nil, fmt.Errorf("world %s tick %d: command %s has kind %q, which no materializer handles", w.id, tc.Tick, c.ID, c.Kind)
		}
		if err := m(tc, c.Command); err != nil {
			return nil, fmt.Errorf("world %s tick %d: command %s: %w", w.id, tc.Tick, c.ID, err)
		}
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// encodeFragment encodes a tick's fragment of one table, with its CSV size
// in the footer unless Options.NoCSVSizes.
func (w *World) encodeFragment(f *Frame, s Stamp) ([]byte, error) {
	if !w.opts.NoCSVSizes {
		return EncodeFragment(f, s)
	}
	data, _, err := frame.Encode(f, func(int) Stamp { return s }, frame.CSVNone, 0)
	return data, err
}

// appendFrames writes one fragment per archetype (step 4), the archetypes
// in parallel.
func (w *World) appendFrames(ctx context.Context, tick int64, token string, epoch int64, frames map[string]*Frame) ([]AppendReceipt, error) {
	dirToken := token
	if dirToken == "" {
		dirToken = "uncoordinated-" + newToken() // rows say ""/0; the path stays unique
	}
	out := make([]AppendReceipt, len(w.tables))
	// The first failure cancels the other appends: the tick will not be
	// published, and nothing waits for creates whose rows nobody will name.
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range w.tables {
		g.Go(func() error {
			w.encoding <- struct{}{}
			data, err := w.encodeFragment(frames[t.Name], Stamp{Tick: tick, CommitToken: token, WriterEpoch: epoch})
			<-w.encoding
			if err != nil {
				return err
			}
			path := index.TickFragmentPath(w.id, w.opts.Run, t.ID, dirToken)
			attrs, err := bucket.CreateOnce(gctx, w.b, path, data)
			if err != nil {
				return fmt.Errorf("world %s tick %d: appending %s: %w", w.id, tick, t.Name, err)
			}
			out[i] = AppendReceipt{Table: t.ID, Path: path, Rows: int64(frames[t.Name].Len()),
				Bytes: int64(len(data)), Digest: Digest(data), Generation: attrs.Generation, Durable: true}
			failpoint.Hit(FailpointAppended)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func manifestTables(appends []AppendReceipt) []index.TableFragments {
	var out []index.TableFragments
	for _, a := range appends {
		out = append(out, index.TableFragments{Table: a.Table, Fragments: []index.Fragment{{
			Path: a.Path, Rows: a.Rows, Bytes: a.Bytes, Digest: a.Digest, Generation: a.Generation}}})
	}
	return out
}

// reconcile decides an uncertain publish (step 7) by an authoritative read
// of the catalog: the exact tokens published at the ticks prove the commit
// and finalize it without a second catalog write; the ticks proven absent
// release them for a fresh-token recomputation (returning
// ErrNotPublished); anything else keeps the world frozen (ErrFrozen). The
// uncertain ticks were one slot's entries, so they landed together or not
// at all.
func (w *World) reconcile(ctx context.Context) ([]CommittedTickReceipt, error) {
	g := w.uncertain
	first := g[0].tick
	s, err := w.cat.Exact(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (tick %d, token %s): %w", ErrFrozen, first, g[0].token, err)
	}
	ours, absent := 0, 0
	for _, p := range g {
		t, ok := s.Tick(w.opts.Run, p.tick)
		switch {
		case ok && t.CommitToken == p.token:
			ours++
		case !ok:
			absent++
		default:
			return nil, fmt.Errorf("%w: tick %d shows token %s, not ours (%s)", ErrFrozen, p.tick, t.CommitToken, p.token)
		}
	}
	switch {
	case ours == len(g):
		w.uncertain = nil
		out := make([]CommittedTickReceipt, 0, len(g))
		for _, p := range g {
			failpoint.Hit(FailpointPublished)
			out = append(out, w.finish(ctx, p))
		}
		w.frames, w.tick = w.base.frames, w.base.tick
		return out, nil
	case absent == len(g):
		w.uncertain = nil
		return nil, fmt.Errorf("world %s tick %d: %w; it will be recomputed under a fresh token", w.id, first, ErrNotPublished)
	}
	return nil, fmt.Errorf("%w: of ticks %d..%d, published in one slot, %d are published and %d absent", ErrFrozen, first, g[len(g)-1].tick, ours, absent)
}

// finish runs steps 8 to 10 for p, the oldest tick not yet finished, once
// it is published.
func (w *World) finish(ctx context.Context, p *prepared) CommittedTickReceipt {
	// 8. Consume the spawn and despawn cache entries it applied.
	w.spawns, w.despawns = w.spawns[p.spawns:], w.despawns[p.despawns:]
	failpoint.Hit(FailpointConsumed)
	// 9. Advance the published state and record the receipt.
	w.base.frames, w.base.tick = p.frames, p.tick
	r := CommittedTickReceipt{World: w.id, Run: w.opts.Run, Tick: p.tick, Token: p.token, Appends: p.appends}
	w.last = &r
	failpoint.Hit(FailpointAdvanced)
	// 10. PostTick hooks are advisory: the receipt stands whatever they do.
	for _, h := range w.post {
		_ = h(ctx, p.tick)
	}
	w.maintain(p.tick)
	return r
}
