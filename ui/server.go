package ui

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// Options configure a Server.
type Options struct {
	// Bucket is the bucket the server reads (required). The server only
	// reads it: its catalogs are opened without a compactor and commit
	// nothing.
	Bucket bucket.Bucket
	// Views are the options every (world, run)'s views are built with:
	// Dir is required (the views' fragment lists), Cache and BucketID for
	// a bucket that cannot be read in place; Run and View are set per
	// request, and Reuse is not used (the server keeps its views).
	Views sql.Options
	// Token, if set, is required of every request: as ?token=, which
	// sets a cookie so the pages' own requests carry it, or as the
	// cookie, or as an "Authorization: token T" header. Without it the
	// server answers only requests addressed to a loopback name (Host
	// localhost, 127.0.0.0/8 or [::1]), so a web page elsewhere cannot
	// reach it through a name it points at this machine.
	Token string
	// MaxResultBytes bounds a query's result as the server takes it from
	// DuckDB (default 16 MiB); past it the rows that fit are sent, marked
	// truncated, and the query is stopped.
	MaxResultBytes int
	// Freshness bounds how old a catalog state a page may show: a request
	// asks the bucket for newer commits when the last look is older
	// (default index.DefaultFreshness, a second).
	Freshness time.Duration
	// MaxCatalogs bounds the worlds whose catalogs the server keeps open
	// (default DefaultMaxCatalogs, as a mount keeps them): past it the
	// least recently used is closed, and what the server keeps of that
	// world (its events, its size) goes with it.
	MaxCatalogs int
	// MaxViews bounds the (world, run)s, and pairs of them compared, whose
	// views the server keeps with their DuckDB databases (default
	// DefaultMaxViews): past it the least recently used are closed.
	MaxViews int
	// MaxEvents and MaxLogEntries bound what the timeline reads of the
	// catalog log for commit events: the newest slots, read backward,
	// until it holds MaxEvents events (default 200) or has read the
	// slots of MaxLogEntries entries (default 1,000; most entries are
	// tick publications, which are not events: reading the newest
	// 10,000 took 244 ms on a 100,000-tick world, 2,000 up to 450 ms
	// at a load of 11, 1,000 about 50 ms); a page asks for older events
	// the same way.
	MaxEvents     int
	MaxLogEntries uint64
	// SweepFileReads bounds the ticks' own files the sweep page reads
	// itself to summarize a column per tick (default
	// DefaultSweepFileReads; negative: none): a sweep that reads more
	// leaves them to DuckDB, which reads many small files at once
	// (sweepseries.go). Compacted files are summarized by their tick
	// indexes, whatever their number.
	SweepFileReads int
}

// Defaults of Options.
const (
	DefaultMaxResultBytes = 16 << 20
	DefaultMaxEvents      = 200
	DefaultMaxLogEntries  = 1_000
	DefaultMaxCatalogs    = 1024
	DefaultMaxViews       = 32
	DefaultSweepFileReads = 1024
)

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.Freshness == 0 {
		o.Freshness = index.DefaultFreshness
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxLogEntries == 0 {
		o.MaxLogEntries = DefaultMaxLogEntries
	}
	if o.MaxCatalogs == 0 {
		o.MaxCatalogs = DefaultMaxCatalogs
	}
	if o.SweepFileReads == 0 {
		o.SweepFileReads = DefaultSweepFileReads
	}
	if o.MaxViews == 0 {
		o.MaxViews = DefaultMaxViews
	}
	return o
}

// Validate checks the options once their defaults are in.
func (o *Options) Validate() error {
	switch {
	case o.Bucket == nil:
		return errors.New("ui options: Bucket is required")
	case o.Views.Dir == "":
		return fmt.Errorf("ui options: Views.Dir: %w", sql.ErrNoDir)
	case o.MaxResultBytes < 0:
		return fmt.Errorf("ui options: MaxResultBytes %d is negative", o.MaxResultBytes)
	case o.MaxEvents < 0:
		return fmt.Errorf("ui options: MaxEvents %d is negative", o.MaxEvents)
	case o.MaxCatalogs < 0:
		return fmt.Errorf("ui options: MaxCatalogs %d is negative", o.MaxCatalogs)
	case o.MaxViews < 0:
		return fmt.Errorf("ui options: MaxViews %d is negative", o.MaxViews)
	}
	return nil
}

// Server is the web interface: an http.Handler over a bucket's worlds.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	pages *template.Template

	// catalogs are the worlds' catalogs kept, at most opts.MaxCatalogs:
	// an evicted world's events and size go with it (evicted).
	catalogs *index.Catalogs
	// shelf keeps the views built, at most opts.MaxViews; plans keeps
	// as many whole sweeps, planned but never opened (their databases
	// are their tables', on the shelf: sweep.go), so that a sweep's
	// plan and its tables do not push each other off one shelf.
	shelf, plans *sql.Shelf[viewsKey, *memory]

	// queryStarted and queryEnded, if set (tests), are called as each
	// query starts and ends.
	queryStarted func(q string)
	queryEnded   func(q string, err error)
	// timePoints bounds Timeline.Published (maxTimePoints; tests set
	// fewer), keptEvents the events kept of a world (maxKeptEvents).
	timePoints int
	keptEvents int
	// catalogClosed, if set (tests), is called as the server closes a
	// world's catalog it no longer keeps.
	catalogClosed func(world string)

	mu struct {
		sync.Mutex
		// events and sizes hold worlds of catalogs (evicted forgets a
		// world's).
		events map[string]*eventLog
		sizes  map[string]keptSize
		// tickIndexes are compacted files' ticks and rows, by the
		// file's digest (counts.go).
		tickIndexes map[string]*tickRows
		closed      bool
	}
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for opts. Close releases its catalogs and
// databases.
func New(opts Options) (*Server, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(template.FuncMap{}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui pages: %w", err)
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), pages: pages, timePoints: maxTimePoints, keptEvents: maxKeptEvents}
	s.catalogs = index.NewCatalogs(opts.Bucket, index.CatalogsOptions{Max: opts.MaxCatalogs, Freshness: opts.Freshness, Evicted: s.evicted})
	s.shelf = sql.NewShelf[viewsKey, *memory](sql.ShelfOptions{Max: opts.MaxViews})
	s.plans = sql.NewShelf[viewsKey, *memory](sql.ShelfOptions{Max: opts.MaxViews})
	s.mu.events = map[string]*eventLog{}
	s.mu.sizes = map[string]keptSize{}
	s.mu.tickIndexes = map[string]*tickRows{}
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.routes()
	return s, nil
}

// Close closes the catalogs and the databases the server opened; queries
// still running end with an error.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	s.shelf.Close() // databases in use close when released
	s.plans.Close()
	s.catalogs.Close()
	return nil
}

var errClosed = errors.New("ui server closed")

// TokenCookie is the cookie that carries the token after ?token=,
// named with the server's port (as Jupyter names its cookies): browsers
// keep cookies per host, not per port, so two servers on one machine
// must not overwrite each other's.
func TokenCookie(host string) string {
	_, port, _ := net.SplitHostPort(host)
	return "worldfs_ui_token_" + port
}

// ServeHTTP checks who asks (the token, or a loopback Host), then serves.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		if !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("worldfs ui: refused: host %q is not a loopback name; without a token the server answers only localhost, 127.0.0.1 or [::1]", r.Host), http.StatusForbidden)
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if !s.tokenOK(t) {
			http.Error(w, "worldfs ui: wrong token: open the URL worldfs ui printed", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: TokenCookie(r.Host), Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		s.mux.ServeHTTP(w, r)
		return
	}
	if c, err := r.Cookie(TokenCookie(r.Host)); err == nil && s.tokenOK(c.Value) {
		s.mux.ServeHTTP(w, r)
		return
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token "); ok && s.tokenOK(a) {
		s.mux.ServeHTTP(w, r)
		return
	}
	http.Error(w, "worldfs ui: this server requires a token: open the URL worldfs ui printed (…/?token=…)", http.StatusForbidden)
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.opts.Token)) == 1
}

// loopbackHost reports whether a request's Host names this machine's
// loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether a listen address (host:port) binds only the
// loopback interface: a server on any other address needs a token.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false // ":8080" binds every interface
	}
	return loopbackHost(host)
}

// httpError is an error with its status.
type httpError struct {
	status int
	err    error
}

func (e httpError) Error() string { return e.err.Error() }
func (e httpError) Unwrap() error { return e.err }

func badRequest(err error) error { return httpError{http.StatusBadRequest, err} }
func notFound(err error) error   { return httpError{http.StatusNotFound, err} }

// queryError is DuckDB's error for a query that ran: the page shows it.
type queryError struct{ err error }

func (e queryError) Error() string { return e.err.Error() }
func (e queryError) Unwrap() error { return e.err }

// statusOf maps an error to its HTTP status, in one place.
func statusOf(err error) int {
	var he httpError
	var qe queryError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, sql.ErrNotReadOnly), errors.As(err, &qe):
		return http.StatusBadRequest
	case errors.Is(err, index.ErrNoWorld), errors.Is(err, sql.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeJSON answers v, or the error as {"error": …} with its status.
func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(statusOf(err))
		v = map[string]string{"error": err.Error()}
	}
	if r, ok := v.(*Result); ok && r.Values != nil {
		writeValues(w, r)
		return
	}
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// writeValues writes r as writeJSON would, its Values as they are:
// appendValues wrote them as JSON, which encoding/json would scan again
// (an entity's history of 100,000 ticks: 4 MB, 20-40 ms).
func writeValues(w io.Writer, r *Result) {
	head := *r
	head.Values = nil
	b, err := json.Marshal(&head)
	if err != nil || len(b) <= 2 || b[len(b)-1] != '}' { // not an object of fields: never
		_ = json.NewEncoder(w).Encode(r)
		return
	}
	b = append(b[:len(b)-1], `,"values":`...)
	_, _ = w.Write(b)
	_, _ = w.Write(r.Values)
	_, _ = io.WriteString(w, "}\n")
}
