package iceberg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	ice "github.com/apache/iceberg-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// Collection keeps what an export's live snapshots reference, in every
// program that links this package (worldfs does).
func init() { maintenance.RegisterRefSource(Refs) }

// registration is an export registry record: one per exported table,
// created once before the table's first metadata version.
type registration struct {
	Table string `json:"table"` // the object prefix of the table
	Base  string `json:"base"`  // the URI the metadata names objects by
}

func register(ctx context.Context, b bucket.Bucket, world, loc, base string) error {
	sum := sha256.Sum256([]byte(loc))
	data, _ := json.Marshal(registration{Table: loc, Base: base})
	name := index.ExportRegistryName(world, hex.EncodeToString(sum[:8]))
	if _, err := bucket.CreateOnce(ctx, b, name, data); err != nil {
		return fmt.Errorf("registering the export of %s: %w", loc, err)
	}
	return nil
}

// registrations lists the tables exported from world.
func registrations(ctx context.Context, b bucket.Bucket, world string) ([]registration, error) {
	var out []registration
	for a, err := range b.List(ctx, RegistryPrefix(world), "") {
		if err != nil {
			return nil, err
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		var r registration
		if err := json.Unmarshal(data, &r); err != nil || r.Table == "" || r.Base == "" {
			return nil, fmt.Errorf("export registry record %s: %w", a.Name, ErrCorrupt)
		}
		out = append(out, r)
	}
	return out, nil
}

// Refs returns every bucket object a live snapshot of an export of world
// references (data files, in place or rewritten). Collection keeps them
// until the snapshots expire. Anything it cannot read fails it, and with
// it the collection: closed.
func Refs(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error) {
	regs, err := registrations(ctx, b, world)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range regs {
		_, m, err := latest(ctx, b, r.Table)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", r.Table, err)
		}
		if m == nil {
			continue // registered, never committed
		}
		objectOf := func(uri string) (string, error) { return objectOf(r.Base, uri) }
		read := map[string]bool{} // manifests, shared by snapshots
		for i := range m.Snapshots {
			name, err := objectOf(m.Snapshots[i].ManifestList)
			if err != nil {
				return nil, err
			}
			data, _, err := b.Get(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("export %s: snapshot %d: %w", r.Table, m.Snapshots[i].SnapshotID, err)
			}
			manifests, err := ice.ReadManifestList(strings.NewReader(string(data)))
			if err != nil {
				return nil, fmt.Errorf("export %s: %s: %v: %w", r.Table, name, err, ErrCorrupt)
			}
			for _, mf := range manifests {
				if read[mf.FilePath()] {
					continue
				}
				read[mf.FilePath()] = true
				es, err := readManifest(ctx, b, mf, objectOf)
				if err != nil {
					return nil, fmt.Errorf("export %s: %w", r.Table, err)
				}
				for _, e := range es {
					obj, err := objectOf(e.uri)
					if err != nil {
						return nil, err
					}
					out[obj] = true
				}
			}
		}
	}
	return out, nil
}
