package serve

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	dbsql "database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// Options configure a Server.
type Options struct {
	// Bucket is the bucket the server reads (required). It only reads:
	// its catalogs are opened without a compactor and commit nothing.
	Bucket bucket.Bucket
	// Views are the options every session's views are built with: Dir is
	// required (the views' fragment lists), Cache and BucketID for a
	// bucket that cannot be read in place; Run, View, At and Only are set
	// per session, and Reuse is not used (the server keeps its views).
	Views sql.Options
	// Password, if set, is required of every client, by SCRAM-SHA-256.
	// Without it the server accepts any user without a password, and
	// only on a loopback address (CheckListen).
	Password string
	// TLS, if set, is offered to clients that ask for it (SSLRequest);
	// without it they are told the server has none, and go on in clear
	// text or give up, as their sslmode says.
	TLS *tls.Config
	// MaxConns bounds the sessions open at once (default
	// DefaultMaxConns); a client past it is refused at startup with
	// SQLSTATE 53300.
	MaxConns int
	// IdleTimeout closes a session that sends nothing for this long, and
	// one that reads nothing of a result for this long (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// StatementTimeout stops a statement that runs longer (default
	// DefaultStatementTimeout); a session may lower it (SET
	// statement_timeout), never raise it.
	StatementTimeout time.Duration
	// QueryMemory is what the DuckDB database of a session may hold for
	// its statement (DuckDB's memory_limit; default
	// DefaultQueryMemory): a statement that needs more spills to the
	// views directory, or fails with SQLSTATE 53200.
	QueryMemory int64
	// Threads bounds the threads of each session's DuckDB database
	// (default 0: DuckDB's, one per core).
	Threads int
	// Freshness bounds how old a catalog state a statement may see (default
	// index.DefaultFreshness, a second).
	Freshness time.Duration
	// MaxCatalogs and MaxViews bound the worlds whose catalogs, and the
	// (worlds, run, pin)s whose views, the server keeps (defaults
	// DefaultMaxCatalogs, DefaultMaxViews); past them the least recently
	// used are closed.
	MaxCatalogs, MaxViews int
	// Log, if set, gets a line per session and per refused client.
	Log *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxConns         = 64
	DefaultIdleTimeout      = time.Hour
	DefaultStatementTimeout = 10 * time.Minute
	DefaultQueryMemory      = 1 << 30
	DefaultMaxCatalogs      = 1024
	DefaultMaxViews         = 32
)

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Views.Run == "" {
		o.Views.Run = index.DefaultRun
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.StatementTimeout == 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.QueryMemory == 0 {
		o.QueryMemory = DefaultQueryMemory
	}
	if o.Freshness == 0 {
		o.Freshness = index.DefaultFreshness
	}
	if o.MaxCatalogs == 0 {
		o.MaxCatalogs = DefaultMaxCatalogs
	}
	if o.MaxViews == 0 {
		o.MaxViews = DefaultMaxViews
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate checks the options once their defaults are in.
func (o *Options) Validate() error {
	switch {
	case o.Bucket == nil:
		return errors.New("serve options: Bucket is required")
	case o.Views.Dir == "":
		return fmt.Errorf("serve options: Views.Dir: %w", sql.ErrNoDir)
	case o.MaxConns < 0, o.MaxCatalogs < 0, o.MaxViews < 0, o.Threads < 0:
		return errors.New("serve options: MaxConns, MaxCatalogs, MaxViews and Threads are not negative")
	case o.IdleTimeout < 0 || o.StatementTimeout < 0:
		return errors.New("serve options: IdleTimeout and StatementTimeout are not negative")
	case o.QueryMemory < 16<<20:
		return fmt.Errorf("serve options: QueryMemory %d is below 16 MiB, too little for DuckDB to run a query", o.QueryMemory)
	}
	return nil
}

// ErrNeedsPassword: the server would listen beyond this machine without
// a password.
var ErrNeedsPassword = errors.New("a password is required off loopback")

// CheckListen refuses to listen on addr, a host:port, without a password
// unless its host is a loopback address (127.0.0.0/8, ::1, localhost):
// without a password any user connects, so only this machine's may.
func CheckListen(addr string, password bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w (give host:port, as 127.0.0.1:5433)", addr, err)
	}
	if password || IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %s listens beyond this machine, where any user could connect without one; "+
		"set a password (--password-file FILE, or the environment variable WORLDFS_SERVE_PASSWORD) and clients authenticate by SCRAM-SHA-256, "+
		"or listen on 127.0.0.1", ErrNeedsPassword, addr)
}

// IsLoopback says whether host (a name or an address) is this machine's
// loopback: localhost, 127.0.0.0/8 or ::1.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// Server answers PostgreSQL clients (protocol 3.0) with the views of a
// bucket's worlds: a session's database names its world (or several,
// separated by commas), and every statement runs on DuckDB databases
// sql.Open returns, through sql's statement gate (docs/INTERNALS.md,
// "serve").
type Server struct {
	opts Options
	// verifier is the password's SCRAM keys (nil: no password).
	verifier *verifier
	// zone is DuckDB's time zone, in which it writes TIMESTAMPTZ values
	// (the session's TimeZone).
	zone string

	// catalogs are the worlds' catalogs kept, at most opts.MaxCatalogs.
	catalogs *index.Catalogs
	// shelf keeps the views built, at most opts.MaxViews, and counts the
	// DuckDB databases opened on them.
	shelf *sql.Shelf[viewsKey, struct{}]
	// panics counts the sessions a bug ended.
	panics atomic.Int64
	// nextPID numbers the sessions (BackendKeyData's process id).
	nextPID atomic.Int32
	// hooks, if set (tests), hear of a statement starting to run, of a
	// session ending and of the rows a statement pulled from DuckDB.
	hooks struct {
		started func()
		ended   func()
		pulled  func(rows int64)
	}

	mu struct {
		sync.Mutex
		// sessions are the sessions open, by process id, for cancel
		// requests and the bound on connections.
		sessions  map[int32]*session
		listeners map[net.Listener]bool
		conns     map[net.Conn]bool // every connection, open or starting
		closed    bool
	}
	wg sync.WaitGroup
}

// New returns a Server for opts. Close ends its sessions and releases its
// catalogs and databases.
func New(opts Options) (*Server, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	zone, err := duckZone()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, zone: zone}
	if opts.Password != "" {
		v, err := newVerifier(opts.Password)
		if err != nil {
			return nil, err
		}
		s.verifier = v
	}
	s.catalogs = index.NewCatalogs(opts.Bucket, index.CatalogsOptions{Max: opts.MaxCatalogs, Freshness: opts.Freshness})
	s.shelf = sql.NewShelf[viewsKey, struct{}](sql.ShelfOptions{
		Max:     opts.MaxViews,
		Limits:  sql.Limits{Memory: opts.QueryMemory, Threads: opts.Threads},
		Prepare: compat,
	})
	s.mu.sessions = map[int32]*session{}
	s.mu.listeners = map[net.Listener]bool{}
	s.mu.conns = map[net.Conn]bool{}
	return s, nil
}

// Serve accepts connections on l until l fails or the server closes;
// it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.mu.listeners[l] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.mu.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.mu.conns, c)
				s.mu.Unlock()
			}()
			s.handle(c)
		}()
	}
}

// Close stops accepting, ends every session (a statement running ends
// with an error) and closes the catalogs and databases.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	for l := range s.mu.listeners {
		l.Close()
	}
	for c := range s.mu.conns {
		c.Close()
	}
	for _, se := range s.mu.sessions {
		se.stop(errClosed) // what it runs stops
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.shelf.Close() // databases in use close when released
	s.catalogs.Close()
	return nil
}

// Stats are what a server holds now.
type Stats struct {
	// Sessions are the sessions open.
	Sessions int
	// Databases is how many DuckDB databases the server has opened.
	Databases int64
	// Panics is how many sessions a bug of the server ended (each logged
	// with its stack).
	Panics int64
}

// Stats returns what the server holds now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Sessions: len(s.mu.sessions), Databases: s.shelf.Opened(), Panics: s.panics.Load()}
}

// startupTimeout bounds a client's startup: its packets and its
// authentication (PostgreSQL's authentication_timeout).
const startupTimeout = time.Minute

// register adds se to the sessions, unless MaxConns are open.
func (s *Server) register(se *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.sessions) >= s.opts.MaxConns {
		return false
	}
	for {
		pid := s.nextPID.Add(1)
		if pid <= 0 {
			s.nextPID.Store(0)
			continue
		}
		if _, taken := s.mu.sessions[pid]; !taken {
			se.pid = pid
			break
		}
	}
	se.secret = make([]byte, 4)
	_, _ = rand.Read(se.secret)
	s.mu.sessions[se.pid] = se
	return true
}

func (s *Server) unregister(se *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.sessions[se.pid] == se {
		delete(s.mu.sessions, se.pid)
	}
}

// cancel cancels the statement session pid runs, if secret is its key
// (a wrong key is ignored, as PostgreSQL ignores it).
func (s *Server) cancel(pid int32, secret []byte) {
	s.mu.Lock()
	se := s.mu.sessions[pid]
	s.mu.Unlock()
	if se != nil && subtle.ConstantTimeCompare(se.secret, secret) == 1 {
		se.cancelStatement()
	}
}

// handle serves one connection: its startup, then its session.
func (s *Server) handle(c net.Conn) {
	defer c.Close()
	se, err := s.startup(c)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, errHandled) {
			s.opts.Log.Info("refused a client", "remote", c.RemoteAddr().String(), "error", err)
		}
		return
	}
	s.opts.Log.Info("session", "pid", se.pid, "remote", c.RemoteAddr().String(), "user", se.user, "database", se.database)
	defer func() {
		// A bug of the server ends its session, not the server.
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.opts.Log.Error("a session failed", "pid", se.pid, "panic", r, "stack", string(debug.Stack()))
			se.close()
			s.unregister(se)
		}
	}()
	se.run()
	se.close()
	s.unregister(se)
	if s.hooks.ended != nil {
		s.hooks.ended()
	}
}

// errHandled: the connection's startup ended as the protocol says (a
// cancel request, a refusal sent to the client).
var errHandled = errors.New("handled")

// duckZone returns the time zone DuckDB writes TIMESTAMPTZ values in.
func duckZone() (string, error) {
	db, err := dbsql.Open("duckdb", "")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var zone string
	if err := db.QueryRow("SELECT current_setting('TimeZone')").Scan(&zone); err != nil {
		return "", fmt.Errorf("DuckDB's time zone: %w", err)
	}
	return zone, nil
}
