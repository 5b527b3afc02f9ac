package index

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Kind names an entry type.
type Kind string

const (
	KindWorldCreate      Kind = "world.create"
	KindFenceAcquire     Kind = "fence.acquire"
	KindTickPublish      Kind = "tick.publish"
	KindWorldStatus      Kind = "world.status"
	KindClaimAcquire     Kind = "claim.acquire"
	KindClaimTakeover    Kind = "claim.takeover"
	KindClaimComplete    Kind = "claim.complete"
	KindClaimRelease     Kind = "claim.release"
	KindFragmentsRewrite Kind = "fragments.rewrite"
	KindCommandEnqueue   Kind = "command.enqueue"
	KindIntentOpen       Kind = "intent.open"
	KindIntentClose      Kind = "intent.close"
	KindTagCreate        Kind = "tag.create"
	KindTagDelete        Kind = "tag.delete"
)

// Entry is one catalog mutation. Exactly the payload field of its Kind is
// set.
type Entry struct {
	// Op is the caller's operation id; a reread that finds it in a slot
	// proves the operation committed.
	Op   string `json:"op"`
	Kind Kind   `json:"kind"`

	WorldCreate  *WorldCreate      `json:"world_create,omitempty"`
	FenceAcquire *FenceAcquire     `json:"fence_acquire,omitempty"`
	TickPublish  *TickPublish      `json:"tick_publish,omitempty"`
	WorldStatus  *WorldStatus      `json:"world_status,omitempty"`
	Claim        *ClaimOp          `json:"claim,omitempty"`
	Rewrite      *FragmentsRewrite `json:"rewrite,omitempty"`
	Command      *Command          `json:"command,omitempty"`
	Intent       *IntentOp         `json:"intent,omitempty"`
	Tag          *TagOp            `json:"tag,omitempty"`
}

// Writer modes (docs/ARCHITECTURE.md, "The catalog").
const (
	ModeResumable   = "resumable"
	ModeCleanupOnly = "cleanup_only"
)

// WorldCreate creates the world; it is the log's first entry. A fork names
// its parent and the point it forked from.
type WorldCreate struct {
	Parent     string `json:"parent,omitempty"`
	ForkRun    string `json:"fork_run,omitempty"`
	ForkTick   int64  `json:"fork_tick,omitempty"`
	WriterMode string `json:"writer_mode"`
	// CreatedUnixMs is the creator's clock, recorded as data.
	CreatedUnixMs int64 `json:"created_unix_ms"`
	// Meta is the world's run parameters (meta.go): immutable key-value
	// metadata, within ValidateMeta's bounds. A fork's holds its parent's
	// with its own keys over them (engine.ForkWorld).
	Meta map[string]string `json:"meta,omitempty"`
}

// FenceAcquire makes its writer the world's one live writer: the epoch
// becomes the current epoch plus one, staling every earlier holder. A
// mutable resume (Resume) is refused on a cleanup_only world.
type FenceAcquire struct {
	Holder string `json:"holder"`
	Resume bool   `json:"resume,omitempty"`
}

// Fragment is one Parquet fragment of a table in a publication: what a
// reader checks the file it opens against (size and generation at every
// open, the digest once per generation).
type Fragment struct {
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"` // "sha256:<hex>" of the file's bytes
	// Generation is the bucket's generation of the object the writer
	// created (bucket.Attrs.Generation); 0 in records written before it
	// was kept, which are checked by size and digest only.
	Generation int64 `json:"generation,omitempty"`
	// Span is set on a compacted file: it holds the visible rows of every
	// published tick of its run from Span.From to Span.To (the ticks that
	// name it), and only those. Nil: the rows of one publication.
	Span *Span `json:"span,omitempty"`
}

// Span is an inclusive range of ticks.
type Span struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Contains reports whether tick is in the span.
func (s Span) Contains(tick int64) bool { return s.From <= tick && tick <= s.To }

// TableFragments lists a table's fragments in a publication.
type TableFragments struct {
	Table     string     `json:"table"`
	Fragments []Fragment `json:"fragments"`
}

// TickPublish is a tick's manifest (step 6 of a tick write): published under
// the writer's epoch, put-if-absent on (run, tick), and it advances the
// run's durable head.
type TickPublish struct {
	Run         string           `json:"run"`
	Tick        int64            `json:"tick"`
	CommitToken string           `json:"commit_token"`
	WriterEpoch int64            `json:"writer_epoch"`
	Tables      []TableFragments `json:"tables"`
	// NextEntity is the writer's next unused entity id after this tick, so
	// a resumed writer never reuses an id.
	NextEntity int64 `json:"next_entity,omitempty"`
	// PublishedUnixMs is when the writer published the tick (its clock,
	// recorded as data; 0 before the field existed).
	PublishedUnixMs int64 `json:"published_unix_ms,omitempty"`
	// Settle names the durable commands this tick materialized; they are
	// settled atomically with the publish.
	Settle []string `json:"settle,omitempty"`
}

// Command is a durable command: enqueued in the catalog, materialized by
// the world's writer at the first tick at or after Due, and settled by that
// tick's publish, so it takes effect exactly once.
type Command struct {
	ID   string `json:"id"`
	Run  string `json:"run"`
	Due  int64  `json:"due"`
	Kind string `json:"kind"`
	// Body is the command's payload (JSON text, opaque to the catalog).
	Body string `json:"body,omitempty"`
}

// World statuses.
const (
	StatusActive   = "active"
	StatusArchived = "archived"
)

// WorldStatus sets the world's status and, optionally, moves its writer
// mode from resumable to cleanup_only (never back).
type WorldStatus struct {
	Status     string `json:"status"`
	WriterMode string `json:"writer_mode,omitempty"`
}

// ClaimKey is a fact's scope within its world (invariant 4).
type ClaimKey struct {
	Run        string `json:"run"`
	Producer   string `json:"producer"`
	ExternalID string `json:"external_id"`
}

func (k ClaimKey) String() string { return k.Run + "/" + k.Producer + "/" + k.ExternalID }

// ClaimOp is the payload of the four claim entries.
//
//   - claim.acquire: put-if-absent on Key; a fresh claim is pending under
//     CommitToken, held by Holder until LeaseUntilMs. Digest is the
//     server-computed payload digest.
//   - claim.takeover: Holder takes over a pending claim whose lease ended
//     (NowMs ≥ its lease), keeping the claim's token; the holder of a live
//     lease renews it the same way.
//   - claim.complete: the pending claim under CommitToken becomes complete;
//     its token joins the visible set, and Fragments (the rows appended
//     under the token) join the file list readers get from the catalog.
//   - claim.release: Holder gives up the pending claim it holds under
//     CommitToken, having appended nothing under it (the command it
//     served was refused after the claim was taken). The claim is gone:
//     the key is free for a fresh acquire (any digest, a new token and a
//     new fact id), and rows anyone appends late under the released token
//     never become visible, since no completion can name it again. A
//     complete claim is never released.
type ClaimOp struct {
	Key          ClaimKey `json:"key"`
	Digest       string   `json:"digest"`
	CommitToken  string   `json:"commit_token,omitempty"`
	Holder       string   `json:"holder,omitempty"`
	LeaseUntilMs int64    `json:"lease_until_ms,omitempty"`
	// Fragments (claim.complete only) hold the claim's rows.
	Fragments []TableFragments `json:"fragments,omitempty"`
	// NowMs is the caller's clock, recorded as data so that Apply stays
	// deterministic.
	NowMs int64 `json:"now_ms"`
}

// FragmentsRewrite replaces published fragments with new files holding the
// same rows (optimize). The rows keep their commit columns, so visibility is
// unchanged (invariant 9). Two forms:
//   - one tick's table: Tick, Table, Old (the paths replaced, as read) and
//     New;
//   - compaction of a range of ticks: Span, ReadSeq and Tables. Every
//     published tick of Run in Span, each unchanged since sequence ReadSeq
//     (the state the compactor read), has its fragments of each table in
//     Tables replaced by that table's compacted files, whose rows are
//     exactly the visible rows those fragments held; a file already
//     compacted is replaced only whole (its span inside Span);
//   - compaction of facts (Facts): every claim of Run in claim shard
//     ClaimShard that is complete and unchanged since ReadSeq, and names a
//     table of Tables, has that table's fragments replaced by its compacted
//     files, whose rows are exactly the facts those fragments held.
type FragmentsRewrite struct {
	Run   string     `json:"run"`
	Tick  int64      `json:"tick,omitempty"`
	Table string     `json:"table,omitempty"`
	Old   []string   `json:"old,omitempty"`
	New   []Fragment `json:"new,omitempty"`

	Span    *Span            `json:"span,omitempty"`
	ReadSeq uint64           `json:"read_seq,omitempty"`
	Tables  []TableFragments `json:"tables,omitempty"`

	Facts      bool  `json:"facts,omitempty"`
	ClaimShard int64 `json:"claim_shard,omitempty"`

	// Intent is the open intent under which the compacted files were
	// written (intent.open): a new entry naming one is refused unless the
	// intent is still open and every compacted file it names carries the
	// intent's id (CompactedPath). Empty in entries written before
	// intents existed.
	Intent string `json:"intent,omitempty"`
}

// IntentOp is the payload of the two intent entries (docs/ARCHITECTURE.md,
// invariant 16). An intent announces, before they are written, objects
// that a later entry will name (a compaction's files) or objects a writer
// is about to reference from outside the catalog (an export's files):
// while it is open, collection deletes no object that carries its id
// (CompactedPath), and nothing the catalog named at or after the
// sequence that opened it (it pins the catalog there).
//
//   - intent.open: ID becomes open, held by Holder until LeaseUntilMs.
//     Opening an open intent again renews its lease, by its holder only;
//     the sequence that first opened it stays its pin.
//   - intent.close: ID is open no more. Its holder closes it at any time;
//     anyone else (a collector) once its lease ended (NowMs ≥
//     LeaseUntilMs). Closing an intent that is not open does nothing.
//     Once closed, no entry can name what was written under it: a
//     compaction citing it is refused, so its files are garbage at once.
type IntentOp struct {
	ID           string `json:"id"`
	Holder       string `json:"holder"`
	What         string `json:"what,omitempty"` // for people: "compaction of run main"
	LeaseUntilMs int64  `json:"lease_until_ms,omitempty"`
	// NowMs is the caller's clock, recorded as data so that Apply stays
	// deterministic.
	NowMs int64 `json:"now_ms"`
}

// IntentIDLen is the length of an intent's id: 16 lowercase hex digits.
const IntentIDLen = 16

// ValidIntentID reports whether id is an intent's id.
func ValidIntentID(id string) bool {
	if len(id) != IntentIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (e *Entry) validate() error {
	if err := e.validatePayload(); err != nil {
		return err
	}
	for _, run := range e.runs() {
		if err := ValidateRunName(run); err != nil {
			return fmt.Errorf("%s: %w", e.Kind, err)
		}
	}
	return nil
}

// runs returns the run names the entry carries.
func (e *Entry) runs() []string {
	switch {
	case e.WorldCreate != nil && e.WorldCreate.ForkRun != "":
		return []string{e.WorldCreate.ForkRun}
	case e.TickPublish != nil:
		return []string{e.TickPublish.Run}
	case e.Claim != nil:
		return []string{e.Claim.Key.Run}
	case e.Command != nil:
		return []string{e.Command.Run}
	case e.Rewrite != nil:
		return []string{e.Rewrite.Run}
	case e.Tag != nil && e.Tag.Run != "":
		return []string{e.Tag.Run}
	}
	return nil
}

func (e *Entry) validatePayload() error {
	set := 0
	for _, p := range []bool{e.WorldCreate != nil, e.FenceAcquire != nil, e.TickPublish != nil, e.WorldStatus != nil, e.Claim != nil, e.Rewrite != nil, e.Command != nil, e.Intent != nil, e.Tag != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("%s entry with %d payloads, want 1", e.Kind, set)
	}
	switch e.Kind {
	case KindWorldCreate:
		if c := e.WorldCreate; c == nil {
			return errors.New("world.create without its payload")
		} else if c.WriterMode != ModeResumable && c.WriterMode != ModeCleanupOnly {
			return fmt.Errorf("world.create: writer mode %q (want %q or %q)", c.WriterMode, ModeResumable, ModeCleanupOnly)
		} else if (c.Parent == "") != (c.ForkRun == "") {
			return errors.New("world.create: a fork names both its parent and fork run")
		} else if err := ValidateMeta(c.Meta); err != nil {
			return fmt.Errorf("world.create: %w", err)
		}
	case KindFenceAcquire:
		if e.FenceAcquire == nil || e.FenceAcquire.Holder == "" {
			return errors.New("fence.acquire without a holder")
		}
	case KindTickPublish:
		p := e.TickPublish
		switch {
		case p == nil:
			return errors.New("tick.publish without its payload")
		case p.Run == "" || p.CommitToken == "":
			return errors.New("tick.publish needs a run and a commit token")
		case p.Tick < 0 || p.WriterEpoch <= 0:
			return fmt.Errorf("tick.publish: tick %d epoch %d (tick ≥ 0, epoch ≥ 1)", p.Tick, p.WriterEpoch)
		}
	case KindWorldStatus:
		if s := e.WorldStatus; s == nil || (s.Status != StatusActive && s.Status != StatusArchived) {
			return errors.New("world.status: status must be active or archived")
		} else if s.WriterMode != "" && s.WriterMode != ModeCleanupOnly {
			return fmt.Errorf("world.status: writer mode can only move to %q", ModeCleanupOnly)
		}
	case KindClaimAcquire, KindClaimTakeover, KindClaimComplete, KindClaimRelease:
		c := e.Claim
		lease := e.Kind == KindClaimAcquire || e.Kind == KindClaimTakeover
		switch {
		case c == nil:
			return fmt.Errorf("%s without its payload", e.Kind)
		case c.Key.Run == "" || c.Key.Producer == "" || c.Key.ExternalID == "":
			return fmt.Errorf("%s: the claim key needs a run, a producer and an external id", e.Kind)
		case c.Digest == "":
			return fmt.Errorf("%s: no digest", e.Kind)
		case lease && (c.Holder == "" || c.LeaseUntilMs <= c.NowMs):
			return fmt.Errorf("%s: needs a holder and a lease ending after now", e.Kind)
		case e.Kind == KindClaimRelease && c.Holder == "":
			return fmt.Errorf("%s: needs the holder that releases it", e.Kind)
		case e.Kind != KindClaimTakeover && c.CommitToken == "":
			return fmt.Errorf("%s: no commit token", e.Kind)
		case (e.Kind == KindClaimComplete) != (len(c.Fragments) > 0):
			return fmt.Errorf("%s: only a completion names fragments, and it must", e.Kind)
		}
	case KindCommandEnqueue:
		c := e.Command
		if c == nil || c.ID == "" || c.Run == "" || c.Kind == "" || c.Due < 0 {
			return errors.New("command.enqueue needs an id, a run, a kind and a due tick ≥ 0")
		}
	case KindIntentOpen, KindIntentClose:
		i := e.Intent
		switch {
		case i == nil:
			return fmt.Errorf("%s without its payload", e.Kind)
		case !ValidIntentID(i.ID):
			return fmt.Errorf("%s: id %q is not %d lowercase hex digits", e.Kind, i.ID, IntentIDLen)
		case i.Holder == "":
			return fmt.Errorf("%s: needs a holder", e.Kind)
		case e.Kind == KindIntentOpen && i.LeaseUntilMs <= i.NowMs:
			return fmt.Errorf("%s: needs a lease ending after now", e.Kind)
		}
	case KindTagCreate, KindTagDelete:
		return validateTag(e.Kind, e.Tag)
	case KindFragmentsRewrite:
		r := e.Rewrite
		switch {
		case r == nil || r.Run == "":
			return errors.New("fragments.rewrite needs a run")
		case r.Intent != "" && !ValidIntentID(r.Intent):
			return fmt.Errorf("fragments.rewrite: intent %q is not %d lowercase hex digits", r.Intent, IntentIDLen)
		case r.Facts:
			if r.Span != nil || len(r.Tables) == 0 || r.Table != "" || len(r.Old) != 0 || len(r.New) != 0 || r.ClaimShard < 0 || r.ClaimShard >= claimBuckets {
				return errors.New("fragments.rewrite of facts needs a claim shard and compacted files per table, and nothing of the other forms")
			}
			for _, tf := range r.Tables {
				if tf.Table == "" || len(tf.Fragments) == 0 {
					return errors.New("fragments.rewrite of facts: each table needs a name and compacted files")
				}
				for _, f := range tf.Fragments {
					if f.Span == nil || f.Span.From > f.Span.To {
						return fmt.Errorf("fragments.rewrite of facts: file %s must carry the span of its facts' ticks", f.Path)
					}
				}
			}
		case r.Span == nil:
			if r.Table == "" || len(r.Old) == 0 || len(r.New) == 0 || len(r.Tables) != 0 {
				return errors.New("fragments.rewrite of one tick needs a table, old paths and new fragments")
			}
		default:
			if r.Span.From > r.Span.To || len(r.Tables) == 0 || r.Table != "" || len(r.Old) != 0 || len(r.New) != 0 {
				return errors.New("fragments.rewrite of a span needs from ≤ to and compacted files per table, and nothing of the one-tick form")
			}
			for _, tf := range r.Tables {
				if tf.Table == "" || len(tf.Fragments) == 0 {
					return errors.New("fragments.rewrite of a span: each table needs a name and compacted files")
				}
				for _, f := range tf.Fragments {
					if f.Span == nil || f.Span.From < r.Span.From || f.Span.To > r.Span.To || f.Span.From > f.Span.To {
						return fmt.Errorf("fragments.rewrite of span %d..%d: file %s must carry a span inside it", r.Span.From, r.Span.To, f.Path)
					}
				}
			}
		}
	default:
		return fmt.Errorf("unknown entry kind %q", e.Kind)
	}
	return nil
}

// clone returns a deep copy of e.
func (e Entry) clone() Entry {
	if e.WorldCreate != nil {
		v := *e.WorldCreate
		v.Meta = maps.Clone(v.Meta)
		e.WorldCreate = &v
	}
	if e.FenceAcquire != nil {
		v := *e.FenceAcquire
		e.FenceAcquire = &v
	}
	if e.TickPublish != nil {
		v := *e.TickPublish
		v.Tables = cloneTables(v.Tables)
		e.TickPublish = &v
	}
	if e.WorldStatus != nil {
		v := *e.WorldStatus
		e.WorldStatus = &v
	}
	if e.Claim != nil {
		v := *e.Claim
		v.Fragments = cloneTables(v.Fragments)
		e.Claim = &v
	}
	if e.Command != nil {
		v := *e.Command
		e.Command = &v
	}
	if e.TickPublish != nil {
		e.TickPublish.Settle = slices.Clone(e.TickPublish.Settle)
	}
	if e.Intent != nil {
		v := *e.Intent
		e.Intent = &v
	}
	if e.Tag != nil {
		v := *e.Tag
		e.Tag = &v
	}
	if e.Rewrite != nil {
		v := *e.Rewrite
		v.Old = slices.Clone(v.Old)
		v.New = slices.Clone(v.New)
		v.Tables = cloneTables(v.Tables)
		e.Rewrite = &v
	}
	return e
}

func cloneTables(ts []TableFragments) []TableFragments {
	out := slices.Clone(ts)
	for i := range out {
		out[i].Fragments = slices.Clone(out[i].Fragments)
	}
	return out
}
