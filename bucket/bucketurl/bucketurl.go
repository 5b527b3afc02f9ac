// Package bucketurl is the one place that builds a bucket backend from a
// URL. Everything above the bucket layer opens buckets through it.
package bucketurl

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

// Help describes the accepted URLs, for command-line help.
const Help = `Bucket URLs:
  ./dir, /abs/dir, file:///abs/dir   a local directory (made by the first write, or worldfs init)
  gs://BUCKET[/PREFIX]               Google Cloud Storage; credentials from the environment,
                                     STORAGE_EMULATOR_HOST selects an emulator
  mem://NAME[?profile=gcs&seed=N]    process memory (tests, simulation); profile "gcs"
                                     models GCS latency and per-name throttling`

// Options apply to whichever backend a URL names. They are not part of the
// URL, which names the bucket (and keys its cache) whatever the options.
type Options struct {
	// Timeout is how long a bucket call waits for the bucket to answer
	// before it fails with *bucket.NotAnsweringError (default
	// bucket.DefaultTimeout). Every backend honours it; a memory bucket
	// fails a call whose modeled latency exceeds it.
	Timeout time.Duration
}

// Open builds the bucket that rawURL names, with default options.
func Open(ctx context.Context, rawURL string) (bucket.Bucket, error) {
	return OpenWith(ctx, rawURL, Options{})
}

// OpenWith builds the bucket that rawURL names.
func OpenWith(ctx context.Context, rawURL string, opts Options) (bucket.Bucket, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("bucket timeout %v: must be positive", opts.Timeout)
	}
	if rawURL == "" {
		return nil, fmt.Errorf("empty bucket URL\n%s", Help)
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return local.OpenWith(rawURL, local.Options{Timeout: opts.Timeout})
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
		return local.OpenWith(u.Path, local.Options{Timeout: opts.Timeout})
	case "gs":
		if u.Host == "" {
			return nil, fmt.Errorf("bucket URL %q: no bucket name (gs://BUCKET/PREFIX)", rawURL)
		}
		return gcs.Open(ctx, u.Host, u.Path, gcs.Options{Timeout: opts.Timeout})
	case "mem":
		return openMem(rawURL, u, opts.Timeout)
	}
	return nil, fmt.Errorf("bucket URL %q: unknown scheme %q in %q\n%s", rawURL, scheme, scheme+"://"+rest, Help)
}

func openMem(rawURL string, u *url.URL, timeout time.Duration) (bucket.Bucket, error) {
	name := u.Host + u.Path
	if name == "" {
		return nil, fmt.Errorf("bucket URL %q: no name (mem://NAME)", rawURL)
	}
	opts := mem.Options{Timeout: timeout}
	if timeout == 0 {
		opts.Timeout = bucket.DefaultTimeout
	}
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
