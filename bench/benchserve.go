package bench

import (
	"context"
	dbsql "database/sql"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/internal/stats"
	"github.com/worldfs/worldfs/serve"
	wsql "github.com/worldfs/worldfs/sql"
)

// ServeResult is what worldfs bench serve measured.
type ServeResult struct {
	World string `json:"world"`
	Table string `json:"table"`
	Tick  int64  `json:"tick"`
	Rows  int64  `json:"rows"` // of the one-tick query
	// OneTick: the warm one-tick query in process (sql.Run, as worldfs sql
	// runs it, CSV to nowhere) and through the wire (pgx, binary), and
	// the ratio of their medians (goal: at most 1.3).
	InProcess stats.Latencies `json:"in_process"`
	Wire      stats.Latencies `json:"wire"`
	Ratio     float64         `json:"ratio"`
	// Million: a 1,000,000-row result read in process (database/sql, each
	// row scanned), as worldfs sql renders it (sql.Run CSV), and through
	// the wire by pgx, in rows a second (goal: the wire at least half the
	// in-process rate).
	MillionScan float64 `json:"million_scan_rows_per_sec"`
	MillionRun  float64 `json:"million_run_rows_per_sec"`
	MillionWire float64 `json:"million_wire_rows_per_sec"`
	// Clients: 32 clients each asking for 20 ticks at random, the latency
	// of each query (after a first that opens the session's database).
	Clients     int           `json:"clients"`
	ClientsLoad stats.Summary `json:"clients_load"`
	// SlowReader: a client that reads 64 KiB a tenth of a second of a
	// result of ResultMiB, for Seconds: the server's memory (this
	// process's resident set) before, and its peak above that.
	ResultMiB      int64   `json:"slow_reader_result_mib"`
	QueryMemoryMiB int64   `json:"query_memory_mib"`
	BaseMiB        int64   `json:"slow_reader_base_rss_mib"`
	PeakGrowthMiB  int64   `json:"slow_reader_peak_growth_mib"`
	ReadMiB        float64 `json:"slow_reader_read_mib"`
}

func serveSpec(env Env) Bench {
	var url, world, dir *string
	var repeats, clients *int
	var slow *time.Duration
	return benchSpec[*ServeResult]{
		name: "serve",
		summary: "measure worldfs serve (the PostgreSQL protocol) against worldfs sql in process: a warm one-tick query (median, p99), " +
			"a 1,000,000-row result read by pgx, 32 clients' latencies, and the server's memory under a slow reader",
		example: "worldfs bench serve --bucket ./worldfs-data --world w1",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to query (required): its first table, at the tick half way to its head")
			repeats = fs.Int("repeats", 200, "repeats of the one-tick query, each way")
			clients = fs.Int("clients", 32, "clients at once")
			slow = fs.Duration("slow", 5*time.Second, "how long the slow reader reads")
			dir = fs.String("dir", "", "work directory for the views' fragment lists (default: a temporary one, removed after)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *world == "" || *repeats < 1 || *clients < 1 {
				return usagef("bench serve takes no arguments, --world, and positive --repeats and --clients")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenExisting(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*ServeResult, error) {
			if err := env.RequireWorld(ctx, b, *world); err != nil {
				return nil, err
			}
			d, remove, err := benchDir(*dir, "worldfs-bench-serve-")
			if err != nil {
				return nil, err
			}
			defer remove()
			return benchServe(ctx, b, d, *world, *repeats, *clients, *slow)
		},
		table: func(out io.Writer, r *ServeResult) error {
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "world %s, table %s, tick %d (%d rows)\n", r.World, r.Table, r.Tick, r.Rows)
			fmt.Fprintf(tw, "one tick, warm\tin process p50 %.2f ms p99 %.2f ms\twire (pgx) p50 %.2f ms p99 %.2f ms\tratio %.2f (goal ≤ 1.3)\n",
				r.InProcess.P50ms, r.InProcess.P99ms, r.Wire.P50ms, r.Wire.P99ms, r.Ratio)
			fmt.Fprintf(tw, "1,000,000 rows\tin process: scanned %.0f rows/s, worldfs sql CSV %.0f rows/s\twire (pgx) %.0f rows/s\t%.0f%% of the scan (goal ≥ 50%%)\n",
				r.MillionScan, r.MillionRun, r.MillionWire, 100*r.MillionWire/r.MillionScan)
			fmt.Fprintf(tw, "%d clients\t%d queries, %.0f/s\tp50 %.2f ms p90 %.2f ms p99 %.2f ms max %.2f ms\n",
				r.Clients, r.ClientsLoad.Ops, r.ClientsLoad.OpsPerSec, r.ClientsLoad.P50ms, r.ClientsLoad.P90ms, r.ClientsLoad.P99ms, r.ClientsLoad.MaxMs)
			fmt.Fprintf(tw, "slow reader\tresult %d MiB, query memory %d MiB\tread %.1f MiB\tserver RSS %d MiB, peak +%d MiB\n",
				r.ResultMiB, r.QueryMemoryMiB, r.ReadMiB, r.BaseMiB, r.PeakGrowthMiB)
			return tw.Flush()
		},
	}.bench()
}

// millionQuery is a result of 1,000,000 rows of the types of worldfs's
// tables: integers, floats, booleans and text.
const millionQuery = "SELECT range AS n, range::DOUBLE * 0.5 AS x, range % 7 = 0 AS b, 'row ' || range AS s FROM range(1000000)"

func benchServe(ctx context.Context, b bucket.Bucket, dir, world string, repeats, clients int, slow time.Duration) (*ServeResult, error) {
	opts := wsql.Options{Dir: filepath.Join(dir, "views")}
	s, err := wsql.Build(ctx, b, world, opts)
	if err != nil {
		return nil, err
	}
	if len(s.Views) == 0 || s.Visible == nil {
		return nil, fmt.Errorf("world %s has no table with visible ticks to query", world)
	}
	r := &ServeResult{World: world, Table: s.Views[0], Tick: (s.Visible.From + s.Visible.To) / 2, Clients: clients}
	q := fmt.Sprintf("SELECT * FROM %s_at(%d)", r.Table, r.Tick)

	// In process, as worldfs sql runs it.
	db, err := wsql.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var in []time.Duration
	for i := range repeats + 5 {
		start := time.Now()
		if err := wsql.Run(ctx, db, q, wsql.FormatCSV, io.Discard, nil); err != nil {
			return nil, err
		}
		if i >= 5 { // warm
			in = append(in, time.Since(start))
		}
	}
	r.InProcess = stats.Distribution(in)

	const queryMemory = 256 << 20
	srv, err := serve.New(serve.Options{Bucket: b, Views: opts, QueryMemory: queryMemory, MaxConns: clients + 4})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go srv.Serve(ln)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	dsn := fmt.Sprintf("host=%s port=%s user=bench dbname=%s sslmode=disable", host, port, world)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	var wire []time.Duration
	for i := range repeats + 5 {
		start := time.Now()
		rows, err := c.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		n := int64(0)
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				return nil, err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if i >= 5 {
			wire = append(wire, time.Since(start))
		}
		r.Rows = n
	}
	r.Wire = stats.Distribution(wire)
	r.Ratio = r.Wire.P50ms / r.InProcess.P50ms

	// A million rows.
	if r.MillionScan, err = scanRate(ctx, db); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := wsql.Run(ctx, db, millionQuery, wsql.FormatCSV, io.Discard, nil); err != nil {
		return nil, err
	}
	r.MillionRun = 1e6 / time.Since(start).Seconds()
	start = time.Now()
	rows, err := c.Query(ctx, millionQuery)
	if err != nil {
		return nil, err
	}
	n := 0
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			return nil, err
		}
		n++
	}
	if err := rows.Err(); err != nil || n != 1e6 {
		return nil, fmt.Errorf("the million rows through the wire: %d rows, %v", n, err)
	}
	r.MillionWire = 1e6 / time.Since(start).Seconds()

	// Clients at once, each at ticks of its own.
	var rec stats.Recorder
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	begin := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer cc.Close(context.Background())
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range 21 { // the first warms the session's database: not counted
				tick := s.Visible.From + rng.Int64N(s.Visible.To-s.Visible.From+1)
				start := time.Now()
				rows, err := cc.Query(ctx, fmt.Sprintf("SELECT * FROM %s_at(%d)", r.Table, tick))
				if err != nil {
					errs <- err
					return
				}
				for rows.Next() {
				}
				if err := rows.Err(); err != nil {
					errs <- err
					return
				}
				if j > 0 {
					rec.Add(time.Since(start))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	r.ClientsLoad = rec.Summarize(time.Since(begin))

	// A slow reader of a large result.
	if err := slowReader(ctx, r, host, port, world, slow); err != nil {
		return nil, err
	}
	r.QueryMemoryMiB = queryMemory >> 20
	return r, nil
}

// scanRate is the rate of reading millionQuery's rows in process, each
// scanned as database/sql gives it.
func scanRate(ctx context.Context, db *dbsql.DB) (float64, error) {
	start := time.Now()
	rows, err := db.QueryContext(ctx, millionQuery)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	vals := make([]any, 4)
	ptrs := []any{&vals[0], &vals[1], &vals[2], &vals[3]}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return 0, err
		}
	}
	return 1e6 / time.Since(start).Seconds(), rows.Err()
}

// slowReader sends a query of a large result on a raw connection and
// reads 64 KiB of it every tenth of a second, sampling this process's
// resident set.
func slowReader(ctx context.Context, r *ServeResult, host, port, world string, d time.Duration) error {
	const rows, width = 2_000_000, 200
	r.ResultMiB = int64(rows*(width+8)) >> 20
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=bench dbname=%s sslmode=disable", host, port, world))
	if err != nil {
		return err
	}
	raw := c.PgConn().Conn()
	base := rss()
	r.BaseMiB = base >> 20
	q := fmt.Sprintf("SELECT range AS n, repeat('x', %d) AS pad FROM range(%d)", width, rows)
	msg := append([]byte{'Q'}, 0, 0, 0, 0)
	msg = append(append(msg, q...), 0)
	l := len(msg) - 1
	msg[1], msg[2], msg[3], msg[4] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	if _, err := raw.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var read int64
	peak := base
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		raw.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _ := io.ReadFull(raw, buf)
		read += int64(n)
		peak = max(peak, rss())
		time.Sleep(100 * time.Millisecond)
	}
	raw.Close()
	r.PeakGrowthMiB = (peak - base) >> 20
	r.ReadMiB = float64(read) / (1 << 20)
	return nil
}

// rss is this process's resident set, in bytes (0 where /proc has none).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
