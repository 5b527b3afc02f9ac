package sql

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
)

// recordPath returns a local file DuckDB can read for a fragment the
// catalog records, checked against its record (cache.Record).
type recordPath func(ctx context.Context, f index.Fragment) (string, error)

// Record is the catalog's record of f, as the cache checks it.
func Record(f index.Fragment) cache.Record {
	return cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
}

// verifier returns the fragment paths of the views, checked against the
// catalog: a local bucket's files are read in place, so their size and
// generation are checked as they are listed and their sha256 once per
// file (remembered in opts.Verified, or in dir/verified), which wait
// computes for the files not yet remembered; a remote bucket's fragments
// are verified as they are fetched into the cache.
func verifier(b bucket.Bucket, path pathFunc, opts Options, dir string) (recordPath, func(context.Context) error) {
	if _, ok := bucket.As[bucket.Local](b); ok {
		v := opts.Verified
		if v == nil {
			v = cache.OpenVerified(filepath.Join(dir, "verified"))
		}
		batch := v.Batch()
		return func(ctx context.Context, f index.Fragment) (string, error) {
			p, err := path(ctx, f.Path)
			if err != nil {
				return "", err
			}
			if err := batch.Add(p, Record(f)); err != nil {
				return "", err
			}
			return p, nil
		}, batch.Wait
	}
	return func(ctx context.Context, f index.Fragment) (string, error) {
		if !Record(f).Recorded() {
			return path(ctx, f.Path)
		}
		if opts.Cache == nil {
			return "", fmt.Errorf("fragment %s: a remote bucket is read through the fragment cache; none was given", f.Path)
		}
		return opts.Cache.VerifiedPath(ctx, b, opts.BucketID, Record(f))
	}, func(context.Context) error { return nil }
}
