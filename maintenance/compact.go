package maintenance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints of compaction, in order.
const (
	// FailpointCompactWritten: a compacted file is durable; the catalog
	// does not name it yet.
	FailpointCompactWritten = "engine.compact.written"
	// FailpointCompactPublishing: every file of a window (or claim shard)
	// and its tick index are durable; the entry naming them is about to be
	// committed.
	FailpointCompactPublishing = "engine.compact.publishing"
	// FailpointCompactCommitted: the catalog names the compacted files.
	FailpointCompactCommitted = "engine.compact.committed"
)

// DefaultWindows are the compaction windows, largest first: a compacted
// file covers ticks of one aligned window. A run's history below the
// recent ticks is cut into the largest windows that fit, then smaller ones
// (LSM-like levels: 64 ticks, then 512, then 4,096), so a table of N ticks
// has about N/4,096 files plus a bounded tail, and each row is rewritten
// once per level.
var DefaultWindows = []int64{4096, 512, 64}

// NoRecent as CompactOptions.Recent keeps no recent ticks as written:
// every whole window up to the head is compacted.
const NoRecent = -1

// CompactOptions tune Compact.
type CompactOptions struct {
	// Run to compact (default index.DefaultRun).
	Run string
	// Recent is how many of the newest ticks stay as written (default
	// 256; NoRecent: none, compact up to the head): they are what live
	// readers read most.
	Recent int64
	// TargetRows bounds the rows of one compacted file (default 1<<20,
	// what DuckDB scans well in one file); a window holding more is cut
	// into several files at tick boundaries.
	TargetRows int64
	// MinFacts is how many facts of one claim shard (a fixed 1/256 of a
	// run's claims) wait in fragments of their own before they are
	// compacted together (default 16).
	MinFacts int
	// MaxFactFragments bounds the fragments of their own a table's facts
	// wait in across all claim shards (default 256): a run that finds that
	// many compacts every shard holding one.
	MaxFactFragments int
	// Tables, if set, limits compaction to these tables (by name or id).
	Tables []string
	// Workers bounds the files rewritten at once (default GOMAXPROCS).
	Workers int
	// Progress, if set, hears of each window as it is done.
	Progress func(CompactProgress)
	// Windows are the compaction windows, largest first, each a multiple
	// of the next (default DefaultWindows). Compactors of one run with
	// other windows nest as long as every window divides the larger ones.
	Windows []int64
	// IntentLease is the lease of the intent the files are written under
	// (index.DefaultIntentLease if 0); the compactor renews it while it
	// works. A collector closes it once the lease ended without a
	// renewal, and the compactor's entries are then refused.
	IntentLease time.Duration
}

// EnsureDefaults fills in the defaults of the fields left zero (or
// negative) and returns o.
func (o *CompactOptions) EnsureDefaults() *CompactOptions {
	if o.Run == "" {
		o.Run = index.DefaultRun
	}
	switch {
	case o.Recent == NoRecent:
	case o.Recent <= 0:
		o.Recent = 256
	}
	if o.TargetRows <= 0 {
		o.TargetRows = 1 << 20
	}
	if o.MinFacts <= 0 {
		o.MinFacts = 16
	}
	if o.MaxFactFragments <= 0 {
		o.MaxFactFragments = 256
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if len(o.Windows) == 0 {
		o.Windows = DefaultWindows
	}
	return o
}

// SmallestWindow is the ticks of the smallest compaction window: a run
// has nothing to compact before it holds that many past the recent ones.
func (o *CompactOptions) SmallestWindow() int64 {
	if len(o.Windows) == 0 {
		return DefaultWindows[len(DefaultWindows)-1]
	}
	return o.Windows[len(o.Windows)-1]
}

// Validate checks the options once their defaults are in: the run is a
// run's name (index.ValidateRunName) and no table named is empty. Compact
// calls EnsureDefaults, then Validate, and refuses invalid options before
// it reads the catalog.
func (o *CompactOptions) Validate() error {
	if err := index.ValidateRunName(o.Run); err != nil {
		return fmt.Errorf("compact options: Run: %w", err)
	}
	for i, t := range o.Tables {
		if t == "" {
			return fmt.Errorf("compact options: Tables[%d] is empty (want a table's name or id)", i)
		}
	}
	for i, w := range o.Windows {
		if w < 1 || i > 0 && o.Windows[i-1]%w != 0 || i > 0 && w >= o.Windows[i-1] {
			return fmt.Errorf("compact options: Windows %v: want windows of at least a tick, largest first, each a multiple of the next", o.Windows)
		}
	}
	return nil
}

// CompactProgress reports one window.
type CompactProgress struct {
	Span      index.Span
	Done      int // windows done so far
	Total     int // windows planned
	Compacted bool
}

// CompactResult sums up a Compact call.
type CompactResult struct {
	Windows  int   // windows rewritten
	Facts    int   // claim shards whose facts were compacted
	Refused  int   // windows another compactor or a publish changed first
	Files    int   // compacted files written
	FilesIn  int   // files they replace
	Rows     int64 // rows rewritten
	BytesIn  int64
	BytesOut int64
	// IndexBytes: the tick indexes written beside the compacted files.
	IndexBytes int64
	// TicksEncoded: ticks whose file the tick indexes measured by
	// encoding it; TicksReused: ticks whose entry they took from the index
	// of the compacted file the rows came from (a tick is encoded once,
	// at its first compaction, not again at each level).
	TicksEncoded int64
	TicksReused  int64

	progress int // windows done (for CompactProgress)
}

// Compact rewrites the small fragments of a world's run into compacted
// files, window by window: each holds exactly the visible rows of its
// ticks, every column kept as it was (commit columns included), ordered by
// tick then entity, and one fragments.rewrite entry per window makes
// readers switch at once (invariant 9). It is safe to run beside a live
// writer and beside other compactors: a window whose ticks changed since
// they were read is refused by the catalog, and its file is left for
// collection. A crash at any moment leaves the history as it was or as
// compacted, never anything between.
func Compact(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts CompactOptions) (CompactResult, error) {
	var res CompactResult
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return res, err
	}
	s, err := cat.Exact(ctx)
	if err != nil {
		return res, err
	}
	var windows []index.Span
	if run, ok := s.Run(opts.Run); ok { // a run of facts alone has no ticks
		bound, start := run.Head-max(opts.Recent, 0), int64(0)
		for _, w := range opts.Windows {
			for ; start+w-1 <= bound; start += w {
				windows = append(windows, index.Span{From: start, To: start + w - 1})
			}
		}
	}
	c := &compactor{b: b, cat: cat, world: s.World.ID, opts: opts, tables: map[string]*frame.Table{},
		work: semaphore.NewWeighted(int64(opts.Workers))}
	defer c.close(ctx)
	// The windows are disjoint: they are compacted side by side, each
	// committed on its own.
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Workers)
	for _, span := range windows {
		g.Go(func() error {
			var r CompactResult
			done, err := c.window(gctx, span, &r)
			mu.Lock()
			defer mu.Unlock()
			res.Add(r)
			if err != nil {
				return err
			}
			res.progress++
			if opts.Progress != nil {
				opts.Progress(CompactProgress{Span: span, Done: res.progress, Total: len(windows), Compacted: done})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	return res, c.facts(ctx, &res)
}

// facts compacts the completed facts of the run, claim shard by claim
// shard, several shards at once: a shard is rewritten into compacted files
// of its facts, named by one fragments.rewrite entry, when its facts wait
// in MinFacts fragments of their own, when one of its tables has
// MaxFactFragments such fragments across all shards (then every shard
// holding one is rewritten, so no table keeps more waiting than that after
// a run), or when it holds more compacted files than its rows need. Which
// rows go in is decided by the claims alone: each compacted claim's row
// (its fact id, tick and token), whatever else its fragments hold.
func (c *compactor) facts(ctx context.Context, res *CompactResult) error {
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return err
	}
	due, plan := c.planFacts(ctx, s)
	if len(due) == 0 {
		return nil
	}
	in, err := c.held(ctx)
	if err != nil {
		return err
	}
	if s.Seq < in.Seq {
		if s, err = c.pinned(ctx, s, in); err != nil {
			return err
		}
		due, plan = c.planFacts(ctx, s)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Workers)
	for _, k := range due {
		sh := plan.shards[k]
		g.Go(func() error {
			var r CompactResult
			defer func() {
				mu.Lock()
				res.Add(r)
				mu.Unlock()
			}()
			// The facts' rows sort by tick then fact id, like ticks'.
			tables, err := c.rewriteAll(gctx, sh.order, sh.sources, plan.admitOf(k), false, &r)
			if err != nil {
				return err
			}
			rw := &index.FragmentsRewrite{Run: c.opts.Run, Facts: true, ClaimShard: k, ReadSeq: s.Seq, Tables: tables, Intent: in.ID()}
			done, err := c.commit(gctx, rw, fmt.Sprintf("the facts of claim shard %d", k), &r)
			if done {
				r.Facts++
			}
			return err
		})
	}
	return g.Wait()
}

// factShard is one claim shard's facts as a compaction reads them.
type factShard struct {
	sources map[string][]source // by table id
	order   []string
	own     int             // fragments of their own (not compacted)
	owned   map[string]bool // the tables they hold
	files   map[string]bool
	rows    int64
}

// factRow is a compacted fact's row: a fact's row is kept by the rewrite
// of its claim's shard alone (a batch's fragment holds the facts of
// several shards).
type factRow struct{ tick, id, shard int64 }

// factPlan is what a compaction of facts reads, by claim shard.
type factPlan struct {
	shards map[int64]*factShard
	facts  map[string]factRow // the rows to keep, by claim token
}

func (p factPlan) admitOf(k int64) admitFunc {
	return func(tick int64, token string, _, entity int64) bool {
		r, ok := p.facts[token]
		return ok && r == factRow{tick, entity, k}
	}
}

// planFacts returns the claim shards of s due for compaction, and what
// they read.
func (c *compactor) planFacts(ctx context.Context, s *index.State) ([]int64, factPlan) {
	shards := map[int64]*factShard{}
	facts := map[string]factRow{} // the rows to keep, by claim token
	waiting := map[string]int{}   // fragments of their own, by table
	var keys []int64
	s.Claims(c.opts.Run, func(cl *index.Claim) bool {
		if cl.State != index.ClaimComplete || len(cl.Tables) != 1 || !c.wanted(ctx, cl.Tables[0].Table) {
			return true
		}
		k := index.ClaimShardOf(cl.Key)
		sh := shards[k]
		if sh == nil {
			sh = &factShard{sources: map[string][]source{}, files: map[string]bool{}, owned: map[string]bool{}}
			shards[k] = sh
			keys = append(keys, k)
		}
		facts[cl.CommitToken] = factRow{cl.Tick, cl.FactID, k}
		id := cl.Tables[0].Table
		if _, ok := sh.sources[id]; !ok {
			sh.order = append(sh.order, id)
		}
		for _, f := range cl.Tables[0].Fragments {
			if sh.files[f.Path] {
				if f.Span == nil {
					sh.rows += f.Rows // a batch's fragment: each claim records its own rows
				}
				continue
			}
			sh.files[f.Path] = true
			sh.rows += f.Rows
			if f.Span == nil {
				sh.own++
				sh.owned[id] = true
				waiting[id]++
			}
			// A fragment of its own is read through the claims: its path
			// does not say whose rows it holds.
			sh.sources[id] = append(sh.sources[id], source{f, cl.Tick, cl.CommitToken, false})
		}
		return true
	})
	var due []int64
	for _, k := range keys {
		sh := shards[k]
		crowded := false
		for id := range sh.owned {
			crowded = crowded || waiting[id] >= c.opts.MaxFactFragments
		}
		if sh.own >= c.opts.MinFacts || crowded ||
			int64(len(sh.files)) > max(1, (sh.rows+c.opts.TargetRows-1)/c.opts.TargetRows)+int64(sh.own) {
			due = append(due, k)
		}
	}
	return due, factPlan{shards: shards, facts: facts}
}

// Add sums o into r.
func (r *CompactResult) Add(o CompactResult) {
	r.Windows += o.Windows
	r.Facts += o.Facts
	r.Refused += o.Refused
	r.Files += o.Files
	r.FilesIn += o.FilesIn
	r.Rows += o.Rows
	r.BytesIn += o.BytesIn
	r.BytesOut += o.BytesOut
	r.IndexBytes += o.IndexBytes
	r.TicksEncoded += o.TicksEncoded
	r.TicksReused += o.TicksReused
}

type compactor struct {
	b     bucket.Bucket
	cat   *index.Catalog
	world string
	opts  CompactOptions
	work  *semaphore.Weighted // held by each table's rewrite: Workers at once
	mu    sync.Mutex
	// tables are the schemas read so far, by id.
	tables map[string]*frame.Table

	// intent is the intent every file is written under, opened before the
	// first (invariant 16); nil until a window or shard needs rewriting.
	imu    sync.Mutex
	intent *index.HeldIntent
}

// held returns the compaction's intent, opening it the first time, and
// renews its lease when half of it has passed. Everything a compaction
// writes is written after it returns and named by an entry citing it.
func (c *compactor) held(ctx context.Context) (*index.HeldIntent, error) {
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.intent == nil {
		in, err := c.cat.OpenIntent(ctx, "compaction of run "+c.opts.Run, c.opts.IntentLease)
		if err != nil {
			return nil, err
		}
		c.intent = in
		return in, nil
	}
	return c.intent, c.intent.Renew(ctx)
}

// close closes the compaction's intent, if it opened one: its files that
// no entry named are garbage from then on. A close that fails leaves the
// intent to its lease.
func (c *compactor) close(ctx context.Context) {
	c.imu.Lock()
	in := c.intent
	c.imu.Unlock()
	if in == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = in.Close(ctx)
}

// pinned returns the state a rewrite reads its sources from: s if the
// intent pins the catalog at or before it, else the state now (which
// does). Its sources then stay in the bucket until the intent closes.
func (c *compactor) pinned(ctx context.Context, s *index.State, in *index.HeldIntent) (*index.State, error) {
	if s.Seq >= in.Seq {
		return s, nil
	}
	return c.cat.Exact(ctx)
}

// rewriteAll rewrites each table of order (side by side, as work allows)
// and returns their compacted files in that order. ticks: the files are a
// window's ticks, each written with its tick index.
func (c *compactor) rewriteAll(ctx context.Context, order []string, sources map[string][]source, admit admitFunc, ticks bool, res *CompactResult) ([]index.TableFragments, error) {
	out := make([]index.TableFragments, len(order))
	results := make([]CompactResult, len(order))
	g, gctx := errgroup.WithContext(ctx)
	for i, id := range order {
		g.Go(func() error {
			t, err := c.table(gctx, id)
			if err != nil {
				return err
			}
			if err := c.work.Acquire(gctx, 1); err != nil {
				return err
			}
			defer c.work.Release(1)
			files, err := c.rewrite(gctx, t, sources[id], admit, ticks, &results[i])
			out[i] = index.TableFragments{Table: id, Fragments: files}
			return err
		})
	}
	err := g.Wait()
	for _, r := range results {
		res.Add(r)
	}
	return out, err
}

// source is one file a window's table reads, and how to keep its rows.
type source struct {
	index.Fragment
	tick  int64
	token string
	// proven: every row of the file is visible (a compacted file, or a
	// tick's own fragment under its token).
	proven bool
}

// window compacts the ticks of span if some table there has more files than
// its rows need. It reports whether it did.
func (c *compactor) window(ctx context.Context, span index.Span, res *CompactResult) (bool, error) {
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return false, err
	}
	w, err := c.planWindow(ctx, s, span)
	if err != nil || !w.needed {
		return false, err
	}
	in, err := c.held(ctx)
	if err != nil {
		return false, err
	}
	if s, err = c.pinned(ctx, s, in); err != nil {
		return false, err
	}
	if w, err = c.planWindow(ctx, s, span); err != nil || !w.needed {
		return false, err
	}
	allow := s.Allowlist(c.opts.Run)
	admit := func(tick int64, token string, epoch, _ int64) bool { return allow.Admits(tick, token, epoch) }
	tables, err := c.rewriteAll(ctx, w.order, w.sources, admit, true, res)
	if err != nil {
		return false, err
	}
	rw := &index.FragmentsRewrite{Run: c.opts.Run, Span: &span, ReadSeq: s.Seq, Tables: tables, Intent: in.ID()}
	done, err := c.commit(ctx, rw, fmt.Sprintf("ticks %d..%d", span.From, span.To), res)
	if done {
		res.Windows++
	}
	return done, err
}

// commit commits a compaction's entry under its intent, renewed first. A
// refusal (a publish or another compactor moved the rows first, or the
// intent was closed) counts in res.Refused; its files are garbage.
func (c *compactor) commit(ctx context.Context, rw *index.FragmentsRewrite, what string, res *CompactResult) (bool, error) {
	failpoint.Hit(FailpointCompactPublishing)
	_, err := c.held(ctx)
	if err == nil {
		_, err = c.cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw})
	}
	if errors.Is(err, index.ErrRefused) {
		res.Refused++
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("world %s: compaction of %s: %w", c.world, what, err)
	}
	failpoint.Hit(FailpointCompactCommitted)
	return true, nil
}

// windowPlan is what a window's rewrite reads: its tables in order, each
// one's sources, and whether it needs rewriting at all.
type windowPlan struct {
	order   []string
	sources map[string][]source
	needed  bool
}

// planWindow plans the rewrite of span's ticks as s has them.
func (c *compactor) planWindow(ctx context.Context, s *index.State, span index.Span) (windowPlan, error) {
	var err error
	var order []string
	sources := map[string][]source{}
	listed := map[string]bool{}
	s.Ticks(c.opts.Run, span.From, func(t *index.Tick) bool {
		if t.Tick > span.To {
			return false
		}
		var tables []index.TableFragments
		if tables, err = t.Tables(); err != nil {
			return false
		}
		for _, tf := range tables {
			if !c.wanted(ctx, tf.Table) {
				continue
			}
			if _, ok := sources[tf.Table]; !ok {
				order = append(order, tf.Table)
			}
			for _, f := range tf.Fragments {
				if f.Span != nil {
					if listed[f.Path] {
						continue
					}
					listed[f.Path] = true
				}
				sources[tf.Table] = append(sources[tf.Table], source{f, t.Tick, t.CommitToken,
					index.Proven(c.world, c.opts.Run, tf.Table, t.CommitToken, f)})
			}
		}
		return true
	})
	if err != nil {
		return windowPlan{}, err
	}
	// A window is done when each table there is compacted files only, no
	// more of them than its rows need.
	needed := false
	for _, id := range order {
		var rows int64
		for _, src := range sources[id] {
			rows += src.Rows
			needed = needed || src.Span == nil
		}
		needed = needed || int64(len(sources[id])) > max(1, (rows+c.opts.TargetRows-1)/c.opts.TargetRows)
	}
	return windowPlan{order: order, sources: sources, needed: needed}, nil
}

// wanted reports whether table id is one CompactOptions.Tables names.
func (c *compactor) wanted(ctx context.Context, id string) bool {
	if len(c.opts.Tables) == 0 || slices.Contains(c.opts.Tables, id) {
		return true
	}
	t, err := c.table(ctx, id)
	return err == nil && slices.Contains(c.opts.Tables, t.Name)
}

// table returns the schema of table id, read once.
func (c *compactor) table(ctx context.Context, id string) (*frame.Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tables[id]; ok {
		return t, nil
	}
	info, err := frame.ReadTableInfo(ctx, c.b, c.world, id)
	if err != nil {
		return nil, fmt.Errorf("world %s: table %s has no description: %w", c.world, id, err)
	}
	t, err := frame.TableFromInfo(info)
	if err != nil {
		return nil, err
	}
	c.tables[id] = t
	return t, nil
}

// rewrite reads the visible rows of a table's sources and writes them as
// compacted files of at most TargetRows rows each (cut at tick
// boundaries), returning their catalog records. It works column by column:
// the sources' commit columns decide which rows are visible and their
// order (by tick, then entity), and then each column's values are decoded
// once and re-encoded into the output's row groups, never assembled into
// rows; a source whose rows are already in order is not sorted again.
// With ticks, each file is written with its tick index (TickIndex) first.
func (c *compactor) rewrite(ctx context.Context, t *frame.Table, sources []source, admit admitFunc, ticks bool, res *CompactResult) ([]index.Fragment, error) {
	in, err := c.open(ctx, t, sources)
	if err != nil {
		return nil, err
	}
	for _, f := range in.files {
		res.BytesIn += f.size
	}
	res.FilesIn += len(in.files)
	keys, err := in.visible(t, admit)
	if err != nil {
		return nil, err
	}
	var known map[int64]frame.TickEntry
	var unrecorded map[int64]bool
	if ticks {
		if known, err = c.knownTicks(ctx, sources); err != nil {
			return nil, err
		}
		unrecorded = in.unrecordedCSV(keys)
	}
	var out []index.Fragment
	for lo := 0; lo < len(keys) || (lo == 0 && len(out) == 0); {
		hi := min(len(keys), lo+int(c.opts.TargetRows))
		for hi < len(keys) && hi > lo && keys[hi].tick == keys[hi-1].tick {
			hi++ // a tick's rows stay in one file
		}
		data, err := in.encode(t, keys[lo:hi])
		if err != nil {
			return nil, fmt.Errorf("table %s: compacting: %w", t.Name, err)
		}
		span := index.Span{From: sources[0].tick, To: sources[len(sources)-1].tick}
		if sources[0].Span != nil {
			span.From = sources[0].Span.From
		}
		if last := sources[len(sources)-1]; last.Span != nil {
			span.To = last.Span.To
		}
		if hi > lo {
			span = index.Span{From: keys[lo].tick, To: keys[hi-1].tick}
		}
		f, err := c.write(ctx, t, data, int64(hi-lo), span)
		if err != nil {
			return nil, err
		}
		if ticks {
			if err := c.writeTickIndex(ctx, t, f, data, keys[lo:hi], known, unrecorded, res); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
		res.Files++
		res.Rows += int64(hi - lo)
		res.BytesOut += f.Bytes
		if hi == lo {
			break
		}
		lo = hi
	}
	return out, nil
}

// fetchers bounds the reads one rewrite has in flight (a remote bucket's
// latency, not the CPU, is their cost).
const fetchers = 16

// sourceFile is one source opened for a rewrite.
type sourceFile struct {
	source
	size   int64
	groups []parquet.RowGroup
	// csvRecorded: the file's footer records its CSV size (frame.CSVSizeKey).
	csvRecorded bool
}

// sourceFiles are a rewrite's sources, opened, and the row groups of all
// of them in order (a row key's group indexes it).
type sourceFiles struct {
	files  []sourceFile
	groups []parquet.RowGroup
	fileOf []int // the file of each of groups
}

// unrecordedCSV returns the ticks of keys with rows from a tick's own
// fragment whose writer recorded no CSV size in its footer (it wrote
// before sizes were recorded): their canonical files have none.
func (in *sourceFiles) unrecordedCSV(keys []rowKey) map[int64]bool {
	out := map[int64]bool{}
	for _, k := range keys {
		if f := &in.files[in.fileOf[k.group]]; f.Span == nil && !f.csvRecorded {
			out[k.tick] = true
		}
	}
	return out
}

// rowKey is one visible row: where it sorts and where it is.
type rowKey struct {
	tick, entity int64
	group, row   int32
}

// open reads and checks the sources (several at once): each must match its
// catalog digest and have the table's columns, in its order, of its types,
// one value per row.
func (c *compactor) open(ctx context.Context, t *frame.Table, sources []source) (*sourceFiles, error) {
	in := &sourceFiles{files: make([]sourceFile, len(sources))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchers)
	for i, src := range sources {
		g.Go(func() error {
			data, _, err := c.b.Get(gctx, src.Path)
			if err != nil {
				return fmt.Errorf("world %s: reading %s: %w", c.world, src.Path, err)
			}
			if frame.Digest(data) != src.Digest {
				return fmt.Errorf("world %s: fragment %s does not match its catalog digest", c.world, src.Path)
			}
			file, err := openFragment(t, data)
			if err != nil {
				return fmt.Errorf("world %s: reading %s: %w", c.world, src.Path, err)
			}
			src.proven = src.proven || src.Span != nil
			_, recorded := file.Lookup(frame.CSVSizeKey)
			in.files[i] = sourceFile{source: src, size: int64(len(data)), groups: file.RowGroups(), csvRecorded: recorded}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, f := range in.files {
		in.groups = append(in.groups, f.groups...)
		for range f.groups {
			in.fileOf = append(in.fileOf, i)
		}
	}
	if len(in.groups) > math.MaxInt32 {
		return nil, fmt.Errorf("world %s: table %s: %d row groups in one compaction", c.world, t.Name, len(in.groups))
	}
	return in, nil
}

// openFragment opens a fragment of t, refusing one of another schema (a
// changed schema is a new table).
func openFragment(t *frame.Table, data []byte) (*parquet.File, error) {
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	if err := frame.SameColumns(t, file); err != nil {
		return nil, err
	}
	return file, nil
}

// admitFunc decides whether a row of a source that is not proven is
// visible, by its commit columns and entity.
type admitFunc func(tick int64, token string, epoch, entity int64) bool

// visible returns the keys of the sources' visible rows (a proven source's
// all, another's as admit says), sorted by tick then entity, stably.
func (in *sourceFiles) visible(t *frame.Table, admit admitFunc) ([]rowKey, error) {
	tickCol, tokenCol, epochCol, entityCol := t.Column(frame.ColTick), t.Column(frame.ColCommitToken), t.Column(frame.ColWriterEpoch), t.Column(frame.ColEntity)
	var keys []rowKey
	sorted := true
	g := 0
	for _, f := range in.files {
		for _, rg := range f.groups {
			ticks, err := frame.ColumnValues(rg, tickCol, nil)
			if err != nil {
				return nil, err
			}
			entities, err := frame.ColumnValues(rg, entityCol, nil)
			if err != nil {
				return nil, err
			}
			var tokens, epochs []parquet.Value
			if !f.proven {
				if tokens, err = frame.ColumnValues(rg, tokenCol, nil); err != nil {
					return nil, err
				}
				if epochs, err = frame.ColumnValues(rg, epochCol, nil); err != nil {
					return nil, err
				}
			}
			for i := range ticks {
				if !f.proven && !admit(ticks[i].Int64(), string(tokens[i].ByteArray()), epochs[i].Int64(), entities[i].Int64()) {
					continue
				}
				k := rowKey{tick: ticks[i].Int64(), entity: entities[i].Int64(), group: int32(g), row: int32(i)}
				if n := len(keys); n > 0 && compareKeys(keys[n-1], k) > 0 {
					sorted = false
				}
				keys = append(keys, k)
			}
			g++
		}
	}
	if !sorted {
		slices.SortStableFunc(keys, compareKeys)
	}
	return keys, nil
}

func compareKeys(a, b rowKey) int {
	return cmp.Or(cmp.Compare(a.tick, b.tick), cmp.Compare(a.entity, b.entity))
}

// encode writes the rows keys name, in that order, as one Parquet file of
// t: column by column, each source row group's values decoded once.
func (in *sourceFiles) encode(t *frame.Table, keys []rowKey) ([]byte, error) {
	groups := make([]*parquet.Buffer, (len(keys)+frame.RowGroupRows-1)/frame.RowGroupRows)
	for i := range groups {
		groups[i] = parquet.NewBuffer(t.CompactedSchema())
	}
	used := map[int32]bool{}
	for _, k := range keys {
		used[k.group] = true
	}
	decoded := make([][]parquet.Value, len(in.groups))
	batch := make([]parquet.Value, 0, min(len(keys), frame.RowGroupRows))
	for col := range t.Columns {
		for g := range used {
			var err error
			if decoded[g], err = frame.ColumnValues(in.groups[g], col, decoded[g][:0]); err != nil {
				return nil, err
			}
		}
		for i, rg := range groups {
			batch = batch[:0]
			for _, k := range keys[i*frame.RowGroupRows : min(len(keys), (i+1)*frame.RowGroupRows)] {
				batch = append(batch, decoded[k.group][k.row])
			}
			if _, err := rg.ColumnBuffers()[col].WriteValues(batch); err != nil {
				return nil, err
			}
		}
	}
	var out bytes.Buffer
	w := frame.NewWriter(&out, t)
	for _, rg := range groups {
		if _, err := w.WriteRowGroup(rg); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// write stores data, a compacted file of rows rows of ticks span, durably,
// named by its digest.
func (c *compactor) write(ctx context.Context, t *frame.Table, data []byte, rows int64, span index.Span) (index.Fragment, error) {
	digest := frame.Digest(data)
	intent := ""
	c.imu.Lock()
	if c.intent != nil { // held before Compact writes a file
		intent = c.intent.ID()
	}
	c.imu.Unlock()
	path := index.CompactedPath(c.world, c.opts.Run, t.ID, strings.TrimPrefix(digest, "sha256:")[:32], intent)
	attrs, err := bucket.CreateOnce(ctx, c.b, path, data)
	if err != nil {
		return index.Fragment{}, fmt.Errorf("world %s: writing %s: %w", c.world, path, err)
	}
	failpoint.Hit(FailpointCompactWritten)
	return index.Fragment{Path: path, Rows: rows, Bytes: int64(len(data)), Digest: digest,
		Generation: attrs.Generation, Span: &span}, nil
}

// writeTickIndex stores the tick index of f, a compacted file of t holding
// data, whose rows keys lists, beside it (index.TickIndexPath), durably,
// before any catalog entry names f: a reader that finds f finds its
// index. A tick known from its source's index (with as many rows) keeps
// its entry; the others are encoded.
func (c *compactor) writeTickIndex(ctx context.Context, t *frame.Table, f index.Fragment, data []byte, keys []rowKey, known map[int64]frame.TickEntry, unrecorded map[int64]bool, res *CompactResult) error {
	x, encoded, err := frame.BuildTickIndex(t, data, tickRuns(keys), known, unrecorded)
	if err != nil {
		return fmt.Errorf("world %s: %s: %w", c.world, f.Path, err)
	}
	n, err := frame.WriteTickIndex(ctx, c.b, f, x)
	if err != nil {
		return fmt.Errorf("world %s: %w", c.world, err)
	}
	res.IndexBytes += n
	res.TicksEncoded += int64(encoded)
	res.TicksReused += int64(len(x.Ticks) - encoded)
	return nil
}

// tickRuns returns the ticks of keys (rows in (tick, entity) order) as
// entries without a size: each tick, its first row and its rows.
func tickRuns(keys []rowKey) []frame.TickEntry {
	var out []frame.TickEntry
	for i, k := range keys {
		if n := len(out); n > 0 && out[n-1].Tick == k.tick {
			out[n-1].Rows++
			continue
		}
		out = append(out, frame.TickEntry{Tick: k.tick, Row: int64(i), Rows: 1})
	}
	return out
}

// knownTicks returns the entries of the tick indexes of the compacted
// files among sources, by tick (a file without one adds none).
func (c *compactor) knownTicks(ctx context.Context, sources []source) (map[int64]frame.TickEntry, error) {
	known := map[int64]frame.TickEntry{}
	for _, src := range sources {
		if src.Span == nil {
			continue
		}
		x, err := frame.ReadTickIndex(ctx, c.b, src.Fragment)
		if errors.Is(err, frame.ErrNoTickIndex) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("world %s: %w", c.world, err)
		}
		for _, e := range x.Ticks {
			known[e.Tick] = e
		}
	}
	return known, nil
}
