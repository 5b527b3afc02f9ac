package ui

import (
	"bytes"
	"context"
	dsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
	"golang.org/x/sync/singleflight"
)

// catalog returns world's catalog, opened read-only on first use and kept
// (index.Catalogs).
func (s *Server) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	if err := index.ValidateWorldID(world); err != nil {
		return nil, badRequest(err)
	}
	c, err := s.catalogs.Get(ctx, world)
	switch {
	case errors.Is(err, index.ErrNoWorld):
		return nil, notFound(fmt.Errorf("world %s does not exist", world))
	case errors.Is(err, index.ErrClosed):
		return nil, errClosed
	}
	return c, err
}

// evicted forgets what the server kept of a world whose catalog it no
// longer keeps (index.CatalogsOptions.Evicted).
func (s *Server) evicted(world string) {
	s.mu.Lock()
	delete(s.mu.events, world)
	delete(s.mu.sizes, world)
	s.mu.Unlock()
	if s.catalogClosed != nil {
		s.catalogClosed(world)
	}
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

// views is one (world, run)'s SQL views, kept on the server's shelf
// (sql.Shelf) with the DuckDB databases that hold them, and the pages'
// memory of them.
type views = sql.Kept[*memory]

// memory is what the pages remember of one views: the views are one
// catalog state, so an answer about them cannot change.
type memory struct {
	// view is the lineage the views were built from (nil: a session of
	// two worlds' views, or a sweep).
	view *index.View
	// tables, of a sweep, are the tables its worlds have in common with
	// their numeric columns in common (sweep.go).
	tables sweepTables
	// countsFlight computes the rows per tick once for concurrent
	// requests.
	countsFlight singleflight.Group

	mu struct {
		sync.Mutex
		// memo holds the answers to the pages' own questions that read
		// the whole history (rows per tick, the columns), by their SQL.
		memo map[string]*Result
		// reports are diff reports of two of the views' ticks, or of
		// two worlds' (at most maxReports).
		reports map[string]*sql.DiffReport
		// counts is the rows per tick of each view (counts.go), once
		// computed.
		counts *tickCounts
		// covered, of a sweep, is which of its compacted reads of a
		// column the files' tick indexes summarize (sweepseries.go), by
		// table and column ("table\x00column").
		covered map[string]coveredReads
	}
}

func viewSeqs(v *index.View) []uint64 {
	seqs := make([]uint64, len(v.Segments))
	for i, seg := range v.Segments {
		seqs[i] = seg.State.Seq
	}
	return seqs
}

// viewsKey names views on the shelf: a world's run (a session of two
// worlds or a sweep named by its worlds), and, for a sweep, the table it
// is narrowed to (empty: the whole).
type viewsKey struct{ world, run, table string }

// viewsOf returns the views of (world, run) as the catalogs are now,
// building them when they changed since the last build.
func (s *Server) viewsOf(ctx context.Context, world, run string) (*views, error) {
	v, err := s.view(ctx, world, run)
	if err != nil {
		return nil, err
	}
	return s.keep(ctx, viewsKey{world: world, run: run}, viewSeqs(v), func(ctx context.Context) (*sql.Script, *memory, error) {
		opts := s.opts.Views
		opts.Run, opts.View, opts.Reuse = run, v, nil
		sc, err := sql.Build(ctx, s.opts.Bucket, world, opts)
		return sc, &memory{view: v}, err
	})
}

// keep returns the views of key at catalog sequences seqs from the
// shelf, built there if need be (sql.Shelf.Get).
func (s *Server) keep(ctx context.Context, key viewsKey, seqs []uint64, build func(context.Context) (*sql.Script, *memory, error)) (*views, error) {
	return keepOn(ctx, s.shelf, key, seqs, build)
}

// keepOn is keep on shelf.
func keepOn(ctx context.Context, shelf *sql.Shelf[viewsKey, *memory], key viewsKey, seqs []uint64, build func(context.Context) (*sql.Script, *memory, error)) (*views, error) {
	v, err := shelf.Get(ctx, key, seqs, build)
	if errors.Is(err, sql.ErrShelfClosed) {
		return nil, errClosed
	}
	return v, err
}

// Result is a query's answer as the pages get it: the column names in
// order and each row's values as DuckDB renders them (sql.Cells, as
// worldfs sql --format csv prints them: CAST(value AS VARCHAR), NULL
// as NULL).
type Result struct {
	SQL     string     `json:"sql"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Values, if set (queryValues), holds the rows instead of Rows (then
	// empty), as a JSON array of arrays of typed values.
	Values json.RawMessage `json:"values,omitempty"`
	// Truncated: the result had more than the server's MaxResultBytes;
	// Rows (or Values) holds the whole rows that fit.
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
	return s.memoOn(ctx, v, q)
}

// memoOn is memoQuery on views v.
func (s *Server) memoOn(ctx context.Context, v *views, q string) (*Result, error) {
	return s.remember(v, q, func() (*Result, error) { return s.queryOn(ctx, v, q) })
}

// remember returns the answer v's memory holds for key, else answer's,
// which it keeps unless it failed or was truncated.
func (s *Server) remember(v *views, key string, answer func() (*Result, error)) (*Result, error) {
	v.Extra.mu.Lock()
	res := v.Extra.mu.memo[key]
	v.Extra.mu.Unlock()
	if res != nil {
		return res, nil
	}
	res, err := answer()
	if err != nil || res.Truncated {
		return res, err
	}
	v.Extra.mu.Lock()
	if v.Extra.mu.memo == nil {
		v.Extra.mu.memo = map[string]*Result{}
	}
	v.Extra.mu.memo[key] = res
	v.Extra.mu.Unlock()
	return res, nil
}

// errFull stops a result at the server's bound.
var errFull = errors.New("result too large")

// query runs q on (world, run)'s views through sql.Cells, the gate of every
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

// queryOn runs q on views v (query): its cells, as worldfs sql --format
// csv prints them (sql.Cells), taken row by row up to the server's bound
// on a result, MaxResultBytes of values (each value's bytes and one for
// its separator); the rows past it are not read.
func (s *Server) queryOn(ctx context.Context, v *views, q string) (*Result, error) {
	res := &Result{Rows: [][]string{}}
	size := 0
	err := s.runOn(ctx, v, q, res, func(ctx context.Context, db *dsql.DB, notes io.Writer) error {
		header := true
		return sql.Cells(ctx, db, q, notes, func(cells []string) error {
			for _, c := range cells {
				size += len(c) + 1
			}
			switch {
			case header && size > s.opts.MaxResultBytes:
				return queryError{errors.New("the result's column names alone pass the server's bound on a result (MaxResultBytes)")}
			case header:
				res.Columns, header = slices.Clone(cells), false
			case size > s.opts.MaxResultBytes:
				res.Truncated = true
				return errFull
			default:
				res.Rows = append(res.Rows, slices.Clone(cells))
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// queryValues is queryOn with the rows as typed JSON (Result.Values,
// sql.Values): numbers as JSON numbers, for a page that charts many (an
// entity's history: 100,000 ticks of ten columns are a million values,
// which as text DuckDB, database/sql and encoding/json each handle in
// turn). The bound is MaxResultBytes of that JSON.
func (s *Server) queryValues(ctx context.Context, v *views, q string) (*Result, error) {
	res := &Result{Rows: [][]string{}}
	var out *valuesJSON
	err := s.runOn(ctx, v, q, res, func(ctx context.Context, db *dsql.DB, notes io.Writer) error {
		return sql.Values(ctx, db, q, notes, func(names []string) error {
			res.Columns = slices.Clone(names)
			out = newValuesJSON(len(names), s.opts.MaxResultBytes)
			return nil
		}, func(vals []any) error {
			if !out.add(vals) {
				res.Truncated = true // runOn's sign that errFull is not a failure
				return errFull
			}
			return nil
		})
	})
	if out != nil {
		res.Values, res.Truncated = out.close()
	}
	if err != nil {
		return nil, err
	}
	if res.Values == nil {
		res.Values = json.RawMessage("[]")
	}
	return res, nil
}

// valuesJSON writes rows as a JSON array of appendValues arrays in a
// goroutine of its own, a batch of rows at a time, while the driver gives
// the next (an entity's history of 100,000 ticks: 900,000 values the
// driver boxes and appendValues formats, 40-60 ms in turn). Past max
// bytes it keeps the rows that fit, and add says to stop.
type valuesJSON struct {
	n, max    int
	batch     []any // rows of n values
	work      chan []any
	free      chan []any
	done      chan struct{}
	full      atomic.Bool
	buf       []byte
	truncated bool
}

// valuesBatch is the rows of one batch.
const valuesBatch = 1024

func newValuesJSON(n, max int) *valuesJSON {
	w := &valuesJSON{n: n, max: max, batch: make([]any, 0, n*valuesBatch), buf: []byte{'['},
		work: make(chan []any, 2), free: make(chan []any, 3), done: make(chan struct{})}
	go w.write()
	return w
}

// add copies one row's values (vals is not kept); false: the bound is
// passed, add no more.
func (w *valuesJSON) add(vals []any) bool {
	w.batch = append(w.batch, vals...)
	if len(w.batch) < cap(w.batch) {
		return true
	}
	w.work <- w.batch
	select {
	case w.batch = <-w.free:
	default:
		w.batch = make([]any, 0, w.n*valuesBatch)
	}
	return !w.full.Load()
}

func (w *valuesJSON) write() {
	defer close(w.done)
	for b := range w.work {
		for i := 0; i+w.n <= len(b) && !w.truncated; i += w.n {
			m := len(w.buf)
			if m > 1 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendValues(w.buf, b[i:i+w.n])
			if len(w.buf) > w.max {
				w.buf, w.truncated = w.buf[:m], true
				w.full.Store(true)
			}
		}
		clear(b)
		select {
		case w.free <- b[:0]:
		default:
		}
	}
}

// close writes the rows added last and returns the array and whether
// rows were left out.
func (w *valuesJSON) close() ([]byte, bool) {
	if len(w.batch) > 0 {
		w.work <- w.batch
	}
	close(w.work)
	<-w.done
	return append(w.buf, ']'), w.truncated
}

// runOn runs a query q on views v through run, which fills res: the one
// path of the server's queries (a database of v's, the hooks, the errors
// a page shows, the time).
func (s *Server) runOn(ctx context.Context, v *views, q string, res *Result, run func(ctx context.Context, db *dsql.DB, notes io.Writer) error) error {
	start := time.Now()
	db, err := v.Acquire(ctx)
	if err != nil {
		return err
	}
	if s.queryStarted != nil {
		s.queryStarted(q)
	}
	var notes bytes.Buffer
	err = run(ctx, db, &notes)
	if s.queryEnded != nil {
		s.queryEnded(q, err)
	}
	v.Release(db, ctx.Err() == nil)
	var qe queryError
	switch {
	case err == nil, res.Truncated:
	case errors.As(err, &qe):
		return err
	case errors.Is(err, sql.ErrNotReadOnly):
		return badRequest(err)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return queryError{err}
	}
	res.SQL, res.Notes, res.ElapsedMs = q, notes.String(), ms(time.Since(start))
	return nil
}

// appendValues appends vals (sql.Values') to buf as a JSON array: a
// number as a JSON number where a double holds it exactly (an integer
// within ±2^53, a finite float; as DuckDB's text otherwise, "inf", a
// wide integer), NULL as null.
func appendValues(buf []byte, vals []any) []byte {
	buf = append(buf, '[')
	for i, v := range vals {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch x := v.(type) {
		case nil:
			buf = append(buf, "null"...)
		case bool:
			buf = strconv.AppendBool(buf, x)
		case int64:
			if x < -1<<53 || x > 1<<53 {
				buf = append(strconv.AppendInt(append(buf, '"'), x, 10), '"')
			} else {
				buf = strconv.AppendInt(buf, x, 10)
			}
		case float32:
			buf = appendFloat(buf, float64(x), 32)
		case float64:
			buf = appendFloat(buf, x, 64)
		case string:
			b, _ := json.Marshal(x)
			buf = append(buf, b...)
		default: // not a type sql.Values gives
			b, _ := json.Marshal(fmt.Sprint(x))
			buf = append(buf, b...)
		}
	}
	return append(buf, ']')
}

// appendFloat appends x, a float of bits bits, as the shortest JSON
// number that reads back as x, or, not finite, as DuckDB writes it.
func appendFloat(buf []byte, x float64, bits int) []byte {
	switch {
	case math.IsNaN(x):
		return append(buf, `"nan"`...)
	case math.IsInf(x, 1):
		return append(buf, `"inf"`...)
	case math.IsInf(x, -1):
		return append(buf, `"-inf"`...)
	}
	return strconv.AppendFloat(buf, x, 'g', -1, bits)
}
