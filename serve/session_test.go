package serve_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/serve"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestPinsAreSessionSettings: SET worldfs.at pins the views to a point as
// worldfs sql --at does (a tick, head~N, a token), worldfs.until to the
// history up to one, RESET follows the head again, and a point that does
// not parse is refused with what to give.
func TestPinsAreSessionSettings(t *testing.T) {
	f := newFixture(t, nil)
	ctx := enginetest.Context(t)
	c := f.connect(t, "w")
	const q = "SELECT count(DISTINCT tick) AS ticks, min(tick) AS first, max(tick) AS last, count(*) AS n FROM particle"
	var token string
	if err := c.QueryRow(ctx, "SELECT commit_token FROM worldfs_ticks WHERE tick = 4").Scan(&token); err != nil {
		t.Fatal(err)
	}
	answer := func() string {
		var ticks, first, last, n int64
		if err := c.QueryRow(ctx, q).Scan(&ticks, &first, &last, &n); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("ticks,first,last,n\n%d,%d,%d,%d\n", ticks, first, last, n)
	}
	for _, p := range []string{"5", "head~2", token} {
		if _, err := c.Exec(ctx, "SET worldfs.at = '"+p+"'"); err != nil {
			t.Fatal(err)
		}
		m, err := index.ParseMoment(p, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := answer(), f.reference(t, "w", q, &m); got != want {
			t.Errorf("worldfs.at = %s: %q, worldfs sql --at: %q", p, got, want)
		}
	}
	if got := answer(); !strings.Contains(got, "\n1,4,4,") {
		t.Errorf("worldfs.at = the token of tick 4: %q, want tick 4 alone", got)
	}
	if _, err := c.Exec(ctx, "SET worldfs.until = '5'"); err != nil {
		t.Fatal(err)
	}
	if got := answer(); !strings.HasPrefix(got, "ticks,first,last,n\n5,1,5,") {
		t.Errorf("worldfs.until = 5: %q, want the particles of ticks 1 to 5", got)
	}
	if _, err := c.Exec(ctx, "RESET worldfs.until"); err != nil {
		t.Fatal(err)
	}
	if got, want := answer(), f.reference(t, "w", q, nil); got != want {
		t.Errorf("after RESET: %q, worldfs sql: %q", got, want)
	}
	_, err := c.Exec(ctx, "SET worldfs.at = 'yesterday noon'")
	if pgCode(err) != "22023" || !strings.Contains(err.Error(), "head~10") {
		t.Errorf("a point that does not parse: %v, want SQLSTATE 22023 naming the forms", err)
	}
	// A pin given at startup, as PGOPTIONS gives it.
	c2 := f.connect(t, "w", "options='-c worldfs.at=3'")
	var ticks, first int64
	if err := c2.QueryRow(ctx, "SELECT count(DISTINCT tick), min(tick) FROM particle").Scan(&ticks, &first); err != nil || ticks != 1 || first != 3 {
		t.Errorf("options -c worldfs.at=3: %d ticks from %d, %v; want tick 3 alone", ticks, first, err)
	}
}

// TestLiveWriterThirtyTwoClients: 32 clients query a world while its
// writer commits tick after tick, each at a pin of its own; every answer
// equals worldfs sql's of the same pin.
func TestLiveWriterThirtyTwoClients(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := enginetest.World(t, b, "live", 2)
	// Each statement confirms the catalog current (a freshness of a
	// nanosecond): a client asks for ticks the writer has published, and
	// must find them.
	f := serveBucket(t, b, func(o *serve.Options) { o.Freshness = time.Nanosecond })
	ctx := enginetest.Context(t)
	const lastTick = 14
	var head atomic.Int64
	head.Store(2)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for tick := int64(3); tick <= lastTick; tick++ {
			if err := enginetest.Drive(gctx, w, tick); err != nil {
				return err
			}
			head.Store(tick)
		}
		return nil
	})
	const q = "SELECT count(*) AS n, coalesce(sum(entity_id), 0) AS ids, coalesce(round(sum(position_x), 6), 0) AS x, coalesce(max(tick), -1) AS tick FROM particle"
	type answer struct {
		tick int64
		got  string
	}
	var mu sync.Mutex
	var answers []answer
	for i := range 32 {
		g.Go(func() error {
			c, err := pgx.Connect(gctx, f.dsn("live"))
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 2 {
				tick := rng.Int64N(head.Load() + 1)
				if _, err := c.Exec(gctx, "SET worldfs.at = '"+strconv.FormatInt(tick, 10)+"'"); err != nil {
					return err
				}
				var n, ids, last int64
				var x float64
				if err := c.QueryRow(gctx, q).Scan(&n, &ids, &x, &last); err != nil {
					return fmt.Errorf("client %d at tick %d: %w", i, tick, err)
				}
				mu.Lock()
				answers = append(answers, answer{tick, fmt.Sprintf("n,ids,x,tick\n%d,%d,%s,%d\n", n, ids, floatText(x, 64), last)})
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for _, a := range answers {
		if _, ok := want[a.tick]; !ok {
			m := index.Moment{Text: strconv.FormatInt(a.tick, 10), Tick: &a.tick}
			want[a.tick] = f.reference(t, "live", q, &m)
		}
		if a.got != want[a.tick] {
			t.Errorf("at tick %d: %q, worldfs sql: %q", a.tick, a.got, want[a.tick])
		}
	}
	if len(answers) != 64 || len(want) < 5 {
		t.Fatalf("%d answers at %d pins; the test proves little", len(answers), len(want))
	}
}

// longQuery runs for minutes unless stopped.
const longQuery = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b"

// TestCancelAndTimeoutStopALongQuery: a cancel request stops a statement
// that would run for minutes, with SQLSTATE 57014 and PostgreSQL's
// message; the session goes on; a statement timeout stops one the same
// way, with its own message.
func TestCancelAndTimeoutStopALongQuery(t *testing.T) {
	f := newFixture(t, nil)
	started := make(chan struct{}, 16)
	f.srv.SetHooks(func() { started <- struct{}{} }, nil, nil)
	ctx := enginetest.Context(t)
	c := f.connect(t, "w")
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, longQuery)
		done <- err
	}()
	<-started
	begin := time.Now()
	if err := c.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // the statement alone runs for hours
		t.Fatal("the cancelled statement still runs a minute after the cancel request")
	}
	took := time.Since(begin)
	if pgCode(err) != "57014" || !strings.Contains(err.Error(), "canceling statement due to user request") {
		t.Fatalf("a cancelled statement: %v, want SQLSTATE 57014", err)
	}
	t.Logf("the cancelled statement ended %v after the cancel request", took)
	if took > 30*time.Second {
		t.Errorf("the cancel took %v", took)
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM particle_at(2)").Scan(&n); err != nil {
		t.Fatalf("after the cancel: %v", err)
	}
	if _, err := c.Exec(ctx, "SET statement_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, longQuery)
	if pgCode(err) != "57014" || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("past the statement timeout: %v, want SQLSTATE 57014", err)
	}
}

// TestAKilledClientFreesItsConnection: with room for one session, a
// client killed in the middle of a long statement frees it (the
// statement stops), and the next client gets in.
func TestAKilledClientFreesItsConnection(t *testing.T) {
	f := newFixture(t, func(o *serve.Options) { o.MaxConns = 1 })
	started, ended := make(chan struct{}, 16), make(chan struct{}, 16)
	f.srv.SetHooks(func() { started <- struct{}{} }, func() { ended <- struct{}{} }, nil)
	ctx := enginetest.Context(t)
	a, err := pgx.Connect(ctx, f.dsn("w"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, f.dsn("w")); pgCode(err) != "53300" {
		t.Fatalf("a second client with room for one: %v, want SQLSTATE 53300", err)
	}
	// The client is pgx's no more (pgx would send a cancel request as
	// its connection fails): the query, then the socket closes.
	hc, err := a.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	hc.Frontend.Send(&pgproto3.Query{String: longQuery})
	if err := hc.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	<-started
	hc.Conn.Close() // the client dies
	select {
	case <-ended:
	case <-time.After(time.Minute): // its statement alone runs for hours
		t.Fatal("the session of a killed client still runs a minute after it died")
	}
	if got := f.srv.Stats().Sessions; got != 0 {
		t.Fatalf("%d sessions open after the only client died", got)
	}
	b := f.connect(t, "w")
	var n int64
	if err := b.QueryRow(ctx, "SELECT count(*) FROM particle_at(2)").Scan(&n); err != nil || n == 0 {
		t.Fatalf("the next client: %d rows, %v", n, err)
	}
}

// stallListener's connections stop taking writes after limit bytes, as a
// client that stops reading does once the socket's buffers are full:
// stalled is closed then, and the write waits for release.
type stallListener struct {
	net.Listener
	limit   int
	stalled chan struct{}
	release chan struct{}
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l}, nil
}

type stallConn struct {
	net.Conn
	l       *stallListener
	written int
	once    sync.Once
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.written+len(p) > c.l.limit {
		c.once.Do(func() { close(c.l.stalled) })
		<-c.l.release
		return 0, net.ErrClosed
	}
	c.written += len(p)
	return c.Conn.Write(p)
}

func rssBytes(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestAStalledClientHoldsABatchNotTheResult: a client that stops reading
// a 360 MB result (as text) leaves the server holding what DuckDB holds
// within --query-memory and a batch: when its writes stall, the server
// has pulled no more rows than it sent and one batch, and its memory has
// grown by far less than the result.
func TestAStalledClientHoldsABatchNotTheResult(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 1)
	srv, err := serve.New(serve.Options{Bucket: b, Views: viewsOptions(t), QueryMemory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &stallListener{Listener: inner, limit: 1 << 20, stalled: make(chan struct{}), release: make(chan struct{})}
	go srv.Serve(ln)
	defer srv.Close()
	var pulled atomic.Int64
	srv.SetHooks(nil, nil, func(n int64) { pulled.Store(n) })
	const rows, width = 1_500_000, 240
	ctx := enginetest.Context(t)
	f := &fixture{addr: inner.Addr().String()}
	c, err := pgx.Connect(ctx, f.dsn("w"))
	if err != nil {
		t.Fatal(err)
	}
	base := rssBytes(t)
	go c.PgConn().Exec(ctx, fmt.Sprintf("SELECT range AS n, repeat('x', %d) AS pad FROM range(%d)", width, rows)).ReadAll()
	<-ln.stalled
	grown, got := rssBytes(t)-base, pulled.Load()
	close(ln.release)
	result := int64(rows * (width + 8))
	t.Logf("stalled after %d of %d rows; the process grew by %d MiB for a result of %d MiB (query memory 64 MiB)", got, rows, grown>>20, result>>20)
	if sent := int64(1<<20) / (width + 10); got > sent+16384 {
		t.Errorf("the server pulled %d rows for a client that took about %d", got, sent)
	}
	if grown > result/2 {
		t.Errorf("the server grew by %d MiB for a client that read 1 MiB of a %d MiB result", grown>>20, result>>20)
	}
}

// TestQueryMemoryIsCapped: a statement that needs more than
// --query-memory and cannot spill fails with SQLSTATE 53200 and a hint
// naming the limit; the session goes on.
func TestQueryMemoryIsCapped(t *testing.T) {
	f := newFixture(t, func(o *serve.Options) { o.QueryMemory = 32 << 20 })
	ctx := enginetest.Context(t)
	c := f.connect(t, "w")
	_, err := c.Exec(ctx, "SELECT list(range) FROM range(20000000)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53200" || !strings.Contains(pe.Hint, "32 MiB (--query-memory)") {
		t.Fatalf("a statement past the memory cap: %v (%+v), want SQLSTATE 53200 naming --query-memory", err, pe)
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM particle_at(2)").Scan(&n); err != nil || n == 0 {
		t.Fatalf("after: %d, %v", n, err)
	}
}
