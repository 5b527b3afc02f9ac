package fs

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/internal/stats"
	wsql "github.com/worldfs/worldfs/sql"
)

// Stats counts what the mount served: snapshot opens, the bytes they
// exposed, the bytes read through the mount (passthrough reads bypass it),
// DuckDB databases this process opened since the mount began (the mount
// itself opens one only to read the rows of a file a ctl command names:
// none for a stat or a read), files derived in Go from their fragments' visible
// rows (split ticks, facts/: see rowSet; and the ticks of compacted files
// without a tick index, sized at lookup: see derivedEntry), compacted
// ticks' files rebuilt from their rows (frame.CompactedFile; those of
// them rebuilt ahead of a reader of a listed table: Mount.readAhead), the
// compacted files opened to read their rows (for either) and the bytes of compacted files
// fetched from a remote bucket for them, CSV renderings, CSV sizes read from a fragment's footer, opens planned
// again because maintenance had moved a tick's rows, and per-operation latencies over a recent window.
type Stats struct {
	opens, passthrough           atomic.Int64
	rendered, replanned, rebuilt atomic.Int64
	rebuiltAhead                 atomic.Int64
	duckdbAt                     int64 // wsql.Databases() when the mount began
	catalogsClosed, csvSized     atomic.Int64
	gathered, compactedOpened    atomic.Int64
	bytesOpened, bytesRead       atomic.Int64
	// compactedFetched: the bytes of compacted files read from a remote
	// bucket to rebuild their ticks' files, by ranges or whole.
	compactedFetched atomic.Int64

	mu struct {
		sync.Mutex
		ops map[string]*window
	}
}

// window keeps the last windowSize latencies of one operation.
type window struct {
	count int64
	ds    []time.Duration // a ring
}

const windowSize = 4096

func newStats() *Stats {
	s := &Stats{duckdbAt: wsql.Databases()}
	s.mu.ops = map[string]*window{}
	return s
}

// op records the latency of one operation that began at start.
func (s *Stats) op(name string, start time.Time) {
	d := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.mu.ops[name]
	if w == nil {
		w = &window{}
		s.mu.ops[name] = w
	}
	if len(w.ds) < windowSize {
		w.ds = append(w.ds, d)
	} else {
		w.ds[w.count%windowSize] = d
	}
	w.count++
}

// OpStats summarizes one operation's latencies.
type OpStats struct {
	Count int64   `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// StatsSnapshot is what .worldfs/stats shows.
type StatsSnapshot struct {
	Opens             int64              `json:"opens"`
	PassthroughOpens  int64              `json:"passthrough_opens"`
	DuckDBRuns        int64              `json:"duckdb_runs"`
	Gathered          int64              `json:"gathered"`
	Rebuilt           int64              `json:"rebuilt"`
	RebuiltAhead      int64              `json:"rebuilt_ahead"`
	Rendered          int64              `json:"rendered_csv"`
	CSVSizesRead      int64              `json:"csv_sizes_read"`
	Replanned         int64              `json:"replanned"`
	CatalogsOpen      int                `json:"catalogs_open"`
	CatalogsClosed    int64              `json:"catalogs_closed"`
	BytesOpened       int64              `json:"bytes_opened"`
	BytesReadViaMount int64              `json:"bytes_read_via_mount"`
	CompactedFetched  int64              `json:"compacted_bytes_fetched"`
	CompactedOpened   int64              `json:"compacted_files_opened"`
	CacheHits         int64              `json:"cache_hits"`
	CacheMisses       int64              `json:"cache_misses"`
	CacheBytes        int64              `json:"cache_bytes"`
	Ops               map[string]OpStats `json:"ops"`
}

// Snapshot returns the counters now.
func (s *Stats) Snapshot(c *cache.Disk) StatsSnapshot {
	out := StatsSnapshot{
		Opens: s.opens.Load(), PassthroughOpens: s.passthrough.Load(), DuckDBRuns: wsql.Databases() - s.duckdbAt, Gathered: s.gathered.Load(),
		Rebuilt: s.rebuilt.Load(), RebuiltAhead: s.rebuiltAhead.Load(), Rendered: s.rendered.Load(), CSVSizesRead: s.csvSized.Load(), Replanned: s.replanned.Load(), CatalogsClosed: s.catalogsClosed.Load(),
		BytesOpened: s.bytesOpened.Load(), BytesReadViaMount: s.bytesRead.Load(),
		CompactedFetched: s.compactedFetched.Load(), CompactedOpened: s.compactedOpened.Load(), Ops: map[string]OpStats{},
	}
	if c != nil {
		cs := c.Stats()
		out.CacheHits, out.CacheMisses, out.CacheBytes = cs.Hits, cs.Misses, cs.Bytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, w := range s.mu.ops {
		l := stats.Distribution(slices.Clone(w.ds))
		out.Ops[name] = OpStats{Count: w.count, P50ms: l.P50ms, P99ms: l.P99ms, MaxMs: l.MaxMs}
	}
	return out
}
