package fs

import (
	"context"
	"os"

	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
)

// record is the catalog's record of f, as the cache checks it.
func record(f index.Fragment) cache.Record {
	return cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
}

// fragmentPath returns a local file holding the fragment f records: the
// bucket file itself on a local bucket, else a copy in the cache, verified
// (size and sha256, by cache.Record's rule) as it is fetched. ctx is a bounded read's
// (see bounded): its deadline reaches the fetch.
func (m *Mount) fragmentPath(ctx context.Context, f index.Fragment) (string, error) {
	if m.local != nil {
		return m.local.Path(f.Path)
	}
	return m.opts.Cache.VerifiedPath(ctx, m.b, m.opts.BucketID, record(f))
}

// checkOpen checks a fragment file the mount is about to serve as is
// against the catalog's record, through the open file itself (what is
// checked is what is served): its size on every open, and on a local
// bucket the sha256 the first time the file is served (remembered per
// file, so it is hashed once; a copied bucket's files, with new
// generations, are decided so). A cached copy was hashed as it was
// fetched.
func (m *Mount) checkOpen(file *os.File, f index.Fragment) error {
	r := record(f)
	if m.local != nil {
		return m.verified.CheckOpen(file, r)
	}
	info, err := file.Stat()
	if err != nil {
		return err
	}
	return r.CheckSize(file.Name(), info.Size())
}
