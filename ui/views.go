package ui

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
	"golang.org/x/sync/singleflight"
)

// catalog returns world's catalog, opened read-only on first use (no
// compactor: it never writes, not even a closing checkpoint) and kept.
func (s *Server) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	if err := index.ValidateWorldID(world); err != nil {
		return nil, badRequest(err)
	}
	s.mu.Lock()
	c, ok := s.mu.catalogs.Get(world)
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	// Opened outside the lock: a slow load never holds up other worlds.
	c, err := index.Open(ctx, s.opts.Bucket, world, index.Options{NoCompactor: true, Freshness: s.opts.Freshness})
	if err != nil {
		return nil, err
	}
	if !c.Tip().World.Created {
		c.Close()
		return nil, notFound(fmt.Errorf("world %s does not exist", world))
	}
	var closes []closing
	defer func() {
		for _, cl := range closes {
			cl.c.Close() // a closed catalog still answers those who hold it
			if cl.evicted && s.catalogClosed != nil {
				s.catalogClosed(cl.world)
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		closes = append(closes, closing{world, c, false})
		return nil, errClosed
	}
	if prev, ok := s.mu.catalogs.Get(world); ok {
		closes = append(closes, closing{world, c, false}) // opened meanwhile by another request
		return prev, nil
	}
	s.mu.catalogs.Add(world, c)
	closes, s.mu.evicted = append(closes, s.mu.evicted...), nil
	return c, nil
}

// closing is a catalog to close once the server's lock is released;
// evicted: the server no longer keeps its world (catalogClosed hears of
// it).
type closing struct {
	world   string
	c       *index.Catalog
	evicted bool
}

// state returns world's catalog state, confirmed current within a second.
func (s *Server) state(ctx context.Context, world string) (*index.State, error) {
	c, err := s.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	return c.Fresh(ctx)
}

// view resolves (world, run)'s lineage against the catalogs as they are
// now: the one planner of visibility that the views are built from.
func (s *Server) view(ctx context.Context, world, run string) (*index.View, error) {
	if err := index.ValidateRunName(run); err != nil {
		return nil, badRequest(err)
	}
	return index.OpenView(ctx, s.state, world, run)
}

// views is one (world, run)'s SQL views, built from one view of the
// catalogs, with the DuckDB databases that hold them.
type views struct {
	script *sql.Script
	// view is the lineage they were built from (nil: a session of two
	// worlds' views).
	view *index.View
	// seqs is the catalog sequence of each segment of the view they were
	// built from: views whose catalogs moved on are built again.
	seqs []uint64
	// countsFlight computes the rows per tick once for concurrent
	// requests.
	countsFlight singleflight.Group

	mu struct {
		sync.Mutex
		idle    []*dbsql.DB
		retired bool // replaced by newer views: no database goes back to idle
		// memo holds the answers to the pages' own questions that read
		// the whole history (rows per tick, the columns), by their SQL:
		// the views are one catalog state, so the answer cannot change.
		memo map[string]*Result
		// reports are diff reports of two of the views' ticks, or of
		// two worlds' (at most maxReports).
		reports map[string]*sql.DiffReport
		// counts is the rows per tick of each view (counts.go), once
		// computed.
		counts *tickCounts
	}
}

// maxIdle is how many databases one views keeps open between requests;
// a request that finds none idle opens its own, so a slow query never
// holds up another page.
const maxIdle = 2

func viewSeqs(v *index.View) []uint64 {
	seqs := make([]uint64, len(v.Segments))
	for i, seg := range v.Segments {
		seqs[i] = seg.State.Seq
	}
	return seqs
}

type viewsKey struct{ world, run string }

// viewsOf returns the views of (world, run) as the catalogs are now,
// building them when they changed since the last build.
func (s *Server) viewsOf(ctx context.Context, world, run string) (*views, error) {
	v, err := s.view(ctx, world, run)
	if err != nil {
		return nil, err
	}
	seqs := viewSeqs(v)
	key := viewsKey{world, run}
	if cur := s.keptViews(key, seqs); cur != nil {
		return cur, nil
	}
	return s.install(ctx, key, seqs, v, func(ctx context.Context) (*sql.Script, error) {
		opts := s.opts.Views
		opts.Run, opts.View, opts.Reuse = run, v, nil
		return sql.Build(ctx, s.opts.Bucket, world, opts)
	})
}

// keptViews returns the views of key the server keeps if they were
// built at catalog sequences seqs.
func (s *Server) keptViews(key viewsKey, seqs []uint64) *views {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.mu.views.Peek(key)
	if !ok || !slices.Equal(cur.seqs, seqs) {
		return nil
	}
	s.mu.views.Get(key) // used
	return cur
}

// install builds views for key at catalog sequences seqs, once for all
// the requests that ask at the same time (the build goes on for the
// others if the first request ends), and keeps them unless newer ones were
// kept meanwhile.
func (s *Server) install(ctx context.Context, key viewsKey, seqs []uint64, view *index.View, build func(context.Context) (*sql.Script, error)) (*views, error) {
	flight := fmt.Sprintf("%s\x00%s\x00%v", key.world, key.run, seqs)
	ch := s.builds.DoChan(flight, func() (any, error) {
		script, err := build(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		return s.keep(key, &views{script: script, view: view, seqs: seqs})
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
	seqs := nv.seqs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, errClosed
	}
	old, ok := s.mu.views.Get(key)
	if ok && old.newerThan(seqs) {
		return old, nil // a request that saw a newer catalog built first
	}
	s.mu.views.Add(key, nv) // past MaxViews, the least recently used views are retired
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

// acquire returns a database holding the views: an idle one, or a new one.
func (v *views) acquire(ctx context.Context) (*dbsql.DB, error) {
	v.mu.Lock()
	if n := len(v.mu.idle); n > 0 {
		db := v.mu.idle[n-1]
		v.mu.idle = v.mu.idle[:n-1]
		v.mu.Unlock()
		return db, nil
	}
	v.mu.Unlock()
	return sql.Open(ctx, v.script)
}

// release gives db back, or closes it if enough are idle, the views were
// replaced, or its query was cancelled (which may leave it busy).
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

// Result is a query's answer as the pages get it: the column names in
// order and each row's values as DuckDB renders them (sql.Run's csv
// format: CAST(value AS VARCHAR), NULL as NULL).
type Result struct {
	SQL     string     `json:"sql"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Truncated: the result had more than the server's MaxResultBytes;
	// Rows holds the whole rows that fit.
	Truncated bool `json:"truncated,omitempty"`
	// Notes are sql.Run's notes (a tick that is not visible, …).
	Notes string `json:"notes,omitempty"`
	// ElapsedMs is the server's time for the query, from asking for a
	// database to the last row read (a page's own question kept in memory
	// shows the time it took when it ran).
	ElapsedMs float64 `json:"elapsed_ms,omitempty"`
}

// memoQuery is query for a page's own question about the whole history:
// asked once per views (a catalog state), then answered from memory.
func (s *Server) memoQuery(ctx context.Context, world, run, q string) (*Result, error) {
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	res := v.mu.memo[q]
	v.mu.Unlock()
	if res != nil {
		return res, nil
	}
	res, err = s.queryOn(ctx, v, q)
	if err != nil || res.Truncated {
		return res, err
	}
	v.mu.Lock()
	if v.mu.memo == nil {
		v.mu.memo = map[string]*Result{}
	}
	v.mu.memo[q] = res
	v.mu.Unlock()
	return res, nil
}

// errFull stops a result at the server's bound.
var errFull = errors.New("result too large")

// boundedWriter takes up to limit bytes, then fails every write.
type boundedWriter struct {
	buf   bytes.Buffer
	limit int
	full  bool
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if room := w.limit - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.full = true
		return 0, errFull
	}
	return w.buf.Write(p)
}

// query runs q on (world, run)'s views through sql.Run, the gate of every
// statement the server runs for a page: one query path for the pages, the
// query box and worldfs sql. ctx is the request's: a page that aborts its
// fetch cancels the query.
func (s *Server) query(ctx context.Context, world, run, q string) (*Result, error) {
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	return s.queryOn(ctx, v, q)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// queryOn runs q on views v (query).
func (s *Server) queryOn(ctx context.Context, v *views, q string) (*Result, error) {
	start := time.Now()
	db, err := v.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if s.queryStarted != nil {
		s.queryStarted(q)
	}
	out := &boundedWriter{limit: s.opts.MaxResultBytes}
	var notes bytes.Buffer
	err = sql.Run(ctx, db, q, sql.FormatCSV, out, &notes)
	if s.queryEnded != nil {
		s.queryEnded(q, err)
	}
	v.release(db, ctx.Err() == nil)
	if err != nil && !out.full {
		if errors.Is(err, sql.ErrNotReadOnly) {
			return nil, badRequest(err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, queryError{err}
	}
	res, err := readResult(out.buf.Bytes(), out.full)
	if err != nil {
		return nil, err
	}
	res.SQL, res.Notes, res.ElapsedMs = q, notes.String(), ms(time.Since(start))
	return res, nil
}

// readResult reads sql.Run's csv output; full says it was cut at the
// server's bound, and then only the whole rows before the cut are kept.
func readResult(data []byte, full bool) (*Result, error) {
	if full {
		// A row ends with a newline; a newline inside a quoted value
		// leaves an unterminated quote, which ends the reading below.
		data = data[:bytes.LastIndexByte(data, '\n')+1]
		if len(data) == 0 {
			return nil, queryError{fmt.Errorf("the result's column names alone pass the server's bound on a result (MaxResultBytes)")}
		}
	}
	res := &Result{Rows: [][]string{}, Truncated: full}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	res.Columns = head
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil || len(rec) != len(head) {
			if full {
				break // the row the bound cut
			}
			return nil, fmt.Errorf("reading the result: %v", err)
		}
		res.Rows = append(res.Rows, rec)
	}
	return res, nil
}
