package sql

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Options pin what the views show.
type Options struct {
	// Run (default index.DefaultRun).
	Run string
	// AtTick pins the views to the state up to this tick (nil: the head).
	AtTick *int64
	// Only narrows the views to the rows of this one tick (with AtTick
	// set to it): only that tick's files are listed and read, so a
	// snapshot of one tick costs the same early or late in a long history
	// (legacy history files, which span ticks, are still read whole).
	Only bool
	// Token pins the views to the tick that commit token published.
	Token string
	// AtTime pins the views to the newest visible tick published at or
	// before this instant (to the millisecond the catalog records), as
	// <table>_as_of does; before the first tick was published the views
	// show no tick, as <table>_as_of shows no row.
	AtTime *time.Time
	// At pins the views to a point as a person typed it (ParseMoment): a
	// tick as AtTick does, a commit token as Token, an instant as AtTime,
	// or head~N, the tick N before the head. Give at most one of AtTick,
	// Token, AtTime and At.
	At *index.Moment
	// Table, if set, narrows the views to the table of that readable name:
	// the script defines its views alone, and worldfs_manifests,
	// worldfs_facts and worldfs_receipts show only what that table holds
	// of them (CopyTick, which reads one table, need not plan the others).
	Table string
	// Cache holds local copies of a remote bucket's fragments (required
	// for buckets that cannot be read in place); BucketID names the bucket
	// in it.
	Cache    *cache.Disk
	BucketID string
	// Dir is where the views' fragment lists are written (content-addressed
	// Parquet files the script reads). Build requires it: worldfs passes
	// <cache-dir>/views, tests a temporary directory; nothing defaults to
	// the user's home. CopyTick and CopyFacts without it write their list
	// beside their output and remove it when the copy ends.
	Dir string
	// View, if set, is the lineage of (world, Run) already resolved from
	// open catalogs (a mount's): Build and BuildFrom read no catalog then,
	// only the table descriptions and the files.
	View *index.View
	// Verified remembers the bucket files read in place that were found to
	// match their catalog records (default: one kept in Dir/verified).
	Verified *cache.Verified
	// Reuse, if set, keeps each script Build builds in this size-bounded
	// cache, and Build returns a kept one instead of building while every
	// catalog it was built from is unchanged (reuse.go): a fresh process
	// then reads no catalog, unless a query reads worldfs_manifests of a
	// compacted world, which loads them through Build's bucket and context:
	// keep both open while such views are used. Ignored with View.
	Reuse *cache.Disk
}

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Run == "" {
		o.Run = index.DefaultRun
	}
	return o
}

// Validate checks the options once their defaults are in: the run is a
// run name, and Only has a tick to narrow to (AtTick or Token).
func (o *Options) Validate() error {
	if err := index.ValidateRunName(o.Run); err != nil {
		return fmt.Errorf("sql options: %w", err)
	}
	if o.Only && o.AtTick == nil && o.Token == "" && o.AtTime == nil && o.At == nil {
		return errors.New("sql options: Only narrows the views to one tick; name it with AtTick, Token, AtTime or At")
	}
	pins := 0
	for _, set := range []bool{o.AtTick != nil, o.Token != "", o.AtTime != nil, o.At != nil} {
		if set {
			pins++
		}
	}
	if pins > 1 {
		return errors.New("sql options: AtTick, Token, AtTime and At each pin the views; give one")
	}
	return nil
}

// pin moves a point given as At to the field that pins it as typed: a
// tick to AtTick, a token to Token, an instant to AtTime. Only head~N and
// a tag stay in At, resolved once the lineage is known (buildFrom).
func (o Options) pin() Options {
	m := o.At
	if m == nil || o.AtTick != nil || o.Token != "" || o.AtTime != nil {
		return o
	}
	switch {
	case m.Tick != nil:
		o.AtTick, o.At = m.Tick, nil
	case m.Token != "":
		o.Token, o.At = m.Token, nil
	case m.Time != nil:
		o.AtTime, o.At = m.Time, nil
	}
	return o
}

// ErrNoDir: Build was given no Options.Dir for the views' fragment lists.
var ErrNoDir = errors.New("sql options: Dir is required (the directory for the views' fragment lists, e.g. <cache-dir>/views)")

func (o Options) dir() (string, error) {
	d := o.Dir
	if d == "" {
		return "", ErrNoDir
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("views directory: %w", err)
	}
	return filepath.Abs(d)
}

// ErrNotFound: the world, run, tick or token named does not exist.
var ErrNotFound = index.ErrNotFound

// fragment is one file of a table's visible history.
type fragment struct {
	world, run, table string
	object            string // the bucket object
	path              string // a file path DuckDB can read
	tick              int64
	token             string
	epoch, rows       int64
	bytes             int64 // -1: not known
	filtered          bool  // rows must match (tick, token); false: every row (unfiltered or legacy history)
	fact              bool  // a completed claim's rows, visible by its token (invariant 1)
	proven            bool  // filtered, and the catalog proves every row is (tick, token): no row check
	// keep, on a compacted file (proven, rows of many ticks), is the ticks
	// whose rows the views keep.
	keep *index.Span
	// first and last bound the ticks of the rows the file may show when it
	// is read as it is: its tick, or a compacted file's span within keep.
	first, last int64
}

// Script is the SQL that defines a world's views.
type Script struct {
	World, Run string
	AtTick     int64    // math.MaxInt64: the head
	Views      []string // the per-table component views, by name
	// Visible is the span of the run's visible ticks the views show, from
	// its first to its newest at or before AtTick (To < From: none); nil
	// when the views also show rows no published tick lists (legacy or
	// uncoordinated history). A run's ticks follow one another, so a tick
	// outside it is not visible; one inside it may be only if the ticks
	// were numbered with gaps, which the engine never does.
	Visible *index.Span `json:",omitempty"`
	// FragmentList is the Parquet file (in Options.Dir) of the files the
	// views read, with the tick and token each was published under; the
	// script reads it.
	FragmentList string
	// text is the script as render wrote it, with its markers (verify.go,
	// compacted.go); compacted, if set, is what worldfs_manifests shows of
	// the ticks that name compacted files, not yet written to a list.
	text      string
	compacted *compacted
	// ticks, if set, is the visible ticks worldfs_ticks shows (nil: none).
	ticks *tickList
	// plain is the script a DuckDB outside worldfs runs (SQL), once known.
	plain string
	// local: the files of Options.Dir the script reads (the fragment
	// lists and the empty witnesses).
	local []string
	// paths: the files the views read, once each (what a printed
	// script's start checks).
	paths []string
	// run is the SQL worldfs runs: the script with the lists of files
	// verified as queries read them (checks: which files, against what),
	// and the compacted ticks served by this process.
	run    string
	checks *checks
	// parts, if set, are the scripts of a session of several worlds
	// (Join), this one their union.
	parts []*Script
	// Tags are the world's tags (worldfs_tags, and the points tag:NAME
	// of Resolve), by name.
	Tags []index.Tag `json:",omitempty"`
	// What a sweep (sweep.go) reads the world's views by: each view's
	// component columns (after entity_id and tick) and the ids of its
	// tables (one read each), by view; the views with files that need the
	// row check (Mixed) or hold history no catalog lists (Unlisted); the
	// world's row of worldfs_worlds (SQL values).
	Columns  map[string][]frame.Column `json:",omitempty"`
	TableIDs map[string][]string       `json:",omitempty"`
	Mixed    []string                  `json:",omitempty"`
	Unlisted []string                  `json:",omitempty"`
	WorldRow string                    `json:",omitempty"`
	// sweep: a session of several worlds read as one (Sweep).
	sweep bool
	// reads: the files the world's views read as they are, found from
	// its fragment list when first asked (summarized.go; nil: views
	// reused from an earlier build); omit: the files a sweep's views
	// leave out (Omit).
	reads *lazyReads
	omit  []FileRead
	// record is the world's row of worldfs_worlds (nil: views reused
	// from an earlier build); types, each view's component columns'
	// types as the views give them (the widest of every table id's,
	// frame.UnionType), by view and column.
	record *worldRow
	types  map[string]map[string]frame.Type
}

// SQL returns the script for a DuckDB outside worldfs (the DuckDB shell,
// Python's duckdb): the views as worldfs defines them, reading their files
// as they are. Its lists are files in Options.Dir; the lists that cost a
// row per tick (the ticks that name compacted files, which only
// worldfs_manifests reads, and the visible ticks with their publish
// times, which worldfs_ticks, <table>_changes and <table>_as_of read) are
// written by the first call. Its _changes and _as_of filter the views
// rather than plan their files (worldfs's own functions plan them).
func (s *Script) SQL() (string, error) {
	if s.sweep {
		return s.sweepText(true)
	}
	if s.parts != nil {
		return s.sessionText(func(p *Script) (string, error) {
			text, err := p.printedText()
			return p.missingNow(text), err
		})
	}
	text, err := s.printedText()
	return s.missingNow(strings.ReplaceAll(text, markRef, "")), err
}

// printedText is the plain script, its references from macros marked
// (markRef).
func (s *Script) printedText() (string, error) {
	if s.compacted == nil && s.ticks == nil {
		return s.plain, nil
	}
	return s.printed()
}

// Build reads the catalog (and, for forks, every ancestor's) and returns the
// view definitions. A corrupt catalog fails closed: no views.
func Build(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Script, error) {
	opts = opts.pin()
	if v := opts.View; v != nil {
		if v.World != world || len(v.Segments) == 0 {
			return nil, fmt.Errorf("views of world %s: the view given is of world %s", world, v.World)
		}
		return BuildFrom(ctx, b, v.Segments[len(v.Segments)-1].State, opts)
	}
	if opts.Token != "" {
		at, ok, err := namedTick(ctx, b, world, *opts.EnsureDefaults())
		if err != nil {
			return nil, err
		}
		if ok {
			opts.AtTick, opts.Token = &at, ""
		}
	}
	if opts.Reuse != nil {
		if s, err := reused(ctx, b, world, opts); s != nil || err != nil {
			return s, err
		}
	}
	// Views of the whole history plan from the catalogs' summaries of
	// compacted stretches (index.LoadSummarized) instead of decoding every
	// tick; views bounded by a token, a time or one tick read ticks.
	if opts.Token == "" && opts.AtTime == nil && opts.At == nil && !opts.Only {
		own, _, err := index.LoadSummarized(ctx, b, world)
		if err != nil {
			return nil, err
		}
		if err := exists(ctx, b, world, own.World()); err != nil {
			return nil, err
		}
		s, err := buildSummarized(ctx, b, own, opts)
		if !errors.Is(err, index.ErrNotLoaded) {
			return s, err
		}
		// A summary does not tell what the views' bounds cut: plan from
		// every tick.
		whole, _, err := index.Load(ctx, b, world)
		if err != nil {
			return nil, err
		}
		return BuildFrom(ctx, b, whole, opts)
	}
	own, _, err := index.Load(ctx, b, world)
	if err != nil {
		return nil, err
	}
	if err := exists(ctx, b, world, own.World); err != nil {
		return nil, err
	}
	return BuildFrom(ctx, b, own, opts)
}

// exists is ErrNotFound for a world that is not in the bucket: its
// catalog (whose record is w) was never created, it has no marker and no
// data.
func exists(ctx context.Context, b bucket.Bucket, world string, w index.World) error {
	if _, merr := index.ReadMarker(ctx, b, world); !w.Created && errors.Is(merr, bucket.ErrNotExist) && !hasData(ctx, b, world) {
		return fmt.Errorf("world %s: %w", lit(world), ErrNotFound)
	}
	return nil
}

// namedTick returns the tick views pinned by opts.Token show up to, read
// from the one catalog part that holds the tick the token names
// (index.TokenTick) in the world, or, for a tick a fork inherits, in the
// ancestor that published it: the visible tick of that number (as
// index.View.Tick finds it, newest segment first), if it carries the
// token. A token that names no tick, or another tick's, is looked up in
// the lineage's parts its token filters name (filteredTick). ok false if
// only every tick can tell (a named tick in a world without a checkpoint,
// a token not found): pinned then finds it in the whole states
// (index.View.Token).
func namedTick(ctx context.Context, b bucket.Bucket, world string, opts Options) (int64, bool, error) {
	n, ok := index.TokenTick(opts.Token)
	if !ok {
		return filteredTick(ctx, b, world, opts)
	}
	upTo := int64(math.MaxInt64)
	for w, run, seen := world, opts.Run, 0; n <= upTo && seen < maxLineage; seen++ {
		p, _, err := index.LoadFor(ctx, b, w, index.Want{Run: run, From: n, To: n, CheckpointOnly: true})
		if err != nil || p == nil {
			return 0, false, err
		}
		t, found, err := p.Tick(run, n)
		if err != nil {
			return 0, false, err
		}
		if found {
			if t.CommitToken != opts.Token {
				return filteredTick(ctx, b, world, opts)
			}
			if opts.AtTick != nil {
				n = min(n, *opts.AtTick)
			}
			return n, true, nil
		}
		wd := p.World()
		if wd.Parent == "" {
			break
		}
		w, run, upTo = wd.Parent, wd.ForkRun, min(upTo, wd.ForkTick)
	}
	return 0, false, nil
}

// filteredTick is namedTick for a token whose name does not tell its
// tick: the tick index.View.Token finds (for a fork, the lowest visible
// tick of its lineage that carries it), read one world of the lineage at
// a time, each from the parts whose token filters may hold it
// (index.LineageToken). ok false for a token not found, or one that only
// the whole states can place (index.ErrNotLoaded), or if a world or a
// part is missing or was collected meanwhile: the whole states tell what
// is wrong, or find it.
func filteredTick(ctx context.Context, b bucket.Bucket, world string, opts Options) (int64, bool, error) {
	t, found, err := index.LineageToken(ctx, index.PartsFrom(b), world, opts.Run, opts.Token)
	if errors.Is(err, index.ErrNotLoaded) || errors.Is(err, bucket.ErrNotExist) || errors.Is(err, index.ErrSuperseded) || err == nil && !found {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n := t.Tick.Tick
	if opts.AtTick != nil {
		n = min(n, *opts.AtTick)
	}
	return n, true, nil
}

// maxLineage bounds namedTick's walk up a fork's ancestors (a lineage that
// loops is the whole load's to report).
const maxLineage = 64

// BuildFrom returns the view definitions of the world whose catalog state
// own is (ancestors are read from the bucket, unless opts.View, of this
// world and run, resolves them).
func BuildFrom(ctx context.Context, b bucket.Bucket, own *index.State, opts Options) (*Script, error) {
	builds.Add(1)
	opts, path, dir, err := prepare(b, opts)
	if err != nil {
		return nil, err
	}
	view, err := lineageOf(ctx, b, own, opts)
	if err != nil {
		return nil, err
	}
	c := catalogs{own: index.PartialOf(own), plan: view.Plan(), whole: func() (*index.View, error) { return view, nil }}
	return build(ctx, b, c, opts, path, dir)
}

// buildSummarized is BuildFrom of own, loaded by index.LoadSummarized, and
// of its ancestors loaded the same way: the views plan from the states'
// summaries (index.Plan), and what reads the ticks themselves
// (worldfs_manifests, worldfs_ticks) decodes the summarized shards of
// those very states when a query first reads it (wholeView).
func buildSummarized(ctx context.Context, b bucket.Bucket, own *index.Partial, opts Options) (*Script, error) {
	builds.Add(1)
	opts, path, dir, err := prepare(b, opts)
	if err != nil {
		return nil, err
	}
	world, load := own.World().ID, index.LoadSummarizedFrom(b)
	plan, err := index.OpenPlan(ctx, func(ctx context.Context, w string) (*index.Partial, error) {
		if w == world {
			return own, nil
		}
		return load(ctx, w)
	}, world, opts.Run)
	if err != nil {
		return nil, err
	}
	return build(ctx, b, catalogs{own: own, plan: plan, whole: wholeView(ctx, plan)}, opts, path, dir)
}

// prepare returns opts pinned (Options.pin), with their defaults, checked;
// the function that gives the path the views read a file by, and the
// directory of their lists.
func prepare(b bucket.Bucket, opts Options) (Options, pathFunc, string, error) {
	opts = opts.pin()
	path, err := pather(b, opts)
	if err != nil {
		return opts, nil, "", err
	}
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return opts, nil, "", err
	}
	dir, err := opts.dir()
	return opts, path, dir, err
}

// catalogs is what a build reads of the catalogs: the world's own state
// (whole, or summarized), the plan of its lineage, and the view of the
// same states whole, for what reads ticks (decoded when first asked, if
// the states are summarized).
type catalogs struct {
	own   *index.Partial
	plan  *index.Plan
	whole func() (*index.View, error)
}

// build is BuildFrom of the catalogs c, with opts prepared (path, dir).
func build(ctx context.Context, b bucket.Bucket, c catalogs, opts Options, path pathFunc, dir string) (*Script, error) {
	world := c.own.World().ID
	upTo, err := pinned(c, opts)
	if err != nil {
		return nil, err
	}
	if m := opts.At; m == nil && opts.AtTime != nil {
		opts.At = &index.Moment{Text: opts.AtTime.Format(time.RFC3339Nano), Time: opts.AtTime}
	}
	if m := opts.At; m != nil {
		// An instant, head~N or a tag: resolved among the visible ticks
		// (a tag among the world's tags). An instant before the first
		// tick was published pins the views before it: they show no
		// tick, as <table>_as_of shows no row.
		view, err := c.whole()
		if err != nil {
			return nil, err
		}
		t, ok, err := m.InView(view, upTo)
		if err != nil {
			return nil, fmt.Errorf("world %s run %s: %w", world, opts.Run, err)
		}
		if !ok {
			t = -1
			if first, found := firstTick(view); found {
				t = first - 1
			}
		}
		upTo = t
	}
	fpath, checks := verifier(b, path, opts, dir)
	h := &history{fpath: fpath, keepFiles: opts.Reuse != nil && opts.View == nil}
	// The catalog's files: every filtered segment's ticks, then facts (each
	// completed claim's rows, at the tick the fact landed on, visible by the
	// claim's token); and the ticks whose manifests name compacted files.
	from := int64(math.MinInt64)
	if opts.Only {
		from = upTo
	}
	if err := h.catalogFiles(ctx, c.plan, from, upTo); err != nil {
		return nil, err
	}
	segs := c.plan.Segments()
	lineage, err := h.listedFiles(ctx, b, path, segs, upTo)
	if err != nil {
		return nil, err
	}
	// Evaluation receipts are the world's, whatever run they judged.
	if err := h.catalogFiles(ctx, index.OwnPlan(c.own, index.EvaluationRun), math.MinInt64, math.MaxInt64); err != nil {
		return nil, err
	}
	infos, err := describeAll(ctx, b, h.frags)
	if err != nil {
		return nil, err
	}
	if opts.Table != "" {
		h.frags = slices.DeleteFunc(h.frags, func(f fragment) bool { return infos[f.world+"/"+f.table].Name != opts.Table })
	}
	if err := h.emptyTables(ctx, b, infos, opts.Table); err != nil {
		return nil, err
	}
	whole := c.whole
	// worldfs_manifests shows the ticks that name compacted files (a
	// row per tick) only when a query reads it: see compacted.go.
	var comp *compacted
	if opts.Table == "" && slices.ContainsFunc(h.frags, func(f fragment) bool { return f.keep != nil }) {
		comp = &compacted{view: whole, from: from, to: upTo, dir: dir}
	}
	// worldfs_ticks, <table>_changes and <table>_as_of read the visible
	// ticks only when a query does: see ticks.go.
	ticks := &tickList{view: whole, from: from, to: upTo, dir: dir}
	var visible *index.Span
	if !h.listed {
		if visible, err = c.plan.Visible(upTo); err != nil {
			return nil, err
		}
		if v := visible; opts.Only && v != nil && v.From <= upTo && upTo <= v.To {
			visible = &index.Span{From: upTo, To: upTo} // one tick: the views show it alone
		}
	}
	rec := worldRow{world: c.own.World(), run: opts.Run, tags: c.own.Tags()}
	if v := visible; v != nil && v.From <= v.To {
		rec.head = &v.To
	}
	s, err := render(world, opts.Run, upTo, h, infos, lineage, dir, comp, ticks, rec)
	if err != nil {
		return nil, err
	}
	s.checks = checks
	s.Visible = visible
	keep(ctx, b, opts, dir, c.own, segs, h, s)
	return s, nil
}

var builds atomic.Int64

// Builds returns how many views this process has built from catalogs
// (BuildFrom), not counting scripts Build reused (Options.Reuse).
func Builds() int64 { return builds.Load() }

// pinned returns the last tick the views show (math.MaxInt64: the head),
// from opts.AtTick and opts.Token (a tick of c's view, the world's own or
// one it inherits).
func pinned(c catalogs, opts Options) (int64, error) {
	own := c.own
	world := own.World().ID
	upTo := int64(math.MaxInt64)
	if opts.AtTick != nil {
		upTo = *opts.AtTick
	}
	if opts.Token != "" {
		view, err := c.whole()
		if err != nil {
			return 0, err
		}
		t, ok := view.Token(opts.Token)
		if !ok {
			return 0, fmt.Errorf("world %s run %s: commit token %q: %w", world, opts.Run, opts.Token, ErrNotFound)
		}
		upTo = min(upTo, t.Tick.Tick)
	}
	if opts.AtTick != nil {
		if run, ok := own.Run(opts.Run); ok && upTo > run.Head {
			return 0, fmt.Errorf("world %s run %s: tick %d is past the head %d: %w", world, opts.Run, upTo, run.Head, ErrNotFound)
		}
	}
	return upTo, nil
}

// lineageOf returns the view of (own's world, opts.Run): opts.View if it
// is of them, else resolved from own and the ancestors' catalogs.
func lineageOf(ctx context.Context, b bucket.Bucket, own *index.State, opts Options) (*index.View, error) {
	world := own.World.ID
	if v := opts.View; v != nil && v.World == world && v.Run == opts.Run {
		return v, nil
	}
	load := index.LoadFrom(b)
	return index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		if w == world {
			return own, nil
		}
		return load(ctx, w)
	}, world, opts.Run)
}

// wholeView returns a function that decodes the ticks the states of p
// hold as summaries, once it succeeds: the view of the very states the
// views were planned from, for what reads every tick. It is called long
// after the build (its ctx's values are kept, not its end); a failure is
// not kept, and a part collected since a newer checkpoint replaced the
// one planned from is ErrCatalogChanged (the views are to be opened
// again), not a corrupt catalog.
func wholeView(ctx context.Context, p *index.Plan) func() (*index.View, error) {
	ctx = context.WithoutCancel(ctx)
	var whole lazy[*index.View]
	return func() (*index.View, error) {
		return whole.get(func() (*index.View, error) {
			w, err := p.View(ctx)
			if errors.Is(err, index.ErrSuperseded) {
				return nil, fmt.Errorf("world %s: %w (%w)", p.World, ErrCatalogChanged, err)
			}
			return w, err
		})
	}
}

// history is what the views read, as BuildFrom collects it: the files.
type history struct {
	fpath recordPath
	frags []fragment
	// listed: some files were found by listing the bucket, not in a
	// catalog. keepFiles: read collects the catalog's files with their
	// paths (for Options.Reuse).
	listed    bool
	keepFiles bool
	read      []keptFile
	// unkept: too many files to keep the script (maxKeptFiles).
	unkept bool
	// described are the tables each world of the lineage describes, by
	// world/table id (listedFiles lists them); empty, the descriptions of
	// those whose readable name no file has (emptyTables).
	described []string
	empty     []frame.TableInfo
	// compacted: the catalog's entries of the compacted files read, by
	// object (compactedReads).
	compacted map[string]index.Fragment
}

// emptyTables finds the tables the lineage's worlds describe whose
// readable name no file of the views has (a table declared at the
// world's creation, before its first tick; a fact table no fact has
// reached): each gets its views all the same, empty, of its columns.
// Legacy tables (no commit columns) are only ever described with their
// history, and are left out; so is every name but only, if set.
func (h *history) emptyTables(ctx context.Context, b bucket.Bucket, infos map[string]frame.TableInfo, only string) error {
	have := map[string]bool{}
	for _, f := range h.frags {
		have[infos[f.world+"/"+f.table].Name] = true
	}
	for _, key := range h.described {
		world, id, _ := strings.Cut(key, "/")
		if err := describe(ctx, b, infos, world, id); err != nil {
			return err
		}
		ti := infos[key]
		if have[ti.Name] || !hasColumn(ti, frame.ColCommitToken) || only != "" && ti.Name != only {
			continue
		}
		h.empty = append(h.empty, ti)
	}
	return nil
}

// catalogFiles appends the files v reads for ticks from..to (see
// index.View.Files).
func (h *history) catalogFiles(ctx context.Context, v *index.Plan, from, to int64) error {
	var ferr error
	err := v.Files(from, to, func(f index.File) bool {
		p, err := h.fpath(ctx, f.Fragment)
		if err != nil {
			ferr = err
			return false
		}
		if h.keepFiles {
			h.read = append(h.read, keptFile{Path: p, Fragment: f.Fragment})
			if len(h.read) > maxKeptFiles {
				h.keepFiles, h.read, h.unkept = false, nil, true
			}
		}
		first, last := f.Tick, f.Tick
		if f.Span != nil {
			first, last = max(f.Span.From, f.Keep.From), min(f.Span.To, f.Keep.To)
			if h.compacted == nil {
				h.compacted = map[string]index.Fragment{}
			}
			h.compacted[f.Path] = f.Fragment
		}
		h.frags = append(h.frags, fragment{world: f.World, run: f.Run, table: f.Table, object: f.Path, path: p,
			tick: f.Tick, token: f.Token, epoch: f.Epoch, rows: f.Rows, bytes: f.Bytes, filtered: true, fact: f.Fact, proven: !f.Check, keep: f.Keep,
			first: first, last: last})
		return true
	})
	return cmp.Or(err, ferr)
}

// listedFiles appends the files the catalog does not name: each
// unfiltered segment's and each segment's legacy history, listed from the
// bucket. It returns the rows of worldfs_lineage.
func (h *history) listedFiles(ctx context.Context, b bucket.Bucket, path pathFunc, segs []index.PlanSegment, upTo int64) ([]string, error) {
	var lineage []string
	for i, seg := range segs {
		if seg.Mode == index.Unfiltered {
			fs, err := listData(ctx, b, path, seg.World, seg.Run)
			if err != nil {
				return nil, err
			}
			h.frags = append(h.frags, fs...)
		}
		legacy, ids, err := listLegacy(ctx, b, path, seg.World, seg.Run, min(seg.UpTo, upTo))
		if err != nil {
			return nil, err
		}
		h.frags = append(h.frags, legacy...)
		for _, id := range ids {
			if key := seg.World + "/" + id; !slices.Contains(h.described, key) {
				h.described = append(h.described, key)
			}
		}
		h.listed = h.listed || len(legacy) > 0 || seg.Mode == index.Unfiltered
		if i < len(segs)-1 {
			lineage = append(lineage, fmt.Sprintf("(%d, %s, %s, %d)", i, lit(seg.World), lit(seg.Run), seg.UpTo))
		} else {
			lineage = append(lineage, fmt.Sprintf("(%d, %s, %s, NULL)", i, lit(seg.World), lit(seg.Run)))
		}
	}
	return lineage, nil
}

// describeAll reads the description of each table of frags, once per
// table (not once per fragment: a long history has millions), by
// world/table id.
func describeAll(ctx context.Context, b bucket.Bucket, frags []fragment) (map[string]frame.TableInfo, error) {
	infos := map[string]frame.TableInfo{}
	for _, f := range frags {
		if err := describe(ctx, b, infos, f.world, f.table); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

// describe reads the description of a world's table into infos, once.
func describe(ctx context.Context, b bucket.Bucket, infos map[string]frame.TableInfo, world, table string) error {
	key := world + "/" + table
	if _, ok := infos[key]; ok {
		return nil
	}
	ti, err := frame.ReadTableInfo(ctx, b, world, table)
	if err != nil {
		return fmt.Errorf("world %s: table %s has no description: %w", world, table, err)
	}
	infos[key] = ti
	return nil
}

func hasData(ctx context.Context, b bucket.Bucket, world string) bool {
	for range b.List(ctx, index.DataPrefix(world), "") {
		return true
	}
	return false
}

// listData lists an unfiltered segment's fragments (uncoordinated or
// pre-commit-identity history: no manifest names them).
func listData(ctx context.Context, b bucket.Bucket, path pathFunc, world, run string) ([]fragment, error) {
	var out []fragment
	for a, err := range b.List(ctx, index.RunDataPrefix(world, run), "") {
		if err != nil {
			return nil, err
		}
		n, ok := index.ParseFragmentPath(world, a.Name)
		if !ok || n.Token == index.LegacyToken { // legacy fragments: listLegacy
			continue
		}
		p, err := path(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, fragment{world: world, run: run, table: n.Table, object: a.Name, path: p})
	}
	return out, nil
}

// listLegacy lists a segment's legacy (v0.2) table fragments: always
// visible epoch-0 history, read through the legacy-name fallback. Only the
// legacy prefixes of the tables the world describes are listed, never the
// world's whole data. It returns those tables' ids too.
func listLegacy(ctx context.Context, b bucket.Bucket, path pathFunc, world, run string, upTo int64) ([]fragment, []string, error) {
	var out []fragment
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		for a, err := range b.List(ctx, index.LegacyPrefix(world, run, id), "") {
			if err != nil {
				return nil, nil, err
			}
			if !strings.HasSuffix(a.Name, ".parquet") {
				continue
			}
			p, err := path(ctx, a.Name)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, fragment{world: world, run: run, table: id, object: a.Name, path: p, tick: upTo})
		}
	}
	return out, ids, nil
}

// pathFunc returns a local file DuckDB can read for an object.
type pathFunc func(ctx context.Context, name string) (string, error)

// pather reads local buckets in place and any other bucket through the
// disk cache.
func pather(b bucket.Bucket, opts Options) (pathFunc, error) {
	if lb, ok := bucket.As[bucket.Local](b); ok {
		return func(_ context.Context, name string) (string, error) { return lb.Path(name) }, nil
	}
	if opts.Cache == nil || opts.BucketID == "" {
		return nil, fmt.Errorf("views of %v: a remote bucket is read through the fragment cache; none was given", b)
	}
	return func(ctx context.Context, name string) (string, error) {
		return opts.Cache.Path(ctx, b, opts.BucketID, name)
	}, nil
}

// lit quotes a SQL string literal.
func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// readOne is read_parquet of the one file at path, its columns alone:
// DuckDB would add a column for each folder of the path named like
// "k=v" (hive partitioning), such as a cache directory called
// /data/run=3, to a file read with SELECT *. (The views of the tables
// name their columns, and pass no option that every query would bind.)
func readOne(path string) string { return "read_parquet(" + lit(path) + ", hive_partitioning = false)" }

// ref quotes the name of an object of the views referred to from a macro's
// body: a macro binds its body where it is called, so in a session of
// several worlds (Join) the reference is qualified with its world's
// schema (markRef: see sessions.go).
func ref(s string) string { return markRef + ident(s) }

// ident quotes a SQL identifier.
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// render writes the views. Per readable table name, the raw view unions
// the segment files of every table id with that name (a changed schema is
// a new table; legacy tables join by name), keeping only rows whose (tick,
// token) a manifest published, and epoch-0 rows; the component view
// projects away the commit columns. The fragment list (files, ticks and
// tokens) goes to a Parquet file in dir that the script reads, so the
// script stays small whatever the size of the catalog; the commit
// identities of the ticks that name compacted files (comp, if any), which
// only worldfs_manifests reads, are served or written apart (compacted.go).
func render(world, run string, upTo int64, h *history, infos map[string]frame.TableInfo, lineage []string, dir string, comp *compacted, ticks *tickList, rec worldRow) (*Script, error) {
	if strings.ContainsAny(world+run+dir, markLazy+markEager+markEnd+markEndEager+markCompacted+markTicks+markRun+markPlain+markAltEnd+markRef) {
		return nil, fmt.Errorf("views of world %q run %q in %q: control characters in a name", world, run, dir)
	}
	names, parts, list := partition(h.frags, infos)
	// A table no file has yet reads its empty witness: views all the same.
	for _, ti := range h.empty {
		if _, ok := parts[ti.Name]; !ok {
			names = append(names, ti.Name)
		}
		parts[ti.Name] = append(parts[ti.Name], part{ti: ti, empty: true})
	}
	slices.Sort(names)
	listPath, err := writeList(dir, list)
	if err != nil {
		return nil, err
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "-- worldfs views of world %s, run %s", world, run)
	if upTo != math.MaxInt64 {
		fmt.Fprintf(&sb, ", as of tick %d", upTo)
	}
	sb.WriteString(".\n-- Generated from the catalog; visible rows only.\n")
	fmt.Fprintf(&sb, "-- The fragment list (each file, and the tick and commit token its manifest published) is read from\n-- %s.\n\n", listPath)
	sb.WriteString(alt("", listCheck(world, run, listPath)))
	fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP TABLE worldfs_fragments AS SELECT * FROM %s;\n", readOne(listPath))
	sb.WriteString(alt("", filesCheck(world, run)))
	sb.WriteString(ticksViews())
	script := &Script{World: world, Run: run, AtTick: upTo, FragmentList: listPath, local: []string{listPath}, compacted: comp, ticks: ticks, Tags: rec.tags,
		Columns: map[string][]frame.Column{}, TableIDs: map[string][]string{}, WorldRow: rec.values()}
	seen := map[string]bool{}
	for _, r := range list {
		if !seen[r.Path] {
			seen[r.Path] = true
			script.paths = append(script.paths, r.Path)
		}
	}
	script.reads, script.record, script.types = &lazyReads{compacted: h.compacted}, &rec, map[string]map[string]frame.Type{}
	for _, name := range names {
		for _, p := range parts[name] {
			if p.filtered || p.empty {
				script.local = append(script.local, witnessPath(dir, p.ti.ID))
			}
		}
	}
	for _, name := range names {
		cols, err := tableViews(&sb, name, parts[name], upTo, dir)
		if err != nil {
			return nil, err
		}
		script.Views = append(script.Views, name)
		script.Columns[name] = cols
		if script.types[name], err = unionTypes(parts[name]); err != nil {
			return nil, err
		}
		mixed, unlisted := false, false
		for _, p := range parts[name] {
			script.TableIDs[name] = append(script.TableIDs[name], p.ti.ID)
			mixed = mixed || p.mixed
			unlisted = unlisted || !p.filtered && !p.empty
		}
		if mixed {
			script.Mixed = append(script.Mixed, name)
		}
		if unlisted {
			script.Unlisted = append(script.Unlisted, name)
		}
	}
	sb.WriteString(manifestsView(comp != nil))
	var factNames []string
	for _, name := range names {
		if frame.IsFactColumns(parts[name][0].ti.Columns) {
			factNames = append(factNames, name)
		}
	}
	sb.WriteString(factViews(factNames, script.Columns))
	sb.WriteString(tagsView(world, rec.tags))
	sb.WriteString(worldsView(rec.values()))
	fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP VIEW worldfs_lineage AS SELECT segment::INTEGER AS segment, world::VARCHAR AS world, run::VARCHAR AS run, up_to_tick::BIGINT AS up_to_tick FROM (VALUES %s) l(segment, world, run, up_to_tick);\n", strings.Join(lineage, ", "))
	script.text = sb.String()
	script.finish()
	return script, nil
}

// listCheck and filesCheck are the first statements of a printed script
// (a DuckDB outside worldfs runs it, after worldfs has forgotten it): a
// script names files, not ticks, so one kept past their collection would
// fail at its first read with DuckDB's own "no files found". Instead it
// says at once what is gone and how to print it again. listCheck: the
// fragment list (in the views directory, which collection empties of
// lists no script used within the retention, and which another machine
// lacks) is there; filesCheck: every file the list names is (gc deletes
// the files a compaction replaced once the retention has passed). Each is
// one glob of the files: a stat each, no read. worldfs's own runs check
// the files as they read them instead (verify.go).
func listCheck(world, run, listPath string) string {
	msg := fmt.Sprintf("worldfs views of world %s run %s: this script's file list %s is gone (the views directory it was printed into was collected since, or the script was printed on another machine); print the views again: worldfs views --world %s > views.sql (with the --bucket it was printed from)",
		world, run, listPath, world)
	return fmt.Sprintf("SET VARIABLE worldfs_check = (SELECT CASE WHEN count(*) = 0 THEN error(%s) END FROM glob(%s));\n", lit(msg), lit(listPath))
}

// A file already missing when the script is printed (lost: the catalog
// names it, `worldfs check` says what restores it) does not stop the
// script, whose other views answer; SQL writes their number in the place
// of markMissing, and the check counts only files gone since.
func filesCheck(world, run string) string {
	msg := fmt.Sprintf("worldfs views of world %s run %s: %%d of the %%d files this script reads are gone (collected by worldfs gc since it was printed: compaction moved their rows to other files); print the views again: worldfs views --world %s > views.sql (with the --bucket it was printed from)",
		world, run, world)
	return "SET VARIABLE worldfs_check = (SELECT list(DISTINCT path) FROM worldfs_fragments);\n" +
		fmt.Sprintf("SET VARIABLE worldfs_check = (SELECT CASE WHEN count(*) + %s < len(getvariable('worldfs_check')) THEN error(printf(%s, len(getvariable('worldfs_check')) - %s - count(*), len(getvariable('worldfs_check')))) END FROM glob(coalesce(getvariable('worldfs_check'), []::VARCHAR[])));\n", markMissing, lit(msg), markMissing)
}

// markMissing stands in a script's text for the number of its files
// missing when it is printed (SQL).
const markMissing = "/*worldfs:missing*/0"

// missingNow returns text with markMissing replaced by the number of the
// files the script's views read that are not there now.
func (s *Script) missingNow(text string) string {
	if !strings.Contains(text, markMissing) {
		return text
	}
	n := 0
	for _, p := range s.paths {
		if _, err := os.Stat(p); err != nil {
			n++
		}
	}
	return strings.ReplaceAll(text, markMissing, strconv.Itoa(n))
}

// part is one read_parquet of a view: the files of one (world, table id)
// with the view's name.
type part struct {
	ti       frame.TableInfo
	filtered bool
	// empty: the table has no file (its views read its empty witness).
	empty bool
	// mixed: some files need the row check (filtered and not proven), or
	// are not filtered beside filtered ones.
	mixed          bool
	proven, others int    // filtered files the catalog proves, and all other files
	lo, hi         string // the least and greatest published token
	// keep: the ticks whose rows the part shows, when it has compacted
	// files (nil: it has none).
	keep *index.Span
}

// partition groups frags by readable name (sorted), then by (world, table
// id) within a name, one part each, keeping catalog order within a part;
// it returns the names, their parts and the fragment list's rows, in
// that order.
func partition(frags []fragment, infos map[string]frame.TableInfo) ([]string, map[string][]part, []listRow) {
	type tableKey struct{ world, table string }
	type group struct {
		name string
		ti   frame.TableInfo
	}
	groups := map[tableKey]int{}
	var gs []group
	gi := make([]int32, len(frags)) // each fragment's group, by index: the fragments are not copied
	for i := range frags {
		k := tableKey{frags[i].world, frags[i].table}
		g, ok := groups[k]
		if !ok {
			g = len(gs)
			groups[k] = g
			ti := infos[k.world+"/"+k.table]
			gs = append(gs, group{name: ti.Name, ti: ti})
		}
		gi[i] = int32(g)
	}
	var names []string
	partOf := make([]int32, len(gs)) // a group's part number within its name
	seen := map[string]int32{}
	for g := range gs {
		n, ok := seen[gs[g].name]
		if !ok {
			names = append(names, gs[g].name)
		}
		partOf[g], seen[gs[g].name] = n, n+1
	}
	slices.Sort(names)
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	order := make([]int32, len(frags))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		ga, gb := gs[gi[a]], gs[gi[b]]
		if c := rank[ga.name] - rank[gb.name]; c != 0 {
			return c
		}
		return int(partOf[gi[a]]) - int(partOf[gi[b]])
	})
	parts := map[string][]part{}
	list := make([]listRow, 0, len(frags))
	for _, i := range order {
		f, g := &frags[i], gi[i]
		name, pn := gs[g].name, int(partOf[g])
		ps := parts[name]
		for len(ps) <= pn {
			ps = append(ps, part{})
		}
		p := &ps[pn]
		p.ti = gs[g].ti
		if f.filtered {
			if !p.filtered || f.token < p.lo {
				p.lo = f.token
			}
			if !p.filtered || f.token > p.hi {
				p.hi = f.token
			}
			p.filtered = true
		}
		if f.filtered && f.proven {
			p.proven++
		} else {
			p.others++
		}
		p.mixed = p.filtered && p.others > 0
		if f.keep != nil {
			p.keep = f.keep // the same bounds for every file of a part's segment
		}
		parts[name] = ps
		list = append(list, listRow{View: name, Part: int32(pn), Ord: int64(len(list)), World: f.world, Run: f.run,
			TableID: f.table, Tick: f.tick, CommitToken: f.token, WriterEpoch: f.epoch, Filtered: f.filtered, Fact: f.fact, Proven: f.proven,
			Object: f.object, Path: f.path, Rows: f.rows, Bytes: f.bytes, Compacted: f.keep != nil, FirstTick: f.first, LastTick: f.last})
	}
	return names, parts, list
}

// Macros returns the table macros the views define for queries to call:
// per view, <view>_at, _diff, _changes and _as_of.
func (s *Script) Macros() []string {
	if s.parts != nil {
		out := []string{diffFunc}
		if s.sweep {
			for _, v := range s.Views {
				out = append(out, atMacro(v), diffMacro(v), changesMacro(v), asOfMacro(v))
			}
			return out
		}
		for _, p := range s.parts {
			out = append(out, p.Macros()...)
		}
		return out
	}
	var out []string
	for _, v := range s.Views {
		out = append(out, atMacro(v), diffMacro(v), changesMacro(v), asOfMacro(v))
	}
	return out
}

// atMacro is the name of the macro of the rows of one tick of the view
// called name.
func atMacro(name string) string { return name + "_at" }

// tableViews writes the views of the table called name: name_raw (every
// visible row, commit columns included), name (its components) and the
// macro name_at(t) (the rows of tick t, reading only the files that may
// hold it).
func tableViews(sb *strings.Builder, name string, parts []part, upTo int64, dir string) ([]frame.Column, error) {
	// The component columns of every schema of the table, in the order
	// declared (frame.ComponentColumns).
	infos := make([]frame.TableInfo, len(parts))
	for i, p := range parts {
		infos[i] = p.ti
	}
	components := frame.ComponentColumns(infos...)
	var cols []string
	for _, c := range components {
		cols = append(cols, ident(c.Name))
	}
	var qs, comps, ats, betweens []string
	for i, p := range parts {
		q, err := partQueries(sb, name, i, p, cols, upTo, dir)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q.raw)
		comps = append(comps, q.comp)
		ats = append(ats, q.at)
		betweens = append(betweens, q.between)
	}
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP VIEW %s AS\n  %s;\n", ident(name+"_raw"), strings.Join(qs, "\n  UNION ALL BY NAME "))
	// The component view reads the files itself, with the same filters as
	// name_raw, rather than as a view over it: a query of it then binds
	// one view, and its plan has one projection between the scan and the
	// query (a count(*) costs DuckDB a projection per view it goes
	// through). Each part selects entity_id, tick and cols in that order.
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP VIEW %s AS\n  %s;\n", ident(name), strings.Join(comps, "\n  UNION ALL BY NAME "))
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP MACRO %s(t) AS TABLE SELECT entity_id, tick, %s FROM (\n    %s);\n",
		ident(atMacro(name)), strings.Join(cols, ", "), strings.Join(ats, "\n    UNION ALL BY NAME "))
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP MACRO %s(lo, hi) AS TABLE SELECT entity_id, tick, %s FROM (\n    %s);\n",
		ident(betweenMacro(name)), strings.Join(cols, ", "), strings.Join(betweens, "\n    UNION ALL BY NAME "))
	unlisted := slices.ContainsFunc(parts, func(p part) bool { return !p.filtered })
	sb.WriteString(changeMacros(name, cols, unlisted))
	sb.WriteString("\n")
	return components, nil
}

// Macro names of the view called name besides name_at: its changes
// between two ticks, tick by tick over a range, and its rows at an
// instant; and (not for users) its rows of a range of ticks, reading only
// the files that may hold them.
func diffMacro(name string) string    { return name + "_diff" }
func changesMacro(name string) string { return name + "_changes" }
func asOfMacro(name string) string    { return name + "_as_of" }
func betweenMacro(name string) string { return "worldfs_between_" + name }

// changeMacros defines the macros of the changes of the view called name
// (with component columns cols), in DuckLake's vocabulary: change_type is
// insert (present in the newer state only), delete (in the older only),
// or update_preimage and update_postimage (in both, some component
// IS DISTINCT FROM its other value: NULL equals NULL, NaN equals NaN,
// -0.0 equals 0.0, as SQL compares them), each row with the entity's
// component values in the state it shows.
//
//   - name_diff(a, b): tick a against tick b, reading each through
//     name_at (only the files that may hold a or b); tick is the tick the
//     row's values are of (a for delete and update_preimage, b for insert
//     and update_postimage).
//   - name_changes(from, to): each visible tick from..to against the
//     visible tick before it; tick is the tick at which the change became
//     visible (a streaming consumer's cursor).
//   - name_as_of(instant): the rows of the newest visible tick published
//     at or before a TIMESTAMPTZ (none before the first).
//
// unlisted: some of the table's rows are of ticks no catalog lists
// (legacy or uncoordinated history): the change feed takes its ticks from
// the rows too, filtering the view.
func changeMacros(name string, cols []string, unlisted bool) string {
	differs := "false"
	var ds []string
	for _, c := range cols {
		ds = append(ds, "x."+c+" IS DISTINCT FROM y."+c)
	}
	if len(ds) > 0 {
		differs = strings.Join(ds, " OR ")
	}
	of := func(side string) string { return side + ".entity_id, " + side + ".tick" + sideCols(cols, side) }
	colList := strings.Join(append([]string{"entity_id", "tick"}, cols...), ", ")
	var sb strings.Builder
	fmt.Fprintf(&sb, `CREATE OR REPLACE TEMP MACRO %[1]s(a, b) AS TABLE
  WITH x AS (SELECT * FROM %[2]s(a)), y AS (SELECT * FROM %[2]s(b))
  SELECT change_type, %[3]s FROM (
    SELECT CASE WHEN y.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, %[4]s, 0 AS worldfs_side
      FROM x LEFT JOIN y ON x.entity_id = y.entity_id WHERE y.entity_id IS NULL OR %[6]s
    UNION ALL
    SELECT CASE WHEN x.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END, %[5]s, 1
      FROM y LEFT JOIN x ON x.entity_id = y.entity_id WHERE x.entity_id IS NULL OR %[6]s)
  ORDER BY entity_id, worldfs_side;
`, ident(diffMacro(name)), ref(atMacro(name)), colList, of("x"), of("y"), differs)
	// The rows of the ticks from the one before `from` to `to`; x: each
	// row with the tick after its own (the state a change at that tick
	// left), y: the rows of ticks from..to.
	ticks := ref("worldfs_tick_list")
	plainRows := fmt.Sprintf("SELECT %s FROM %s WHERE tick BETWEEN coalesce((SELECT max(tick) FROM %s WHERE tick < f), f) AND t", colList, ref(name), "%[1]s")
	rows := alt(fmt.Sprintf("SELECT * FROM %s(coalesce(%s(f), f), t)", ref(betweenMacro(name)), tickBeforeFunc), fmt.Sprintf(plainRows, ticks))
	changeTicks := ticks
	if unlisted {
		changeTicks = fmt.Sprintf("(SELECT tick FROM %s UNION SELECT DISTINCT tick FROM %s)", ticks, ref(name))
		rows = fmt.Sprintf(plainRows, changeTicks)
	}
	fmt.Fprintf(&sb, `CREATE OR REPLACE TEMP MACRO %[1]s(f, t) AS TABLE
  WITH k AS (SELECT tick, lag(tick) OVER (ORDER BY tick) AS prev FROM %[7]s
             WHERE tick <= t AND tick >= coalesce((SELECT max(tick) FROM %[7]s WHERE tick < f), f)),
  r AS (%[2]s),
  x AS (SELECT r.*, k.tick AS worldfs_at FROM r JOIN k ON r.tick = k.prev WHERE k.tick >= f),
  y AS (SELECT r.*, r.tick AS worldfs_at FROM r WHERE r.tick >= f)
  SELECT tick, change_type, %[3]s FROM (
    SELECT x.worldfs_at AS tick, CASE WHEN y.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, %[4]s, 0 AS worldfs_side
      FROM x LEFT JOIN y ON x.entity_id = y.entity_id AND x.worldfs_at = y.worldfs_at WHERE y.entity_id IS NULL OR %[6]s
    UNION ALL
    SELECT y.worldfs_at, CASE WHEN x.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END, %[5]s, 1
      FROM y LEFT JOIN x ON x.entity_id = y.entity_id AND x.worldfs_at = y.worldfs_at WHERE x.entity_id IS NULL OR %[6]s)
  ORDER BY tick, entity_id, worldfs_side;
`, ident(changesMacro(name)), rows, strings.Join(append([]string{"entity_id"}, cols...), ", "),
		"x.entity_id"+sideCols(cols, "x"), "y.entity_id"+sideCols(cols, "y"), differs, changeTicks)
	// Before the first tick there is no tick to read: the witness (which
	// holds every tick) keeps the file list from being empty, the filter
	// keeps its rows out.
	tickAt := fmt.Sprintf("%s(epoch_ms(instant::TIMESTAMPTZ))", tickAtFunc)
	at := alt(fmt.Sprintf("SELECT * FROM %s(coalesce(%s, %d)) WHERE %s IS NOT NULL", ref(atMacro(name)), tickAt, int64(math.MinInt64), tickAt),
		fmt.Sprintf("SELECT %s FROM %s WHERE tick = (SELECT max(tick) FROM %s WHERE published_ms > 0 AND published_ms <= epoch_ms(instant::TIMESTAMPTZ))", colList, ref(name), ticks))
	fmt.Fprintf(&sb, "CREATE OR REPLACE TEMP MACRO %s(instant) AS TABLE %s;\n", ident(asOfMacro(name)), at)
	return sb.String()
}

// sideCols lists cols of side, each after a comma.
func sideCols(cols []string, side string) string {
	out := ""
	for _, c := range cols {
		out += ", " + side + "." + c
	}
	return out
}

// partQuery is what one part of a view adds to the view's queries.
type partQuery struct {
	// raw: every visible row, with the commit columns and cols (for
	// name_raw); comp: the same rows with entity_id, tick and cols only
	// (for the component view); at: tick t's rows (for the _at macro);
	// between: the rows of ticks lo..hi (for the range macro). raw, at
	// and between select the commit columns and cols.
	raw, comp, at, between string
}

// partQueries writes the statements that list part i of the view called
// name (its files, and for a filtered part the published (tick, token)
// pairs and which files need the row check), and returns the part's
// queries.
func partQueries(sb *strings.Builder, name string, i int, p part, cols []string, upTo int64, dir string) (pq partQuery, err error) {
	if p.empty {
		return emptyPart(p, cols, dir)
	}
	files := fmt.Sprintf("worldfs_files_%s_%d", name, i)
	legacy := !hasColumn(p.ti, frame.ColCommitToken)
	var witness string
	if p.filtered && !legacy {
		if witness, err = writeWitness(dir, p.ti); err != nil {
			return partQuery{}, err
		}
		fmt.Fprintf(sb, "SET VARIABLE %s = (SELECT %s FROM worldfs_fragments WHERE view = %s AND part = %d);\n",
			ident(files), witnessed(witness, "list(path ORDER BY ord)"), lit(name), i)
	} else {
		fmt.Fprintf(sb, "SET VARIABLE %s = (SELECT list(path ORDER BY ord) FROM worldfs_fragments WHERE view = %s AND part = %d);\n", ident(files), lit(name), i)
	}
	visible := ref(fmt.Sprintf("worldfs_visible_%s_%d", name, i))
	if p.mixed {
		fmt.Fprintf(sb, "CREATE OR REPLACE TEMP TABLE %s AS SELECT DISTINCT tick AS v_tick, commit_token AS v_token FROM worldfs_fragments WHERE view = %s AND part = %d AND filtered;\n",
			visible, lit(name), i)
	}
	// entity_id and tick, the components, then the commit columns: the
	// order of a table's files (frame.FormatDeclared).
	sel, comp := "entity_id, tick", "entity_id, tick"
	for _, c := range cols {
		col := ", NULL AS " + c
		if hasColumn(p.ti, strings.Trim(c, `"`)) {
			col = ", " + c
		}
		sel += col
		comp += col
	}
	if legacy {
		sel += ", '' AS commit_token, 0::BIGINT AS writer_epoch"
	} else {
		sel += ", commit_token, writer_epoch"
	}
	read := func(sel, list string) string {
		return fmt.Sprintf("SELECT %s FROM read_parquet(%s)", sel, verifiedList("getvariable("+lit(list)+")"))
	}
	// whole is the part's query of every visible row, selecting sel (the
	// filters name the files' own columns, whatever sel keeps of them).
	whole := func(sel string) string { return read(sel, files) }
	pq.at = read(sel, files) + " WHERE tick = t"
	pq.between = read(sel, files) + " WHERE tick BETWEEN lo AND hi"
	switch {
	case legacy:
		upToTick := fmt.Sprintf(" WHERE tick <= %d", upTo)
		whole = func(sel string) string { return read(sel, files) + upToTick }
		pq.at = whole(sel) + " AND tick = t"
		pq.between = whole(sel) + " AND tick BETWEEN lo AND hi"
	case p.filtered:
		proven, checked := fmt.Sprintf("worldfs_proven_%s_%d", name, i), fmt.Sprintf("worldfs_checked_%s_%d", name, i)
		if p.mixed {
			sb.WriteString(provenFiles(name, i, proven, checked, witness))
		} else {
			// Every file is proven by the catalog: all are read as they
			// are, no footer is read and no row is checked.
			proven = files
			sb.WriteString(provenBounds(name, i, proven+"_bounds", witness, "TRUE"))
		}
		// Of the files read as they are, only those whose tick bounds hold
		// t (the witness holds every tick), or meet lo..hi: the others'
		// footers are never opened. (Fields by subscript: a macro
		// parameter reads f.lo as a string.)
		bounds := "getvariable(" + lit(proven+"_bounds") + ")"
		pq.at = fmt.Sprintf("SELECT %s FROM read_parquet(%s) WHERE tick = t",
			sel, verifiedList("[f['path'] FOR f IN "+bounds+" IF f['lo'] <= t AND t <= f['hi']]"))
		pq.between = fmt.Sprintf("SELECT %s FROM read_parquet(%s) WHERE tick BETWEEN lo AND hi",
			sel, verifiedList("[f['path'] FOR f IN "+bounds+" IF f['lo'] <= hi AND lo <= f['hi']]"))
		keep := ""
		if p.keep != nil && (p.keep.From != math.MinInt64 || p.keep.To != math.MaxInt64) {
			// Compacted files hold other ticks' rows too (a fork's
			// parent's, past the fork point; those past a pin). Bounds
			// that hold every tick filter nothing, and a filter would
			// keep count(*) from being answered from the footers.
			keep = fmt.Sprintf("tick BETWEEN %d AND %d", p.keep.From, p.keep.To)
			pq.at += " AND " + keep
			pq.between += " AND " + keep
		}
		whole = func(sel string) string {
			q := read(sel, proven)
			if keep != "" {
				q += " WHERE " + keep
			}
			if p.mixed {
				q += "\n  UNION ALL BY NAME " + tokenCheck(read(sel, checked), visible, p.lo, p.hi)
			}
			return q
		}
		if p.mixed {
			checkedQ := tokenCheck(read(sel, checked), visible, p.lo, p.hi)
			pq.at += "\n    UNION ALL BY NAME " + checkedQ + " AND tick = t"
			pq.between += "\n    UNION ALL BY NAME " + checkedQ + " AND tick BETWEEN lo AND hi"
		}
	}
	pq.raw, pq.comp = whole(sel), whole(comp)
	return pq, nil
}

// emptyPart is the queries of a part of a table that has no file: they
// read the table's empty witness, so its views have its columns and no
// row.
func emptyPart(p part, cols []string, dir string) (partQuery, error) {
	witness, err := writeWitness(dir, p.ti)
	if err != nil {
		return partQuery{}, err
	}
	sel, comp := "entity_id, tick", "entity_id, tick"
	for _, c := range cols {
		col := ", NULL AS " + c
		if hasColumn(p.ti, strings.Trim(c, `"`)) {
			col = ", " + c
		}
		sel += col
		comp += col
	}
	sel += ", commit_token, writer_epoch"
	read := func(sel string) string { return fmt.Sprintf("SELECT %s FROM %s", sel, readOne(witness)) }
	return partQuery{raw: read(sel), comp: read(comp), at: read(sel) + " WHERE tick = t", between: read(sel) + " WHERE tick BETWEEN lo AND hi"}, nil
}

// manifestsView defines worldfs_manifests: a row per published tick and
// file its manifest names. The files of one tick are in the fragment list
// with their tick; the ticks that name compacted files, if compacted,
// come from where markCompacted says (compacted.go), read only when the
// view is.
func manifestsView(compacted bool) string {
	out := "CREATE OR REPLACE TEMP VIEW worldfs_manifests AS SELECT world, run, tick, commit_token, writer_epoch, table_id, object AS path, nullif(rows, -1) AS rows\n" +
		"  FROM worldfs_fragments WHERE filtered AND NOT fact AND NOT compacted"
	if compacted {
		out += markCompacted
	}
	return out + ";\n"
}

// provenFiles splits the files of a filtered part, when the views are
// opened, into those read as they are (variable proven) and those read
// through the row check (variable checked). A file is read as is when
// every row is its publication's (tick, token): the catalog proves it for
// fragments stored under their own token, and for any other file its
// Parquet statistics may (every row group with tick and commit_token each
// of one value, the very pair its manifest published). Only the footers of
// files the catalog does not prove are read. Every other file (no
// statistics, a mixed or foreign stamp: a crashed attempt's rows handed in
// by mistake) keeps the row check, and so does a file found missing or
// damaged as its footer is about to be read (verify.go: only the queries
// that read it fail). Each list starts with witness, an empty file of the
// table's schema, so that none is ever empty (the lists the views read
// name it twice: witnessed). Variable
// proven_bounds lists the files read as they are with the ticks their
// rows may hold (the witness first, holding every tick), for
// <table>_at(t). A file several claims name (a batch of facts shares one)
// is read once: each of its rows is kept under its own claim's token.
func provenFiles(view string, part int, proven, checked, witness string) string {
	where := fmt.Sprintf("view = %s AND part = %d AND filtered", lit(view), part)
	set, unproven := ident(proven+"_set"), proven+"_unproven"
	return fmt.Sprintf(`SET VARIABLE %[2]s = (SELECT list_prepend(%[6]s, coalesce(list(path), []::VARCHAR[])) FROM worldfs_fragments WHERE %[3]s AND NOT proven);
CREATE OR REPLACE TEMP TABLE %[1]s AS
  SELECT path FROM worldfs_fragments WHERE %[3]s AND proven
  UNION ALL
  SELECT f.path FROM worldfs_fragments f
  JOIN (SELECT file_name, path_in_schema AS col, stats_min_value AS lo, stats_max_value AS hi
        FROM parquet_metadata(%[7]s) WHERE path_in_schema IN ('tick', 'commit_token')) m ON m.file_name = f.path
  WHERE f.%[3]s AND NOT f.proven
  GROUP BY f.path, f.tick, f.commit_token
  HAVING bool_and(m.lo IS NOT NULL AND m.lo = m.hi AND m.lo = CASE m.col WHEN 'tick' THEN f.tick::VARCHAR ELSE f.commit_token END)
     AND count(*) FILTER (WHERE m.col = 'tick') = count(*) FILTER (WHERE m.col = 'commit_token');
SET VARIABLE %[4]s = (SELECT %[8]s FROM (SELECT path, min(ord) AS ord FROM worldfs_fragments WHERE %[3]s AND path IN (SELECT path FROM %[1]s) GROUP BY path));
SET VARIABLE %[5]s = (SELECT %[8]s FROM (SELECT path, min(ord) AS ord FROM worldfs_fragments WHERE %[3]s AND path NOT IN (SELECT path FROM %[1]s) GROUP BY path));
`, set, ident(unproven), where, ident(proven), ident(checked), lit(witness), verifiedListNow("getvariable("+lit(unproven)+")"),
		witnessed(witness, "list(path ORDER BY ord)")) +
		provenBounds(view, part, proven+"_bounds", witness, "path IN (SELECT path FROM "+set+")")
}

// witnessed is the SQL of a list of files that a view reads, list (an
// aggregate, NULL if no file), after the witness named twice. DuckDB
// learns a list's columns from its first file, and opens its first two
// entries when it binds it (to tell one file from several), both when the
// script defines the view and when a query binds it: so no fragment is
// opened then, and a file missing or damaged in the bucket fails only the
// queries that read it (verify.go), not the views.
func witnessed(witness, list string) string {
	return fmt.Sprintf("list_concat([%[1]s, %[1]s], coalesce(%[2]s, []::VARCHAR[]))", lit(witness), list)
}

// provenBounds sets variable bounds to the files of a filtered part read
// as they are (those of its fragment list rows that match where) with the
// ticks their rows may hold, the witness first (holding every tick), for
// <table>_at(t).
func provenBounds(view string, part int, bounds, witness, where string) string {
	return fmt.Sprintf(`SET VARIABLE %s = (SELECT list({'path': path, 'lo': first_tick, 'hi': last_tick} ORDER BY ord) FROM (
  SELECT %s AS path, '%d'::BIGINT AS first_tick, '%d'::BIGINT AS last_tick, -1::BIGINT AS ord
  UNION ALL SELECT path, first_tick, last_tick, min(ord) FROM worldfs_fragments WHERE view = %s AND part = %d AND filtered AND %s
  GROUP BY path, first_tick, last_tick));
`, ident(bounds), lit(witness), int64(math.MinInt64), int64(math.MaxInt64), lit(view), part, where)
}

// writeWitness writes (once) an empty Parquet file of ti's schema in dir
// and returns its path.
func writeWitness(dir string, ti frame.TableInfo) (string, error) {
	path := witnessPath(dir, ti.ID)
	if _, err := os.Stat(path); err == nil {
		touch(path) // in use again: collection counts from its last use
		return path, nil
	}
	t, err := frame.TableFromInfo(ti)
	if err != nil {
		return "", err
	}
	data, err := frame.EncodeFragment(frame.NewFrame(t), frame.Stamp{})
	if err != nil {
		return "", err
	}
	return path, writeAtomic(dir, path, data)
}

// tokenCheck keeps the rows of a group of manifest-named files whose
// (tick, commit_token) a manifest published, and epoch-0 rows, by
// index.RowRule rendered as SQL: rows of crashed attempts or stale
// writers never match, even if their file is handed in. The first conjunct is a constant range on commit_token alone,
// which DuckDB pushes into the Parquet scan and checks against each row
// group's statistics, skipping foreign tokens outside it unread; the
// semi-join on the published (tick, token) pairs is the exact check.
func tokenCheck(q, visible, lo, hi string) string {
	rng := fmt.Sprintf("(commit_token = '' OR commit_token BETWEEN %s AND %s)", lit(lo), lit(hi))
	return q + " WHERE " + rng + " AND " + index.RowRule.SQL(rowColumns("SELECT v_tick, v_token FROM "+visible))
}

// rowColumns names the commit columns of the views' reads for
// index.RowExpr.SQL, with published the query of the published pairs.
func rowColumns(published string) index.SQLColumns {
	return index.SQLColumns{Tick: "tick", Token: "commit_token", Epoch: "writer_epoch", Published: published}
}

// factValue is the SQL of a fact's value: its components' columns (not
// the key, commit or FactMeta columns) as one JSON object, by column
// name, in the table's order.
func factValue(cols []frame.Column) string {
	var fields []string
	for _, c := range cols {
		if c.Component != "" && c.Component != frame.FactComponent {
			fields = append(fields, fmt.Sprintf("%s: %s", lit(c.Name), ident(c.Name)))
		}
	}
	if len(fields) == 0 {
		return "'{}'"
	}
	return fmt.Sprintf("to_json({%s})::VARCHAR", strings.Join(fields, ", "))
}

func hasColumn(ti frame.TableInfo, name string) bool {
	return slices.ContainsFunc(ti.Columns, func(c frame.Column) bool { return c.Name == name })
}

// factViews defines worldfs_facts (every visible external fact of every
// fact table, by its FactMeta, its components' columns as one JSON
// object, value) and worldfs_receipts (visible evaluation receipts, their
// JSON columns typed), both empty when there are none. columns are the
// views' columns by table.
func factViews(factNames []string, columns map[string][]frame.Column) string {
	var facts []string
	receipts := false
	for _, name := range factNames {
		if name == frame.ReceiptTableName {
			receipts = true
			continue
		}
		facts = append(facts, fmt.Sprintf("SELECT entity_id AS fact_id, tick, %s AS table_name, fact_producer AS producer, fact_external_id AS external_id, fact_digest AS digest, %s AS value, commit_token FROM %s",
			lit(name), factValue(columns[name]), ident(name+"_raw")))
	}
	if len(facts) == 0 {
		facts = []string{"SELECT NULL::BIGINT AS fact_id, NULL::BIGINT AS tick, NULL::VARCHAR AS table_name, NULL::VARCHAR AS producer, NULL::VARCHAR AS external_id, NULL::VARCHAR AS digest, NULL::VARCHAR AS value, NULL::VARCHAR AS commit_token WHERE false"}
	}
	out := fmt.Sprintf("CREATE OR REPLACE TEMP VIEW worldfs_facts AS\n  %s;\n", strings.Join(facts, "\n  UNION ALL "))
	from := "(SELECT NULL::BIGINT AS entity_id, NULL::BIGINT AS tick, NULL::VARCHAR AS commit_token, NULL::VARCHAR AS receipt_evaluation_id, NULL::VARCHAR AS receipt_grader_id, NULL::VARCHAR AS receipt_contract, NULL::VARCHAR AS receipt_contract_digest, NULL::VARCHAR AS receipt_subject, NULL::VARCHAR AS receipt_subject_digest, NULL::VARCHAR AS receipt_outcomes WHERE false)"
	if receipts {
		from = ident(frame.ReceiptTableName + "_raw")
	}
	sel := make([]string, len(frame.ReceiptColumns))
	for i, c := range frame.ReceiptColumns {
		sel[i] = ident(c.From)
		if c.JSON {
			sel[i] += "::JSON"
		}
		sel[i] += " AS " + ident(c.Name)
	}
	return out + "CREATE OR REPLACE TEMP VIEW worldfs_receipts AS SELECT " + strings.Join(sel, ", ") + " FROM " + from + ";\n"
}
