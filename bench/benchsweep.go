package bench

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

func sweepSpec(env Env) Bench {
	var dir *string
	var forks, ticks, late, entities, tables, small, runs *int
	return benchSpec[*sweepBench]{
		name: "sweep",
		summary: "a sweep of forks read as one table (worldfs sql --worlds): a GROUP BY over all of them against raw read_parquet of exactly their visible files, " +
			"the time to open the views of the sweep and of many small worlds (in this process and in a fresh one), and a tag lookup's cost",
		example: "worldfs bench sweep --dir /var/tmp/bench-sweep --forks 100 --ticks 1000 --small 1000 --json",
		flags: func(fs *flag.FlagSet) {
			dir = fs.String("dir", "", "where the bench's local bucket and caches go (required; reused: the worlds are built once)")
			forks = fs.Int("forks", 100, "forks of the base world: half at tick 0, half at --late")
			late = fs.Int("late", 500, "the tick the second half of the forks fork at")
			ticks = fs.Int("ticks", 1000, "the tick each fork runs to")
			entities = fs.Int("entities", 50, "entities per table")
			tables = fs.Int("tables", 4, "tables of each world")
			small = fs.Int("small", 1000, "small worlds (one tick of every table, 5 entities each) whose views open together (0: skip)")
			runs = fs.Int("runs", 5, "timed runs of each query (the median is reported)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *dir == "" || *forks < 2 || *ticks < 2 || *late < 0 || *late >= *ticks || *entities < 1 || *tables < 1 || *small < 0 || *runs < 1 {
				return usagef("bench sweep takes no arguments, --dir, --forks ≥ 2, --ticks ≥ 2, 0 ≤ --late < --ticks, and positive --entities, --tables and --runs")
			}
			return nil
		},
		run: func(ctx context.Context, _ bucket.Bucket) (*sweepBench, error) {
			res := &sweepBench{Dir: *dir, Forks: *forks, Late: int64(*late), Ticks: int64(*ticks), Entities: *entities, Tables: *tables, Small: *small, Runs: *runs}
			return res, benchSweep(ctx, res)
		},
		table: func(out io.Writer, res *sweepBench) error {
			printSweepBench(out, res)
			return nil
		},
	}.bench()
}

// sweepBench is the result of bench sweep.
type sweepBench struct {
	Dir      string `json:"dir"`
	Forks    int    `json:"forks"`
	Late     int64  `json:"late_fork_tick"`
	Ticks    int64  `json:"ticks"`
	Entities int    `json:"entities"`
	Tables   int    `json:"tables"`
	Small    int    `json:"small_worlds"`
	Runs     int    `json:"runs"`
	// GenerateSeconds: building the worlds (0: reused).
	GenerateSeconds float64 `json:"generate_seconds"`
	BucketBytes     int64   `json:"bucket_bytes"`
	BucketFiles     int64   `json:"bucket_files"`

	// The sweep's views: built and opened in this process (cold: no
	// script kept; warm: every world's script reused), and by a fresh
	// worldfs sql process running SELECT 1 (wall time; its peak RSS).
	OpenColdSeconds    float64 `json:"open_cold_seconds"`
	OpenWarmSeconds    float64 `json:"open_warm_seconds"`
	ProcessColdSeconds float64 `json:"process_cold_seconds"`
	ProcessWarmSeconds float64 `json:"process_warm_seconds"`
	ProcessPeakRSS     uint64  `json:"process_peak_rss_bytes"`

	// The aggregate over every fork: rows it reads, the medians through
	// the sweep's views and over raw read_parquet of exactly the visible
	// files of each world (its parts' files, each part within its ticks),
	// their ratio; the same query by a fresh process (wall, with the
	// views opened warm) and that process's peak RSS.
	Query        string  `json:"query"`
	Rows         int64   `json:"rows"`
	Groups       int64   `json:"groups"`
	ViewsSeconds float64 `json:"views_seconds"`
	RawSeconds   float64 `json:"raw_seconds"`
	Ratio        float64 `json:"views_to_raw_ratio"`
	QueryProcess float64 `json:"query_process_seconds"`
	// RawProcess: the raw query by a fresh process of this binary on a
	// plain DuckDB (bench raw), its wall time, the best of the runs as
	// QueryProcess is; ProcessRatio: QueryProcess over it (the goal's
	// measure: at most 1.5).
	RawProcess       float64 `json:"raw_process_seconds"`
	ProcessRatio     float64 `json:"process_ratio"`
	QueryProcessRSS  uint64  `json:"query_process_peak_rss_bytes"`
	ViewsFirstSecond float64 `json:"views_first_run_seconds"`

	// Small worlds: their views built and opened together in this process
	// (cold, warm) and by a fresh process (cold, warm).
	SmallOpenColdSeconds    float64 `json:"small_open_cold_seconds"`
	SmallOpenWarmSeconds    float64 `json:"small_open_warm_seconds"`
	SmallProcessColdSeconds float64 `json:"small_process_cold_seconds"`
	SmallProcessWarmSeconds float64 `json:"small_process_warm_seconds"`
	SmallProcessPeakRSS     uint64  `json:"small_process_peak_rss_bytes"`

	// A one-tick query of one fork (build, open, count), pinned by tick
	// number and by a tag naming that tick: the medians of the whole and
	// of the views' build (where the tag is looked up; opening and the
	// query do the same work either way); the builds' difference is what
	// the tag's lookup adds.
	TickQuerySeconds float64 `json:"tick_query_seconds"`
	TagQuerySeconds  float64 `json:"tag_query_seconds"`
	TickBuildSeconds float64 `json:"tick_build_seconds"`
	TagBuildSeconds  float64 `json:"tag_build_seconds"`
	TagAddsSeconds   float64 `json:"tag_adds_seconds"`

	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// rawSweepFile is the raw query's file in the bench's directory.
const rawSweepFile = "raw-sweep.sql"

// Names of the bench's worlds.
const (
	sweepBase      = "sweep-base"
	sweepSmallGlob = "sweepsmall-*"
)

func sweepFork(i int) string  { return fmt.Sprintf("sweep-%03d", i) }
func sweepSmall(i int) string { return fmt.Sprintf("sweepsmall-%04d", i) }

func benchSweep(ctx context.Context, res *sweepBench) error {
	b, err := local.Open(filepath.Join(res.Dir, "bucket"))
	if err != nil {
		return err
	}
	defer b.Close()
	start := time.Now()
	built, err := genSweep(ctx, b, res)
	if err != nil {
		return err
	}
	if built {
		res.GenerateSeconds = time.Since(start).Seconds()
	}
	res.BucketBytes, res.BucketFiles = dirSize(filepath.Join(res.Dir, "bucket"))
	if err := sweepQueries(ctx, b, res); err != nil {
		return err
	}
	if err := sweepProcesses(ctx, res); err != nil {
		return err
	}
	if err := sweepTag(ctx, b, res); err != nil {
		return err
	}
	res.PeakRSSBytes = peakRSS()
	return nil
}

// genSweep builds the base world, its forks and the small worlds, unless
// the bucket holds them already (then false).
func genSweep(ctx context.Context, b bucket.Bucket, res *sweepBench) (bool, error) {
	have := map[string]bool{}
	entries, err := index.ListWorldEntries(ctx, b)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		have[e.ID] = true
	}
	built := false
	tables := benchTables(res.Tables)
	if !have[sweepBase] {
		say("building %s to tick %d", sweepBase, res.Late)
		if err := runSweepWorld(ctx, b, sweepBase, "", 0, res.Late, tables, res.Entities, map[string]string{"sweep": "bench"}, 1); err != nil {
			return false, err
		}
		built = true
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i := range res.Forks {
		if have[sweepFork(i)] {
			continue
		}
		built = true
		g.Go(func() error {
			at := int64(0)
			if i >= res.Forks/2 {
				at = res.Late
			}
			say("building %s (forked at %d) to tick %d", sweepFork(i), at, res.Ticks)
			return runSweepWorld(gctx, b, sweepFork(i), sweepBase, at, res.Ticks, tables, res.Entities, map[string]string{"seed": fmt.Sprint(i)}, 1+float64(i)/100)
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range res.Small {
		if have[sweepSmall(i)] {
			continue
		}
		built = true
		g.Go(func() error {
			if i%100 == 0 {
				say("building small world %d of %d", i, res.Small)
			}
			return runSweepWorld(gctx, b, sweepSmall(i), "", 0, 0, tables, 5, map[string]string{"seed": fmt.Sprint(i)}, 1)
		})
	}
	return built, g.Wait()
}

// runSweepWorld creates world (or forks it from parent at tick at), runs
// it to tick last (its particles drifting by speed), compacts all of it
// and collects what compaction replaced.
func runSweepWorld(ctx context.Context, b bucket.Bucket, world, parent string, at, last int64, tables []*engine.Table, entities int, meta map[string]string, speed float64) error {
	opts := engine.Options{Depth: 4, Meta: meta, Collection: maintenance.CollectOptions{Every: -1}}
	var w *engine.World
	var err error
	if parent == "" {
		if w, err = engine.CreateWorld(ctx, b, world, tables, opts); err != nil {
			return err
		}
		for _, t := range tables {
			for i := range entities {
				if _, err := w.Spawn(t.Name, engine.Values{"position_x": float64(i), "velocity_x": speed, "velocity_y": 1.0, t.Components[0].Name + "_id": int64(i)}); err != nil {
					w.Close()
					return err
				}
			}
		}
	} else if w, err = engine.ForkWorld(ctx, b, parent, world, index.DefaultRun, at, tables, opts); err != nil {
		return err
	}
	defer w.Close()
	if err := w.AddProcessor(func(tc *engine.TickContext) error {
		for _, t := range tables {
			f := tc.Frame(t.Name)
			x, y, vx, vy := f.Float64("position_x"), f.Float64("position_y"), f.Float64("velocity_x"), f.Float64("velocity_y")
			for i := range x {
				x[i] += vx[i] * speed * 0.01
				y[i] += vy[i] * 0.01
			}
		}
		return nil
	}); err != nil {
		return err
	}
	first := parent == ""
	for first || w.Tick() < last {
		first = false
		if _, err := w.Submit(ctx); err != nil {
			return err
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		return err
	}
	if last < 64 {
		return nil
	}
	// Windows down to 8 ticks: with the default ones a run's last ticks
	// past its last whole 64 (up to 63) would stay as written, each a
	// file of its own for every reader.
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: maintenance.NoRecent, Windows: []int64{4096, 512, 64, 8}}); err != nil {
		return err
	}
	_, err = maintenance.Collect(ctx, b, w.Catalog(), maintenance.CollectOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }})
	return err
}

// The aggregate timed over every fork.
const sweepQuery = "SELECT world, tick, avg(position_x) FROM archetype0 GROUP BY ALL"

// sweepQueries opens the sweep's views in this process (cold, then warm)
// and times the aggregate through them and over raw read_parquet of the
// same files.
func sweepQueries(ctx context.Context, b bucket.Bucket, res *sweepBench) error {
	cacheDir, views := filepath.Join(res.Dir, "cache-inproc"), filepath.Join(res.Dir, "views-inproc")
	for _, d := range []string{cacheDir, views} { // cold: no script kept, no fragment list written
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	kept, err := cache.Open(cacheDir, cache.Options{})
	if err != nil {
		return err
	}
	worlds, err := index.MatchWorlds(ctx, b, "sweep-[0-9]*")
	if err != nil {
		return err
	}
	open := func(worlds []string) (*wsql.Script, float64, error) {
		runtimeGC()
		start := time.Now()
		s, err := wsql.BuildSweep(ctx, b, worlds, wsql.Options{Dir: views, Reuse: kept})
		if err != nil {
			return nil, 0, err
		}
		db, err := wsql.Open(ctx, s)
		if err != nil {
			return nil, 0, err
		}
		d := time.Since(start).Seconds()
		db.Close()
		return s, d, nil
	}
	say("opening the views of %d forks, cold then warm", len(worlds))
	if _, res.OpenColdSeconds, err = open(worlds); err != nil {
		return err
	}
	var s *wsql.Script
	if s, res.OpenWarmSeconds, err = open(worlds); err != nil {
		return err
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		return err
	}
	defer db.Close()
	raw, err := rawSweepQuery(ctx, db)
	if err != nil {
		return err
	}
	res.Query = sweepQuery
	// The same for a fresh process of its own (bench raw; sweepProcesses).
	if err := os.WriteFile(filepath.Join(res.Dir, rawSweepFile), []byte(raw), 0o644); err != nil {
		return err
	}
	var viewRuns, rawRuns []time.Duration
	for i := range res.Runs + 1 {
		for _, q := range []struct {
			sql string
			d   *[]time.Duration
		}{{sweepQuery, &viewRuns}, {raw, &rawRuns}} {
			t0 := time.Now()
			var rows, groups int64
			err := db.QueryRowContext(ctx, "SELECT count(*), sum(1) FROM ("+q.sql+")").Scan(&groups, &rows)
			if err != nil {
				return fmt.Errorf("%.200s: %w", q.sql, err)
			}
			d := time.Since(t0)
			if i == 0 && q.sql == sweepQuery {
				res.ViewsFirstSecond = d.Seconds()
			}
			if i > 0 {
				*q.d = append(*q.d, d)
			}
			if q.sql == sweepQuery {
				res.Groups = groups
			} else if groups != res.Groups {
				return fmt.Errorf("the views give %d groups, the raw files %d", res.Groups, groups)
			}
		}
	}
	// The rows the aggregate reads.
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM archetype0").Scan(&res.Rows); err != nil {
		return err
	}
	res.ViewsSeconds, res.RawSeconds = median(viewRuns).Seconds(), median(rawRuns).Seconds()
	res.Ratio = res.ViewsSeconds / res.RawSeconds
	if res.Small > 0 {
		smalls, err := index.MatchWorlds(ctx, b, sweepSmallGlob)
		if err != nil {
			return err
		}
		say("opening the views of %d small worlds, cold then warm", len(smalls))
		if _, res.SmallOpenColdSeconds, err = open(smalls); err != nil {
			return err
		}
		if _, res.SmallOpenWarmSeconds, err = open(smalls); err != nil {
			return err
		}
	}
	return nil
}

// rawSweepQuery is sweepQuery over read_parquet of exactly the files the
// views of each world read (the sweep's worldfs_fragments, each world's
// fragment list), one read per part of a world (a segment's table) within
// the ticks its files may show (first_tick..last_tick: a fork reads its
// parent's compacted files up to its fork point), UNION ALL over them.
func rawSweepQuery(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, `SELECT sweep_world, string_agg('''' || replace(path, '''', '''''') || '''', ', ' ORDER BY ord), min(first_tick), max(last_tick),
		count(*) FILTER (WHERE filtered AND NOT proven) FROM worldfs_fragments WHERE view = 'archetype0' GROUP BY sweep_world, world, table_id ORDER BY ALL`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var w, list string
		var lo, hi, unproven int64
		if err := rows.Scan(&w, &list, &lo, &hi, &unproven); err != nil {
			return "", err
		}
		if unproven > 0 {
			return "", fmt.Errorf("world %s: %d files need the row check; the raw read would not be the views' rows", w, unproven)
		}
		parts = append(parts, fmt.Sprintf("SELECT '%s' AS world, tick, position_x FROM read_parquet([%s]) WHERE tick BETWEEN %d AND %d", w, list, lo, hi))
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return "SELECT world, tick, avg(position_x) FROM (" + strings.Join(parts, "\n  UNION ALL ") + ") GROUP BY ALL", nil
}

// sweepProcesses times fresh worldfs sql processes (this binary) on the
// sweep and on the small worlds: SELECT 1 with no kept script (cold) and
// again (warm), and the aggregate (warm, the best of the runs).
func sweepProcesses(ctx context.Context, res *sweepBench) error {
	cacheDir := filepath.Join(res.Dir, "cache-process")
	var err error
	run := func(glob, query string) (float64, uint64, error) {
		return runProcess(ctx, "sql", "--bucket", filepath.Join(res.Dir, "bucket"), "--cache-dir", cacheDir, "--worlds", glob, "--format", "csv", query)
	}
	if err := os.RemoveAll(cacheDir); err != nil {
		return err
	}
	say("fresh processes on the sweep")
	if res.ProcessColdSeconds, _, err = run("sweep-[0-9]*", "SELECT 1"); err != nil {
		return err
	}
	if res.ProcessWarmSeconds, res.ProcessPeakRSS, err = run("sweep-[0-9]*", "SELECT 1"); err != nil {
		return err
	}
	best := math.MaxFloat64
	for range res.Runs {
		d, rss, err := run("sweep-[0-9]*", sweepQuery)
		if err != nil {
			return err
		}
		best = min(best, d)
		res.QueryProcessRSS = max(res.QueryProcessRSS, rss)
	}
	res.QueryProcess = best
	say("fresh processes of the raw query (bench raw)")
	best = math.MaxFloat64
	for range res.Runs {
		d, _, err := runProcess(ctx, "bench", "raw", "--file", filepath.Join(res.Dir, rawSweepFile))
		if err != nil {
			return err
		}
		best = min(best, d)
	}
	res.RawProcess = best
	res.ProcessRatio = res.QueryProcess / res.RawProcess
	if res.Small == 0 {
		return nil
	}
	say("fresh processes on the small worlds")
	if res.SmallProcessColdSeconds, _, err = run(sweepSmallGlob, "SELECT 1"); err != nil {
		return err
	}
	res.SmallProcessWarmSeconds, res.SmallProcessPeakRSS, err = run(sweepSmallGlob, "SELECT 1")
	return err
}

// runProcess runs this binary with args as a fresh process, its output
// discarded, and returns its wall time and peak RSS (0: not measured).
func runProcess(ctx context.Context, args ...string) (float64, uint64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	what := strings.Join(args, " ")
	args = append([]string{self}, args...)
	// A child's ru_maxrss counts the memory of the process it was forked
	// from: /usr/bin/time, small, forks it and prints its own child's
	// (not installed: not measured).
	if timeBin, _ := exec.LookPath("/usr/bin/time"); timeBin != "" {
		args = append([]string{timeBin, "-f", "worldfs-bench-maxrss-kib %M"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("worldfs %.200s: %w: %s", what, err, stderr.String())
	}
	d := time.Since(start).Seconds()
	var kib uint64
	if i := strings.LastIndex(stderr.String(), "worldfs-bench-maxrss-kib "); i >= 0 {
		fmt.Sscan(stderr.String()[i+len("worldfs-bench-maxrss-kib "):], &kib)
	}
	return d, kib * 1024, nil
}

// sweepTag times a one-tick query of a late fork (views built without a
// kept script, opened, one count), pinned by the tick's number and by a
// tag naming it: the medians, and what the tag adds.
func sweepTag(ctx context.Context, b bucket.Bucket, res *sweepBench) error {
	world := sweepFork(res.Forks - 1)
	tick := res.Late + (res.Ticks-res.Late)/2
	c, err := index.Open(ctx, b, world, index.Options{NoCompactor: true})
	if err != nil {
		return err
	}
	if _, ok := c.Tip().Tag("mid"); !ok {
		if _, err := c.Tag(ctx, index.LoadFrom(b), index.DefaultRun, index.Moment{Text: "mid", Tick: &tick}, "mid", "the bench's tag"); err != nil {
			c.Close()
			return err
		}
	}
	c.Close()
	views := filepath.Join(res.Dir, "views-tag")
	// one returns the time to build the views and the whole (build, open,
	// count).
	one := func(m index.Moment) (time.Duration, time.Duration, error) {
		start := time.Now()
		s, err := wsql.Build(ctx, b, world, wsql.Options{At: &m, Only: true, Dir: views})
		if err != nil {
			return 0, 0, err
		}
		built := time.Since(start)
		db, err := wsql.Open(ctx, s)
		if err != nil {
			return 0, 0, err
		}
		defer db.Close()
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM archetype0").Scan(&n); err != nil {
			return 0, 0, err
		}
		if n != int64(res.Entities) {
			return 0, 0, fmt.Errorf("%s at %s: %d rows, want %d", world, m.Text, n, res.Entities)
		}
		return built, time.Since(start), nil
	}
	byNumber, byTag := index.Moment{Text: fmt.Sprint(tick), Tick: &tick}, index.Moment{Text: "tag:mid", Tag: "mid"}
	var tickBuild, tickAll, tagBuild, tagAll []time.Duration
	for i := range 4*res.Runs + 1 {
		// Each first every other run: neither pays the other's warm-up.
		order := []index.Moment{byNumber, byTag}
		if i%2 == 1 {
			order[0], order[1] = byTag, byNumber
		}
		for _, m := range order {
			bt, all, err := one(m)
			if err != nil {
				return err
			}
			if i == 0 {
				continue
			}
			if m.Tag != "" {
				tagBuild, tagAll = append(tagBuild, bt), append(tagAll, all)
			} else {
				tickBuild, tickAll = append(tickBuild, bt), append(tickAll, all)
			}
		}
	}
	res.TickQuerySeconds, res.TagQuerySeconds = median(tickAll).Seconds(), median(tagAll).Seconds()
	res.TickBuildSeconds, res.TagBuildSeconds = median(tickBuild).Seconds(), median(tagBuild).Seconds()
	res.TagAddsSeconds = res.TagBuildSeconds - res.TickBuildSeconds
	return nil
}

// dirSize is the bytes and files under dir.
func dirSize(dir string) (int64, int64) {
	var bytes, files int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			bytes += fi.Size()
			files++
		}
		return nil
	})
	return bytes, files
}

func printSweepBench(out io.Writer, r *sweepBench) {
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	fmt.Fprintf(out, "%d forks of %s (half at tick 0, half at tick %d) run to tick %d, %d tables × %d entities; %d small worlds; bucket %.0f MiB in %d files",
		r.Forks, sweepBase, r.Late, r.Ticks, r.Tables, r.Entities, r.Small, float64(r.BucketBytes)/(1<<20), r.BucketFiles)
	if r.GenerateSeconds > 0 {
		fmt.Fprintf(out, " (built in %.0f s)", r.GenerateSeconds)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "views of the %d forks: open %.3f s cold, %.3f s warm in process; a fresh process (SELECT 1) %.3f s cold, %.3f s warm, peak RSS %.0f MiB (goal ≤ 1 s)\n",
		r.Forks, r.OpenColdSeconds, r.OpenWarmSeconds, r.ProcessColdSeconds, r.ProcessWarmSeconds, mib(r.ProcessPeakRSS))
	fmt.Fprintf(out, "%s: %d rows in %d groups; median of %d: views %.3f s, raw read_parquet %.3f s, ratio %.2f; first run %.3f s\n",
		r.Query, r.Rows, r.Groups, r.Runs, r.ViewsSeconds, r.RawSeconds, r.Ratio, r.ViewsFirstSecond)
	fmt.Fprintf(out, "the same in fresh processes, best of %d: worldfs sql --worlds %.3f s (peak RSS %.0f MiB), raw on a plain DuckDB (bench raw) %.3f s: ratio %.2f (goal ≤ 1.5)\n",
		r.Runs, r.QueryProcess, mib(r.QueryProcessRSS), r.RawProcess, r.ProcessRatio)
	if r.Small > 0 {
		fmt.Fprintf(out, "views of %d small worlds: open %.3f s cold, %.3f s warm in process; a fresh process %.3f s cold, %.3f s warm, peak RSS %.0f MiB (goal ≤ 5 s)\n",
			r.Small, r.SmallOpenColdSeconds, r.SmallOpenWarmSeconds, r.SmallProcessColdSeconds, r.SmallProcessWarmSeconds, mib(r.SmallProcessPeakRSS))
	}
	fmt.Fprintf(out, "one tick of a fork, built, opened and counted: by number %.1f ms (build %.2f ms), by tag %.1f ms (build %.2f ms): the tag adds %.2f ms (goal ≤ 5 ms); this process's peak RSS %.0f MiB\n",
		r.TickQuerySeconds*1000, r.TickBuildSeconds*1000, r.TagQuerySeconds*1000, r.TagBuildSeconds*1000, r.TagAddsSeconds*1000, mib(r.PeakRSSBytes))
}
