package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/internal/stats"
)

func bucketSpec(env Env) Bench {
	var url *string
	var ops, callers, size *int
	return benchSpec[*bucketBench]{
		name:    "bucket",
		summary: "measure Create and Get on a bucket: throughput, latency percentiles, ratio to direct file reads",
		example: "worldfs bench bucket --bucket 'mem://b?profile=gcs' --ops 2000 --callers 16 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			ops = fs.Int("ops", 2000, "objects to create, then read")
			callers = fs.Int("callers", 16, "concurrent callers")
			size = fs.Int("size", 1024, "object size in bytes")
		},
		check: func(args []string) error {
			if len(args) != 0 {
				return usagef("bench bucket takes no arguments")
			}
			if *ops <= 0 || *callers <= 0 || *size < 0 {
				return usagef("--ops and --callers must be positive, --size not negative")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*bucketBench, error) {
			return benchBucket(ctx, b, *url, *ops, *callers, *size)
		},
		table: func(out io.Writer, res *bucketBench) error {
			fmt.Fprintf(out, "bucket %s, %d objects of %d bytes, %d callers\n", res.Bucket, res.Ops, res.Size, res.Callers)
			for _, p := range []struct {
				name string
				s    stats.Summary
			}{{"create", res.Create}, {"get", res.Get}} {
				fmt.Fprintf(out, "  %-7s %9.0f ops/s  p50 %7.3f ms  p90 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n",
					p.name, p.s.OpsPerSec, p.s.P50ms, p.s.P90ms, p.s.P99ms, p.s.MaxMs)
			}
			if res.DirectRead != nil {
				fmt.Fprintf(out, "  direct  %9.0f ops/s  p50 %7.3f ms  (os.ReadFile of the same files; get/direct throughput ratio %.2f)\n",
					res.DirectRead.OpsPerSec, res.DirectRead.P50ms, res.GetVsDirect)
			}
			return nil
		},
	}.bench()
}

// benchSpec is one bench command. Every bench shares one scaffold
// (bench): check the command line, open the bucket (closed
// after), run, and print the result as one JSON object (--json) or as a
// table.
type benchSpec[R any] struct {
	name, summary, example string
	// flags adds the bench's own flags; the scaffold adds --json.
	flags func(fs *flag.FlagSet)
	// check refuses arguments and flag values with a usage error.
	check func(args []string) error
	// open opens the bucket the bench runs on (nil: it opens none and
	// run gets a nil bucket).
	open func(ctx context.Context) (bucket.Bucket, error)
	// run measures and returns the result.
	run func(ctx context.Context, b bucket.Bucket) (R, error)
	// table prints the result for a reader (without --json).
	table func(out io.Writer, res R) error
	// verdict, if set, fails a result once it is printed (a soak that
	// found damage prints what it did, then fails).
	verdict func(res R) error
}

// benchDir returns dir, or when it is empty a new temporary directory
// named after pattern, and a remove that deletes the directory it made.
func benchDir(dir, pattern string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// selfOr is path, or this executable if path is empty: the worldfs a
// benchmark runs in fresh processes.
func selfOr(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return os.Executable()
}

// benchMount mounts b at work/name with a fresh cache at work/name-cache
// (a cold mount); done unmounts it and closes the mount.
func benchMount(b bucket.Bucket, work, name string, opts wfs.Options, mo wfs.MountOptions) (mnt string, srv *fuse.Server, done func(), err error) {
	if opts.Cache, err = cache.Open(filepath.Join(work, name+"-cache"), cache.Options{}); err != nil {
		return "", nil, nil, err
	}
	if opts.BucketID == "" {
		opts.BucketID = "bench" // the cache is the mount's own: one bucket
	}
	m, err := wfs.New(b, opts)
	if err != nil {
		return "", nil, nil, err
	}
	mnt = filepath.Join(work, name)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		m.Close()
		return "", nil, nil, err
	}
	if srv, err = wfs.Serve(mnt, m, mo); err != nil {
		m.Close()
		return "", nil, nil, err
	}
	return mnt, srv, func() { srv.Unmount(); m.Close() }, nil
}

// bench is s as a Bench: the scaffold adds --json; its run checks the
// command line, opens the bucket (closed after), runs, prints the result
// as one JSON object (--json) or as a table, and then fails if its
// verdict does.
func (s benchSpec[R]) bench() Bench {
	return Bench{
		Name:    s.name,
		Summary: s.summary,
		Example: s.example,
		Flags: func(fs *flag.FlagSet) Run {
			s.flags(fs)
			asJSON := fs.Bool("json", false, "print one JSON object")
			return func(ctx context.Context, args []string, out io.Writer) error {
				if err := s.check(args); err != nil {
					return err
				}
				var b bucket.Bucket
				if s.open != nil {
					var err error
					if b, err = s.open(ctx); err != nil {
						return err
					}
					defer b.Close()
				}
				res, err := s.run(ctx, b)
				if err != nil {
					return err
				}
				if *asJSON {
					err = writeJSON(out, res)
				} else {
					err = s.table(out, res)
				}
				if err == nil && s.verdict != nil {
					err = s.verdict(res)
				}
				return err
			}
		},
	}
}

type bucketBench struct {
	Bucket  string `json:"bucket"`
	Ops     int    `json:"ops"`
	Callers int    `json:"callers"`
	Size    int    `json:"size"`
	Prefix  string `json:"prefix"`

	Create stats.Summary `json:"create"`
	Get    stats.Summary `json:"get"`
	// DirectRead is os.ReadFile of the same files (local buckets only), the
	// baseline Get is measured against.
	DirectRead  *stats.Summary `json:"direct_read,omitempty"`
	GetVsDirect float64        `json:"get_vs_direct_throughput,omitempty"`
}

func benchBucket(ctx context.Context, b bucket.Bucket, url string, ops, callers, size int) (*bucketBench, error) {
	prefix := fmt.Sprintf("bench/%d/", time.Now().UnixNano())
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	name := func(i int) string { return fmt.Sprintf("%s%016x", prefix, i) }
	res := &bucketBench{Bucket: url, Ops: ops, Callers: callers, Size: size, Prefix: prefix}
	var err error
	if res.Create, err = phase(ctx, "create", ops, callers, func(i int) error {
		_, err := bucket.CreateOnce(ctx, b, name(i), data)
		return err
	}); err != nil {
		return nil, err
	}
	if res.Get, err = phase(ctx, "get", ops, callers, func(i int) error {
		_, _, err := b.Get(ctx, name(i))
		return err
	}); err != nil {
		return nil, err
	}
	if lb, ok := bucket.As[bucket.Local](b); ok {
		direct, err := phase(ctx, "direct read", ops, callers, func(i int) error {
			p, err := lb.Path(name(i))
			if err == nil {
				_, err = os.ReadFile(p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		res.DirectRead = &direct
		res.GetVsDirect = res.Get.OpsPerSec / direct.OpsPerSec
	}
	return res, nil
}

// phase runs op(0..n-1) from callers goroutines, printing progress to
// stderr every second.
func phase(ctx context.Context, what string, n, callers int, op func(i int) error) (stats.Summary, error) {
	var rec stats.Recorder
	var next, done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go showCount(pctx, what, func() int { return int(done.Load()) })
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s %d: %w", what, i, err) })
					return
				}
				rec.Add(time.Since(t0))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	stop()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return rec.Summarize(time.Since(start)), firstErr
}
