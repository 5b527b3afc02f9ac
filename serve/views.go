package serve

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// The views a session queries, kept per (worlds, run, pin) and built
// again once a catalog they were built from moved on, as the web
// interface keeps them (ui/views.go): a session that pins nothing reads
// the head, each statement the catalogs as they are now, within
// Options.Freshness.

// pin is what the views of a session show: the head (the zero pin), one
// point (worldfs.at: that tick alone, as worldfs sql --at) or the history
// up to one (worldfs.until, as --until).
type pin struct {
	until bool
	m     *index.Moment
}

// key names the pin among the views kept: a time by its instant (a
// relative one was resolved when it was set), a tick, head~N or a token
// by itself.
func (p pin) key() string {
	m := p.m
	if m == nil {
		return ""
	}
	kind := "at"
	if p.until {
		kind = "until"
	}
	switch {
	case m.Tick != nil:
		return fmt.Sprintf("%s tick %d", kind, *m.Tick)
	case m.Back != nil:
		return fmt.Sprintf("%s head~%d", kind, *m.Back)
	case m.Token != "":
		return kind + " token " + m.Token
	case m.Time != nil:
		return kind + " time " + m.Time.UTC().Format(time.RFC3339Nano)
	}
	return kind + " " + m.Text
}

// viewsKey names views kept.
type viewsKey struct {
	worlds string // the session's worlds, joined by commas
	run    string
	pin    string
}

// views is one session's views, built from one view of each world's
// catalog, with the DuckDB databases that hold them.
type views struct {
	script *sql.Script
	// seqs is the catalog sequence of each segment of each world's view
	// they were built from: views whose catalogs moved on are built
	// again.
	seqs []uint64

	mu struct {
		sync.Mutex
		idle    []*dbsql.DB
		retired bool // replaced by newer views: no database goes back to idle
	}
}

// maxIdle is how many databases one views keeps open between sessions'
// statements beyond those the sessions hold.
const maxIdle = 2

// catalog returns world's catalog, opened read-only on first use (no
// compactor: it never writes) and kept.
func (s *Server) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	if err := index.ValidateWorldID(world); err != nil {
		return nil, &noWorldError{world: world, err: err}
	}
	s.mu.Lock()
	c, ok := s.mu.catalogs.Get(world)
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := index.Open(ctx, s.opts.Bucket, world, index.Options{NoCompactor: true, Freshness: s.opts.Freshness})
	if err != nil {
		return nil, err
	}
	if !c.Tip().World.Created {
		c.Close()
		return nil, &noWorldError{world: world}
	}
	var closes []*index.Catalog
	defer func() {
		for _, c := range closes {
			c.Close() // a closed catalog still answers those who hold it
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		closes = append(closes, c)
		return nil, errClosed
	}
	if prev, ok := s.mu.catalogs.Get(world); ok {
		closes = append(closes, c) // opened meanwhile by another session
		return prev, nil
	}
	s.mu.catalogs.Add(world, c)
	closes, s.mu.evicted = append(closes, s.mu.evicted...), nil
	return c, nil
}

// noWorldError: a session named a world the bucket does not hold.
type noWorldError struct {
	world string
	err   error // why the name is no world's, if it cannot be one
}

func (e *noWorldError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("database %q is not a world's name: %v", e.world, e.err)
	}
	return fmt.Sprintf("database %q does not exist: no world of that name in the bucket", e.world)
}

// errClosed: the server is closing.
var errClosed = errors.New("the server is shutting down")

// state returns world's catalog state, confirmed current within the
// freshness.
func (s *Server) state(ctx context.Context, world string) (*index.State, error) {
	c, err := s.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	return c.Fresh(ctx)
}

// viewsOf returns the views of worlds' run under p as the catalogs are
// now, building them when they changed since the last build.
func (s *Server) viewsOf(ctx context.Context, worlds []string, run string, p pin) (*views, error) {
	if p.m != nil && p.m.Token != "" && len(worlds) > 1 {
		return nil, errors.New("a commit token names a commit of one world; with several worlds pin them with a tick or a time")
	}
	vs := make([]*index.View, len(worlds))
	var seqs []uint64
	for i, w := range worlds {
		v, err := index.OpenView(ctx, s.state, w, run)
		if err != nil {
			return nil, err
		}
		vs[i] = v
		for _, seg := range v.Segments {
			seqs = append(seqs, seg.State.Seq)
		}
	}
	key := viewsKey{strings.Join(worlds, ","), run, p.key()}
	s.mu.Lock()
	cur, ok := s.mu.views.Get(key)
	s.mu.Unlock()
	if ok && slices.Equal(cur.seqs, seqs) {
		return cur, nil
	}
	flight := fmt.Sprintf("%s\x00%s\x00%s\x00%v", key.worlds, key.run, key.pin, seqs)
	ch := s.builds.DoChan(flight, func() (any, error) {
		bctx := context.WithoutCancel(ctx)
		scripts := make([]*sql.Script, len(worlds))
		for i, w := range worlds {
			opts := s.opts.Views
			opts.Run, opts.View, opts.Reuse = run, vs[i], nil
			if p.m != nil {
				m := *p.m
				opts.At, opts.Only = &m, !p.until
			}
			sc, err := sql.Build(bctx, s.opts.Bucket, w, opts)
			if err != nil {
				return nil, err
			}
			scripts[i] = sc
		}
		script, err := sql.Join(scripts...)
		if err != nil {
			return nil, err
		}
		return s.keep(key, &views{script: script, seqs: seqs})
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*views), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// keep makes nv the views of key, unless views at least as new are kept.
func (s *Server) keep(key viewsKey, nv *views) (*views, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, errClosed
	}
	old, ok := s.mu.views.Get(key)
	if ok && old.newerThan(nv.seqs) {
		return old, nil
	}
	s.mu.views.Add(key, nv) // past MaxViews, the least recently used are retired
	if ok {
		old.retire()
	}
	return nv, nil
}

// newerThan reports whether v was built from catalogs at least as new as
// seqs, segment by segment.
func (v *views) newerThan(seqs []uint64) bool {
	if len(v.seqs) != len(seqs) {
		return false
	}
	for i := range seqs {
		if v.seqs[i] < seqs[i] {
			return false
		}
	}
	return true
}

// acquire returns a database holding the views: an idle one, or a new
// one bounded by the server's limits.
func (s *Server) acquire(ctx context.Context, v *views) (*dbsql.DB, error) {
	v.mu.Lock()
	if n := len(v.mu.idle); n > 0 {
		db := v.mu.idle[n-1]
		v.mu.idle = v.mu.idle[:n-1]
		v.mu.Unlock()
		return db, nil
	}
	v.mu.Unlock()
	db, err := sql.OpenWith(ctx, v.script, sql.Limits{Memory: s.opts.QueryMemory, Threads: s.opts.Threads})
	if err != nil {
		return nil, err
	}
	if err := compat(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s.opened.Add(1)
	return db, nil
}

// release gives db back, or closes it if enough are idle, the views were
// replaced, or its statement did not end cleanly (which may leave it
// busy).
func (v *views) release(db *dbsql.DB, ok bool) {
	v.mu.Lock()
	if ok && !v.mu.retired && len(v.mu.idle) < maxIdle {
		v.mu.idle = append(v.mu.idle, db)
		db = nil
	}
	v.mu.Unlock()
	if db != nil {
		db.Close()
	}
}

// retire closes the idle databases; those in use close when released.
func (v *views) retire() {
	v.mu.Lock()
	idle := v.mu.idle
	v.mu.idle, v.mu.retired = nil, true
	v.mu.Unlock()
	for _, db := range idle {
		db.Close()
	}
}
