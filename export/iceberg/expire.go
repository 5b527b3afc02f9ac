package iceberg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// Expired is what Expire did to one table.
type Expired struct {
	Table   string // the table's object prefix
	Removed int    // snapshots dropped
	Kept    int    // snapshots left
	// Metadata is the URI of the new metadata version ("" if nothing was
	// dropped).
	Metadata string
}

// Expire drops, from every table exported under opts.Prefix, the
// snapshots taken (their tick published) before before, except each
// table's current one and those a ref names (a tag's: the export writes a
// tag ref per tag of the world, tags.go), committing one new metadata
// version per table.
// Collection keeps only what the remaining snapshots reference, so a
// reader of an expired snapshot may then find its files gone.
func Expire(ctx context.Context, b bucket.Bucket, opts Options, before time.Time) ([]Expired, error) {
	opts, err := ready(b, opts)
	if err != nil {
		return nil, err
	}
	regs, err := registrations(ctx, b, opts.World)
	if err != nil {
		return nil, err
	}
	cut := before.UnixMilli()
	var out []Expired
	for _, r := range regs {
		if !strings.HasPrefix(r.Table, opts.Prefix+"/") {
			continue
		}
		ver, m, _, err := latest(ctx, b, r.Table)
		if err != nil {
			return out, fmt.Errorf("export %s: %w", r.Table, err)
		}
		if m == nil {
			continue
		}
		ex := Expired{Table: r.Table}
		next := *m
		next.Snapshots = nil
		dropped := map[int64]bool{}
		named := map[int64]bool{} // by a ref: a branch's head, or a tag (tags.go)
		for _, r := range m.Refs {
			named[r.SnapshotID] = true
		}
		for _, s := range m.Snapshots {
			if s.TimestampMs < cut && !named[s.SnapshotID] && (m.CurrentSnapshotID == nil || s.SnapshotID != *m.CurrentSnapshotID) {
				dropped[s.SnapshotID] = true
				continue
			}
			next.Snapshots = append(next.Snapshots, s)
		}
		ex.Removed, ex.Kept = len(dropped), len(next.Snapshots)
		if len(dropped) > 0 {
			next.SnapshotLog = nil
			for _, l := range m.SnapshotLog {
				if !dropped[l.SnapshotID] {
					next.SnapshotLog = append(next.SnapshotLog, l)
				}
			}
			next.MetadataLog = append(append([]metadataLog(nil), m.MetadataLog...),
				metadataLog{TimestampMs: m.LastUpdatedMs, MetadataFile: r.Base + metadataName(r.Table, ver)})
			next.LastUpdatedMs = m.LastUpdatedMs + 1
			// Fewer snapshots reference fewer objects: the new version's
			// list is read from the manifests of those it keeps.
			objects, err := referenced(ctx, b, r.Base, &next)
			if err != nil {
				return out, fmt.Errorf("export %s: %w", r.Table, err)
			}
			if err := commitMetadata(ctx, b, r.Table, ver+1, &next, objects); err != nil {
				return out, err
			}
			ex.Metadata = r.Base + metadataName(r.Table, ver+1)
		}
		out = append(out, ex)
	}
	return out, nil
}
