package bench

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/ui"
)

// All lists every benchmark, in the order "worldfs bench --help" shows
// them; env is how they take and open a bucket. Each call builds the list
// anew: a Bench's flags are bound when its Flags is called.
func All(env Env) []Bench {
	return []Bench{
		bucketSpec(env),    // bucket: Create and Get on a bucket
		coldStartSpec(env), // coldstart: a cold start after a checkpoint
		commitSpec(env),    // commit: concurrent writers' commits
		compactedSpec(env), // fs-compacted: reads of a compacted table through the mount
		diffSpec(env),      // diff: diff and trajectory queries of a fork
		exportSpec(env),    // export: the Iceberg export
		fsSpec(env),        // fs: the mount against direct reads (fio)
		historySpec(env),   // history: a long world before and after compaction
		ingestSpec(env),    // ingest: facts from many producers
		querySpec(env),     // query: the views against raw read_parquet
		rawSpec(env),       // raw: a query on a plain DuckDB, the fresh-process baseline
		serveSpec(env),     // serve: the PostgreSQL protocol against worldfs sql in process
		soakSpec(env),      // soak: a writer, maintenance, gc, checks and readers at once, for a duration
		sweepSpec(env),     // sweep: many forks read as one table
		ticksSpec(env),     // ticks: tick throughput and pipelining
		uiSpec(env),        // ui: the web interface's server-side time
	}
}

// Bench is one benchmark, run as "worldfs bench <Name>".
type Bench struct {
	Name    string
	Summary string // one line, for the help
	Example string // a command line, for the help
	// Flags adds the benchmark's flags to fs (--json among them) and
	// returns the function that runs it once fs is parsed.
	Flags func(fs *flag.FlagSet) Run
}

// Run runs a benchmark: args are its positional arguments, and its
// result goes to out. A mistake in the command line is a UsageError.
type Run func(ctx context.Context, args []string, out io.Writer) error

// Env is what the benchmarks take from the command that runs them.
type Env struct {
	// BucketFlag adds --bucket (and the flags that go with it) to fs
	// and returns the bucket URL it will hold.
	BucketFlag func(fs *flag.FlagSet) *string
	// OpenBucket opens the bucket at url for a benchmark that writes.
	OpenBucket func(ctx context.Context, url string) (bucket.Bucket, error)
	// OpenExisting opens the bucket at url for a benchmark that only
	// reads, failing if it does not exist.
	OpenExisting func(ctx context.Context, url string) (bucket.Bucket, error)
	// RequireWorld fails unless world exists in b.
	RequireWorld func(ctx context.Context, b bucket.Bucket, world string) error
	// UIOptions are the web interface's options over b (at url), with
	// its caches under cacheDir; done releases them.
	UIOptions func(b bucket.Bucket, url, cacheDir string, cacheSize int64) (opts ui.Options, done func(), err error)
}

// UsageError is a mistake in a benchmark's command line: a flag value or
// argument it refuses.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return UsageError{Msg: fmt.Sprintf(format, args...)} }
