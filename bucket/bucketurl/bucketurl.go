// Package bucketurl is the one place that builds a bucket backend from a
// URL. Everything above the bucket layer opens buckets through it.
package bucketurl

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

// Help describes the accepted URLs, for command-line help.
const Help = `Bucket URLs:
  ./dir, /abs/dir, file:///abs/dir   a local directory (created if missing)
  gs://BUCKET[/PREFIX]               Google Cloud Storage; credentials from the environment,
                                     STORAGE_EMULATOR_HOST selects an emulator
  mem://NAME[?profile=gcs&seed=N]    process memory (tests, simulation); profile "gcs"
                                     models GCS latency and per-name throttling`

// Open builds the bucket that rawURL names.
func Open(ctx context.Context, rawURL string) (bucket.Bucket, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("empty bucket URL\n%s", Help)
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return local.Open(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bucket URL %q: %w", rawURL, err)
	}
	switch scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("bucket URL %q: a file URL names a local path (file:///path)", rawURL)
		}
		return local.Open(u.Path)
	case "gs":
		if u.Host == "" {
			return nil, fmt.Errorf("bucket URL %q: no bucket name (gs://BUCKET/PREFIX)", rawURL)
		}
		return gcs.Open(ctx, u.Host, u.Path, gcs.Options{})
	case "mem":
		return openMem(rawURL, u)
	}
	return nil, fmt.Errorf("bucket URL %q: unknown scheme %q in %q\n%s", rawURL, scheme, scheme+"://"+rest, Help)
}

func openMem(rawURL string, u *url.URL) (bucket.Bucket, error) {
	name := u.Host + u.Path
	if name == "" {
		return nil, fmt.Errorf("bucket URL %q: no name (mem://NAME)", rawURL)
	}
	var opts mem.Options
	q := u.Query()
	if p := q.Get("profile"); p != "" {
		prof, ok := mem.Profiles[p]
		if !ok {
			return nil, fmt.Errorf("bucket URL %q: unknown profile %q (known: none, gcs)", rawURL, p)
		}
		opts.Profile = prof
	}
	if s := q.Get("seed"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bucket URL %q: seed %q is not a number", rawURL, s)
		}
		opts.Seed = seed
	}
	for k := range q {
		if k != "profile" && k != "seed" {
			return nil, fmt.Errorf("bucket URL %q: unknown parameter %q (known: profile, seed)", rawURL, k)
		}
	}
	return mem.Open(name, opts), nil
}
