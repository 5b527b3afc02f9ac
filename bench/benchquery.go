package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

func querySpec(env Env) Bench {
	var url, world, catWorld, dir *string
	var fragments, rows, catTicks, runs *int
	var generateOnly *bool
	return benchSpec[*queryBench]{
		name:    "query",
		summary: "time a visible-rows aggregate through the SQL views against DuckDB's raw read_parquet of the same files, and the view build from a large catalog",
		example: "worldfs bench query --bucket ./bench-data --fragments 10000 --rows 1000 --catalog-ticks 1000000 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			fragments = fs.Int("fragments", 10000, "published ticks of the query world, one fragment each")
			rows = fs.Int("rows", 1000, "rows per fragment (entities of the one archetype)")
			world = fs.String("world", "", "query world (default: bench-query-<fragments>x<rows>); reused if the bucket holds it")
			catTicks = fs.Int("catalog-ticks", 1000000, "published ticks of the catalog world the view build is timed on (0: skip)")
			catWorld = fs.String("catalog-world", "", "catalog world (default: bench-catalog-<ticks>); reused if the bucket holds it")
			runs = fs.Int("runs", 5, "timed runs of each query (the median is reported)")
			dir = fs.String("views-dir", "", "where the views' fragment lists are written (default: a temporary directory)")
			generateOnly = fs.Bool("generate-only", false, "build (or check) the worlds and measure nothing")
		},
		check: func(args []string) error {
			if len(args) != 0 || *fragments < 1 || *rows < 1 || *catTicks < 0 || *runs < 1 {
				return usagef("bench query takes no arguments, positive --fragments, --rows and --runs, and --catalog-ticks ≥ 0")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenBucket(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*queryBench, error) {
			if *world == "" {
				*world = fmt.Sprintf("bench-query-%dx%d", *fragments, *rows)
			}
			if *catWorld == "" {
				*catWorld = fmt.Sprintf("bench-catalog-%d", *catTicks)
			}
			res := &queryBench{Bucket: *url, World: *world, Fragments: *fragments, RowsPerFragment: *rows, Runs: *runs}
			var err error
			if res.Generated, err = genQueryWorld(ctx, b, *world, *fragments, *rows, true); err != nil {
				return nil, err
			}
			if *catTicks > 0 {
				res.Catalog = &catalogBench{World: *catWorld, Ticks: *catTicks}
				if res.Catalog.Generated, err = genQueryWorld(ctx, b, *catWorld, *catTicks, *rows, false); err != nil {
					return nil, err
				}
			}
			if *generateOnly {
				return res, nil
			}
			views, remove, err := benchDir(*dir, "worldfs-bench-views-")
			if err != nil {
				return nil, err
			}
			defer remove()
			if err := benchQuery(ctx, b, res, views); err != nil {
				return nil, err
			}
			return res, nil
		},
		table: func(out io.Writer, res *queryBench) error {
			if *generateOnly { // nothing measured: the worlds, as JSON
				return writeJSON(out, res)
			}
			printQueryBench(out, res)
			return nil
		},
	}.bench()
}

// queryBench is the result of bench query.
type queryBench struct {
	Bucket          string `json:"bucket"`
	World           string `json:"world"`
	Fragments       int    `json:"fragments"`
	RowsPerFragment int    `json:"rows_per_fragment"`
	Runs            int    `json:"runs"`
	// Generated: the world was built by this run (false: reused).
	Generated bool `json:"generated"`

	VisibleRows int64  `json:"visible_rows"`
	Query       string `json:"query"`
	// ViewsSeconds: the median of the aggregate through the views; RawSeconds:
	// the same aggregate over read_parquet of exactly the same files.
	ViewsSeconds float64 `json:"views_seconds"`
	RawSeconds   float64 `json:"raw_seconds"`
	Ratio        float64 `json:"views_to_raw_ratio"`

	BuildSeconds float64 `json:"build_seconds"` // catalog load + fragment list + script
	// BuildAgainSeconds: the same build by a new process (the fragment
	// list and the memory of verified files already on disk); Hashed:
	// the fragments each build hashed to verify them.
	BuildAgainSeconds float64 `json:"build_again_seconds"`
	HashedFirst       int64   `json:"hashed_first"`
	HashedAgain       int64   `json:"hashed_again"`
	OpenSeconds       float64 `json:"open_seconds"` // DuckDB runs the script
	// PeakRSSBytes is the process's peak resident set (Go and DuckDB).
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// BuildPeakHeapBytes is the Go heap's peak while the views are built.
	BuildPeakHeapBytes uint64 `json:"build_peak_heap_bytes"`

	Catalog *catalogBench `json:"catalog,omitempty"`
}

// catalogBench times building the views from a large catalog.
type catalogBench struct {
	World     string `json:"world"`
	Ticks     int    `json:"ticks"`
	Generated bool   `json:"generated"`
	// LoadSeconds: index.Load (newest checkpoint and the slots after it);
	// BuildSeconds: the views from the loaded state (fragment list file
	// and script); ...Again: the same with the fragment list already on
	// disk (content-addressed).
	LoadSeconds       float64 `json:"load_seconds"`
	BuildSeconds      float64 `json:"build_seconds"`
	BuildAgainSeconds float64 `json:"build_again_seconds"`
	BuildPeakHeap     uint64  `json:"build_peak_heap_bytes"`
	ScriptBytes       int     `json:"script_bytes"`
	FragmentListBytes int64   `json:"fragment_list_bytes"`
}

// queryTable is the one archetype of the query worlds: 10 columns of
// position, velocity and a kind id, like the tick benchmark's.
func queryTable() *engine.Table { return benchTables(1)[0] }

// genQueryWorld builds a world of n published ticks of one archetype with
// rows entities, exactly as the engine commits them: per tick one fragment
// stamped with a fresh token under the writer's epoch, created at its
// fragment path, then a tick.publish naming it. withData false writes the
// catalog only (its fragments are never read). An existing world of at
// least n ticks is reused.
func genQueryWorld(ctx context.Context, b bucket.Bucket, world string, n, rows int, withData bool) (bool, error) {
	if _, err := index.ReadMarker(ctx, b, world); err == nil {
		s, _, err := index.Load(ctx, b, world)
		if err != nil {
			return false, err
		}
		if r, ok := s.Run("main"); ok && r.Published >= int64(n) {
			fmt.Fprintf(os.Stderr, "bench: reusing world %s (%d ticks)\n", world, r.Published)
			return false, nil
		}
		return false, fmt.Errorf("world %s exists with fewer than %d ticks; name another with --world or --catalog-world", world, n)
	} else if !errors.Is(err, bucket.ErrNotExist) {
		return false, err
	}
	t := queryTable()
	w, err := engine.CreateWorld(ctx, b, world, []*engine.Table{t}, engine.Options{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		return false, err
	}
	defer w.Close()
	epoch := w.Epoch()
	base := engine.NewFrame(t)
	for i := range rows {
		if err := base.Append(int64(i), engine.Values{"velocity_x": 1.0, "velocity_y": float64(i % 7), t.Components[0].Name + "_id": int64(i % 5)}); err != nil {
			return false, err
		}
	}
	// Ticks go to workers in blocks of 32; each block is published with
	// one CommitAll (the catalog groups concurrent blocks into slots).
	const block = 32
	workers := 4
	if !withData {
		workers = 64
	}
	var next, done atomic.Int64
	var firstErr atomic.Value
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go showCount(pctx, "world "+world+": published ticks", func() int { return int(done.Load()) })
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := base.Clone()
			x := f.Float64("position_x")
			for {
				from := next.Add(block) - block
				if from >= int64(n) || firstErr.Load() != nil {
					return
				}
				var entries []index.Entry
				for tick := from; tick < min(from+block, int64(n)); tick++ {
					token := queryToken()
					path := index.FragmentPath(world, "main", t.ID, token, 0)
					frag := index.Fragment{Path: path, Rows: int64(rows)}
					if withData {
						for i := range x {
							x[i] = float64(i) + 0.01*float64(tick)
						}
						data, err := engine.EncodeFragment(f, engine.Stamp{Tick: tick, CommitToken: token, WriterEpoch: epoch})
						var attrs bucket.Attrs
						if err == nil {
							attrs, err = bucket.CreateOnce(ctx, b, path, data)
						}
						if err != nil {
							firstErr.CompareAndSwap(nil, err)
							return
						}
						frag.Bytes, frag.Digest, frag.Generation = int64(len(data)), engine.Digest(data), attrs.Generation
					}
					entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
						Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch, NextEntity: int64(rows),
						Tables: []index.TableFragments{{Table: t.ID, Fragments: []index.Fragment{frag}}}}})
				}
				if _, err := w.Catalog().CommitAll(ctx, entries...); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(int64(len(entries)))
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "bench: world %s: writing a checkpoint\n", world)
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// queryToken is a commit token as the engine mints them.
func queryToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// The aggregate timed: through the views, and over read_parquet of the
// files the views read (the same list, from the same variable).
const (
	queryViews = "SELECT count(*), sum(position_x), avg(velocity_y) FROM archetype0"
	queryRaw   = "SELECT count(*), sum(position_x), avg(velocity_y) FROM read_parquet(getvariable('worldfs_files_archetype0_0'))"
)

func benchQuery(ctx context.Context, b bucket.Bucket, res *queryBench, dir string) error {
	opts := wsql.Options{Dir: dir}
	var s *wsql.Script
	var err error
	start, hashed := time.Now(), cache.HashCount()
	res.BuildPeakHeapBytes = peakHeap(func() { s, err = wsql.Build(ctx, b, res.World, opts) })
	res.BuildSeconds = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	res.HashedFirst = cache.HashCount() - hashed
	start, hashed = time.Now(), cache.HashCount()
	if _, err := wsql.Build(ctx, b, res.World, opts); err != nil {
		return err
	}
	res.BuildAgainSeconds = time.Since(start).Seconds()
	res.HashedAgain = cache.HashCount() - hashed
	start = time.Now()
	db, err := wsql.Open(ctx, s)
	if err != nil {
		return err
	}
	defer db.Close()
	res.OpenSeconds = time.Since(start).Seconds()
	res.Query = queryViews
	var views, raw []time.Duration
	for i := range res.Runs + 1 { // the first run of each warms the page cache
		for _, q := range []struct {
			sql string
			d   *[]time.Duration
		}{{queryViews, &views}, {queryRaw, &raw}} {
			var n int64
			var sum, avg float64
			t0 := time.Now()
			if err := db.QueryRowContext(ctx, q.sql).Scan(&n, &sum, &avg); err != nil {
				return fmt.Errorf("%s: %w", q.sql, err)
			}
			if i > 0 {
				*q.d = append(*q.d, time.Since(t0))
			}
			if q.sql == queryViews {
				res.VisibleRows = n
			} else if n != res.VisibleRows {
				return fmt.Errorf("the views show %d rows, their files hold %d", res.VisibleRows, n)
			}
		}
		fmt.Fprintf(os.Stderr, "bench: query run %d/%d\n", i, res.Runs)
	}
	res.ViewsSeconds, res.RawSeconds = median(views).Seconds(), median(raw).Seconds()
	res.Ratio = res.ViewsSeconds / res.RawSeconds
	res.PeakRSSBytes = peakRSS()
	if res.Catalog != nil {
		return benchCatalog(ctx, b, res.Catalog, dir)
	}
	return nil
}

// benchCatalog times loading a large catalog and building its views.
func benchCatalog(ctx context.Context, b bucket.Bucket, res *catalogBench, dir string) error {
	runtimeGC()
	start := time.Now()
	state, _, err := index.Load(ctx, b, res.World)
	if err != nil {
		return err
	}
	res.LoadSeconds = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "bench: catalog %s loaded in %.3f s\n", res.World, res.LoadSeconds)
	opts := wsql.Options{Dir: dir}
	var s *wsql.Script
	start = time.Now()
	res.BuildPeakHeap = peakHeap(func() { s, err = wsql.BuildFrom(ctx, b, state, opts) })
	res.BuildSeconds = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	start = time.Now()
	if _, err := wsql.BuildFrom(ctx, b, state, opts); err != nil {
		return err
	}
	res.BuildAgainSeconds = time.Since(start).Seconds()
	text, err := s.SQL()
	if err != nil {
		return err
	}
	res.ScriptBytes = len(text)
	if fi, err := os.Stat(s.FragmentList); err == nil {
		res.FragmentListBytes = fi.Size()
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// peakRSS is the process's peak resident set size.
func peakRSS() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024 // kilobytes on Linux
}

func printQueryBench(out io.Writer, res *queryBench) {
	fmt.Fprintf(out, "world %s: %d visible rows in %d fragments\n", res.World, res.VisibleRows, res.Fragments)
	fmt.Fprintf(out, "views built in %.3f s (%d fragments hashed to verify them), again by a new process in %.3f s (%d hashed), opened in %.3f s\n",
		res.BuildSeconds, res.HashedFirst, res.BuildAgainSeconds, res.HashedAgain, res.OpenSeconds)
	fmt.Fprintf(out, "aggregate (median of %d): views %.3f s, raw read_parquet %.3f s, ratio %.3f (goal ≤ 1.15); peak RSS %.0f MiB\n",
		res.Runs, res.ViewsSeconds, res.RawSeconds, res.Ratio, float64(res.PeakRSSBytes)/(1<<20))
	if c := res.Catalog; c != nil {
		fmt.Fprintf(out, "catalog of %d ticks: load %.3f s, view build %.3f s (goal ≤ 1 s; again %.3f s), peak heap %.0f MiB, script %d bytes, fragment list %d bytes\n",
			c.Ticks, c.LoadSeconds, c.BuildSeconds, c.BuildAgainSeconds, float64(c.BuildPeakHeap)/(1<<20), c.ScriptBytes, c.FragmentListBytes)
	}
}
