package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints of an export, for crash tests.
const (
	// FailpointPlanned: the export holds its intents and planned every
	// table from the catalog; it has written nothing yet.
	FailpointPlanned = "export.iceberg.planned"
	// FailpointWritten: a table's manifests and manifest list are written,
	// its new metadata version is not.
	FailpointWritten = "export.iceberg.written"
	// FailpointCommitted: a table's new metadata version is committed.
	FailpointCommitted = "export.iceberg.committed"
)

// ErrNotFound: the world, run, tick or token named has nothing to export.
var ErrNotFound = errors.New("not found")

// ErrRace: another export committed the same metadata version first.
var ErrRace = errors.New("another export of the table committed first")

// Options say what to export and where.
type Options struct {
	World string
	// Run (default index.DefaultRun).
	Run string
	// AtTick pins the export to the visible state up to this tick; Token
	// to the tick that commit token published (neither: the head).
	AtTick *int64
	Token  string
	// Prefix is the object prefix the tables go under, one directory per
	// table (default DefaultPrefix).
	Prefix string
	// Full plans every table in full: it reads each table's previous
	// manifests and checks every file against the catalog, instead of
	// appending the files of the ticks since the previous snapshot.
	Full bool
	// Base is the URI of the bucket's root as other engines address it
	// (default: file://<dir>/ of a local bucket, gs://<bucket>/<prefix> of
	// a GCS bucket); the metadata names every file by Base + object name.
	Base string
	// Catalog is World's catalog, open (index.Open), through which the
	// export holds an intent while it is in flight (see Export); nil:
	// Export opens one for the call (a whole load of the catalog). A
	// program that exports again and again (Follow does) passes one.
	Catalog *index.Catalog
}

// DefaultPrefix is where a run's tables are exported unless told.
func DefaultPrefix(world, run string) string { return index.IcebergPrefix(world, run) }

// RegistryPrefix is where an export records each table it writes, so
// that collection finds every export of a world, whatever its prefix.
func RegistryPrefix(world string) string { return index.ExportRegistryPrefix(world) }

// EnsureDefaults fills in what is unset with its default and returns o:
// Run index.DefaultRun, Prefix DefaultPrefix (without a trailing slash), and Base
// the URI of b's root when b has one (bucket.Addressable), ending in a
// slash.
func (o *Options) EnsureDefaults(b bucket.Bucket) *Options {
	if o.Run == "" {
		o.Run = index.DefaultRun
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix(o.World, o.Run)
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	if o.Base == "" {
		o.Base, _ = BaseURI(b)
	}
	if o.Base != "" && !strings.HasSuffix(o.Base, "/") {
		o.Base += "/"
	}
	return o
}

// Validate checks the options once their defaults are in (Export and
// Expire call EnsureDefaults, then Validate); the error names the field
// and its value.
func (o *Options) Validate() error {
	if o.World == "" {
		return errors.New("export: a world is required")
	}
	if err := index.ValidateWorldID(o.World); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := index.ValidateRunName(o.Run); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if o.AtTick != nil && o.Token != "" {
		return fmt.Errorf("export: AtTick %d and Token %q: pin to a tick or to a commit token, not both", *o.AtTick, o.Token)
	}
	if err := bucket.ValidateName(o.Prefix); err != nil {
		return fmt.Errorf("export: Prefix %q: %w", o.Prefix, err)
	}
	if o.Base == "" {
		return fmt.Errorf("export: %w", errNoBase)
	}
	if o.Catalog != nil && o.Catalog.World() != o.World {
		return fmt.Errorf("export: Catalog is world %s's, World is %s", o.Catalog.World(), o.World)
	}
	return nil
}

// ready is opts with its defaults in, for an export from b, or why they
// are refused.
func ready(b bucket.Bucket, opts Options) (Options, error) {
	err := opts.EnsureDefaults(b).Validate()
	if errors.Is(err, errNoBase) {
		return opts, fmt.Errorf("export: no URI is known for bucket %v; give the base URI (--base)", b)
	}
	return opts, err
}

// errNoBase: Options.Base is empty, and the bucket has no URI to default
// it to.
var errNoBase = errors.New("Base is empty and no URI is known for the bucket; give the base URI (--base)")

// BaseURI returns the URI other engines address bucket b's root by.
func BaseURI(b bucket.Bucket) (string, error) {
	if ab, ok := bucket.As[bucket.Addressable](b); ok {
		return ab.URI(), nil
	}
	return "", fmt.Errorf("export: no URI is known for bucket %v; give the base URI (--base)", b)
}

// Result is what an export did.
type Result struct {
	World, Run string
	// Tick and Token are the pinned tick and the token that published it.
	Tick  int64
	Token string
	// Seq is the sequence of the world's catalog the export read.
	Seq    uint64
	Tables []TableResult
}

// TableResult is what an export did to one table.
type TableResult struct {
	Table string // the readable table name
	// Metadata is the URI of the table's current metadata file; Version its
	// number (v<Version>.metadata.json).
	Metadata   string
	Version    int
	SnapshotID int64
	// Operation of the new snapshot: append, replace or overwrite; ""
	// when the table was already exported as it is (nothing written).
	Operation string
	// Files and Rows the snapshot holds; Added and Removed files against
	// the previous snapshot; Rewritten: files written filtered under the
	// export prefix in this export.
	Files, Added, Removed, Rewritten int
	Rows                             int64
	// Incremental: the export planned only the ticks after the previous
	// snapshot's and did not read its manifests (see incremental.go).
	Incremental bool
	// Reused: files of rows checked by an earlier export whose filtered
	// copy served again, unread.
	Reused int
	// Tags are the table's Iceberg tags, the exported world's tags of the
	// run up to the pin (tags.go): the snapshot each names, by tag.
	Tags map[string]int64 `json:"Tags,omitempty"`
}

// Export writes, for every table of the pinned (world, run), one Iceberg
// snapshot of its visible rows: a new metadata version when the visible
// files changed since the table's last export, nothing otherwise. Each
// table commits alone, by creating its next metadata version (create-only,
// like a log slot), after the version's reference list (what collection
// keeps for it, frame/exportrefs.go): a crash or a race leaves the
// previous version current and valid.
//
// An export in flight is kept by an intent (invariant 16), on the
// catalog of the world and of each ancestor it reads, opened before it
// plans and closed once every table's version landed. No collector
// deletes a file the plan names, whatever the retention, for collection
// (maintenance.Collect) lists a world's data objects, then reads its
// catalog state S exactly, then reads the export registry and each
// registered table's latest version and reference list, and deletes only
// what is listed, not named by S, not pinned by an intent open in S and
// in none of those lists. The export opens intent I at sequence i, plans
// from a state P at or after i (so every file f it plans is named at
// P), registers its tables, writes each table's reference list (the
// previous version's list and the files of the new snapshot) before the
// version, and closes I. For a file f the plan names:
//
//   - I not yet open in S (S before i): if S names f it stays; if not, f
//     was first named after S (a replaced file is never named again:
//     fragments carry their tick's token, compacted files their
//     compaction's intent), so f was a commit in flight when S was read,
//     which the catalog keeps by its own writer's token or intent.
//   - I open in S: if S names f it stays; if not, either f was first named
//     after S (as above) or an entry after P replaced it, at a sequence
//     past i, which I's pin keeps (index.State.PinSeq).
//   - I closed in S: the close came after the version and its reference
//     list, and after the registration, so the collector, reading the
//     registry after S, finds that version or a later one: the version's
//     list holds f; a later one (another export, or Expire) holds every
//     file of the snapshots it keeps, f among them while a snapshot that
//     names f is live.
//
// The files a new version carries over from the previous snapshot (an
// incremental export does not plan them) are in the previous version's
// list and in the new one's, whichever the collector reads. An intent
// whose lease ended is closed by collection: the export renews it before
// each commit and refuses to commit once it is closed.
func Export(ctx context.Context, b bucket.Bucket, opts Options) (*Result, error) {
	opts, err := ready(b, opts)
	if err != nil {
		return nil, err
	}
	e := &exporter{b: b, opts: opts, cat: opts.Catalog, held: map[string]*index.HeldIntent{}, cats: map[string]*index.Catalog{}}
	defer e.release(ctx)
	if e.cat == nil {
		if e.cat, err = e.catalog(ctx, opts.World); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		res, err := e.export(ctx)
		switch {
		case errors.Is(err, ErrRace) && attempt < 3:
			// Plan again on the winner's version.
		default:
			return res, err
		}
	}
}

// export plans and exports every table once.
func (e *exporter) export(ctx context.Context) (*Result, error) {
	opts := e.opts
	if err := e.plan(ctx); err != nil {
		return nil, err
	}
	res := &Result{World: opts.World, Run: opts.Run, Tick: e.pin.Tick.Tick, Token: e.pin.CommitToken, Seq: e.seq}
	names := slices.Sorted(maps.Keys(e.tables))
	// Every table is registered before any commits, so that a table whose
	// first export a crash cut short is found (and planned in full) next
	// time, and so that collection keeps what its versions reference: in
	// the world's registry, and in that of each ancestor whose files the
	// export may name (each time: an export written before ancestors'
	// registrations gets them).
	for _, name := range names {
		loc := e.loc(name)
		r := frame.ExportRegistration{Table: loc, Base: opts.Base, World: opts.World}
		for w := range e.seqs {
			if w == opts.World && e.prevs[loc] != nil {
				continue
			}
			if err := register(ctx, e.b, w, r); err != nil {
				return res, err
			}
		}
	}
	for _, name := range names {
		tr, err := e.tableOnce(ctx, e.tables[name], e.loc(name))
		if err != nil {
			return res, fmt.Errorf("world %s run %s: table %s: %w", opts.World, opts.Run, name, err)
		}
		res.Tables = append(res.Tables, tr)
	}
	// Tables exported incrementally with no new file are as they were.
	for loc := range e.inc {
		name := strings.TrimPrefix(loc, opts.Prefix+"/")
		if e.tables[name] != nil {
			continue
		}
		if tr, changed, err := e.retag(ctx, loc, name); err != nil {
			return res, fmt.Errorf("world %s run %s: table %s: %w", opts.World, opts.Run, name, err)
		} else if changed {
			tr.Incremental = true
			res.Tables = append(res.Tables, tr)
			continue
		}
		if err := e.upgrade(ctx, loc); err != nil {
			return res, fmt.Errorf("world %s run %s: table %s: %w", opts.World, opts.Run, name, err)
		}
		p := e.prevs[loc]
		s := p.m.current()
		tot := totalsOf(s)
		res.Tables = append(res.Tables, TableResult{Table: name, Metadata: e.uri(metadataName(loc, p.ver)), Version: p.ver,
			SnapshotID: s.SnapshotID, Incremental: true, Files: int(tot.files), Rows: tot.rows, Tags: tagsOf(p.m)})
	}
	slices.SortFunc(res.Tables, func(a, b TableResult) int { return strings.Compare(a.Table, b.Table) })
	return res, nil
}

func (e *exporter) loc(table string) string { return index.IcebergTable(e.opts.Prefix, table) }

type exporter struct {
	b    bucket.Bucket
	opts Options
	cat  *index.Catalog // the world's

	// held: the intents the export holds, by world; cats: the catalogs it
	// opened (the world's, unless given, and its ancestors'), by world.
	held map[string]*index.HeldIntent
	cats map[string]*index.Catalog

	// Set by plan.
	own  *index.State
	view *index.View
	pin  index.TickRef
	seq  uint64
	// seqs: the sequence of each world's catalog read (the lineage's).
	seqs map[string]uint64
	// prevs: each table's newest version, by location.
	prevs map[string]*previous
	// inc: the tables exported incrementally, by location, with the tick
	// their current snapshot holds files up to.
	inc    map[string]int64
	tables map[string]*table // by readable name
	// tagged: the tags written as refs (tags.go); upTo: the tables'
	// files up to a tagged tick, planned once.
	tagged []taggedTick
	upTo   map[int64]map[string]*table
}

// table is one readable table's visible files (of every table id and
// lineage segment of that name).
type table struct {
	name  string
	infos map[string]frame.TableInfo // by world/id
	files []index.File
	// visible: the (tick, token) pairs published for each world/id, which
	// a row of a file the catalog does not prove must carry.
	visible map[string]stampSet
	// inc: the table is exported incrementally: only its files of ticks
	// after last are new.
	inc  bool
	last int64
}

type stamp struct {
	tick  int64
	token string
}

// stampSet is a set of published (tick, token) pairs (an index.Published).
type stampSet map[stamp]bool

func (s stampSet) Publishes(tick int64, token string) bool { return s[stamp{tick, token}] }

// plan plans the export from the world's catalog, read at or after the
// intent the export holds on it (see Export), and its ancestors' (each
// read the same way).
func (e *exporter) plan(ctx context.Context) error {
	own, err := e.state(ctx, e.opts.World)
	if err != nil {
		return err
	}
	if err := e.open(ctx, own); err != nil {
		return err
	}
	e.upTo = nil
	e.planTags()
	from, err := e.frontier(ctx)
	if err != nil {
		return err
	}
	if err := e.planFiles(ctx, own, from); err != nil {
		return err
	}
	if from != math.MinInt64 && e.newTable() {
		// A table no previous snapshot covers (a new one): every tick is
		// planned.
		if err := e.planFiles(ctx, own, math.MinInt64); err != nil {
			return err
		}
	}
	e.markIncremental()
	failpoint.Hit(FailpointPlanned)
	return nil
}

// state returns world's catalog state, exactly, read after the export's
// intent on it opened (opening the catalog and the intent the first
// time). A world that does not exist gets no intent: its state says so.
func (e *exporter) state(ctx context.Context, world string) (*index.State, error) {
	cat := e.cat
	if world != e.opts.World {
		if cat = e.cats[world]; cat == nil {
			var err error
			if cat, err = e.catalog(ctx, world); err != nil {
				return nil, err
			}
		}
	}
	if e.held[world] == nil {
		s, err := cat.Exact(ctx)
		if err != nil || !s.World.Created {
			return s, err
		}
		in, err := cat.OpenIntent(ctx, fmt.Sprintf("export of world %s run %s to %s", e.opts.World, e.opts.Run, e.opts.Prefix), 0)
		if err != nil {
			return nil, err
		}
		e.held[world] = in
	}
	return cat.Exact(ctx)
}

// catalog opens world's catalog for the export (closed by release).
func (e *exporter) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	cat, err := index.Open(ctx, e.b, world, index.Options{NoCompactor: true})
	if err != nil {
		return nil, err
	}
	e.cats[world] = cat
	return cat, nil
}

// renew renews the export's intents before a commit: it fails if one was
// closed (its lease ended), for the files it kept may be gone.
func (e *exporter) renew(ctx context.Context) error {
	for _, in := range e.held {
		if err := in.Renew(ctx); err != nil {
			return fmt.Errorf("the export's intent: %w", err)
		}
	}
	return nil
}

// release closes the export's intents, then the catalogs it opened. A
// close that fails leaves the intent to its lease: collection keeps more
// until then, and nothing else.
func (e *exporter) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, in := range e.held {
		_ = in.Close(ctx)
	}
	for _, cat := range e.cats {
		cat.Close()
	}
}

// open resolves the view of the export's world and run over own (the
// world's state, whole or loaded in part) and its ancestors' whole
// states, checks that every segment can be exported, pins the tick
// exported and reads the tables' previous versions.
func (e *exporter) open(ctx context.Context, own *index.State) error {
	world, run := e.opts.World, e.opts.Run
	if !own.World.Created {
		for _, err := range e.b.List(ctx, index.DataPrefix(world), "") {
			if err != nil {
				return err
			}
			return fmt.Errorf("world %s: %s", world, uncoordinated)
		}
		return fmt.Errorf("world %s: %w", world, ErrNotFound)
	}
	e.own, e.seq = own, own.Seq
	view, err := index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		if w == world {
			return own, nil
		}
		return e.state(ctx, w)
	}, world, run)
	if err != nil {
		return err
	}
	e.view, e.seqs = view, map[string]uint64{world: own.Seq}
	for _, seg := range view.Segments {
		e.seqs[seg.World] = seg.State.Seq
		if seg.Mode != index.Filtered {
			return fmt.Errorf("world %s run %s: %s", seg.World, seg.Run, uncoordinated)
		}
		if err := refuseLegacy(ctx, e.b, seg.World); err != nil {
			return err
		}
	}
	var ok bool
	switch {
	case e.opts.Token != "":
		e.pin, ok = view.Token(e.opts.Token)
		if !ok {
			return fmt.Errorf("world %s run %s: commit token %q publishes no visible tick: %w", world, run, e.opts.Token, ErrNotFound)
		}
	case e.opts.AtTick != nil:
		e.pin, ok = view.Tick(*e.opts.AtTick)
		if !ok {
			return fmt.Errorf("world %s run %s: tick %d is not a visible tick: %w", world, run, *e.opts.AtTick, ErrNotFound)
		}
	default:
		e.pin, ok = view.Head()
		if !ok {
			return fmt.Errorf("world %s run %s: no published tick: %w", world, run, ErrNotFound)
		}
	}
	e.prevs, err = e.readPrevious(ctx)
	return err
}

// newTable reports whether a table planned has no previous snapshot
// covering it (receipts aside, planned in full anyway).
func (e *exporter) newTable() bool {
	for name := range e.tables {
		if _, ok := e.inc[e.loc(name)]; !ok && name != frame.ReceiptTableName {
			return true
		}
	}
	return false
}

// markIncremental marks the tables exported incrementally with the tick
// their previous snapshot holds files up to.
func (e *exporter) markIncremental() {
	for name, t := range e.tables {
		if last, ok := e.inc[e.loc(name)]; ok {
			t.inc, t.last = true, last
		}
	}
}

// planFiles collects the visible files of the ticks from..pin, and every
// receipt, by table.
func (e *exporter) planFiles(ctx context.Context, own *index.State, from int64) error {
	e.tables = map[string]*table{}
	if err := e.collect(ctx, e.tables, e.view, from, e.pin.Tick.Tick); err != nil {
		return err
	}
	// Evaluation receipts are the world's, whatever run they judged (as
	// the views show them); they land at no tick, so they are planned in
	// full.
	return e.collect(ctx, e.tables, index.OwnView(own, index.EvaluationRun), math.MinInt64, math.MaxInt64)
}

// collect adds to tables, by readable name, the visible files of view's
// ticks from..to.
func (e *exporter) collect(ctx context.Context, tables map[string]*table, view *index.View, from, to int64) error {
	var ferr error
	add := func(f index.File) bool {
		key := f.World + "/" + f.Table
		var t *table
		for _, c := range tables {
			if _, ok := c.infos[key]; ok {
				t = c
			}
		}
		if t == nil {
			ti, err := frame.ReadTableInfo(ctx, e.b, f.World, f.Table)
			if err != nil {
				ferr = fmt.Errorf("world %s: table %s has no description: %w", f.World, f.Table, err)
				return false
			}
			if t = tables[ti.Name]; t == nil {
				t = &table{name: ti.Name, infos: map[string]frame.TableInfo{}, visible: map[string]stampSet{}}
				tables[ti.Name] = t
			}
			t.infos[key] = ti
			t.visible[key] = stampSet{}
		}
		t.files = append(t.files, f)
		t.visible[key][stamp{f.Tick, f.Token}] = true
		return true
	}
	err := view.Files(from, to, add)
	return cmp.Or(err, ferr)
}

// uncoordinated says why a world without a catalog (or a fork of one)
// cannot be exported.
const uncoordinated = "history without manifests (uncoordinated) cannot be exported: every row of it is visible and no catalog names its files"

// refuseLegacy refuses a world with legacy (pre-commit-identity) tables:
// their rows carry no commit columns, and the catalog names none of their
// files.
func refuseLegacy(ctx context.Context, b bucket.Bucket, world string) error {
	for a, err := range b.List(ctx, index.TableInfoPrefix(world)+"l", "") { // legacy table ids begin with l
		if err != nil {
			return err
		}
		return fmt.Errorf("world %s: legacy (pre-commit-identity) history, such as %s, cannot be exported", world, a.Name)
	}
	return nil
}

// dataFile is one file a snapshot holds.
type dataFile struct {
	uri        string
	rows, size int64
	// lo and hi bound the ticks of its rows.
	lo, hi int64
}

func (e *exporter) uri(name string) string { return e.opts.Base + name }

func (e *exporter) objectOf(uri string) (string, error) { return objectOf(e.opts.Base, uri) }

func objectOf(base, uri string) (string, error) {
	name, ok := strings.CutPrefix(uri, base)
	if !ok {
		return "", fmt.Errorf("%s is not in the bucket %s: %w", uri, base, ErrCorrupt)
	}
	return name, nil
}

// tableOnce exports one table once: it reads the table's latest version,
// writes the new snapshot's manifests and commits the next version, or
// reports the table already exported as it is.
func (e *exporter) tableOnce(ctx context.Context, t *table, loc string) (TableResult, error) {
	tr := TableResult{Table: t.name}
	x, err := e.readTable(ctx, t, loc)
	if x != nil {
		tr.Rewritten, tr.Reused = x.rewritten, x.reused
	}
	if err != nil {
		return tr, err
	}
	x.diff()
	tr.Rows, tr.Files, tr.Incremental = x.base.rows, int(x.base.files)+len(x.uris), x.t.inc
	for _, u := range x.uris {
		tr.Rows += x.want[u].rows
	}
	tr.Added, tr.Removed = len(x.added), len(x.removed)
	same := x.prevSnap != nil && len(x.added) == 0 && len(x.removed) == 0 && x.prevSnap.SchemaID == x.sc.ID
	if same && !t.inc {
		stale, err := e.stale(ctx, x.prevSnap)
		if err != nil {
			return tr, err
		}
		same = !stale
	}
	if same {
		// Already exported as it is: a new version only if the tags
		// changed (the refs), and a version an older worldfs wrote gets
		// the reference list it lacks.
		if rt, changed, err := e.retag(ctx, loc, t.name); err != nil || changed {
			rt.Incremental, rt.Rewritten, rt.Reused = tr.Incremental, tr.Rewritten, tr.Reused
			return rt, err
		}
		tr.Metadata, tr.Version, tr.SnapshotID, tr.Tags = e.uri(metadataName(loc, x.ver)), x.ver, x.prevSnap.SnapshotID, tagsOf(x.prev)
		return tr, e.upgrade(ctx, loc)
	}
	e.identify(x)
	tr.SnapshotID = x.snapID
	listName, err := e.writeManifests(ctx, x)
	if err != nil {
		return tr, err
	}
	op, summary := e.summary(x, tr.Rows)
	tr.Operation = op
	next := e.nextMetadata(x, listName, summary)
	// The tags' refs, with the snapshots of tagged ticks no snapshot
	// holds yet.
	tagged, err := e.tagRefs(ctx, loc, t.name, x.sc, &next)
	if err != nil {
		return tr, err
	}
	tr.Tags = tagsOf(&next)
	// The new version's live snapshots are the previous version's, the
	// new one and those of tagged ticks: what the previous version
	// references and the new snapshots' files (an incremental snapshot's
	// others are the previous one's).
	objects, err := listed(ctx, e.b, loc, e.prevs[loc])
	if err != nil {
		return tr, err
	}
	objects = append(objects, tagged...)
	for _, u := range x.uris {
		obj, err := e.objectOf(u)
		if err != nil {
			return tr, err
		}
		objects = append(objects, obj)
	}
	failpoint.Hit(FailpointWritten)
	if err := e.renew(ctx); err != nil {
		return tr, err
	}
	if err := commitMetadata(ctx, e.b, loc, x.ver+1, &next, objects); err != nil {
		return tr, err
	}
	failpoint.Hit(FailpointCommitted)
	tr.Metadata, tr.Version = e.uri(metadataName(loc, x.ver+1)), x.ver+1
	return tr, nil
}

// upgrade writes the reference list of the table's latest version if it
// has none (an older worldfs wrote the version), from its manifests.
func (e *exporter) upgrade(ctx context.Context, loc string) error {
	p := e.prevs[loc]
	if p == nil || p.m == nil {
		return nil
	}
	_, err := frame.ReadExportRefsOf(ctx, e.b, loc, p.ver, p.sum)
	if !errors.Is(err, frame.ErrNoExportRefs) {
		return nil // there, or damaged: collection says so, and optimize writes it again
	}
	objects, err := referenced(ctx, e.b, p.base, p.m)
	if err != nil {
		return err
	}
	refs := &frame.ExportRefs{Table: loc, Version: p.ver, Metadata: p.sum, Objects: objects}
	if _, err := bucket.CreateOnce(ctx, e.b, refs.Name(), refs.Encode()); err != nil {
		return fmt.Errorf("writing the reference list %s: %w", refs.Name(), err)
	}
	return nil
}

// tableExport is one attempt at exporting a table: the version it builds
// on, the files of the new snapshot against the previous one's, and the
// new snapshot's identity.
type tableExport struct {
	t   *table
	loc string

	// The latest version and its current snapshot (nil when none).
	ver           int
	prev          *metadata
	prevSnap      *snapshot
	prevManifests []ice.ManifestFile
	prevFiles     map[string]entry
	sc            *ice.Schema
	lastCol       int
	// base: the totals of the previous snapshot's files, which an
	// incremental export does not read (otherwise zero: uris holds them).
	base totals

	// Of the files planned: how many were written filtered, and how many
	// filtered copies of an earlier export served again.
	rewritten, reused int

	// The files of the snapshot, by URI; their sorted URIs, and those
	// added and removed against the previous snapshot (see diff).
	want    map[string]dataFile
	uris    []string
	added   []string
	removed []entry

	// The new snapshot's identity (see identify).
	parent *int64
	seq    int64
	snapID int64
}

// readTable takes the table's latest version (as planned), its schema and
// its live files, and the files the new snapshot holds. Exported
// incrementally, it reads only the previous manifest list (its manifests
// carry over by reference) and takes only the files of ticks after the
// previous snapshot's.
func (e *exporter) readTable(ctx context.Context, t *table, loc string) (*tableExport, error) {
	x := &tableExport{t: t, loc: loc, prevFiles: map[string]entry{}}
	if p := e.prevs[loc]; p != nil {
		x.ver, x.prev = p.ver, p.m
	}
	var err error
	if x.prev != nil {
		if x.prevSnap = x.prev.current(); x.prevSnap != nil {
			if t.inc {
				x.prevManifests, err = manifestList(ctx, e.b, x.prevSnap, e.objectOf)
				x.base = totalsOf(x.prevSnap)
			} else {
				x.prevManifests, x.prevFiles, err = liveFiles(ctx, e.b, x.prevSnap, e.objectOf)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if x.sc, x.lastCol, err = schemaOf(x.prev, t); err != nil {
		return nil, err
	}
	x.want = map[string]dataFile{}
	for _, f := range t.files {
		if t.inc {
			var added bool
			if f, added = newSince(f, t.last); !added {
				continue
			}
		}
		df, ok, how, err := e.file(ctx, t, loc, f, x.prevFiles)
		if err != nil {
			return x, err
		}
		if ok {
			x.want[df.uri] = df
		}
		switch how {
		case rewrote:
			x.rewritten++
		case reused:
			x.reused++
		}
	}
	return x, nil
}

// newSince returns what of f an export adds to a snapshot of the ticks
// up to last: f if it holds rows of ticks after last only, nothing
// (false) if of ticks up to last only. A compacted file across last was
// kept by that snapshot up to last (a filtered copy: the snapshot was
// pinned inside its span); the rows of its ticks after last are added in
// a filtered copy of their own (File.Keep from last+1), so that the
// table holds each of its kept rows once and the export stays an append.
func newSince(f index.File, last int64) (index.File, bool) {
	switch {
	case f.Span == nil:
		return f, f.Tick > last
	case f.Span.From > last:
		return f, true
	case f.Span.To <= last:
		return f, false
	}
	keep := index.Span{From: last + 1, To: math.MaxInt64}
	if f.Keep != nil {
		keep = index.Span{From: max(f.Keep.From, last+1), To: f.Keep.To}
	}
	f.Keep = &keep
	return f, keep.From <= keep.To
}

// totals are a snapshot's files, rows and bytes.
type totals struct{ files, rows, size int64 }

// totalsOf reads the totals of snapshot s from its summary.
func totalsOf(s *snapshot) totals {
	n := func(k string) int64 {
		v, _ := strconv.ParseInt(s.Summary[k], 10, 64)
		return v
	}
	return totals{files: n("total-data-files"), rows: n("total-records"), size: n("total-files-size")}
}

// diff sorts the snapshot's files and sets those added and removed
// against the previous snapshot.
func (x *tableExport) diff() {
	x.uris = slices.Sorted(maps.Keys(x.want))
	for _, u := range x.uris {
		if _, ok := x.prevFiles[u]; !ok {
			x.added = append(x.added, u)
		}
	}
	for u, pe := range x.prevFiles {
		if _, ok := x.want[u]; !ok {
			x.removed = append(x.removed, pe)
		}
	}
	slices.SortFunc(x.removed, func(a, b entry) int { return strings.Compare(a.uri, b.uri) })
}

// identify sets the new snapshot's parent, sequence number and ID. The
// snapshot's identity is a function of what it adds and removes and what
// it follows (the parent stands for what it holds): an export of the same
// pin over the same history is the same snapshot.
func (e *exporter) identify(x *tableExport) {
	x.seq = 1
	if x.prev != nil {
		x.seq = x.prev.LastSequenceNumber + 1
	}
	if x.prevSnap != nil {
		x.parent = &x.prevSnap.SnapshotID
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%d\n%s\n%d\n", e.uri(x.loc), x.seq, e.pin.Tick.Tick, e.pin.CommitToken, x.sc.ID)
	if x.parent != nil {
		fmt.Fprintf(h, "%d\n", *x.parent)
	}
	for _, u := range x.added {
		fmt.Fprintln(h, "+"+u)
	}
	for _, r := range x.removed {
		fmt.Fprintln(h, "-"+r.uri)
	}
	sum := h.Sum(nil)
	x.snapID = int64(binary.BigEndian.Uint64(sum[:8]) & math.MaxInt64)
	if x.snapID == 0 {
		x.snapID = 1
	}
}

// writeManifests writes the new snapshot's manifests and its manifest
// list, and returns the list's name. One new manifest: the added files,
// the removed ones as deleted, and the live files of every previous
// manifest that lost one (as existing); the other previous manifests
// carry over unchanged.
func (e *exporter) writeManifests(ctx context.Context, x *tableExport) (string, error) {
	loc, sc, snapID := x.loc, x.sc, x.snapID
	spec := ice.NewPartitionSpec()
	tickID := fieldID(sc, frame.ColTick)
	var entries []ice.ManifestEntry
	for _, u := range x.added {
		df, err := buildDataFile(spec, x.want[u], tickID)
		if err != nil {
			return "", err
		}
		entries = append(entries, ice.NewManifestEntry(ice.EntryStatusADDED, &snapID, nil, nil, df))
	}
	touched := map[int]bool{}
	for _, r := range x.removed {
		touched[r.manifest] = true
		seqN, fseq := r.seq, r.fseq
		entries = append(entries, ice.NewManifestEntry(ice.EntryStatusDELETED, &snapID, &seqN, &fseq, r.file))
	}
	var keptManifests []ice.ManifestFile
	for i, mf := range x.prevManifests {
		if !touched[i] {
			keptManifests = append(keptManifests, mf)
		}
	}
	if len(touched) > 0 {
		for _, u := range slices.Sorted(maps.Keys(x.prevFiles)) {
			pe := x.prevFiles[u]
			if _, live := x.want[u]; live && touched[pe.manifest] {
				orig, seqN, fseq := pe.snapshot, pe.seq, pe.fseq
				entries = append(entries, ice.NewManifestEntry(ice.EntryStatusEXISTING, &orig, &seqN, &fseq, pe.file))
			}
		}
	}
	manifests := keptManifests
	if len(entries) > 0 {
		name := index.IcebergManifestName(loc, snapID)
		var buf bytes.Buffer
		mf, err := ice.WriteManifest(e.uri(name), &buf, 2, spec, sc, snapID, entries)
		if err != nil {
			return "", fmt.Errorf("writing manifest: %w", err)
		}
		size, err := put(ctx, e.b, name, buf.Bytes())
		if err != nil {
			return "", err
		}
		if size != int64(buf.Len()) {
			// An earlier attempt's manifest holds the same entries.
			if mf, err = ice.WriteManifest(e.uri(name), &bytes.Buffer{}, 2, spec, sc, snapID, entries); err != nil {
				return "", err
			}
			mf = withLength(mf, size)
		}
		manifests = append([]ice.ManifestFile{mf}, manifests...)
	}
	listName := index.IcebergManifestListName(loc, snapID)
	var lbuf bytes.Buffer
	if err := ice.WriteManifestList(2, &lbuf, snapID, x.parent, &x.seq, 0, manifests); err != nil {
		return "", fmt.Errorf("writing manifest list: %w", err)
	}
	if _, err := put(ctx, e.b, listName, lbuf.Bytes()); err != nil {
		return "", err
	}
	return listName, nil
}

// summary is the new snapshot's operation and summary; rows is the total
// of its files. An append adds files only; a replace swaps files for
// others holding the same rows (compaction between two exports of one
// pin); anything else overwrites.
func (e *exporter) summary(x *tableExport, rows int64) (string, map[string]string) {
	op := "append"
	var addedRows, removedRows, addedSize, removedSize, totalSize int64
	for _, u := range x.added {
		addedRows += x.want[u].rows
		addedSize += x.want[u].size
	}
	for _, r := range x.removed {
		removedRows += r.rows
		removedSize += r.size
	}
	totalSize = x.base.size
	for _, u := range x.uris {
		totalSize += x.want[u].size
	}
	if x.prevSnap != nil && len(x.added) == 0 && len(x.removed) == 0 {
		op = "replace" // the same files, planned afresh (see stale)
	}
	if len(x.removed) > 0 {
		op = "overwrite"
		if x.prevSnap != nil && x.prevSnap.Summary["worldfs.tick"] == strconv.FormatInt(e.pin.Tick.Tick, 10) && addedRows == removedRows {
			op = "replace"
		}
	}
	sum := map[string]string{
		"operation":              op,
		"added-data-files":       strconv.Itoa(len(x.added)),
		"deleted-data-files":     strconv.Itoa(len(x.removed)),
		"added-records":          strconv.FormatInt(addedRows, 10),
		"deleted-records":        strconv.FormatInt(removedRows, 10),
		"added-files-size":       strconv.FormatInt(addedSize, 10),
		"removed-files-size":     strconv.FormatInt(removedSize, 10),
		"total-data-files":       strconv.FormatInt(x.base.files+int64(len(x.uris)), 10),
		"total-records":          strconv.FormatInt(rows, 10),
		"total-files-size":       strconv.FormatInt(totalSize, 10),
		"total-delete-files":     "0",
		"total-position-deletes": "0",
		"total-equality-deletes": "0",
		"worldfs.world":          e.opts.World,
		"worldfs.run":            e.opts.Run,
		"worldfs.tick":           strconv.FormatInt(e.pin.Tick.Tick, 10),
		"worldfs.commit-token":   e.pin.CommitToken,
	}
	for w, seq := range e.seqs {
		sum[seqKey(w)] = strconv.FormatUint(seq, 10)
	}
	return op, sum
}

// nextMetadata is the table's next version: the previous one (if any)
// with the new snapshot, whose manifest list is listName, made current.
func (e *exporter) nextMetadata(x *tableExport, listName string, summary map[string]string) metadata {
	prev, loc, sc, snapID := x.prev, x.loc, x.sc, x.snapID
	// The snapshot's time is its tick's publication (never before the
	// previous version's).
	ts := max(e.pin.PublishedUnixMs, 1)
	if prev != nil {
		ts = max(ts, prev.LastUpdatedMs+1)
	}
	next := newMetadata(e.uri(loc))
	if prev != nil {
		next = *prev
		next.MetadataLog = append(slices.Clone(prev.MetadataLog), metadataLog{TimestampMs: prev.LastUpdatedMs, MetadataFile: e.uri(metadataName(loc, x.ver))})
		next.Snapshots = slices.Clone(prev.Snapshots)
		next.SnapshotLog = slices.Clone(prev.SnapshotLog)
		next.Schemas = slices.Clone(prev.Schemas)
		next.Properties = maps.Clone(prev.Properties)
	}
	if next.schema(sc.ID) == nil {
		next.Schemas = append(next.Schemas, sc)
	}
	next.CurrentSchemaID = sc.ID
	next.LastColumnID = x.lastCol
	next.LastSequenceNumber = x.seq
	next.LastUpdatedMs = ts
	next.Snapshots = append(next.Snapshots, snapshot{SnapshotID: snapID, ParentSnapshotID: x.parent, SequenceNumber: x.seq,
		TimestampMs: ts, ManifestList: e.uri(listName), Summary: summary, SchemaID: sc.ID})
	next.SnapshotLog = append(next.SnapshotLog, snapshotLog{TimestampMs: ts, SnapshotID: snapID})
	next.CurrentSnapshotID = &snapID
	next.Refs = map[string]ref{"main": {SnapshotID: snapID, Type: "branch"}}
	next.Properties["schema.name-mapping.default"] = nameMapping(next.Schemas)
	next.Properties["worldfs.world"] = e.opts.World
	next.Properties["worldfs.run"] = e.opts.Run
	next.Properties["worldfs.table"] = x.t.name
	return next
}

func newMetadata(location string) metadata {
	return metadata{
		FormatVersion:   2,
		TableUUID:       uuid.NewSHA1(uuid.NameSpaceURL, []byte(location)).String(),
		Location:        location,
		PartitionSpecs:  []partitionSpec{{SpecID: 0, Fields: []any{}}},
		LastPartitionID: 999,
		SortOrders:      []sortOrder{{OrderID: 0, Fields: []any{}}},
		Properties:      map[string]string{},
	}
}

// withLength is mf with the length of the object that holds it.
func withLength(mf ice.ManifestFile, size int64) ice.ManifestFile {
	b := ice.NewManifestFile(2, mf.FilePath(), size, mf.PartitionSpecID(), mf.SnapshotID()).
		SequenceNum(mf.SequenceNum(), mf.MinSequenceNum()).Content(mf.ManifestContent()).
		AddedFiles(mf.AddedDataFiles()).ExistingFiles(mf.ExistingDataFiles()).DeletedFiles(mf.DeletedDataFiles()).
		AddedRows(mf.AddedRows()).ExistingRows(mf.ExistingRows()).DeletedRows(mf.DeletedRows()).
		Partitions(mf.Partitions())
	return b.Build()
}

func buildDataFile(spec ice.PartitionSpec, f dataFile, tickID int) (ice.DataFile, error) {
	b, err := ice.NewDataFileBuilder(spec, ice.EntryContentData, f.uri, ice.ParquetFile, nil, nil, nil, f.rows, f.size)
	if err != nil {
		return nil, err
	}
	if tickID > 0 && f.rows > 0 {
		lo, hi := make([]byte, 8), make([]byte, 8)
		binary.LittleEndian.PutUint64(lo, uint64(f.lo))
		binary.LittleEndian.PutUint64(hi, uint64(f.hi))
		b.LowerBoundValues(map[int][]byte{tickID: lo}).UpperBoundValues(map[int][]byte{tickID: hi})
	}
	return b.Build(), nil
}
