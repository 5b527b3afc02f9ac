package iceberg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	ice "github.com/apache/iceberg-go"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Tags of the exported world become Iceberg tags: for each tag of the
// exported run that names a tick up to the pin, a snapshot of the table's
// history up to that tick (the one an earlier export took at that tick,
// or one taken now) and a ref of type "tag" naming it. The refs are
// written afresh by each export from the catalog's tags, so a tag deleted
// loses its ref at the next export; Expire drops no snapshot a ref names,
// so a tagged snapshot stays readable, with its files kept by collection
// (each version's reference list names what its snapshots reference),
// until its tag is deleted and an export and an Expire follow.

// taggedTick is a tag the export writes as a ref: its name, and the tick
// it names as the export's view shows it.
type taggedTick struct {
	name string
	tick index.TickRef
}

// planTags lists the tags of the exported run whose tick is visible at or
// before the pin, by name.
func (e *exporter) planTags() {
	e.tagged = nil
	for _, tg := range e.own.Tags() {
		if tg.Run != e.opts.Run {
			continue
		}
		t, err := index.TickOfTag(e.view, tg.Name, e.pin.Tick.Tick)
		if err != nil {
			continue // of another pin, or no longer visible: no ref
		}
		e.tagged = append(e.tagged, taggedTick{name: tg.Name, tick: t})
	}
}

// tagRefs sets next's refs: main at its current snapshot, and a tag ref
// for each tag of the export, at a snapshot of next of the tagged tick,
// added to next (and its manifests written) where none holds it. sc is
// the schema the new snapshots are written with. It returns the objects
// the added snapshots reference (for the version's reference list).
func (e *exporter) tagRefs(ctx context.Context, loc, name string, sc *ice.Schema, next *metadata) ([]string, error) {
	refs := map[string]ref{}
	if next.CurrentSnapshotID != nil {
		refs["main"] = ref{SnapshotID: *next.CurrentSnapshotID, Type: "branch"}
	}
	var objects []string
	if name != frame.ReceiptTableName { // receipts land at no tick: no history to tag
		for _, tg := range e.tagged {
			s := e.snapshotAt(next, tg.tick)
			if s == nil {
				var objs []string
				var err error
				if s, objs, err = e.tagSnapshot(ctx, loc, name, sc, next, tg); err != nil {
					return nil, fmt.Errorf("the snapshot of tag %s (tick %d): %w", tg.name, tg.tick.Tick.Tick, err)
				}
				objects = append(objects, objs...)
			}
			refs[tg.name] = ref{SnapshotID: s.SnapshotID, Type: "tag"}
		}
	}
	next.Refs = refs
	return objects, nil
}

// snapshotAt returns the snapshot of m that holds the exported run's
// history up to tick t as this export would (nil: none).
func (e *exporter) snapshotAt(m *metadata, t index.TickRef) *snapshot {
	for i := len(m.Snapshots) - 1; i >= 0; i-- {
		s := &m.Snapshots[i]
		if s.Summary["worldfs.world"] == e.opts.World && s.Summary["worldfs.run"] == e.opts.Run &&
			s.Summary["worldfs.tick"] == strconv.FormatInt(t.Tick.Tick, 10) && s.Summary["worldfs.commit-token"] == t.CommitToken {
			return s
		}
	}
	return nil
}

// tagSnapshot adds to next a snapshot of table name's visible history up
// to the tagged tick, planned from the export's view, with its manifest
// and manifest list written; it is no branch's (no parent, never
// current). It returns the snapshot and the data objects it references.
func (e *exporter) tagSnapshot(ctx context.Context, loc, name string, sc *ice.Schema, next *metadata, tg taggedTick) (*snapshot, []string, error) {
	tables, err := e.tablesUpTo(ctx, tg.tick.Tick.Tick)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]dataFile{}
	if t := tables[name]; t != nil {
		for _, f := range t.files {
			df, ok, _, err := e.file(ctx, t, loc, f, nil)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				want[df.uri] = df
			}
		}
	}
	uris := slices.Sorted(maps.Keys(want))
	seq := next.LastSequenceNumber + 1
	h := sha256.New()
	fmt.Fprintf(h, "%s\ntag %s\n%d\n%s\n%d\n%d\n", e.uri(loc), tg.name, tg.tick.Tick.Tick, tg.tick.CommitToken, sc.ID, seq)
	for _, u := range uris {
		fmt.Fprintln(h, "+"+u)
	}
	sum := h.Sum(nil)
	snapID := int64(binary.BigEndian.Uint64(sum[:8]) & math.MaxInt64)
	if snapID == 0 {
		snapID = 1
	}
	spec := ice.NewPartitionSpec()
	tickID := fieldID(sc, frame.ColTick)
	var entries []ice.ManifestEntry
	var rows, size int64
	var objects []string
	for _, u := range uris {
		df, err := buildDataFile(spec, want[u], tickID)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, ice.NewManifestEntry(ice.EntryStatusADDED, &snapID, nil, nil, df))
		rows, size = rows+want[u].rows, size+want[u].size
		obj, err := e.objectOf(u)
		if err != nil {
			return nil, nil, err
		}
		objects = append(objects, obj)
	}
	var manifests []ice.ManifestFile
	if len(entries) > 0 {
		mname := index.IcebergManifestName(loc, snapID)
		var buf bytes.Buffer
		mf, err := ice.WriteManifest(e.uri(mname), &buf, 2, spec, sc, snapID, entries)
		if err != nil {
			return nil, nil, fmt.Errorf("writing manifest: %w", err)
		}
		n, err := put(ctx, e.b, mname, buf.Bytes())
		if err != nil {
			return nil, nil, err
		}
		if n != int64(buf.Len()) {
			mf = withLength(mf, n) // an earlier attempt's manifest holds the same entries
		}
		manifests = append(manifests, mf)
	}
	listName := index.IcebergManifestListName(loc, snapID)
	var lbuf bytes.Buffer
	if err := ice.WriteManifestList(2, &lbuf, snapID, nil, &seq, 0, manifests); err != nil {
		return nil, nil, fmt.Errorf("writing manifest list: %w", err)
	}
	if _, err := put(ctx, e.b, listName, lbuf.Bytes()); err != nil {
		return nil, nil, err
	}
	summary := map[string]string{
		"operation":              "append",
		"added-data-files":       strconv.Itoa(len(uris)),
		"deleted-data-files":     "0",
		"added-records":          strconv.FormatInt(rows, 10),
		"deleted-records":        "0",
		"added-files-size":       strconv.FormatInt(size, 10),
		"removed-files-size":     "0",
		"total-data-files":       strconv.Itoa(len(uris)),
		"total-records":          strconv.FormatInt(rows, 10),
		"total-files-size":       strconv.FormatInt(size, 10),
		"total-delete-files":     "0",
		"total-position-deletes": "0",
		"total-equality-deletes": "0",
		"worldfs.world":          e.opts.World,
		"worldfs.run":            e.opts.Run,
		"worldfs.tick":           strconv.FormatInt(tg.tick.Tick.Tick, 10),
		"worldfs.commit-token":   tg.tick.CommitToken,
		"worldfs.tag":            tg.name,
	}
	next.LastSequenceNumber = seq
	next.Snapshots = append(next.Snapshots, snapshot{SnapshotID: snapID, SequenceNumber: seq, TimestampMs: max(tg.tick.PublishedUnixMs, 1),
		ManifestList: e.uri(listName), Summary: summary, SchemaID: sc.ID})
	return &next.Snapshots[len(next.Snapshots)-1], objects, nil
}

// tablesUpTo returns the tables' visible files of the ticks up to tick,
// planned from the export's view (once per tick per export).
func (e *exporter) tablesUpTo(ctx context.Context, tick int64) (map[string]*table, error) {
	if t, ok := e.upTo[tick]; ok {
		return t, nil
	}
	tables := map[string]*table{}
	if err := e.collect(ctx, tables, e.view, math.MinInt64, tick); err != nil {
		return nil, err
	}
	if e.upTo == nil {
		e.upTo = map[int64]map[string]*table{}
	}
	e.upTo[tick] = tables
	return tables, nil
}

// retag writes a new version of the table at loc (exported as it is: no
// new snapshot) when its refs are not the export's tags: the same
// snapshots, a tag's snapshot added where none holds it, and the refs
// set afresh. It does nothing when they are.
func (e *exporter) retag(ctx context.Context, loc, name string) (TableResult, bool, error) {
	p := e.prevs[loc]
	if p == nil || p.m == nil || p.m.current() == nil {
		return TableResult{}, false, nil
	}
	next := *p.m
	next.Snapshots = slices.Clone(p.m.Snapshots)
	next.Properties = maps.Clone(p.m.Properties)
	sc := p.m.schema(p.m.current().SchemaID)
	if sc == nil {
		return TableResult{}, false, fmt.Errorf("%s: the current snapshot's schema %d is not among its schemas: %w", metadataName(loc, p.ver), p.m.current().SchemaID, ErrCorrupt)
	}
	added, err := e.tagRefs(ctx, loc, name, sc, &next)
	if err != nil {
		return TableResult{}, false, err
	}
	if len(next.Snapshots) == len(p.m.Snapshots) && maps.Equal(next.Refs, p.m.Refs) {
		return TableResult{}, false, nil
	}
	next.MetadataLog = append(slices.Clone(p.m.MetadataLog), metadataLog{TimestampMs: p.m.LastUpdatedMs, MetadataFile: e.uri(metadataName(loc, p.ver))})
	next.LastUpdatedMs = p.m.LastUpdatedMs + 1
	objects, err := listed(ctx, e.b, loc, p)
	if err != nil {
		return TableResult{}, false, err
	}
	if err := e.renew(ctx); err != nil {
		return TableResult{}, false, err
	}
	if err := commitMetadata(ctx, e.b, loc, p.ver+1, &next, append(objects, added...)); err != nil {
		return TableResult{}, false, err
	}
	s := next.current()
	tot := totalsOf(s)
	return TableResult{Table: name, Metadata: e.uri(metadataName(loc, p.ver+1)), Version: p.ver + 1, SnapshotID: s.SnapshotID,
		Files: int(tot.files), Rows: tot.rows, Tags: tagsOf(&next)}, true, nil
}

// tagsOf returns the snapshot each tag ref of m names, by tag.
func tagsOf(m *metadata) map[string]int64 {
	var out map[string]int64
	for name, r := range m.Refs {
		if r.Type == "tag" {
			if out == nil {
				out = map[string]int64{}
			}
			out[name] = r.SnapshotID
		}
	}
	return out
}
