package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
)

// Shelf keeps built views for a server that answers many readers (the
// web interface, the PostgreSQL server), by the caller's key: each key's
// views are built once for all the readers asking at the same time, kept
// while the catalogs they were built from stay where they were (the
// catalog sequence of each segment of each lineage, Seqs) and built again
// once one moved on. Each kept views holds the DuckDB databases opened on
// its script, idle ones reused. At most ShelfOptions.Max views are kept;
// the least recently used are retired (their idle databases closed, those
// in use closed when released).
//
// T is what the caller keeps beside a views (its own memory of answers);
// it lives as long as the views.
type Shelf[K comparable, T any] struct {
	opts   ShelfOptions
	builds singleflight.Group
	opened atomic.Int64

	mu struct {
		sync.Mutex
		kept   *simplelru.LRU[K, *Kept[T]]
		closed bool
	}
}

// ShelfOptions configure a Shelf.
type ShelfOptions struct {
	// Max is how many views are kept (at least 1).
	Max int
	// Limits bound each database opened (zero: DuckDB's defaults).
	Limits Limits
	// Prepare, if set, runs on each database as it is opened; an error
	// closes it.
	Prepare func(context.Context, *dbsql.DB) error
	// MaxIdle is how many databases one views keeps open between
	// queries beyond those in use (default 2): a query that finds none
	// idle opens its own, so a slow query never holds up another.
	MaxIdle int
}

// ErrShelfClosed: the server that keeps the views is closing.
var ErrShelfClosed = errors.New("the server is shutting down")

// NewShelf returns an empty shelf.
func NewShelf[K comparable, T any](opts ShelfOptions) *Shelf[K, T] {
	if opts.MaxIdle <= 0 {
		opts.MaxIdle = 2
	}
	s := &Shelf[K, T]{opts: opts}
	s.mu.kept, _ = simplelru.NewLRU(max(opts.Max, 1), func(_ K, k *Kept[T]) { k.retire() })
	return s
}

// Kept is views on a shelf: the script, the catalog sequences it was
// built at, the caller's own memory beside it, and its databases.
type Kept[T any] struct {
	Script *Script
	Seqs   []uint64
	Extra  T

	opts   *ShelfOptions
	opened *atomic.Int64
	mu     struct {
		sync.Mutex
		idle    []*dbsql.DB
		retired bool // replaced or evicted: no database goes back to idle
	}
}

// Get returns key's views built at catalog sequences seqs: the kept ones
// if they were built there, else those build makes (once for all the
// callers asking at the same time: the build goes on for the others if
// ctx ends), kept unless newer ones were kept meanwhile.
func (s *Shelf[K, T]) Get(ctx context.Context, key K, seqs []uint64, build func(context.Context) (*Script, T, error)) (*Kept[T], error) {
	s.mu.Lock()
	cur, ok := s.mu.kept.Peek(key)
	if ok && slices.Equal(cur.Seqs, seqs) {
		s.mu.kept.Get(key) // used
		s.mu.Unlock()
		return cur, nil
	}
	s.mu.Unlock()
	flight := fmt.Sprintf("%#v\x00%v", key, seqs)
	ch := s.builds.DoChan(flight, func() (any, error) {
		// A flight for these sequences may have ended between the look
		// above and this one starting: its views are kept, take them.
		if cur, ok := s.kept(key); ok && slices.Equal(cur.Seqs, seqs) {
			return cur, nil
		}
		script, extra, err := build(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		return s.keep(key, &Kept[T]{Script: script, Seqs: seqs, Extra: extra, opts: &s.opts, opened: &s.opened})
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Kept[T]), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// kept returns key's views, if any, without marking them used.
func (s *Shelf[K, T]) kept(key K) (*Kept[T], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.kept.Peek(key)
}

// keep makes nv the views of key, unless views at least as new are kept.
func (s *Shelf[K, T]) keep(key K, nv *Kept[T]) (*Kept[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrShelfClosed
	}
	old, ok := s.mu.kept.Get(key)
	if ok && old.newerThan(nv.Seqs) {
		return old, nil // a reader that saw a newer catalog built first
	}
	s.mu.kept.Add(key, nv) // past Max, the least recently used are retired
	if ok {
		old.retire()
	}
	return nv, nil
}

// Values returns the views kept, the least recently used first.
func (s *Shelf[K, T]) Values() []*Kept[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.kept.Values()
}

// Opened is how many databases the shelf's views have opened.
func (s *Shelf[K, T]) Opened() int64 { return s.opened.Load() }

// Close retires every views kept and keeps none from then on.
func (s *Shelf[K, T]) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	s.mu.kept.Purge() // retires each
}

// newerThan reports whether k was built from catalogs at least as new as
// seqs, segment by segment.
func (k *Kept[T]) newerThan(seqs []uint64) bool {
	if len(k.Seqs) != len(seqs) {
		return false
	}
	for i := range seqs {
		if k.Seqs[i] < seqs[i] {
			return false
		}
	}
	return true
}

// Acquire returns a database holding the views: an idle one, or a new
// one (bounded by the shelf's Limits, prepared by its Prepare).
func (k *Kept[T]) Acquire(ctx context.Context) (*dbsql.DB, error) {
	k.mu.Lock()
	if n := len(k.mu.idle); n > 0 {
		db := k.mu.idle[n-1]
		k.mu.idle = k.mu.idle[:n-1]
		k.mu.Unlock()
		return db, nil
	}
	k.mu.Unlock()
	db, err := OpenWith(ctx, k.Script, k.opts.Limits)
	if err != nil {
		return nil, err
	}
	if k.opts.Prepare != nil {
		if err := k.opts.Prepare(ctx, db); err != nil {
			db.Close()
			return nil, err
		}
	}
	k.opened.Add(1)
	return db, nil
}

// Release gives db back, or closes it if enough are idle, the views were
// retired, or its query did not end cleanly (ok false: it may be busy).
func (k *Kept[T]) Release(db *dbsql.DB, ok bool) {
	k.mu.Lock()
	if ok && !k.mu.retired && len(k.mu.idle) < k.opts.MaxIdle {
		k.mu.idle = append(k.mu.idle, db)
		db = nil
	}
	k.mu.Unlock()
	if db != nil {
		db.Close()
	}
}

// Retired reports whether the views were retired, and how many idle
// databases they hold.
func (k *Kept[T]) Retired() (retired bool, idle int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.mu.retired, len(k.mu.idle)
}

// retire closes the idle databases; those in use close when released.
func (k *Kept[T]) retire() {
	k.mu.Lock()
	idle := k.mu.idle
	k.mu.idle, k.mu.retired = nil, true
	k.mu.Unlock()
	for _, db := range idle {
		db.Close()
	}
}
