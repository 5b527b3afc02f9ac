package maintenance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// FailpointGCDeleted: collection just deleted one object; it is followed
// by FailpointGCDeleted + "." + the object's kind ("engine.gc.deleted.slot").
const FailpointGCDeleted = "engine.gc.deleted"

// DefaultRetention is how long a replaced file, an old slot, checkpoint or
// shard stays after nothing names it (7 days): a reader that pinned an
// older snapshot keeps working that long.
const DefaultRetention = 7 * 24 * time.Hour

// MinRetention is the shortest retention collection takes without
// CollectOptions.UnsafeRetention: a day, the floor the log's slots already
// have. The catalog's own consistency never depends on the retention
// (invariant 16: intents keep what a commit in flight will name); what a
// shorter one risks is the readers pinned to file paths for longer, a
// `worldfs views` script in a user's DuckDB, a `worldfs sql` or UI
// session left open, a file held open on a mount of a remote bucket,
// which find their files gone.
const MinRetention = 24 * time.Hour

// Floors under the retention for catalog objects, whatever the flag says:
// a catalog whose tip went unconfirmed for index.Options.ReloadAfter (12 h)
// reloads before it commits, so no slot younger than twice that may go; a
// checkpoint being written names its shards only at its end.
const (
	minSlotRetention  = 24 * time.Hour
	minShardRetention = time.Hour
)

// What collection found, by kind of object.
const (
	KindReplaced   = "replaced"   // a fragment a rewrite replaced
	KindCompacted  = "compacted"  // a compacted file no tick names
	KindTickIndex  = "tick-index" // a collected compacted file's tick index
	KindAttempt    = "attempt"    // a dead attempt's fragment (vacuum)
	KindSlot       = "slot"
	KindCheckpoint = "checkpoint"
	KindShard      = "shard"
	KindViewList   = "view-list" // the views' fragment lists and witnesses
	// KindIntent: an intent whose lease ended, closed (nothing deleted:
	// its files become garbage, see invariant 16).
	KindIntent = "intent"
)

// CollectOptions tune Collect.
type CollectOptions struct {
	// Run limits the fragments examined to one run ("": every run). The
	// catalog's slots, checkpoints and shards are the world's.
	Run string
	// Retention (default DefaultRetention; at least MinRetention unless
	// UnsafeRetention).
	Retention time.Duration
	// UnsafeRetention takes a Retention under MinRetention: readers pinned
	// to file paths (a views script, an open session, a file open on a
	// mount of a remote bucket) may find their files gone. The catalog
	// stays whole at any retention.
	UnsafeRetention bool
	// KeepCheckpoints: the newest this many checkpoints stay (default 2).
	KeepCheckpoints int
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// Now is the clock retention is measured with (default time.Now).
	Now func() time.Time
	// ViewsDir, if set, is the views' directory of fragment lists and
	// witnesses (<cache dir>/views); those not used for ViewsAge (default
	// the retention: a printed views script keeps working that long after
	// its last use) go.
	ViewsDir string
	ViewsAge time.Duration
	// MaxDeletes bounds the objects one call deletes (0: no bound); the
	// background maintainer sets it so a pass stays short.
	MaxDeletes int
	// Every: background maintenance (an open World) collects after every
	// Every-th compaction run (default 8, about every 512 ticks; < 0:
	// never), deleting at most MaxDeletes (default there 1,000) a pass.
	Every int
	// Report hears of each object collected (or, Kept, reported and left),
	// with the reason; Progress of each phase's progress.
	Report   func(Collected)
	Progress func(CollectProgress)
}

// EnsureDefaults fills in the defaults of the fields left zero (or
// negative) and returns o.
func (o *CollectOptions) EnsureDefaults() *CollectOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.KeepCheckpoints <= 0 {
		o.KeepCheckpoints = 2
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ViewsAge <= 0 {
		o.ViewsAge = o.Retention
	}
	return o
}

// Validate checks the options once their defaults are in: the run, if
// one is named, is a run's name (index.ValidateRunName), and MaxDeletes
// is no bound (0) or a positive one. Collect calls EnsureDefaults, then
// Validate, and refuses invalid options before it lists the bucket.
func (o *CollectOptions) Validate() error {
	if o.Run != "" {
		if err := index.ValidateRunName(o.Run); err != nil {
			return fmt.Errorf("collect options: Run: %w", err)
		}
	}
	if o.MaxDeletes < 0 {
		return fmt.Errorf("collect options: MaxDeletes %d (want 0 for no bound, or a positive bound)", o.MaxDeletes)
	}
	if o.Retention < MinRetention && !o.UnsafeRetention {
		return &RetentionError{Retention: o.Retention}
	}
	return nil
}

// RetentionError refuses a retention under MinRetention that was not
// marked unsafe.
type RetentionError struct{ Retention time.Duration }

func (e *RetentionError) Error() string {
	return fmt.Sprintf("retention %v is under the floor of %v: files that a reader of an older snapshot still reads "+
		"(a `worldfs views` script in your DuckDB, a `worldfs sql` or UI session left open, a file open on a mount "+
		"of a remote bucket) could be deleted under it; the catalog itself stays whole at any retention. "+
		"Take the risk with --unsafe-retention (CollectOptions.UnsafeRetention in Go)", e.Retention, strings.TrimSuffix(MinRetention.String(), "0m0s"))
}

// Collected is one object collection deleted (or, in a dry run, would).
type Collected struct {
	Name   string
	Kind   string
	Bytes  int64
	Reason string
	// Kept: not deleted, reported because collection could not decide
	// (a fragment without usable statistics).
	Kept bool
	// Closed: not an object but an intent (Kind KindIntent, Name its id)
	// whose lease ended, closed; what was written under it is garbage.
	Closed bool
}

// CollectProgress reports a phase of collection.
type CollectProgress struct {
	Phase    string // "fragments", "log", "checkpoints", "shards", "views"
	Examined int
	Deleted  int
}

// CollectResult sums up a Collect call.
type CollectResult struct {
	Examined int            // data objects examined
	Deleted  int            // objects deleted (dry run: that would be)
	Bytes    int64          // their bytes
	Kept     int            // objects reported and kept (undecidable)
	ByKind   map[string]int // deleted, by kind
	// Truncated: MaxDeletes stopped the pass early.
	Truncated bool
}

// Collect deletes what the catalog proves dead (invariant 9: visibility is
// decided by manifests, so an object no manifest can ever name again holds
// no visible row), each with bucket.DeleteOnce on the generation listed:
//
//   - a fragment of a published tick stored under the tick's own token
//     that the tick no longer names (a rewrite replaced it), once the slot
//     of that rewrite is older than the retention; likewise a fragment
//     under a complete claim's token that the claim no longer names (a
//     rewrite of its facts replaced it), dated by the claim's last change;
//     a compacted file that
//     no tick names, once it and the last change of the ticks it holds are
//     older than the retention (a larger merge replaced it, or its
//     compactor died before its entry);
//   - vacuum, keyed on token absence: a fragment under a token that no
//     tick of its run publishes and no claim holds (in any state), read
//     from its Parquet statistics (tick, writer_epoch, commit_token, one
//     stamp per fragment): dead if its tick is published under another
//     token, or if its tick is above the run's head and its epoch below
//     the world's fence epoch (a fenced-out writer). Anything a live
//     writer may still publish (the current epoch above the head) stays;
//     a file without usable statistics stays and is reported. Never by
//     age or generation alone; an uncoordinated run is never vacuumed;
//   - old slots: the prefix of the log older than the retention (and a
//     day), once a checkpoint stands at its end; checkpoints beyond the
//     newest KeepCheckpoints, older than the retention, except the one the
//     log starts from; shards no remaining checkpoint names;
//   - the views' fragment lists and witnesses unused for ViewsAge.
//
// cat is the world's catalog, read exactly after the bucket is listed, so
// that an object listed was created before the state that judges it.
func Collect(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts CollectOptions) (CollectResult, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return CollectResult{}, err
	}
	c := &collector{b: b, cat: cat, world: cat.World(), opts: opts, now: opts.Now(),
		res: CollectResult{ByKind: map[string]int{}}, slotTimes: map[uint64]time.Time{}, present: map[string]bool{}}
	steps := []func(context.Context) error{c.intents, c.fragments, c.log, c.checkpoints, c.shards, c.views}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			if errors.Is(err, errEnough) {
				c.res.Truncated = true
				break
			}
			return c.res, err
		}
	}
	return c.res, nil
}

var (
	errEnough = errors.New("collection: enough deleted for one pass")
	errGone   = errors.New("collection: the object is gone")
)

type collector struct {
	b     bucket.Bucket
	cat   *index.Catalog
	world string
	opts  CollectOptions
	now   time.Time

	// mu guards what the deleters running side by side share; Report
	// and Progress are called under it, one at a time.
	mu        sync.Mutex
	res       CollectResult
	deleting  int // deletes under way
	enough    bool
	slotTimes map[uint64]time.Time

	// tickIndexes are the tick indexes listed (of either format), by
	// their compacted file's name (set by fragments before its deleters
	// start).
	tickIndexes map[string][]bucket.Attrs
	// pin is the lowest sequence an open intent pins (pinned false: none
	// is open), set by fragments before its deleters start: nothing the
	// catalog named there or later is deleted (invariant 16).
	pin    uint64
	pinned bool
	// present: whether each file a tick names now is in the bucket
	// (replacementLost), by path.
	present map[string]bool
}

// keptByPin reports whether an object the catalog named until sequence
// last (its replacement) is kept by an open intent's pin.
func (c *collector) keptByPin(last uint64) bool { return c.pinned && last > c.pin }

// intents closes the intents whose lease ended by the collector's clock
// (their holder died or stalled): from then on no entry can name what was
// written under them (index.IntentOp), so the fragments step that follows
// judges those files like any other. A dry run closes nothing.
func (c *collector) intents(ctx context.Context) error {
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return err
	}
	var closed []index.Intent
	if c.opts.DryRun {
		for _, in := range s.Intents() {
			if c.now.UnixMilli() >= in.LeaseUntilMs {
				closed = append(closed, in)
			}
		}
	} else if closed, err = c.cat.CloseExpired(ctx, s, "collector/"+c.cat.Store(), c.now); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range closed {
		c.res.ByKind[KindIntent]++
		if c.opts.Report != nil {
			c.opts.Report(Collected{Name: in.ID, Kind: KindIntent, Closed: true,
				Reason: fmt.Sprintf("intent of %s opened at sequence %d, held by %s, whose lease ended %s", in.What, in.Seq, in.Holder, stamp(time.UnixMilli(in.LeaseUntilMs)))})
		}
	}
	return nil
}

// deleters bounds the objects collection decides and deletes at once (a
// delete waits on the bucket, not the CPU).
const deleters = 16

// drop deletes one object (unless a dry run) and reports it. It is safe
// to call from several goroutines.
func (c *collector) drop(ctx context.Context, a bucket.Attrs, kind, reason string) error {
	c.mu.Lock()
	if c.opts.MaxDeletes > 0 && c.res.Deleted+c.deleting >= c.opts.MaxDeletes {
		c.enough = true
		c.mu.Unlock()
		return errEnough
	}
	c.deleting++
	c.mu.Unlock()
	var err error
	if !c.opts.DryRun {
		err = bucket.DeleteOnce(ctx, c.b, a.Name, a.Generation)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleting--
	switch {
	case errors.Is(err, bucket.ErrNotExist) || errors.Is(err, bucket.ErrGenerationMismatch):
		return nil // another collector was first, or the name holds a new object
	case err != nil:
		return fmt.Errorf("world %s: deleting %s: %w", c.world, a.Name, err)
	case !c.opts.DryRun:
		failpoint.Hit(FailpointGCDeleted)
		failpoint.Hit(FailpointGCDeleted + "." + kind)
	}
	c.res.Deleted++
	c.res.Bytes += a.Size
	c.res.ByKind[kind]++
	if c.opts.Report != nil {
		c.opts.Report(Collected{Name: a.Name, Kind: kind, Bytes: a.Size, Reason: reason})
	}
	return nil
}

func (c *collector) keep(a bucket.Attrs, kind, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Kept++
	if c.opts.Report != nil {
		c.opts.Report(Collected{Name: a.Name, Kind: kind, Bytes: a.Size, Reason: reason, Kept: true})
	}
}

func (c *collector) progress(phase string, examined int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts.Progress != nil {
		c.opts.Progress(CollectProgress{Phase: phase, Examined: examined, Deleted: c.res.Deleted})
	}
}

// each runs fn(i) for i in [0, n), deleters at once, and returns the first
// failure, or errEnough once a pass has deleted MaxDeletes; progress hears
// of every 256th item started.
func (c *collector) each(ctx context.Context, phase string, n int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleters)
	for i := range n {
		c.mu.Lock()
		enough := c.enough
		c.mu.Unlock()
		if enough || gctx.Err() != nil {
			break
		}
		if i%256 == 0 {
			c.progress(phase, i)
		}
		g.Go(func() error {
			err := fn(gctx, i)
			if errors.Is(err, errEnough) || errors.Is(err, errGone) {
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.progress(phase, n)
	if c.enough {
		return errEnough
	}
	return nil
}

func (c *collector) old(since time.Time, retention time.Duration) bool {
	return !since.IsZero() && c.now.Sub(since) >= retention
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// fragment is one listed data object of a run (index.ParseFragmentPath).
type fragment struct {
	bucket.Attrs
	run, table, token string
}

func (c *collector) fragments(ctx context.Context) error {
	prefix := index.DataPrefix(c.world)
	if c.opts.Run != "" {
		prefix += c.opts.Run + "/"
	}
	var listed []fragment
	listedNames := map[string]bool{}
	c.tickIndexes = map[string][]bucket.Attrs{}
	n := 0
	for a, err := range c.b.List(ctx, prefix, "") {
		if err != nil {
			return fmt.Errorf("world %s: listing fragments: %w", c.world, err)
		}
		n++
		if n%1024 == 0 {
			c.progress("listing", n)
		}
		if file, ok := index.TickIndexOf(c.world, a.Name); ok {
			c.tickIndexes[file] = append(c.tickIndexes[file], a) // goes with its file
			continue
		}
		n, ok := index.ParseFragmentPath(c.world, a.Name)
		if !ok {
			continue // not a fragment of a run (table descriptions, lineage)
		}
		listed = append(listed, fragment{Attrs: a, run: n.Run, table: n.Table, token: n.Token})
		listedNames[a.Name] = true
	}
	// The state that judges them is read after the listing: every object
	// listed was written before it, so its claim or publication (if any)
	// is in it.
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return err
	}
	named := map[string]bool{}
	s.Fragments(c.opts.Run, func(r index.FragmentRef) bool {
		named[r.Path] = true
		return true
	})
	// What an open intent writes or pins stays, whatever its age: a
	// compaction's files until its entry names them (or the intent
	// closes), and everything the catalog named at the pin.
	c.pin, c.pinned = s.PinSeq()
	open := func(name string) bool {
		id := index.CompactedIntentOf(name)
		if id == "" {
			return false
		}
		_, ok := s.Intent(id)
		return ok
	}
	refs, err := exportReferences(ctx, c.b, c.world)
	if err != nil {
		return fmt.Errorf("world %s: what exports reference: %w", c.world, err)
	}
	for name := range refs {
		named[name] = true
	}
	claims := map[string]map[string][]*index.Claim{} // run → claims (any state) by token
	allows := map[string]*index.Allowlist{}
	var todo []fragment
	for _, f := range listed {
		if named[f.Name] || open(f.Name) {
			continue
		}
		allow, ok := allows[f.run]
		if !ok {
			allow = s.Allowlist(f.run)
			allows[f.run] = allow
			held := map[string][]*index.Claim{}
			s.Claims(f.run, func(cl *index.Claim) bool {
				held[cl.CommitToken] = append(held[cl.CommitToken], cl)
				if b := index.BatchOf(cl.CommitToken); b != cl.CommitToken {
					held[b] = append(held[b], cl) // its batch's fragments
				}
				return true
			})
			claims[f.run] = held
		}
		if allow.Mode == index.Unfiltered {
			continue // no manifests: every row is visible
		}
		todo = append(todo, f)
	}
	// A tick index whose file was not listed: its file's collection
	// stopped between the two, or its file was created after the listing
	// passed its name.
	var orphans []string
	for file := range c.tickIndexes {
		if !listedNames[file] && !named[file] && !open(file) {
			orphans = append(orphans, file)
		}
	}
	slices.Sort(orphans)
	c.mu.Lock()
	c.res.Examined += len(listed) + len(c.tickIndexes)
	c.mu.Unlock()
	err = c.each(ctx, "fragments", len(todo), func(ctx context.Context, i int) error {
		return c.fragment(ctx, s, todo[i], claims[todo[i].run])
	})
	if err != nil {
		return err
	}
	return c.each(ctx, "tick indexes", len(orphans), func(ctx context.Context, i int) error {
		return c.orphanTickIndex(ctx, orphans[i])
	})
}

// orphanTickIndex deletes the tick index of file, a compacted file that
// was not listed, if it is older than the retention and file does not
// exist.
func (c *collector) orphanTickIndex(ctx context.Context, file string) error {
	for _, ix := range c.tickIndexes[file] {
		if !c.old(ix.Created, c.opts.Retention) {
			continue
		}
		if _, err := c.b.Stat(ctx, file); !errors.Is(err, bucket.ErrNotExist) {
			if err != nil {
				return fmt.Errorf("world %s: %s: %w", c.world, file, err)
			}
			return nil // created after the listing: decided with it
		}
		if err := c.drop(ctx, ix, KindTickIndex, fmt.Sprintf("tick index of %s, which is gone, created %s", file, stamp(ix.Created))); err != nil {
			return err
		}
	}
	return nil
}

// fragment decides one fragment no publication names.
func (c *collector) fragment(ctx context.Context, s *index.State, f fragment, held map[string][]*index.Claim) error {
	if index.IsCompactedToken(f.token) {
		st, err := c.stats(ctx, f.Attrs)
		if err != nil {
			return err
		}
		if !st.ok {
			c.keep(f.Attrs, KindCompacted, "no usable tick statistics; kept")
			return nil
		}
		since := f.Created
		var last uint64
		s.Ticks(f.run, st.tickMin, func(t *index.Tick) bool {
			if t.Tick > st.tickMax {
				return false
			}
			last = max(last, t.Seq)
			return true
		})
		// A compacted file of facts is named by claims, not ticks: it may
		// have been replaced by any later compaction of the run's facts.
		s.Claims(f.run, func(cl *index.Claim) bool {
			if cl.State == index.ClaimComplete && len(cl.Tables) > 0 && cl.Tables[0].Table == f.table {
				last = max(last, cl.Seq)
			}
			return true
		})
		if c.keptByPin(last) {
			return nil
		}
		if last > 0 {
			at, err := c.slotTime(ctx, last)
			if err != nil {
				return err
			}
			if at.After(since) {
				since = at
			}
		}
		if !c.old(since, c.opts.Retention) {
			return nil
		}
		if lost, err := c.replacementLost(ctx, s, f.run, f.table, st.tickMin, st.tickMax); err != nil || lost != "" {
			if lost != "" {
				c.keep(f.Attrs, KindCompacted, fmt.Sprintf("compacted file of ticks %d..%d that no tick names, kept: %s, which holds their rows now, is missing or damaged (worldfs check --read-data)", st.tickMin, st.tickMax, lost))
			}
			return err
		}
		reason := fmt.Sprintf("compacted file of ticks %d..%d that no tick names since %s", st.tickMin, st.tickMax, stamp(since))
		// Its tick index first: an index never outlives its file's
		// collection by a crash between the two.
		for _, ix := range c.tickIndexes[f.Name] {
			if err := c.drop(ctx, ix, KindTickIndex, "tick index of the "+reason); err != nil {
				return err
			}
		}
		return c.drop(ctx, f.Attrs, KindCompacted, reason)
	}
	if t, ok := s.TickByToken(f.run, f.token); ok {
		// Its tick is published under its token and names other files: a
		// rewrite (compaction) replaced it at the tick's sequence.
		if c.keptByPin(t.Seq) {
			return nil
		}
		since, err := c.slotTime(ctx, t.Seq)
		if err != nil {
			return err
		}
		if !c.old(since, c.opts.Retention) {
			return nil
		}
		if lost, err := c.replacementLost(ctx, s, f.run, f.table, t.Tick, t.Tick); err != nil || lost != "" {
			if lost != "" {
				c.keep(f.Attrs, KindReplaced, fmt.Sprintf("tick %d's fragment, replaced, kept: %s, which holds its rows now, is missing or damaged (worldfs check --read-data)", t.Tick, lost))
			}
			return err
		}
		return c.drop(ctx, f.Attrs, KindReplaced, fmt.Sprintf("tick %d's fragment, replaced by a rewrite at sequence %d (%s)", t.Tick, t.Seq, stamp(since)))
	}
	if cls, ok := held[f.token]; ok {
		// The fragment of a fact, or of a batch of facts. A complete
		// claim's rows are visible only through the files it names, which
		// change only by a rewrite of its facts: once every claim whose
		// rows it may hold is complete and names it no more, it was
		// replaced, at their last change or before.
		var last uint64
		for _, cl := range cls {
			if cl.State != index.ClaimComplete {
				return nil // a pending or released claim's: never vacuumed
			}
			last = max(last, cl.Seq)
		}
		if c.keptByPin(last) {
			return nil
		}
		since, err := c.slotTime(ctx, last)
		if err != nil {
			return err
		}
		if !c.old(since, c.opts.Retention) {
			return nil
		}
		what := fmt.Sprintf("fact %s's fragment", cls[0].Key)
		if len(cls) > 1 || cls[0].CommitToken != f.token {
			what = fmt.Sprintf("fragment of a batch of %d facts", len(cls))
		}
		return c.drop(ctx, f.Attrs, KindReplaced, fmt.Sprintf("%s, replaced by a rewrite of its facts at sequence %d or before (%s)", what, last, stamp(since)))
	}
	st, err := c.stats(ctx, f.Attrs)
	if err != nil {
		return err
	}
	if !st.ok || !st.oneStamp || st.token != f.token {
		c.keep(f.Attrs, KindAttempt, "token absent from the catalog, but the file has no usable statistics of one (tick, token, epoch); kept")
		return nil
	}
	if st.epoch == 0 {
		return nil // epoch-0 rows are always visible
	}
	run, _ := s.Run(f.run)
	if pub, ok := s.Tick(f.run, st.tickMin); ok && pub.CommitToken != f.token {
		return c.drop(ctx, f.Attrs, KindAttempt, fmt.Sprintf("dead attempt: tick %d is published under another token", st.tickMin))
	}
	if st.tickMin > run.Head && st.epoch < s.World.Epoch {
		return c.drop(ctx, f.Attrs, KindAttempt, fmt.Sprintf("dead attempt: tick %d above the head %d, by epoch %d, fenced out by epoch %d", st.tickMin, run.Head, st.epoch, s.World.Epoch))
	}
	return nil // a live writer may still publish it
}

// replacementLost returns a file that table's ticks from..to of run name
// now and that is not in the bucket with the size the catalog records
// ("": every one is): a replaced file is the one thing left that could
// restore their rows (worldfs check names it), so it stays. Each file is
// looked at once a collection.
func (c *collector) replacementLost(ctx context.Context, s *index.State, run, table string, from, to int64) (string, error) {
	var paths []index.Fragment
	var err error
	s.Ticks(run, from, func(t *index.Tick) bool {
		if t.Tick > to {
			return false
		}
		var tables []index.TableFragments
		if tables, err = t.Tables(); err != nil {
			return false
		}
		for _, tf := range tables {
			if tf.Table == table {
				paths = append(paths, tf.Fragments...)
			}
		}
		return true
	})
	if err != nil {
		return "", err
	}
	for _, f := range paths {
		c.mu.Lock()
		present, seen := c.present[f.Path]
		c.mu.Unlock()
		if !seen {
			a, err := c.b.Stat(ctx, f.Path)
			switch {
			case errors.Is(err, bucket.ErrNotExist):
			case err != nil:
				return "", fmt.Errorf("world %s: %w", c.world, err)
			default:
				present = a.Size == f.Bytes
			}
			c.mu.Lock()
			c.present[f.Path] = present
			c.mu.Unlock()
		}
		if !present {
			return f.Path, nil
		}
	}
	return "", nil
}

// slotTime returns when the slot holding seq was created; a collected
// slot counts as old as the oldest slot kept (later than the truth).
func (c *collector) slotTime(ctx context.Context, seq uint64) (time.Time, error) {
	c.mu.Lock()
	t, ok := c.slotTimes[seq]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	a, _, ok, err := index.SlotHolding(ctx, c.b, c.world, seq)
	if err != nil {
		return time.Time{}, err
	}
	t = a.Created
	if !ok {
		t = c.now // nothing to date it by: as if just now
	}
	c.mu.Lock()
	c.slotTimes[seq] = t
	c.mu.Unlock()
	return t, nil
}

// fileStats are a fragment's Parquet footer statistics of its commit
// columns.
type fileStats struct {
	ok               bool // tick bounds known
	tickMin, tickMax int64
	oneStamp         bool // one tick, one token, one epoch
	token            string
	epoch            int64
}

// stats reads a fragment's footer (two ranged reads, not the file).
func (c *collector) stats(ctx context.Context, a bucket.Attrs) (fileStats, error) {
	f, err := parquet.OpenFile(&rangeReader{ctx: ctx, b: c.b, name: a.Name}, a.Size,
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		if errors.Is(err, bucket.ErrNotExist) {
			return fileStats{}, errGone
		}
		if ctx.Err() != nil || isBucketErr(err) {
			return fileStats{}, fmt.Errorf("world %s: reading the footer of %s: %w", c.world, a.Name, err)
		}
		return fileStats{}, nil // not Parquet we can read: no usable statistics
	}
	col := map[string]int{}
	for i, path := range f.Schema().Columns() {
		col[path[len(path)-1]] = i
	}
	ti, ok1 := col[frame.ColTick]
	ki, ok2 := col[frame.ColCommitToken]
	ei, ok3 := col[frame.ColWriterEpoch]
	if !ok1 {
		return fileStats{}, nil
	}
	var st fileStats
	st.oneStamp = ok2 && ok3
	first := true
	for _, rg := range f.Metadata().RowGroups {
		if rg.NumRows == 0 {
			continue
		}
		tmin, tmax, ok := int64Stats(rg.Columns[ti].MetaData.Statistics)
		if !ok {
			return fileStats{}, nil
		}
		if first {
			st.tickMin, st.tickMax = tmin, tmax
		}
		st.tickMin, st.tickMax = min(st.tickMin, tmin), max(st.tickMax, tmax)
		if st.oneStamp {
			emin, emax, eok := int64Stats(rg.Columns[ei].MetaData.Statistics)
			ks := rg.Columns[ki].MetaData.Statistics
			kmin, kmax := string(statMin(ks)), string(statMax(ks))
			switch {
			case !eok || emin != emax || kmin != kmax || statMin(ks) == nil || tmin != tmax:
				st.oneStamp = false
			case first:
				st.epoch, st.token = emin, kmin
			case emin != st.epoch || kmin != st.token || tmin != st.tickMin:
				st.oneStamp = false
			}
		}
		first = false
	}
	if first {
		return fileStats{}, nil // no rows: nothing says what it held
	}
	st.ok = true
	st.oneStamp = st.oneStamp && st.tickMin == st.tickMax
	return st, nil
}

func isBucketErr(err error) bool {
	var na *bucket.NotAnsweringError
	return errors.As(err, &na) || errors.Is(err, bucket.ErrUnavailable)
}

// statMin and statMax return a column chunk's bounds (plain-encoded).
func statMin(s format.Statistics) []byte {
	if s.MinValue != nil {
		return s.MinValue
	}
	return s.Min
}

func statMax(s format.Statistics) []byte {
	if s.MaxValue != nil {
		return s.MaxValue
	}
	return s.Max
}

func int64Stats(s format.Statistics) (lo, hi int64, ok bool) {
	mn, mx := statMin(s), statMax(s)
	if len(mn) != 8 || len(mx) != 8 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(mn)), int64(binary.LittleEndian.Uint64(mx)), true
}

// accessTime is when a file was last read, as far as the file system says.
func accessTime(info os.FileInfo) time.Time {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	return time.Time{}
}

// rangeReader reads an object by ranges, for a footer.
type rangeReader struct {
	ctx  context.Context
	b    bucket.Bucket
	name string
}

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	data, err := r.b.GetRange(r.ctx, r.name, off, int64(len(p)))
	n := copy(p, data)
	if err == nil && n < len(p) {
		err = fmt.Errorf("%s: short read at %d", r.name, off)
	}
	return n, err
}

// log collects the slots a checkpoint stands in for.
func (c *collector) log(ctx context.Context) error {
	retention := max(c.opts.Retention, minSlotRetention)
	plan, err := index.PlanRebase(ctx, c.b, c.world, c.now.Add(-retention))
	if err != nil {
		return err
	}
	c.progress("log", len(plan.Slots))
	if len(plan.Slots) == 0 {
		return nil
	}
	if !c.opts.DryRun {
		if err := index.Rebase(ctx, c.b, c.world, plan); err != nil {
			return fmt.Errorf("world %s: checkpoint for collecting the log: %w", c.world, err)
		}
		// The log is the truth until a whole checkpoint stands at its
		// new start: one that names a missing shard keeps every slot.
		if err := index.CheckpointWhole(ctx, c.b, c.world, index.CheckpointName(c.world, plan.Base)); err != nil {
			return fmt.Errorf("world %s: the checkpoint the log would start from; no slot deleted: %w", c.world, err)
		}
	}
	for _, s := range plan.Slots {
		reason := fmt.Sprintf("slot of sequences %d..%d, created %s, behind the checkpoint at %d", s.First, s.Last, stamp(s.Created), plan.Base)
		if err := c.drop(ctx, s.Attrs, KindSlot, reason); err != nil {
			return err
		}
	}
	return nil
}

func (c *collector) checkpoints(ctx context.Context) error {
	_, dead, err := index.KeptCheckpoints(ctx, c.b, c.world, c.opts.KeepCheckpoints, c.opts.Retention, c.now)
	if err != nil {
		return fmt.Errorf("world %s: listing checkpoints: %w", c.world, err)
	}
	return c.each(ctx, "checkpoints", len(dead), func(ctx context.Context, i int) error {
		a := dead[i]
		reason := fmt.Sprintf("checkpoint created %s, older than the retention and not among the newest %d", stamp(a.Created), c.opts.KeepCheckpoints)
		return c.drop(ctx, a, KindCheckpoint, reason)
	})
}

func (c *collector) shards(ctx context.Context) error {
	// Shards first, then the checkpoints that name them: a checkpoint
	// written meanwhile names shards listed young, or shards of the newest
	// checkpoint, which stays.
	shards, err := bucket.Collect(c.b.List(ctx, index.ShardPrefix(c.world), ""))
	if err != nil {
		return fmt.Errorf("world %s: listing checkpoint shards: %w", c.world, err)
	}
	named := map[string]bool{}
	for a, err := range c.b.List(ctx, index.CheckpointPrefix(c.world), "") {
		if err != nil {
			return fmt.Errorf("world %s: listing checkpoints: %w", c.world, err)
		}
		kept, err := index.CheckpointObjects(ctx, c.b, c.world, a.Name)
		if errors.Is(err, bucket.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, n := range kept {
			named[n] = true
		}
	}
	retention := max(c.opts.Retention, minShardRetention)
	var dead []bucket.Attrs
	for _, a := range shards {
		// A shard's summary and token filter live as long as their
		// shard is named, a checkpoint's summaries as long as it.
		shard := a.Name
		if s, ok := index.ShardOfSidecar(a.Name); ok {
			shard = s
		}
		if !named[shard] && c.old(a.Created, retention) {
			dead = append(dead, a)
		}
	}
	return c.each(ctx, "shards", len(dead), func(ctx context.Context, i int) error {
		return c.drop(ctx, dead[i], KindShard, fmt.Sprintf("checkpoint shard created %s that no checkpoint names", stamp(dead[i].Created)))
	})
}

// views removes the views' fragment lists and witnesses not written or
// read for ViewsAge (a list a script still reads is recreated by the next
// `worldfs sql`, and its atime keeps it).
func (c *collector) views(ctx context.Context) error {
	if c.opts.ViewsDir == "" {
		return nil
	}
	entries, err := os.ReadDir(c.opts.ViewsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("views directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && index.IsViewsFileName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	c.progress("views", len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(c.opts.ViewsDir, n)
		info, err := os.Stat(path)
		if err != nil {
			continue
		}
		used := info.ModTime()
		if at := accessTime(info); at.After(used) {
			used = at
		}
		if !c.old(used, c.opts.ViewsAge) {
			continue
		}
		if c.opts.MaxDeletes > 0 && c.res.Deleted >= c.opts.MaxDeletes {
			return errEnough
		}
		if !c.opts.DryRun {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("views directory: %w", err)
			}
		}
		c.res.Deleted++
		c.res.Bytes += info.Size()
		c.res.ByKind[KindViewList]++
		if c.opts.Report != nil {
			c.opts.Report(Collected{Name: path, Kind: KindViewList, Bytes: info.Size(), Reason: "views' file unused since " + stamp(used)})
		}
	}
	return nil
}
