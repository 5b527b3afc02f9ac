package fs

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// Mount is the file system of one bucket: its root node, the catalogs it
// reads, and the writers its ctl files hold.
type Mount struct {
	// Immutable.
	b     bucket.Bucket
	local bucket.Local // nil: a remote bucket, read through the cache
	opts  Options
	stats *Stats
	// startedMs is when the mount began (Unix ms): the modification time
	// of what has no commit time of its own (the root, ctl files, stats).
	startedMs int64
	// cats are the read-only catalogs, by world, at most
	// opts.MaxCatalogs (index.Catalogs).
	cats *index.Catalogs
	// verified remembers the bucket files found to match their catalog
	// records (kept in the cache directory).
	verified *cache.Verified
	// tickIndexes are the compacted files' tick indexes read so far.
	tickIndexes    tickIndexes
	compactedFiles compactedFiles
	rebuiltFiles   rebuiltFiles
	ahead          aheadFiles
	// refusals are the commands the ctl files refused, by ctl file and
	// user, for their ctl.errors files (refusals.go).
	refusals refusals

	mu struct {
		sync.Mutex
		// colds are the partial states of worlds read cold (cold.go), the
		// last read of each; at most opts.MaxCatalogs.
		colds map[string]*coldState
		// coldsStale: cold states brought to the tip before it are
		// brought there again before they answer (a ctl command
		// succeeded: see refresh).
		coldsStale time.Time
		infos      map[string]frame.TableInfo          // by world/table id; immutable objects
		tables     map[string]*engine.Table            // by world/table id, rebuilt from infos
		worlds     []index.WorldEntry                  // the world directory, sorted by id
		worldsAt   time.Time                           // when worlds was read
		writers    map[string]*writer                  // by world
		ingest     map[string]*engine.IngestionService // by world
		closed     bool
	}
}

// New returns the file system of b.
func New(b bucket.Bucket, opts Options) (*Mount, error) {
	if err := opts.EnsureDefaults().Validate(b); err != nil {
		return nil, err
	}
	m := &Mount{b: b, opts: opts, stats: newStats(), startedMs: time.Now().UnixMilli()}
	m.local, _ = bucket.As[bucket.Local](b)
	m.verified = cache.OpenVerified(filepath.Join(opts.Cache.Dir(), "verified"))
	m.cats = index.NewCatalogs(b, index.CatalogsOptions{
		Max: opts.MaxCatalogs, Freshness: opts.Freshness, Uncreated: true,
		Evicted: func(string) { m.stats.catalogsClosed.Add(1) },
	})
	m.mu.colds = map[string]*coldState{}
	m.mu.infos = map[string]frame.TableInfo{}
	m.mu.tables = map[string]*engine.Table{}
	m.mu.writers = map[string]*writer{}
	m.mu.ingest = map[string]*engine.IngestionService{}
	return m, nil
}

// Root returns the root directory node.
func (m *Mount) Root() gofs.InodeEmbedder { return &rootDir{dirBase: dirBase{m: m}} }

// Close releases the writers and catalogs. A tick being committed is
// decided first (Close waits for the writer).
func (m *Mount) Close() error {
	m.mu.Lock()
	m.mu.closed = true
	writers := m.mu.writers
	m.mu.writers = map[string]*writer{}
	m.mu.Unlock()
	var errs []error
	for _, w := range writers {
		w.mu.Lock()
		errs = append(errs, w.w.Close())
		w.mu.Unlock()
	}
	m.cats.Close()
	m.ahead.stop() // before the compacted files close: no worker opens one again
	m.compactedFiles.close()
	return errors.Join(errs...)
}

// ino is the stable inode number of a path in the tree: FNV-1a of its
// parts, each followed by a zero byte (computed in place: a listing calls
// it for every entry).
func ino(parts ...string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h = (h ^ uint64(p[i])) * prime
		}
		h *= prime // the zero byte
	}
	return h&(1<<62-1) | 1<<61 // below go-fuse's automatic numbers, never 0 or 1
}

// finish returns ctx without its cancellation, for the mount's reads: the
// kernel interrupts a request whenever the caller's thread takes a signal
// (Go's runtime preempts goroutines with one), and answering those with
// EINTR fails callers that do not retry. Reads are short and bounded by
// their own timeouts, so they run to their end.
func finish(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
