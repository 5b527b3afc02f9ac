package index

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/worldfs/worldfs/bucket"
)

// Catalogs is a bucket's read-only catalogs, one per world, for a server
// that answers many readers (the web interface, the PostgreSQL server):
// each opened on first use without a compactor (it never writes, not even
// a closing checkpoint) and kept, at most Max, the least recently used
// closed when one more is opened. A closed catalog still answers those
// who hold it (Fresh and Exact read the bucket); closing stops its
// committer and lets its state go once they are done.
type Catalogs struct {
	b    bucket.Bucket
	opts CatalogsOptions

	mu struct {
		sync.Mutex
		kept    *simplelru.LRU[string, *Catalog]
		evicted []string // worlds whose catalogs were evicted, closed outside the lock
		closing []*Catalog
		closed  bool
	}
}

// CatalogsOptions configure Catalogs.
type CatalogsOptions struct {
	// Max is how many catalogs are kept open (at least 1).
	Max int
	// Freshness is each catalog's (Options.Freshness).
	Freshness time.Duration
	// Evicted, if set, is called with a world whose catalog is no
	// longer kept, after it closed (outside any lock of Catalogs).
	Evicted func(world string)
	// Uncreated keeps the catalog of a world that records no creation
	// yet, as any other (the mount: a world being created shows once its
	// creation lands); without it such a world is ErrNoWorld.
	Uncreated bool
}

// NewCatalogs returns the catalogs of b's worlds, none open yet.
func NewCatalogs(b bucket.Bucket, opts CatalogsOptions) *Catalogs {
	cs := &Catalogs{b: b, opts: opts}
	cs.mu.kept, _ = simplelru.NewLRU(max(opts.Max, 1), func(world string, c *Catalog) {
		cs.mu.evicted = append(cs.mu.evicted, world)
		cs.mu.closing = append(cs.mu.closing, c)
	})
	return cs
}

// Get returns world's catalog, opened on first use and kept. A world
// whose catalog records no creation is ErrNoWorld (and not kept) unless
// Uncreated is set; a
// name that cannot be a world's is ValidateWorldID's error; after Close,
// ErrClosed.
func (cs *Catalogs) Get(ctx context.Context, world string) (*Catalog, error) {
	if err := ValidateWorldID(world); err != nil {
		return nil, err
	}
	cs.mu.Lock()
	c, ok := cs.mu.kept.Get(world)
	closed := cs.mu.closed
	cs.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case ok:
		return c, nil
	}
	// Opened outside the lock: a slow load never holds up other worlds.
	c, err := Open(ctx, cs.b, world, Options{NoCompactor: true, Freshness: cs.opts.Freshness})
	if err != nil {
		return nil, err
	}
	if !cs.opts.Uncreated && !c.Tip().World.Created {
		c.Close()
		return nil, fmt.Errorf("world %s: %w", world, ErrNoWorld)
	}
	cs.mu.Lock()
	var kept *Catalog
	switch prev, ok := cs.mu.kept.Get(world); {
	case cs.mu.closed:
		cs.mu.closing = append(cs.mu.closing, c)
		err = ErrClosed
	case ok:
		cs.mu.closing = append(cs.mu.closing, c) // opened meanwhile by another reader
		kept = prev
	default:
		cs.mu.kept.Add(world, c) // past Max, the least recently used is evicted
		kept = c
	}
	cs.closeOutside()
	return kept, err
}

// closeOutside closes, once cs's lock is released (which it releases),
// the catalogs no longer kept, then tells Evicted of their worlds.
func (cs *Catalogs) closeOutside() {
	closing, evicted := cs.mu.closing, cs.mu.evicted
	cs.mu.closing, cs.mu.evicted = nil, nil
	cs.mu.Unlock()
	for _, c := range closing {
		c.Close() // a closed catalog still answers those who hold it
	}
	if cs.opts.Evicted != nil {
		for _, w := range evicted {
			cs.opts.Evicted(w)
		}
	}
}

// State returns world's catalog state, confirmed current within the
// freshness.
func (cs *Catalogs) State(ctx context.Context, world string) (*State, error) {
	c, err := cs.Get(ctx, world)
	if err != nil {
		return nil, err
	}
	return c.Fresh(ctx)
}

// Contains reports whether world's catalog is kept (its use unchanged).
func (cs *Catalogs) Contains(world string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mu.kept.Contains(world)
}

// Values returns the catalogs kept, the least recently used first.
func (cs *Catalogs) Values() []*Catalog {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mu.kept.Values()
}

// Len is how many catalogs are kept.
func (cs *Catalogs) Len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mu.kept.Len()
}

// Close closes every catalog kept; Get fails with ErrClosed from then on.
func (cs *Catalogs) Close() {
	cs.mu.Lock()
	cs.mu.closed = true
	cs.mu.kept.Purge() // each is queued for closing, as an eviction
	cs.mu.evicted = nil
	cs.closeOutside()
}
