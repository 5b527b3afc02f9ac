package maintenance

import (
	"context"
	"errors"
	"fmt"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// What exports reference from outside the catalog, which collection keeps
// whatever the catalog says of them (docs/ARCHITECTURE.md, "Export and
// transfer"). It is data in the bucket, read by every collector, whatever
// code its program links:
//
//   - the export registry (export/registry/<world>/, index.ExportRegistryName):
//     one registration per exported table, created before the table's
//     first metadata version, naming the table's location (its object
//     prefix);
//   - beside each metadata version of an exported table, its reference
//     list (index.IcebergRefsName, named by the version and the hash of
//     the metadata's bytes): every bucket object the version's live
//     snapshots reference, created before the version itself.
//
// Collection reads, for each registered table, its latest version (the
// highest listed: a version is create-only, like a log slot) and that
// version's reference list, and keeps every object in it. What it cannot
// read (the registry, a registration, the latest version, a reference
// list missing because an older worldfs wrote the version, or damaged)
// fails the collection before it deletes any of the world's data: the
// error names the export and what to do.
//
// An export in flight (planned, its version not yet committed) is kept by
// the intent it holds on the world's catalog (invariant 16), which it
// closes only after the version and its reference list landed: see
// package export/iceberg.

// exportReferences returns every object that the latest metadata version
// of an export registered in world's registry references (objects of any
// world: collection keeps those it lists). An error names the export and
// what to do; collection then deletes none of the world's data.
func exportReferences(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error) {
	const nothing = "collection deletes none of the world's data until then"
	regs, err := frame.ReadExportRegistrations(ctx, b, world)
	if err != nil {
		return nil, fmt.Errorf("%w; delete a damaged record and run `worldfs export iceberg` again for each export of world %s (an export registers its tables anew); %s", err, world, nothing)
	}
	out := map[string]bool{}
	for _, r := range regs {
		v, err := frame.LatestExportVersion(ctx, b, r.Table)
		if err != nil {
			return nil, fmt.Errorf("export %s: listing its metadata versions: %w; %s", r.Table, err, nothing)
		}
		if v == 0 {
			continue // registered, never committed (one in flight holds an intent)
		}
		refs, err := frame.ReadExportRefs(ctx, b, r.Table, v)
		switch {
		case errors.Is(err, frame.ErrNoExportRefs):
			return nil, fmt.Errorf("export %s: %w (written by an older worldfs); run `worldfs optimize --world %s` to write it, or `worldfs export iceberg --world %s` again; %s", r.Table, err, world, r.World, nothing)
		case errors.Is(err, index.ErrCorrupt):
			return nil, fmt.Errorf("export %s: %w; run `worldfs optimize --world %s`, which writes it again; %s", r.Table, err, world, nothing)
		case err != nil:
			return nil, fmt.Errorf("export %s: %w; %s", r.Table, err, nothing)
		}
		for _, o := range refs.Objects {
			out[o] = true
		}
	}
	return out, nil
}

// ExportReferences is what collection of world keeps for its exports
// (see exportReferences): for `worldfs check` and tests.
func ExportReferences(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error) {
	return exportReferences(ctx, b, world)
}
