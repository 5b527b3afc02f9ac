package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints of an export, for crash tests.
const (
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
	// Run (default "main").
	Run string
	// AtTick pins the export to the visible state up to this tick; Token
	// to the tick that commit token published (neither: the head).
	AtTick *int64
	Token  string
	// Prefix is the object prefix the tables go under, one directory per
	// table (default DefaultPrefix).
	Prefix string
	// Base is the URI of the bucket's root as other engines address it
	// (default: file://<dir>/ of a local bucket, gs://<bucket>/<prefix> of
	// a GCS bucket); the metadata names every file by Base + object name.
	Base string
}

// DefaultPrefix is where a run's tables are exported unless told.
func DefaultPrefix(world, run string) string { return "export/iceberg/" + world + "/" + run }

// RegistryPrefix is where an export records each table it writes, so
// that collection finds every export of a world, whatever its prefix.
func RegistryPrefix(world string) string { return "export/registry/" + world + "/" }

func (o *Options) ensureDefaults(b bucket.Bucket) error {
	if o.World == "" {
		return errors.New("export: a world is required")
	}
	if err := index.ValidateWorldID(o.World); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if o.Run == "" {
		o.Run = "main"
	}
	if err := index.ValidateRunName(o.Run); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if o.AtTick != nil && o.Token != "" {
		return errors.New("export: pin to a tick or to a commit token, not both")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix(o.World, o.Run)
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	if err := bucket.ValidateName(o.Prefix); err != nil {
		return fmt.Errorf("export: prefix: %w", err)
	}
	if o.Base == "" {
		base, err := BaseURI(b)
		if err != nil {
			return err
		}
		o.Base = base
	}
	if !strings.HasSuffix(o.Base, "/") {
		o.Base += "/"
	}
	return nil
}

// BaseURI returns the URI other engines address bucket b's root by.
func BaseURI(b bucket.Bucket) (string, error) {
	switch b := b.(type) {
	case *local.Bucket:
		return "file://" + strings.TrimSuffix(b.Root(), "/") + "/", nil
	case *gcs.Bucket:
		return b.String(), nil
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
}

// Export writes, for every table of the pinned (world, run), one Iceberg
// snapshot of its visible rows: a new metadata version when the visible
// files changed since the table's last export, nothing otherwise. Each
// table commits alone, by creating its next metadata version (create-only,
// like a log slot): a crash or a race leaves the previous version current
// and valid.
func Export(ctx context.Context, b bucket.Bucket, opts Options) (*Result, error) {
	if err := opts.ensureDefaults(b); err != nil {
		return nil, err
	}
	e := &exporter{b: b, opts: opts}
	if err := e.plan(ctx); err != nil {
		return nil, err
	}
	res := &Result{World: opts.World, Run: opts.Run, Tick: e.pin.Tick.Tick, Token: e.pin.CommitToken, Seq: e.seq}
	for _, name := range slices.Sorted(maps.Keys(e.tables)) {
		tr, err := e.table(ctx, e.tables[name])
		if err != nil {
			return res, fmt.Errorf("world %s run %s: table %s: %w", opts.World, opts.Run, name, err)
		}
		res.Tables = append(res.Tables, tr)
	}
	return res, nil
}

type exporter struct {
	b      bucket.Bucket
	opts   Options
	pin    index.TickRef
	seq    uint64
	tables map[string]*table // by readable name
}

// table is one readable table's visible files (of every table id and
// lineage segment of that name).
type table struct {
	name  string
	infos map[string]engine.TableInfo // by world/id
	files []index.File
	// visible: the (tick, token) pairs published for each world/id, which
	// a row of a file the catalog does not prove must carry.
	visible map[string]map[stamp]bool
}

type stamp struct {
	tick  int64
	token string
}

func (e *exporter) plan(ctx context.Context) error {
	world, run := e.opts.World, e.opts.Run
	own, _, err := index.Load(ctx, e.b, world)
	if err != nil {
		return err
	}
	if !own.World.Created {
		return fmt.Errorf("world %s: %w", world, ErrNotFound)
	}
	e.seq = own.Seq
	load := index.LoadFrom(e.b)
	view, err := index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		if w == world {
			return own, nil
		}
		return load(ctx, w)
	}, world, run)
	if err != nil {
		return err
	}
	for _, seg := range view.Segments {
		if seg.Mode != index.Filtered {
			return fmt.Errorf("world %s run %s: history without manifests (uncoordinated) cannot be exported: every row of it is visible and no catalog names its files", seg.World, seg.Run)
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
	e.tables = map[string]*table{}
	var ferr error
	add := func(f index.File) bool {
		key := f.World + "/" + f.Table
		var t *table
		for _, c := range e.tables {
			if _, ok := c.infos[key]; ok {
				t = c
			}
		}
		if t == nil {
			ti, err := engine.ReadTableInfo(ctx, e.b, f.World, f.Table)
			if err != nil {
				ferr = fmt.Errorf("world %s: table %s has no description: %w", f.World, f.Table, err)
				return false
			}
			if t = e.tables[ti.Name]; t == nil {
				t = &table{name: ti.Name, infos: map[string]engine.TableInfo{}, visible: map[string]map[stamp]bool{}}
				e.tables[ti.Name] = t
			}
			t.infos[key] = ti
			t.visible[key] = map[stamp]bool{}
		}
		t.files = append(t.files, f)
		t.visible[key][stamp{f.Tick, f.Token}] = true
		return true
	}
	if err := view.Files(math.MinInt64, e.pin.Tick.Tick, add); err != nil || ferr != nil {
		return cmp.Or(err, ferr)
	}
	// Evaluation receipts are the world's, whatever run they judged (as
	// the views show them).
	err = index.OwnView(own, engine.EvaluationRun).Files(math.MinInt64, math.MaxInt64, add)
	return cmp.Or(err, ferr)
}

// refuseLegacy refuses a world with legacy (pre-commit-identity) tables:
// their rows carry no commit columns, and the catalog names none of their
// files.
func refuseLegacy(ctx context.Context, b bucket.Bucket, world string) error {
	for a, err := range b.List(ctx, "data/"+world+"/_tables/l", "") {
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

// table exports one table.
func (e *exporter) table(ctx context.Context, t *table) (TableResult, error) {
	loc := e.opts.Prefix + "/" + t.name
	for attempt := 0; ; attempt++ {
		tr, err := e.tableOnce(ctx, t, loc)
		if errors.Is(err, ErrRace) && attempt < 3 {
			continue // read the winner's version and build on it
		}
		return tr, err
	}
}

// tableOnce exports one table once: it reads the table's latest version,
// writes the new snapshot's manifests and commits the next version, or
// reports the table already exported as it is.
func (e *exporter) tableOnce(ctx context.Context, t *table, loc string) (TableResult, error) {
	tr := TableResult{Table: t.name}
	x, rewritten, err := e.readTable(ctx, t, loc)
	tr.Rewritten = rewritten
	if err != nil {
		return tr, err
	}
	x.diff()
	for _, u := range x.uris {
		tr.Rows += x.want[u].rows
	}
	tr.Files = len(x.uris)
	tr.Added, tr.Removed = len(x.added), len(x.removed)
	if x.prevSnap != nil && len(x.added) == 0 && len(x.removed) == 0 && x.prevSnap.SchemaID == x.sc.ID {
		tr.Metadata, tr.Version, tr.SnapshotID = e.uri(metadataName(loc, x.ver)), x.ver, x.prevSnap.SnapshotID
		return tr, nil // already exported as it is
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
	failpoint.Hit(FailpointWritten)
	if x.ver == 0 {
		if err := register(ctx, e.b, e.opts.World, loc, e.opts.Base); err != nil {
			return tr, err
		}
	}
	if err := e.commit(ctx, loc, x.ver+1, &next); err != nil {
		return tr, err
	}
	failpoint.Hit(FailpointCommitted)
	tr.Metadata, tr.Version = e.uri(metadataName(loc, x.ver+1)), x.ver+1
	return tr, nil
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

// readTable reads the table's latest version, its live files and schema,
// and the files the new snapshot holds; it reports how many of those it
// rewrote.
func (e *exporter) readTable(ctx context.Context, t *table, loc string) (*tableExport, int, error) {
	x := &tableExport{t: t, loc: loc, prevFiles: map[string]entry{}}
	var err error
	if x.ver, x.prev, err = latest(ctx, e.b, loc); err != nil {
		return nil, 0, err
	}
	if x.prev != nil {
		if x.prevSnap = x.prev.current(); x.prevSnap != nil {
			if x.prevManifests, x.prevFiles, err = liveFiles(ctx, e.b, x.prevSnap, e.objectOf); err != nil {
				return nil, 0, err
			}
		}
	}
	if x.sc, x.lastCol, err = schemaOf(x.prev, t); err != nil {
		return nil, 0, err
	}
	x.want = map[string]dataFile{}
	rewrote := 0
	for _, f := range t.files {
		df, ok, rewritten, err := e.file(ctx, t, loc, f, x.prevFiles)
		if err != nil {
			return nil, rewrote, err
		}
		if ok {
			x.want[df.uri] = df
		}
		if rewritten {
			rewrote++
		}
	}
	return x, rewrote, nil
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
// snapshot's identity is a function of what it holds and what it
// follows: an export of the same pin over the same history is the same
// snapshot.
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
	for _, u := range x.uris {
		fmt.Fprintln(h, u)
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
	tickID := fieldID(sc, engine.ColTick)
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
		name := fmt.Sprintf("%s/metadata/%016x-m0.avro", loc, uint64(snapID))
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
	listName := fmt.Sprintf("%s/metadata/snap-%016x.avro", loc, uint64(snapID))
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
	for _, u := range x.uris {
		totalSize += x.want[u].size
	}
	if len(x.removed) > 0 {
		op = "overwrite"
		if x.prevSnap != nil && x.prevSnap.Summary["worldfs.tick"] == strconv.FormatInt(e.pin.Tick.Tick, 10) && addedRows == removedRows {
			op = "replace"
		}
	}
	return op, map[string]string{
		"operation":              op,
		"added-data-files":       strconv.Itoa(len(x.added)),
		"deleted-data-files":     strconv.Itoa(len(x.removed)),
		"added-records":          strconv.FormatInt(addedRows, 10),
		"deleted-records":        strconv.FormatInt(removedRows, 10),
		"added-files-size":       strconv.FormatInt(addedSize, 10),
		"removed-files-size":     strconv.FormatInt(removedSize, 10),
		"total-data-files":       strconv.Itoa(len(x.uris)),
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

// commit creates version v of the table's metadata: the export's one
// commit point.
func (e *exporter) commit(ctx context.Context, loc string, v int, m *metadata) error {
	return commitMetadata(ctx, e.b, loc, v, m)
}

func commitMetadata(ctx context.Context, b bucket.Bucket, loc string, v int, m *metadata) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	name := metadataName(loc, v)
	if _, err := bucket.CreateOnce(ctx, b, name, data); err != nil {
		if errors.Is(err, bucket.ErrExist) {
			return fmt.Errorf("%s: %w", name, ErrRace)
		}
		return fmt.Errorf("committing %s: %w", name, err)
	}
	return nil
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

// file decides how file f of table t is exported: in place, or rewritten
// with its visible rows only under the table's data/ (ok false: it holds
// no visible row).
func (e *exporter) file(ctx context.Context, t *table, loc string, f index.File, prev map[string]entry) (df dataFile, ok, rewritten bool, err error) {
	key := f.World + "/" + f.Table
	switch {
	case f.Span != nil && f.Keep != nil && (f.Keep.From > f.Span.From || f.Keep.To < f.Span.To):
		// A compacted file the view keeps only part of (a fork's parent
		// compacted past the fork point): its kept rows, written once.
		keep := *f.Keep
		h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%d", f.Path, keep.From, keep.To)))
		name := fmt.Sprintf("%s/data/keep-%s.parquet", loc, hex.EncodeToString(h[:16]))
		if pe, ok := prev[e.uri(name)]; ok {
			return dataFile{uri: pe.uri, rows: pe.rows, size: pe.size, lo: max(f.Span.From, keep.From), hi: min(f.Span.To, keep.To)}, pe.rows > 0, false, nil
		}
		return e.filtered(ctx, f, name, func(tick int64, _ string, _ int64) bool { return keep.Contains(tick) })
	case f.Span != nil:
		return dataFile{uri: e.uri(f.Path), rows: f.Rows, size: f.Bytes, lo: f.Span.From, hi: f.Span.To}, f.Rows > 0, false, nil
	case !f.Check:
		return dataFile{uri: e.uri(f.Path), rows: f.Rows, size: f.Bytes, lo: f.Tick, hi: f.Tick}, f.Rows > 0, false, nil
	}
	// A file the catalog does not prove: the seed's row check, as the
	// views apply it. Rows published under their (tick, token), and
	// epoch-0 history, are visible.
	visible := t.visible[key]
	check := func(tick int64, token string, epoch int64) bool {
		return (token == "" && epoch == 0) || visible[stamp{tick, token}]
	}
	return e.filtered(ctx, f, "", check)
}

// filtered exports the rows of f that keep accepts: f in place if it
// accepts every row, a filtered copy if some, nothing if none.
func (e *exporter) filtered(ctx context.Context, f index.File, name string, keep func(int64, string, int64) bool) (dataFile, bool, bool, error) {
	df, kept, total, err := e.rewrite(ctx, f, name, keep)
	if err != nil || kept == 0 {
		return df, false, false, err
	}
	if kept == total {
		df.uri, df.size = e.uri(f.Path), f.Bytes // every row visible: read in place
		return df, true, false, nil
	}
	return df, true, true, nil
}

// rewrite reads f and writes the rows keep accepts as a new file under
// name ("": <table>/data/checked-<digest>.parquet), unless it keeps every
// row.
func (e *exporter) rewrite(ctx context.Context, f index.File, name string, keep func(int64, string, int64) bool) (dataFile, int64, int64, error) {
	data, _, err := e.b.Get(ctx, f.Path)
	if err != nil {
		return dataFile{}, 0, 0, err
	}
	if f.Digest != "" && engine.Digest(data) != f.Digest {
		return dataFile{}, 0, 0, fmt.Errorf("%s does not match its catalog record (digest): %w", f.Path, index.ErrCorrupt)
	}
	out, kept, total, lo, hi, err := filterParquet(data, keep)
	if err != nil {
		return dataFile{}, 0, 0, fmt.Errorf("%s: %w", f.Path, err)
	}
	df := dataFile{rows: kept, lo: lo, hi: hi}
	if kept == 0 || kept == total {
		return df, kept, total, nil
	}
	if name == "" {
		loc := e.opts.Prefix + "/" + e.tableName(f)
		name = fmt.Sprintf("%s/data/checked-%s.parquet", loc, strings.TrimPrefix(engine.Digest(out), "sha256:")[:32])
	}
	size, err := put(ctx, e.b, name, out)
	if err != nil {
		return dataFile{}, 0, 0, err
	}
	df.uri, df.size = e.uri(name), size
	return df, kept, total, nil
}

func (e *exporter) tableName(f index.File) string {
	for name, t := range e.tables {
		if _, ok := t.infos[f.World+"/"+f.Table]; ok {
			return name
		}
	}
	return f.Table
}
