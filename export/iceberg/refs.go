package iceberg

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// What collection keeps for an export is data in the bucket, which every
// collector reads whatever code its program links (the formats are
// frame/exportrefs.go; maintenance.Collect reads them): the export
// registry, and beside each metadata version its reference list. This
// file writes them, and reads what a version references from its
// manifests (with iceberg-go) where a version has no list: written by a
// worldfs before reference lists.

// register records the table at loc as exported from the export's world
// in the registry of world (the exported world, or an ancestor whose
// files the table names). Registering again is a no-op.
func register(ctx context.Context, b bucket.Bucket, world string, r frame.ExportRegistration) error {
	if r.World == world {
		r.World = "" // the registry's own (as a worldfs before ancestors' registrations wrote it)
	}
	name := frame.ExportRegistrationName(world, r.Table)
	_, err := bucket.CreateOnce(ctx, b, name, r.Encode())
	if errors.Is(err, bucket.ErrExist) {
		return nil // registered before, with another base URI
	}
	if err != nil {
		return fmt.Errorf("registering the export of %s in %s: %w", r.Table, name, err)
	}
	return nil
}

// registrations lists the tables exported from world (not those of its
// forks registered there too).
func registrations(ctx context.Context, b bucket.Bucket, world string) ([]frame.ExportRegistration, error) {
	regs, err := frame.ReadExportRegistrations(ctx, b, world)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(regs, func(r frame.ExportRegistration) bool { return r.World != world }), nil
}

// commitMetadata creates version v of the table at loc, m, after its
// reference list naming objects (every bucket object the version's live
// snapshots reference): the commit point of an export (and of Expire).
// A version taken by another export is ErrRace.
func commitMetadata(ctx context.Context, b bucket.Bucket, loc string, v int, m *metadata, objects []string) error {
	data, err := encodeMetadata(m)
	if err != nil {
		return err
	}
	refs := &frame.ExportRefs{Table: loc, Version: v, Metadata: sha256.Sum256(data), Objects: objects}
	if _, err := bucket.CreateOnce(ctx, b, refs.Name(), refs.Encode()); err != nil {
		if errors.Is(err, bucket.ErrExist) {
			return fmt.Errorf("the reference list %s of version v%d holds other objects than the version's (damaged? `worldfs optimize` writes it again): %w", refs.Name(), v, ErrCorrupt)
		}
		return fmt.Errorf("writing the reference list %s: %w", refs.Name(), err)
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

// listed returns what version p of the table at loc references: its
// reference list, or (none, or a damaged one) what its manifests name.
func listed(ctx context.Context, b bucket.Bucket, loc string, p *previous) ([]string, error) {
	if p == nil || p.m == nil {
		return nil, nil
	}
	r, err := frame.ReadExportRefsOf(ctx, b, loc, p.ver, p.sum)
	if err == nil {
		return r.Objects, nil
	}
	if !errors.Is(err, frame.ErrNoExportRefs) && !errors.Is(err, index.ErrCorrupt) {
		return nil, fmt.Errorf("export %s: %w", loc, err)
	}
	return referenced(ctx, b, p.base, p.m)
}

// referenced returns every bucket object the live snapshots of m name
// (data files, in place or rewritten), read from their manifests; base
// is the URI the metadata names objects by.
func referenced(ctx context.Context, b bucket.Bucket, base string, m *metadata) ([]string, error) {
	objectOf := func(uri string) (string, error) { return objectOf(base, uri) }
	out := map[string]bool{}
	read := map[string]bool{} // manifests, shared by snapshots
	for i := range m.Snapshots {
		manifests, err := manifestList(ctx, b, &m.Snapshots[i], objectOf)
		if err != nil {
			return nil, err
		}
		for _, mf := range manifests {
			if read[mf.FilePath()] {
				continue
			}
			read[mf.FilePath()] = true
			es, err := readManifest(ctx, b, mf, objectOf)
			if err != nil {
				return nil, err
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
	return slices.Sorted(maps.Keys(out)), nil
}

// Refs returns every bucket object a live snapshot of an export
// registered in world's registry references, read from the manifests of
// each table's latest version (not from its reference list): what
// collection of world must keep.
func Refs(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error) {
	regs, err := frame.ReadExportRegistrations(ctx, b, world)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range regs {
		_, m, _, err := latest(ctx, b, r.Table)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", r.Table, err)
		}
		if m == nil {
			continue // registered, never committed
		}
		objs, err := referenced(ctx, b, r.Base, m)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", r.Table, err)
		}
		for _, o := range objs {
			out[o] = true
		}
	}
	return out, nil
}

// ReferenceLists is what WriteReferenceLists found and did.
type ReferenceLists struct {
	Tables  int // registered tables with a committed version
	Missing int // latest versions without a reference list (written by an older worldfs)
	Damaged int // latest versions whose list is damaged
	Written int // lists written (0 in a dry run)
}

// WriteReferenceLists writes the reference list of the latest version of
// every export registered in world's registry that has none (a worldfs
// before reference lists wrote the version), and again that of one whose
// list is damaged (deleting the damaged object first), from the
// version's manifests, so that collection, which refuses to delete
// anything of the world while an export's list is missing or damaged,
// can go on. A dry run counts and writes nothing.
func WriteReferenceLists(ctx context.Context, b bucket.Bucket, world string, dryRun bool) (ReferenceLists, error) {
	var res ReferenceLists
	regs, err := frame.ReadExportRegistrations(ctx, b, world)
	if err != nil {
		return res, err
	}
	for _, r := range regs {
		v, m, sum, err := latest(ctx, b, r.Table)
		if err != nil {
			return res, fmt.Errorf("export %s: %w", r.Table, err)
		}
		if m == nil {
			continue
		}
		res.Tables++
		_, err = frame.ReadExportRefsOf(ctx, b, r.Table, v, sum)
		damaged := errors.Is(err, index.ErrCorrupt)
		switch {
		case err == nil:
			continue
		case damaged:
			res.Damaged++
		case errors.Is(err, frame.ErrNoExportRefs):
			res.Missing++
		default:
			return res, fmt.Errorf("export %s: %w", r.Table, err)
		}
		if dryRun {
			continue
		}
		objs, err := referenced(ctx, b, r.Base, m)
		if err != nil {
			return res, fmt.Errorf("export %s: version v%d: %w", r.Table, v, err)
		}
		refs := &frame.ExportRefs{Table: r.Table, Version: v, Metadata: sum, Objects: objs}
		if damaged {
			a, err := b.Stat(ctx, refs.Name())
			if err != nil {
				return res, fmt.Errorf("export %s: %w", r.Table, err)
			}
			if err := bucket.DeleteOnce(ctx, b, a.Name, a.Generation); err != nil && !errors.Is(err, bucket.ErrNotExist) {
				return res, fmt.Errorf("export %s: deleting the damaged reference list %s: %w", r.Table, a.Name, err)
			}
		}
		if _, err := bucket.CreateOnce(ctx, b, refs.Name(), refs.Encode()); err != nil {
			return res, fmt.Errorf("export %s: writing the reference list %s: %w", r.Table, refs.Name(), err)
		}
		res.Written++
	}
	return res, nil
}

// encodeMetadata is m's bytes as a version holds them.
func encodeMetadata(m *metadata) ([]byte, error) { return json.MarshalIndent(m, "", "  ") }
