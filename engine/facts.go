package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints of the fact lifecycle (docs/ARCHITECTURE.md), in the order a fact
// passes them.
const (
	FailpointFactClaimed   = "engine.fact.claimed"   // the claim is pending under this holder
	FailpointFactAppended  = "engine.fact.appended"  // the fact's row is durable
	FailpointFactCompleted = "engine.fact.completed" // the claim is complete
)

// FactFailpoints lists the fact lifecycle's failpoints in order.
var FactFailpoints = []string{FailpointFactClaimed, FailpointFactAppended, FailpointFactCompleted}

// Failpoints of a batch of facts sharing one fragment, in order. The
// per-fact points above are hit too, once per fact of the batch.
const (
	FailpointBatchClaimed  = "engine.facts.batch.claimed"  // every claim of the batch is pending
	FailpointBatchAppended = "engine.facts.batch.appended" // the batch's fragment is durable, no claim complete
	FailpointBatchPartial  = "engine.facts.batch.partial"  // one claim of the batch is complete, others may not be
)

// BatchFailpoints lists the batch failpoints in order.
var BatchFailpoints = []string{FailpointBatchClaimed, FailpointBatchAppended, FailpointBatchPartial}

// ReservedProducer prefixes the producers worldfs itself uses (evaluation
// receipts); callers' facts may not use it.
const ReservedProducer = "worldfs."

// The FactMeta columns and fact tables are the data's format (package
// frame); engine keeps their names.
const (
	ColFactProducer   = frame.ColFactProducer
	ColFactExternalID = frame.ColFactExternalID
	ColFactDigest     = frame.ColFactDigest
	ColFactCommit     = frame.ColFactCommit
)

// NewFactTable builds the table a kind of fact is stored in, its columns
// in the order declared (frame.NewDeclaredFactTable).
func NewFactTable(name string, components ...Component) (*Table, error) {
	return frame.NewDeclaredFactTable(name, components...)
}

// IsFactTable reports whether t stores facts (it has the FactMeta columns).
func IsFactTable(t *Table) bool { return frame.IsFactColumns(t.Columns) }

// IsFactColumns reports whether a table's columns include FactMeta
// (frame.IsFactColumns).
func IsFactColumns(cols []Column) bool { return frame.IsFactColumns(cols) }

// Fact is one externally produced record to ingest.
type Fact struct {
	// Run the fact belongs to (default index.DefaultRun).
	Run string
	// Producer and ExternalID are the fact's identity within the run:
	// exactly one fact per (world, run, producer, external id) is ever
	// visible.
	Producer, ExternalID string
	// Table is a fact table (NewFactTable).
	Table *Table
	// Values are the components' values by column name ("reading_value");
	// FactMeta is filled in by worldfs.
	Values Values
}

// FactReceipt is the durable outcome of ingesting a fact.
type FactReceipt struct {
	World      string `json:"world"`
	Run        string `json:"run"`
	Producer   string `json:"producer"`
	ExternalID string `json:"external_id"`
	// CommitToken is the claim's token: the fact is visible iff it is.
	CommitToken string `json:"commit_token"`
	// FactID is the fact's id, from the catalog's negative band.
	FactID int64 `json:"fact_id"`
	// Tick is the run's last visible tick when the fact was claimed (-1:
	// none); facts never advance it.
	Tick      int64  `json:"tick"`
	Table     string `json:"table"`
	TableName string `json:"table_name"`
	// Digest is worldfs's digest of the fact's components.
	Digest string `json:"digest"`
	Path   string `json:"path"`
	// Deduplicated: the fact was already visible; this call changed
	// nothing.
	Deduplicated bool `json:"deduplicated"`
	// Recovered says how this call finished a claim stranded by another
	// holder: "append" (no rows were found; they were appended under the
	// original token) or "orphan" (the rows were there; only the
	// completion was missing).
	Recovered string `json:"recovered,omitempty"`
}

// ErrInvalid matches every refusal of bad input by the ingestion service
// (errors.Is): nothing was claimed or written.
var ErrInvalid = errors.New("invalid input")

// inputError is a refusal of bad input; its message is the cause's.
type inputError struct{ err error }

func (e *inputError) Error() string        { return e.err.Error() }
func (e *inputError) Unwrap() error        { return e.err }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

func invalid(err error) error { return &inputError{err} }

// IngestOptions configure an IngestionService.
type IngestOptions struct {
	// Holder names this service in claims (default: a random name).
	Holder string
	// Lease is how long a claim stays this holder's before others may
	// take it over (default 30 s).
	Lease time.Duration
	// MaxWait bounds how long a call waits for another holder's live lease
	// to complete or end before it returns ClaimPendingError (default:
	// twice the lease; negative: do not wait).
	MaxWait time.Duration
	// Now is the clock leases are measured with (default time.Now).
	Now func() time.Time
	// NewTicker starts the ticker leases are renewed on, every d: its
	// channel and the function that stops it (default: time.NewTicker).
	// With Now it lets a test drive lease time by hand.
	NewTicker func(d time.Duration) (<-chan time.Time, func())
	// MaxBatch bounds how many concurrent facts share one fragment
	// (default 512, at most index.MaxSlotEntries/8; 1 turns batching off).
	MaxBatch int
	// Batches bounds how many batches one round of claims starts (default
	// 4): a round takes at most MaxBatch×Batches queued facts.
	Batches int
	// Catalog options, used when the service opens the catalog itself.
	Catalog index.Options
}

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *IngestOptions) EnsureDefaults() *IngestOptions {
	if o.Holder == "" {
		o.Holder = "ingest-" + newToken()[:12]
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.MaxWait == 0 {
		o.MaxWait = 2 * o.Lease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTicker == nil {
		o.NewTicker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.Batches <= 0 {
		o.Batches = 4
	}
	return o
}

// Validate checks the options once their defaults are in: a lease is at
// least a millisecond (leases are kept in milliseconds).
func (o *IngestOptions) Validate() error {
	if o.Lease < time.Millisecond {
		return fmt.Errorf("ingest options: lease %v is under a millisecond", o.Lease)
	}
	if o.MaxBatch > maxBatch {
		return fmt.Errorf("ingest options: a batch of %d facts is over the %d a round's slot can claim and complete", o.MaxBatch, maxBatch)
	}
	return nil
}

// maxBatch bounds IngestOptions.MaxBatch: a round's one slot holds the
// claims and the completions of several batches.
const maxBatch = index.MaxSlotEntries / 8

// IngestionService owns the fact lifecycle of one world (docs/ARCHITECTURE.md):
// claim, append, flush, complete, behind one direct method. It works on
// live worlds (World.Ingest shares the writer's catalog) and on cold ones
// (OpenIngestionService opens the catalog alone). It is safe for
// concurrent use; concurrent calls share catalog slots (group commit).
type IngestionService struct {
	b     bucket.Bucket
	cat   *index.Catalog
	world string
	opts  IngestOptions
	owned bool // Close closes cat

	described sync.Map   // table id → struct{}: its description is in the bucket
	tables    sync.Map   // table id → *Table: the world's table of those columns (worldTable)
	factNames sync.Map   // table name → struct{}: a fact table of the world (checkFactName)
	parts     partCache  // parts of batch chains read or written while probing
	chains    chainLocks // walks of one chain take turns

	// The group-commit queue of Ingest (see batch.go).
	mu struct {
		sync.Mutex
		queue    []*factReq
		ready    []*factBatch // rows placed, to complete in the next round
		pumping  bool
		inflight map[index.ClaimKey]*lead
		rounds   int           // rounds started
		placing  map[int]int   // by the round that claimed them: batches appending their rows
		placed   chan struct{} // closed when one of them is done, if the pump waits (late)
	}
}

// NewIngestionService returns a service that commits through cat, an open
// catalog of a created world.
//
// opts are taken with their defaults; their Validate is the caller's (a
// World's and a mount's options validate their Ingest).
func NewIngestionService(b bucket.Bucket, cat *index.Catalog, opts IngestOptions) *IngestionService {
	opts.EnsureDefaults()
	s := &IngestionService{b: b, cat: cat, world: cat.World(), opts: opts}
	s.mu.inflight, s.mu.placing = map[index.ClaimKey]*lead{}, map[int]int{}
	return s
}

// OpenIngestionService opens world's catalog for ingestion into a cold
// world (no live writer needed). Close releases it.
func OpenIngestionService(ctx context.Context, b bucket.Bucket, world string, opts IngestOptions) (*IngestionService, error) {
	cat, err := index.Open(ctx, b, world, opts.Catalog)
	if err != nil {
		return nil, err
	}
	s, err := cat.Exact(ctx)
	if err == nil && !s.World.Created {
		err = fmt.Errorf("world %s: %w", world, index.ErrNoWorld)
	}
	if err != nil {
		cat.Close()
		return nil, err
	}
	svc := NewIngestionService(b, cat, opts)
	svc.owned = true
	return svc, nil
}

// Close closes the catalog if the service opened it.
func (s *IngestionService) Close() error {
	if s.owned {
		return s.cat.Close()
	}
	return nil
}

// World returns the world the service ingests into.
func (s *IngestionService) World() string { return s.world }

// Ingest makes f visible exactly once. The same fact again (same key,
// same components) returns the original receipt; the same key with other
// components is a ClaimConflictError, forever; a claim another holder is
// still working on is awaited (up to MaxWait) and its receipt returned, or
// taken over once its lease ends.
func (s *IngestionService) Ingest(ctx context.Context, f Fact) (FactReceipt, error) {
	if f.Run == "" {
		f.Run = index.DefaultRun
	}
	if err := s.checkFact(f); err != nil {
		return FactReceipt{}, invalid(err)
	}
	if err := s.checkFactName(ctx, f); err != nil {
		return FactReceipt{}, err
	}
	t, err := s.worldTable(ctx, f.Table)
	if err != nil {
		return FactReceipt{}, err
	}
	f.Table = t
	row, digest, err := factRow(f.Table, f.Values)
	if err != nil {
		return FactReceipt{}, invalid(fmt.Errorf("world %s: fact %s/%s: %w", s.world, f.Producer, f.ExternalID, err))
	}
	key := index.ClaimKey{Run: f.Run, Producer: f.Producer, ExternalID: f.ExternalID}
	out, err := s.enqueue(ctx, &factReq{key: key, digest: digest, table: f.Table, row: row})
	if err != nil {
		return FactReceipt{}, err
	}
	return s.receipt(out, f.Table), nil
}

// worldTable returns the table the world keeps for t's columns: t, or the
// world's table of the same name and columns in another order (a table of
// a worldfs before declared order: adoptTables). A fact's digest and its
// file are its table's, so a fact resent after an upgrade is the same
// fact, deduplicated, never a conflict.
func (s *IngestionService) worldTable(ctx context.Context, t *Table) (*Table, error) {
	if w, ok := s.tables.Load(t.ID); ok {
		return w.(*Table), nil
	}
	ts, err := adoptTables(ctx, s.b, s.world, []*Table{t})
	if err != nil {
		return nil, err
	}
	s.tables.Store(t.ID, ts[0])
	return ts[0], nil
}

func (s *IngestionService) checkFact(f Fact) error {
	switch {
	case f.Producer == "" || f.ExternalID == "":
		return fmt.Errorf("world %s: a fact needs a producer and an external id", s.world)
	case strings.HasPrefix(f.Producer, ReservedProducer):
		return fmt.Errorf("world %s: producer %q: names starting %q are reserved for worldfs", s.world, f.Producer, ReservedProducer)
	case f.Table == nil || !IsFactTable(f.Table):
		return fmt.Errorf("world %s: fact %s/%s: the table must be a fact table (NewFactTable)", s.world, f.Producer, f.ExternalID)
	case f.Table.ID == receiptTable.ID || f.Table.Name == ReceiptTableName:
		return fmt.Errorf("world %s: fact %s/%s: table %s holds evaluation receipts, which only Evaluate records", s.world, f.Producer, f.ExternalID, f.Table.Name)
	}
	return ValidateUserRun(f.Run)
}

// checkFactName refuses a fact table named as one of the world's entity
// tables: the views and the mount join a world's tables by name, so its
// facts would show as entities of that table in SQL (particle_at(t)
// counting them) while the mount's tick files and worldfs_facts left them
// out. A name is remembered as a fact table's once the world describes a
// fact table of that name: from then on a resume refuses an entity table
// of that name (checkEntityNames). A name that is taken stays taken.
func (s *IngestionService) checkFactName(ctx context.Context, f Fact) error {
	if _, ok := s.factNames.Load(f.Table.Name); ok {
		return nil
	}
	infos, err := tableInfos(ctx, s.b, s.world)
	if err != nil {
		return err
	}
	described := false
	for _, ti := range infos {
		if ti.Name != f.Table.Name {
			continue
		}
		if !IsFactColumns(ti.Columns) {
			return invalid(fmt.Errorf("world %s: fact %s/%s: table %s is an entity table of the world; facts need a fact table of their own name", s.world, f.Producer, f.ExternalID, f.Table.Name))
		}
		described = true
	}
	if described {
		s.factNames.Store(f.Table.Name, struct{}{})
	}
	return nil
}

// checkEntityNames refuses entity tables named as one of the world's fact
// tables, for the reason checkFactName refuses the converse.
func checkEntityNames(ctx context.Context, b bucket.Bucket, world string, tables []*Table) error {
	infos, err := tableInfos(ctx, b, world)
	if err != nil {
		return err
	}
	for _, ti := range infos {
		if IsFactColumns(ti.Columns) && slices.ContainsFunc(tables, func(t *Table) bool { return t.Name == ti.Name }) {
			return invalid(fmt.Errorf("world %s: table %s is a fact table of the world; an entity table needs a name of its own", world, ti.Name))
		}
	}
	return nil
}

// tableInfos reads the descriptions of the world's tables.
func tableInfos(ctx context.Context, b bucket.Bucket, world string) ([]frame.TableInfo, error) {
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return nil, err
	}
	infos := make([]frame.TableInfo, 0, len(ids))
	for _, id := range ids {
		ti, err := frame.ReadTableInfo(ctx, b, world, id)
		if err != nil {
			return nil, err
		}
		infos = append(infos, ti)
	}
	return infos, nil
}

// ValidateUserRun checks a run name a caller gives: a valid run name
// (index.ValidateRunName) that does not start with "_", which worldfs
// reserves for its own (evaluation receipts; the _tables and _lineage
// folders of a world's data).
func ValidateUserRun(run string) error {
	if err := index.ValidateRunName(run); err != nil {
		return err
	}
	if run[0] == '_' {
		return fmt.Errorf("run %q: names starting with _ are reserved for worldfs", run)
	}
	return nil
}

func (s *IngestionService) receipt(o settled, t *Table) FactReceipt {
	c := o.claim
	return FactReceipt{World: s.world, Run: c.Key.Run, Producer: c.Key.Producer, ExternalID: c.Key.ExternalID,
		CommitToken: c.CommitToken, FactID: c.FactID, Tick: c.Tick, Table: t.ID, TableName: t.Name,
		Digest: c.Digest, Path: o.path, Deduplicated: o.dedup, Recovered: o.recovered}
}

// Digest returns the digest worldfs computes for the fact's components
// (the one its claim records).
func (f Fact) Digest() (string, error) {
	if f.Table == nil {
		return "", invalid(errors.New("a fact needs a table"))
	}
	_, d, err := factRow(f.Table, f.Values)
	if err != nil {
		return "", invalid(err)
	}
	return d, nil
}

// factRow checks v against t's components and returns the row (FactMeta
// not yet filled) and the fact's digest: worldfs's own, computed from a
// canonical encoding of the typed component values, never the caller's.
func factRow(t *Table, v Values) (Values, string, error) {
	for name := range v {
		if i := t.Column(name); i >= 0 && t.Columns[i].Component == frame.FactComponent {
			return nil, "", fmt.Errorf("column %s is FactMeta, which worldfs fills in", name)
		}
	}
	var conv [16]any
	vals, err := frame.ConvertRow(t, v, conv[:0])
	if err != nil {
		return nil, "", err
	}
	// The row as a frame holds it: a column without a value holds its
	// type's zero.
	row := make(Values, len(vals))
	for i, c := range t.Columns {
		if c.Component == "" {
			continue
		}
		if vals[i] == nil {
			vals[i] = zeroOf(c.Type)
		}
		if vals[i] != nil {
			row[c.Name] = vals[i]
		}
	}
	// The canonical encoding, built in one buffer and hashed once:
	// "worldfs.fact.v1\0<table id>\0", then per component column
	// "<name>\0<type>\0<len>:<value>\0".
	var buf [256]byte
	enc := append(append(append(buf[:0], "worldfs.fact.v1\x00"...), t.ID...), 0)
	for _, c := range t.Columns {
		if c.Component == "" || c.Component == frame.FactComponent {
			continue
		}
		var val string
		switch x := row[c.Name].(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, "", fmt.Errorf("column %s: %v is not a finite number", c.Name, x)
			}
			val = strconv.FormatUint(math.Float64bits(x), 16)
		case float32:
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, "", fmt.Errorf("column %s: %v is not a finite number", c.Name, x)
			}
			val = strconv.FormatUint(uint64(math.Float32bits(x)), 16)
		case string:
			val = x
		default:
			val = fmt.Sprint(x)
		}
		enc = append(append(append(enc, c.Name...), 0), c.Type...)
		enc = append(strconv.AppendInt(append(enc, 0), int64(len(val)), 10), ':')
		enc = append(append(enc, val...), 0)
	}
	sum := sha256.Sum256(enc)
	return row, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// zeroOf is the zero value of a column of type t (nil for no known type).
func zeroOf(t Type) any {
	switch t {
	case Float64:
		return float64(0)
	case Float32:
		return float32(0)
	case Int64:
		return int64(0)
	case Int32:
		return int32(0)
	case Bool:
		return false
	case String:
		return ""
	}
	return nil
}

// settled is a claim's lifecycle finished: the complete claim and its row.
type settled struct {
	claim     *index.Claim
	path      string
	row       Values // the visible row (read back when this call did not append it)
	dedup     bool
	recovered string
}

// settle runs one claim's lifecycle: acquire (or await, or take over) the
// claim on key, append its one row unless it is already there, and
// complete it. row computes the row's values; it runs only while this
// holder owns the claim and no row exists under its token (graders run
// there, after the claim). If row fails, or anything else fails before
// the row's create is sent, nothing was appended under the token and the
// claim is released (claim.release), so that the refusal leaves the key
// free at once instead of pending for a lease.
func (s *IngestionService) settle(ctx context.Context, key index.ClaimKey, digest string, t *Table,
	row func(context.Context, *index.Claim) (Values, error)) (settled, error) {
	var r index.Result
	takenOver := false
	for {
		acquire := s.lease(key, digest, s.opts.Now())
		acquire.CommitToken = newToken()
		var err error
		r, err = s.cat.Commit(ctx, index.Entry{Kind: index.KindClaimAcquire, Claim: acquire})
		var pending *index.ClaimPendingError
		switch {
		case err == nil && r.Existing:
			return s.complete(ctx, r.Claim, t, true)
		case errors.As(err, &pending):
			c, done, err := s.await(ctx, key, digest)
			switch {
			case errors.Is(err, errReleased):
				continue // its holder gave it up: claim it afresh
			case err != nil:
				return settled{}, err
			case done:
				return s.complete(ctx, c, t, true)
			}
			r.Claim, takenOver = c, true
		case err != nil:
			return settled{}, err
		}
		break
	}
	c := r.Claim
	failpoint.Hit(FailpointFactClaimed)
	// Keep the lease while this holder works (a grader may outlast it):
	// a live holder is never taken for dead.
	stop := s.renew(ctx, []*index.Claim{c})
	defer stop()

	p := &pendingRow{claim: c}
	built := false
	build := func(missing []*pendingRow) ([]byte, error) {
		if !built { // the grader runs at most once, and only if no row exists
			v, err := row(ctx, c)
			if err != nil {
				return nil, err
			}
			p.values, built = factValues(v, c), true
		}
		if err := s.describe(ctx, t); err != nil {
			return nil, err
		}
		return s.encode(t, missing)
	}
	// A claim taken over may already hold its row (a holder appended and
	// then died or stalled): then it completes without appending. This
	// holder's own fresh token holds nothing unless its lease ended first,
	// which place handles too.
	if err := s.place(ctx, t, index.BatchOf(c.CommitToken), []*pendingRow{p}, takenOver, build); err != nil {
		var be *buildError
		if errors.As(err, &be) {
			stop()
			return settled{}, s.release(ctx, c, be.err)
		}
		return settled{}, err
	}
	out := settled{path: p.frag.Path, row: p.row}
	switch {
	case p.found && takenOver:
		out.recovered = "orphan"
	case takenOver:
		out.recovered = "append"
	}
	failpoint.Hit(FailpointFactAppended)

	r, err := s.cat.Commit(ctx, s.completion(p))
	if err != nil {
		return settled{}, fmt.Errorf("world %s: completing fact %s: %w", s.world, key, err)
	}
	failpoint.Hit(FailpointFactCompleted)
	out.claim = r.Claim
	return out, nil
}

// completion is the entry completing p's claim over the fragment holding
// its row.
func (s *IngestionService) completion(p *pendingRow) index.Entry {
	c := p.claim
	return index.Entry{Kind: index.KindClaimComplete, Claim: &index.ClaimOp{
		Key: c.Key, Digest: c.Digest, CommitToken: c.CommitToken, NowMs: s.opts.Now().UnixMilli(),
		Fragments: []index.TableFragments{{Table: p.table, Fragments: []index.Fragment{p.frag}}}}}
}

// errReleased: the pending claim awaited was released by its holder.
var errReleased = errors.New("the pending claim was released")

// release gives up c, which this holder holds and appended nothing under,
// after cause ended its work; it returns cause. If the release itself
// fails, the claim stays pending until its lease ends (then a takeover
// finds no rows and appends afresh), and the error says so.
func (s *IngestionService) release(ctx context.Context, c *index.Claim, cause error) error {
	_, err := s.cat.Commit(context.WithoutCancel(ctx), index.Entry{Kind: index.KindClaimRelease, Claim: &index.ClaimOp{
		Key: c.Key, Digest: c.Digest, CommitToken: c.CommitToken, Holder: s.opts.Holder, NowMs: s.opts.Now().UnixMilli()}})
	if err != nil {
		return fmt.Errorf("%w (releasing its claim failed, so it stays pending until its lease ends: %v)", cause, err)
	}
	return cause
}

// factValues is a claim's full row: v with its FactMeta filled in.
func factValues(v Values, c *index.Claim) Values {
	v = cloneValues(v)
	v[ColFactProducer], v[ColFactExternalID] = c.Key.Producer, c.Key.ExternalID
	v[ColFactDigest], v[ColFactCommit] = c.Digest, c.CommitToken
	return v
}

// pendingRow is one claim's row on its way into a fragment.
type pendingRow struct {
	claim  *index.Claim
	values Values // the row to append (FactMeta filled in)
	// Where the row is, once placed: the fragment (its part of the
	// batch), the row as stored, and whether another attempt wrote it.
	table string
	frag  index.Fragment
	row   Values
	found bool
}

// buildError: computing or encoding the rows failed before any create was
// sent, so nothing was appended under the claims' tokens.
type buildError struct{ err error }

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// place makes each row durable exactly once in its batch's chain of
// fragments: index.FragmentPath(world, run, table, batch, n) for n = 0, 1, …
// Every writer (the batch's holder, or a holder taking claims over) walks
// the chain in order, reading each part that exists: a row found there
// under its claim's fact id and token is placed (an orphan, completed
// without appending); the rows still missing at the first absent part are
// created there, together (build encodes them), and if another writer
// created that part first, it is read like the others and the walk goes
// on. A part is written only by a writer that read every earlier part and
// found its rows absent there, so a claim's row is in at most one part:
// however many writers race, exactly one row per claim exists, and its
// completion names that part. probe reads a part before trying to create
// it (a takeover); a fresh batch creates part 0 at once. Parts are never
// rewritten, so one this service read or wrote while probing is not read
// again (parts): recovering a batch reads each of its parts once.
func (s *IngestionService) place(ctx context.Context, t *Table, batch string, rows []*pendingRow, probe bool,
	build func([]*pendingRow) ([]byte, error)) error {
	missing := rows
	run := rows[0].claim.Key.Run
	if probe {
		// Walks of one chain here take turns, so that each finds the
		// parts the one before read or wrote in parts.
		defer s.chains.lock(index.FragmentPath(s.world, run, t.ID, batch, 0))()
	}
	for part := 0; len(missing) > 0; part++ {
		path := index.FragmentPath(s.world, run, t.ID, batch, part)
		p, err := (*storedPart)(nil), bucket.ErrNotExist
		if probe {
			p, err = s.readPart(ctx, path)
		}
		if errors.Is(err, bucket.ErrNotExist) {
			enc, berr := build(missing)
			if berr != nil {
				return &buildError{berr}
			}
			var attrs bucket.Attrs
			attrs, err = bucket.CreateOnce(ctx, s.b, path, enc)
			if err == nil {
				p = &storedPart{path: path, data: enc, attrs: attrs}
				if probe {
					s.parts.put(p)
				}
				frag := p.fragment()
				for _, r := range missing {
					r.placed(t, frag, r.values, false)
				}
				return nil
			}
			if errors.Is(err, bucket.ErrExist) {
				p, err = s.readPart(ctx, path)
			}
		}
		if err != nil {
			return fmt.Errorf("world %s: appending %d facts to %s: %w", s.world, len(missing), path, err)
		}
		probe = true
		if missing, err = s.found(t, p, missing); err != nil {
			return err
		}
	}
	return nil
}

// storedPart is one part of a batch's chain as stored.
type storedPart struct {
	path  string
	data  []byte
	attrs bucket.Attrs
}

func (p *storedPart) fragment() index.Fragment {
	return index.Fragment{Path: p.path, Rows: 1, Bytes: int64(len(p.data)), Digest: Digest(p.data), Generation: p.attrs.Generation}
}

// readPart reads the part at path, from the parts this service already
// read or wrote if it is one of them.
func (s *IngestionService) readPart(ctx context.Context, path string) (*storedPart, error) {
	if p := s.parts.get(path); p != nil {
		return p, nil
	}
	data, attrs, err := s.b.Get(ctx, path)
	if err != nil {
		return nil, err
	}
	p := &storedPart{path: path, data: data, attrs: attrs}
	s.parts.put(p)
	return p, nil
}

// partCache keeps the parts of batch chains a service read or wrote while
// probing, the most recent partCacheSize of them. A part is never
// rewritten, and never collected while a claim whose row it may hold is
// pending, so a kept part is the stored one for as long as a walk needs
// it; an absent part is never kept.
type partCache struct {
	mu    sync.Mutex
	parts map[string]*storedPart
	order []string
}

const partCacheSize = 64

func (c *partCache) get(path string) *storedPart {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[path]
}

func (c *partCache) put(p *storedPart) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts == nil {
		c.parts = map[string]*storedPart{}
	}
	if _, ok := c.parts[p.path]; ok {
		return
	}
	if len(c.order) == partCacheSize {
		delete(c.parts, c.order[0])
		c.order = c.order[1:]
	}
	c.parts[p.path] = p
	c.order = append(c.order, p.path)
}

// chainLocks serialises the walks of one chain within a service.
type chainLocks struct {
	mu    sync.Mutex
	locks map[string]*chainLock
}

type chainLock struct {
	sync.Mutex
	users int
}

// lock locks the chain named by its part 0 and returns the unlock.
func (c *chainLocks) lock(name string) func() {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[string]*chainLock{}
	}
	l := c.locks[name]
	if l == nil {
		l = &chainLock{}
		c.locks[name] = l
	}
	l.users++
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.locks, name)
		}
		c.mu.Unlock()
	}
}

func (p *pendingRow) placed(t *Table, frag index.Fragment, row Values, found bool) {
	p.table, p.frag, p.row, p.found = t.ID, frag, row, found
}

// found places the rows of missing that part p holds, checked against
// their claims, and returns those it does not hold. A row stamped
// otherwise than its claim, or twice, is corruption: no claim is
// completed over it.
func (s *IngestionService) found(t *Table, p *storedPart, missing []*pendingRow) ([]*pendingRow, error) {
	want := make(map[int64]*pendingRow, len(missing))
	for _, r := range missing {
		want[r.claim.FactID] = r
	}
	seen := map[int64]StampedRow{}
	var dup error
	f, err := DecodeFragment(t, p.data, func(r StampedRow) bool {
		w := want[r.Entity]
		if w == nil || r.CommitToken != w.claim.CommitToken {
			return false
		}
		if _, ok := seen[r.Entity]; ok {
			dup = fmt.Errorf("fact %s has two rows", w.claim.Key)
			return false
		}
		seen[r.Entity] = r
		return true
	})
	if err == nil {
		err = dup
	}
	var rest []*pendingRow
	var frag index.Fragment
	if len(seen) > 0 {
		frag = p.fragment()
	}
	for _, m := range missing {
		if err != nil {
			break
		}
		c := m.claim
		r, ok := seen[c.FactID]
		if !ok {
			rest = append(rest, m)
			continue
		}
		row := f.Row(c.FactID)
		if r.Tick != c.Tick || r.WriterEpoch != c.Epoch || row[ColFactDigest] != c.Digest || row[ColFactCommit] != c.CommitToken {
			err = fmt.Errorf("fact %s: its row is stamped tick %d epoch %d %v/%v, not the claim's %d %d %s/%s",
				c.Key, r.Tick, r.WriterEpoch, row[ColFactDigest], row[ColFactCommit], c.Tick, c.Epoch, c.Digest, c.CommitToken)
			break
		}
		m.placed(t, frag, row, true)
	}
	if err != nil {
		return nil, fmt.Errorf("world %s: %s: %v: %w", s.world, p.path, err, index.ErrCorrupt)
	}
	return rest, nil
}

// encode writes rows as one fragment, each row under its own claim's
// (tick, token, epoch).
func (s *IngestionService) encode(t *Table, rows []*pendingRow) ([]byte, error) {
	f := NewFrame(t)
	stamps := make(map[int64]Stamp, len(rows))
	for _, p := range rows {
		c := p.claim
		if err := f.Append(c.FactID, p.values); err != nil {
			return nil, fmt.Errorf("world %s: fact %s: %w", s.world, c.Key, err)
		}
		stamps[c.FactID] = Stamp{Tick: c.Tick, CommitToken: c.CommitToken, WriterEpoch: c.Epoch}
	}
	return EncodeStamped(f, func(i int) Stamp { return stamps[f.Entities[i]] })
}

// verifyIn checks that data, found at path, holds the claim's one row and
// returns it; with compacted set, data is a compacted file holding the
// facts of many claims, of which the claim's row is the one with its fact
// id and token.
func (s *IngestionService) verifyIn(t *Table, c *index.Claim, path string, data []byte, compacted bool) (Values, error) {
	var keep func(StampedRow) bool
	if compacted {
		keep = func(r StampedRow) bool { return r.Entity == c.FactID && r.CommitToken == c.CommitToken }
	}
	f, err := DecodeFragment(t, data, keep)
	if err == nil && (f.Len() != 1 || f.Entities[0] != c.FactID) {
		err = fmt.Errorf("%d rows, want fact %d alone", f.Len(), c.FactID)
	}
	var row Values
	if err == nil {
		row = f.Row(c.FactID)
		if row[ColFactDigest] != c.Digest || row[ColFactCommit] != c.CommitToken {
			err = fmt.Errorf("its row is stamped %v/%v, not the claim's %s/%s", row[ColFactDigest], row[ColFactCommit], c.Digest, c.CommitToken)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("world %s: fact %s: %s: %v: %w", s.world, c.Key, path, err, index.ErrCorrupt)
	}
	return row, nil
}

// await waits for another holder's pending claim on key: it returns the
// claim complete (done), or taken over by this holder once its lease ends,
// or errReleased if its holder released it, or ClaimPendingError after
// MaxWait.
func (s *IngestionService) await(ctx context.Context, key index.ClaimKey, digest string) (*index.Claim, bool, error) {
	deadline := s.opts.Now().Add(max(s.opts.MaxWait, 0))
	for {
		c, err := s.watch(ctx, key, digest, deadline)
		if err == nil {
			return c, true, nil
		}
		if !errors.Is(err, errLeaseEnded) {
			return nil, false, err
		}
		r, err := s.cat.Commit(ctx, index.Entry{Kind: index.KindClaimTakeover, Claim: s.lease(key, digest, s.opts.Now())})
		var pending *index.ClaimPendingError
		switch {
		case err == nil:
			return r.Claim, r.Existing, nil
		case errors.Is(err, index.ErrRefused), errors.As(err, &pending):
			// Released meanwhile (watch sees it), or another holder took
			// it over first: look again.
		default:
			return nil, false, err
		}
	}
}

// errLeaseEnded: the pending claim awaited may be taken over.
var errLeaseEnded = errors.New("the pending claim's lease ended")

// watch waits for another holder's pending claim on key to end, polling
// the catalog: it returns the claim once complete, errLeaseEnded once its
// lease ended, errReleased if its holder released it, ClaimConflictError
// if it holds another digest, or ClaimPendingError at deadline.
func (s *IngestionService) watch(ctx context.Context, key index.ClaimKey, digest string, deadline time.Time) (*index.Claim, error) {
	for attempt := 0; ; attempt++ {
		st, err := s.cat.Exact(ctx)
		if err != nil {
			return nil, err
		}
		c, ok := st.Claim(key)
		switch {
		case !ok || c.State == index.ClaimReleased:
			return nil, errReleased
		case c.Digest != digest:
			return nil, &index.ClaimConflictError{World: s.world, Key: key, Claimed: c.Digest, Attempted: digest}
		case c.State == index.ClaimComplete:
			return c, nil
		}
		now := s.opts.Now()
		if now.UnixMilli() >= c.LeaseUntilMs {
			return nil, errLeaseEnded
		}
		if !now.Before(deadline) {
			return nil, &index.ClaimPendingError{World: s.world, Key: key, Holder: c.Holder, LeaseUntilMs: c.LeaseUntilMs}
		}
		poll := min(5*time.Millisecond<<min(attempt, 5), 100*time.Millisecond)
		leaseLeft := time.Duration(min(c.LeaseUntilMs-now.UnixMilli()+1, int64(time.Hour/time.Millisecond))) * time.Millisecond
		wait := min(leaseLeft, poll, deadline.Sub(now))
		if err := bucket.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// complete finishes a call that found the claim already complete: the
// original receipt, with its row read back.
func (s *IngestionService) complete(ctx context.Context, c *index.Claim, t *Table, dedup bool) (settled, error) {
	if len(c.Tables) != 1 || len(c.Tables[0].Fragments) != 1 || c.Tables[0].Table != t.ID {
		return settled{}, fmt.Errorf("world %s: fact %s: the completed claim names fragments %+v, not one of table %s: %w",
			s.world, c.Key, c.Tables, t.ID, index.ErrCorrupt)
	}
	fr := c.Tables[0].Fragments[0]
	out := settled{claim: c, path: fr.Path, dedup: dedup}
	if t.Name != ReceiptTableName {
		return out, nil // a fact's receipt comes from the claim alone
	}
	data, _, err := s.b.Get(ctx, fr.Path)
	if err != nil {
		return settled{}, fmt.Errorf("world %s: reading receipt %s: %w", s.world, fr.Path, err)
	}
	if Digest(data) != fr.Digest {
		return settled{}, fmt.Errorf("world %s: receipt %s does not match its digest: %w", s.world, fr.Path, index.ErrCorrupt)
	}
	out.row, err = s.verifyIn(t, c, fr.Path, data, fr.Span != nil)
	return out, err
}

// describe records t's description in the bucket once per service.
func (s *IngestionService) describe(ctx context.Context, t *Table) error {
	if _, ok := s.described.Load(t.ID); ok {
		return nil
	}
	if err := registerTables(ctx, s.b, s.world, []*Table{t}); err != nil {
		return err
	}
	s.described.Store(t.ID, struct{}{})
	return nil
}

func cloneValues(v Values) Values {
	out := make(Values, len(v)+4)
	for k, x := range v {
		out[k] = x
	}
	return out
}

// Ingest ingests a fact into the world's history (IngestionService.Ingest):
// it lands at the run's last visible tick, never advances it, and never
// becomes an entity of the simulation. Unlike the rest of World, Ingest and
// Evaluate may be called concurrently with Step and each other: they touch
// only the catalog and the bucket.
func (w *World) Ingest(ctx context.Context, f Fact) (FactReceipt, error) {
	svc, err := w.ingestion()
	if err != nil {
		return FactReceipt{}, err
	}
	if f.Run == "" {
		f.Run = w.opts.Run
	}
	return svc.Ingest(ctx, f)
}

// Evaluate records an evaluation receipt for the world
// (IngestionService.Evaluate).
func (w *World) Evaluate(ctx context.Context, ev Evaluation, grade Grader) (EvaluationReceipt, error) {
	svc, err := w.ingestion()
	if err != nil {
		return EvaluationReceipt{}, err
	}
	return svc.Evaluate(ctx, ev, grade)
}

func (w *World) ingestion() (*IngestionService, error) {
	if w.cat == nil {
		return nil, fmt.Errorf("world %s: an uncoordinated world has no catalog to claim facts in", w.id)
	}
	w.ingestOnce.Do(func() {
		opts := w.opts.Ingest
		if opts.Holder == "" {
			opts.Holder = w.opts.Holder + "-ingest-" + newToken()[:8]
		}
		w.ingest = NewIngestionService(w.b, w.cat, opts)
	})
	return w.ingest, nil
}

// lease is the claim op by which this holder holds key for a lease from
// now (an acquire, a takeover, a renewal).
func (s *IngestionService) lease(key index.ClaimKey, digest string, now time.Time) *index.ClaimOp {
	return &index.ClaimOp{Key: key, Digest: digest, Holder: s.opts.Holder,
		NowMs: now.UnixMilli(), LeaseUntilMs: now.Add(s.opts.Lease).UnixMilli()}
}

// renew extends this holder's leases on claims every third of a lease
// until the returned stop is called.
func (s *IngestionService) renew(ctx context.Context, claims []*index.Claim) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	tick, stopTicker := s.opts.NewTicker(max(s.opts.Lease/3, time.Millisecond))
	go func() {
		defer close(done)
		defer stopTicker()
		held := slices.Clone(claims)
		for len(held) > 0 {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			keep := make([]bool, len(held))
			var wg sync.WaitGroup
			for i, c := range held {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := s.cat.Commit(ctx, index.Entry{Kind: index.KindClaimTakeover, Claim: s.lease(c.Key, c.Digest, s.opts.Now())})
					var pending *index.ClaimPendingError
					// Taken over, or complete: nothing left to keep. Any
					// other failure (storage) is retried at the next tick:
					// a live holder must not lose its lease to a passing
					// error.
					keep[i] = !errors.As(err, &pending) && !(err == nil && r.Existing)
				}()
			}
			wg.Wait()
			var next []*index.Claim
			for i, c := range held {
				if keep[i] {
					next = append(next, c)
				}
			}
			held = next
		}
	}()
	return func() { cancel(); <-done }
}
