package maintenance

import (
	"context"
	"slices"
	"sync"

	"github.com/worldfs/worldfs/bucket"
)

// What exports reference from outside the catalog, which collection keeps
// whatever the catalog says of them.

// A RefSource names objects that something outside the catalog still
// references (an export's live snapshots), which collection keeps
// whatever the catalog says of them. An error fails the collection
// before it deletes a fragment.
type RefSource func(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error)

var refSources struct {
	sync.Mutex
	list []RefSource
}

// RegisterRefSource adds a source every Collect asks; a package that
// references fragments from outside the catalog registers one when it is
// linked in (export/iceberg does).
func RegisterRefSource(s RefSource) {
	refSources.Lock()
	defer refSources.Unlock()
	refSources.list = append(refSources.list, s)
}

// exportReferences returns the objects of world that exports reference.
func exportReferences(ctx context.Context, b bucket.Bucket, world string) (map[string]bool, error) {
	refSources.Lock()
	sources := slices.Clone(refSources.list)
	refSources.Unlock()
	out := map[string]bool{}
	for _, src := range sources {
		refs, err := src(ctx, b, world)
		if err != nil {
			return nil, err
		}
		for name := range refs {
			out[name] = true
		}
	}
	return out, nil
}
