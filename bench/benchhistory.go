package bench

import (
	"context"
	stdsql "database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

func historySpec(env Env) Bench {
	var url, world, self, work, compare *string
	var ticks, archetypes, entities, runs *int
	var afterOnly, synthetic *bool
	var compareAt *string
	var flags *flag.FlagSet
	return benchSpec[any]{
		name: "history",
		summary: "measure reads of a long world before and after compaction: views open, a whole-table aggregate and <table>_at(t) " +
			"(through the views, raw read_parquet, and a fresh worldfs sql process), the mount's ticks/, peak RSS, object counts",
		example: "worldfs bench history --bucket ./long --ticks 10000 --archetypes 4 --entities 50 --json > h10k.json\n" +
			"  worldfs bench history --bucket ./long --ticks 100000 --after-only --compare h10k.json",
		flags: func(fs *flag.FlagSet) {
			flags = fs
			url = env.BucketFlag(fs)
			ticks = fs.Int("ticks", 10000, "ticks of the world")
			archetypes = fs.Int("archetypes", 4, "archetypes (one table and one fragment per tick each)")
			entities = fs.Int("entities", 50, "entities per archetype (small frames: the file count is the cost)")
			world = fs.String("world", "", "world to measure (default: bench-history-<ticks>x<archetypes>x<entities>); reused if the bucket holds it")
			runs = fs.Int("runs", 3, "timed runs of the views' cold open and of each in-process query (the median is reported)")
			self = fs.String("worldfs", "", "the worldfs binary run as the fresh sql process (default: this one)")
			work = fs.String("dir", "", "work directory for the views' fragment lists, caches and mount points (default: a temporary one, removed after)")
			afterOnly = fs.Bool("after-only", false, "measure only after compaction (reading an uncompacted long history file by file takes minutes)")
			synthetic = fs.Bool("synthetic", false, "build (or reuse) worlds as a long-lived compacted world leaves them, in minutes: "+
				"every window of 4,096 ticks one compacted file per table, the tick fragments it replaced collected, a checkpoint of the tip; "+
				"measure issue 27's goals at --ticks and at each --compare-at (default --archetypes 1, --entities 8)")
			compareAt = fs.String("compare-at", "", "with --synthetic: smaller tick counts, comma-separated, built and measured in the same run (e.g. 10000,100000)")
			compare = fs.String("compare", "", "a --json report of bench history at another --ticks (e.g. 10,000): the goals then include the ratio of this run's views open to that one's")
		},
		check: func(args []string) error {
			if len(args) != 0 || *ticks < 1 || *archetypes < 1 || *entities < 1 || *runs < 1 {
				return usagef("bench history takes no arguments and positive --ticks, --archetypes, --entities and --runs")
			}
			if *compareAt != "" && !*synthetic {
				return usagef("--compare-at needs --synthetic (without it, --compare names a report of another run)")
			}
			if *synthetic && (*world != "" || *afterOnly || *compare != "") {
				return usagef("--synthetic names its own worlds and measures them compacted: --world, --after-only and --compare do not apply")
			}
			_, err := parseCompareAt(*compareAt, *ticks)
			return err
		},
		open: func(ctx context.Context) (bucket.Bucket, error) {
			if !strings.Contains(*url, "://") {
				// The fresh sql process opens the bucket by the same URL.
				if abs, err := filepath.Abs(*url); err == nil {
					*url = abs
				}
			}
			return env.OpenBucket(ctx, *url)
		},
		run: func(ctx context.Context, b bucket.Bucket) (any, error) {
			if *synthetic {
				set := map[string]bool{}
				flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
				res := &MillionReport{Bucket: *url, Archetypes: *archetypes, Entities: *entities, Runs: *runs}
				if !set["archetypes"] {
					res.Archetypes = 1
				}
				if !set["entities"] {
					res.Entities = 8
				}
				sizes, _ := parseCompareAt(*compareAt, *ticks)
				var err error
				if *self, err = selfOr(*self); err != nil {
					return nil, err
				}
				dir, remove, err := benchDir(*work, "worldfs-bench-history-")
				if err != nil {
					return nil, err
				}
				defer remove()
				if err := benchMillion(ctx, b, res, append(sizes, *ticks), *self, dir); err != nil {
					return nil, err
				}
				return res, nil
			}
			if *world == "" {
				*world = fmt.Sprintf("bench-history-%dx%dx%d", *ticks, *archetypes, *entities)
			}
			var err error
			if *self, err = selfOr(*self); err != nil {
				return nil, err
			}
			dir, remove, err := benchDir(*work, "worldfs-bench-history-")
			if err != nil {
				return nil, err
			}
			defer remove()
			h := &HistoryReport{Bucket: *url, World: *world, Ticks: *ticks, Archetypes: *archetypes, Entities: *entities, Runs: *runs}
			var base *HistoryReport
			if *compare != "" {
				data, err := os.ReadFile(*compare)
				if err != nil {
					return nil, usagef("--compare: %v", err)
				}
				if err := json.Unmarshal(data, &base); err != nil || base.After == nil {
					return nil, usagef("--compare %s: not a bench history --json report (%v)", *compare, err)
				}
			}
			if err := benchHistory(ctx, b, h, *self, dir, *afterOnly); err != nil {
				return nil, err
			}
			h.Goals = historyGoals(h, base)
			return h, nil
		},
		table: func(out io.Writer, res any) error {
			switch res := res.(type) {
			case *MillionReport:
				printMillionBench(out, res)
			case *HistoryReport:
				printHistoryBench(out, res)
			}
			return nil
		},
	}.bench()
}

// HistoryReport is the result of bench history.
type HistoryReport struct {
	Bucket     string `json:"bucket"`
	World      string `json:"world"`
	Ticks      int    `json:"ticks"`
	Archetypes int    `json:"archetypes"`
	Entities   int    `json:"entities_per_archetype"`
	Runs       int    `json:"runs"`
	// Generated: the world was built by this run (false: reused).
	Generated    bool    `json:"generated"`
	BuildSeconds float64 `json:"build_seconds,omitempty"`
	// MidTick is the tick <table>_at(t) reads; Table the table measured.
	MidTick int64  `json:"mid_tick"`
	Table   string `json:"table"`

	Before *HistoryPhase `json:"before"`
	// CompactSeconds: maintenance.Compact over the whole run (default options).
	CompactSeconds float64 `json:"compact_seconds"`
	// CompactCPUSeconds: this process's CPU time (user + system) in it.
	CompactCPUSeconds float64 `json:"compact_cpu_seconds"`
	Compaction        struct {
		Windows  int   `json:"windows"`
		Files    int   `json:"files"`
		FilesIn  int   `json:"files_replaced"`
		Rows     int64 `json:"rows"`
		BytesOut int64 `json:"bytes_written"`
		// IndexBytes: the tick indexes written beside the files.
		IndexBytes int64 `json:"tick_index_bytes"`
	} `json:"compaction"`
	After *HistoryPhase `json:"after"`
	// PeakRSSBytes: this process's peak resident set (building, compacting,
	// the in-process views and the mount).
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// Goals: issue 11's goals after compaction, each with its figure.
	Goals []historyGoal `json:"goals"`
}

// historyGoal is one goal: its figure, its bound and whether it holds.
type historyGoal struct {
	Goal  string  `json:"goal"`
	Value float64 `json:"value"`
	Bound float64 `json:"bound"`
	Met   bool    `json:"met"`
	// Note: what the figure is, where it needs saying.
	Note string `json:"note,omitempty"`
}

// HistoryPhase is what one state of the world (before or after
// compaction) costs to read.
type HistoryPhase struct {
	// ViewsOpenSeconds (the median of --runs): the catalog load (ViewsLoadSeconds), then
	// wsql.BuildFrom (plan, fragment list, script; ViewsBuildSeconds
	// includes the load) and wsql.Open (DuckDB runs the script), in
	// process, in an empty views directory: no fragment list written and
	// no file verified before (cold). The files are verified as queries
	// read them, so that cost is in the queries' first runs
	// (CountFirstSeconds, AtFirstSeconds). ViewsReusedSeconds: wsql.Build
	// reusing the script kept by a build (the catalog unchanged: what a
	// later worldfs sql does), then wsql.Open.
	ViewsOpenSeconds   float64 `json:"views_open_seconds"`
	ViewsLoadSeconds   float64 `json:"views_load_seconds"`
	ViewsBuildSeconds  float64 `json:"views_build_seconds"`
	ViewsReusedSeconds float64 `json:"views_reused_seconds"`
	// The CPU time (user + system, this process) of the same: on a busy
	// machine the figure that does not count the waits for a core.
	ViewsOpenCPU   float64 `json:"views_open_cpu_seconds"`
	ViewsReusedCPU float64 `json:"views_reused_cpu_seconds"`
	// FilesRead: the files the views read for the table (its part 0).
	FilesRead int64 `json:"files_read"`
	// Medians of Runs: count(*) over the whole table and <table>_at(MidTick)
	// through the views, then the same over read_parquet of the files the
	// views list.
	CountSeconds float64 `json:"count_seconds"`
	// The first run of each, right after the views were opened cold: it
	// verifies the files it reads (none remembered yet).
	CountFirstSeconds float64 `json:"count_first_seconds"`
	AtFirstSeconds    float64 `json:"at_first_seconds"`
	AtSeconds         float64 `json:"at_seconds"`
	RawCountSeconds   float64 `json:"raw_count_seconds"`
	RawAtSeconds      float64 `json:"raw_at_seconds"`
	CountRatio        float64 `json:"count_to_raw_ratio"`
	AtRatio           float64 `json:"at_to_raw_ratio"`
	Rows              int64   `json:"rows"`
	AtRows            int64   `json:"at_rows"`
	// SQL: <table>_at(MidTick) end to end by a fresh worldfs sql process;
	// first with an empty cache directory (it builds the views, nothing
	// verified before: cold), then on that cache directory with the kept
	// script removed (it builds the views again, the files verified and
	// the fragment lists written by the first: warm), then again (it
	// reuses the script the second kept). Its peak RSS is its VmHWM,
	// sampled every 2 ms.
	SQLFirst     historyProcess `json:"sql_first"`
	SQLBuiltWarm historyProcess `json:"sql_built_warm"`
	SQLAgain     historyProcess `json:"sql_again"`
	// The mount (fresh, in process): ls of ticks/, open + read of the
	// table's file of MidTick (MountError: why it was not measured).
	MountError       string  `json:"mount_error,omitempty"`
	LsSeconds        float64 `json:"ls_ticks_seconds"`
	LsEntries        int     `json:"ls_ticks_entries"`
	TickReadSeconds  float64 `json:"tick_open_read_seconds"`
	TickReadBytes    int64   `json:"tick_read_bytes"`
	PeakRSSBytes     uint64  `json:"peak_rss_bytes"`
	BucketObjects    int64   `json:"bucket_objects"`
	DataObjectsTable []int64 `json:"data_objects_per_table"`
	// FilesNamed: the distinct files the catalog names per table (what a
	// reader of the whole history reads).
	FilesNamed []int64 `json:"files_named_per_table"`
}

type historyProcess struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds: its user + system time.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// cpuSeconds is this process's CPU time so far (user + system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return rusageSeconds(&ru)
}

func rusageSeconds(ru *syscall.Rusage) float64 {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func benchHistory(ctx context.Context, b bucket.Bucket, h *HistoryReport, self, dir string, afterOnly bool) error {
	tables := benchTables(h.Archetypes)
	if err := historyWorld(ctx, b, h, tables); err != nil {
		return err
	}
	h.MidTick, h.Table = int64(h.Ticks/2), tables[0].Name
	var err error
	if !afterOnly {
		if h.Before, err = historyMeasure(ctx, b, h, tables, self, filepath.Join(dir, "before")); err != nil {
			return err
		}
	}
	cat, err := index.Open(ctx, b, h.World, index.Options{}) // as optimize's: see openWorld
	if err != nil {
		return err
	}
	status := progress.New(os.Stderr)
	opts := maintenance.CompactOptions{Progress: func(p maintenance.CompactProgress) {
		status.Step("bench: compacting windows", int64(p.Done), int64(p.Total))
	}}
	say("compacting")
	start, cpu := time.Now(), cpuSeconds()
	res, err := maintenance.Compact(ctx, b, cat, opts)
	status.Done()
	h.CompactSeconds, h.CompactCPUSeconds = time.Since(start).Seconds(), cpuSeconds()-cpu
	cat.Close()
	if err != nil {
		return err
	}
	c := &h.Compaction
	c.Windows, c.Files, c.FilesIn, c.Rows, c.BytesOut, c.IndexBytes = res.Windows, res.Files, res.FilesIn, res.Rows, res.BytesOut, res.IndexBytes
	if h.After, err = historyMeasure(ctx, b, h, tables, self, filepath.Join(dir, "after")); err != nil {
		return err
	}
	if h.Before != nil && (h.Before.Rows != h.After.Rows || h.Before.AtRows != h.After.AtRows) {
		return fmt.Errorf("compaction changed the answers: %d rows (%d at tick %d) before, %d (%d) after",
			h.Before.Rows, h.Before.AtRows, h.MidTick, h.After.Rows, h.After.AtRows)
	}
	h.PeakRSSBytes = peakRSS()
	return nil
}

// historyWorld builds the world (uncompacted: no background maintenance)
// or reuses it; a world left with fewer ticks (a generation stopped
// midway) is resumed and continued, so a long world can be generated in
// several sittings.
func historyWorld(ctx context.Context, b bucket.Bucket, h *HistoryReport, tables []*engine.Table) error {
	opts := engine.Options{NoMaintenance: true}
	var w *engine.World
	done := int64(0)
	if _, err := index.ReadMarker(ctx, b, h.World); err == nil {
		s, _, err := index.Load(ctx, b, h.World)
		if err != nil {
			return err
		}
		r, _ := s.Run("main")
		if r.Published >= int64(h.Ticks) {
			say("reusing world %s (%d ticks)", h.World, r.Published)
			return nil
		}
		if r.Published < 1 {
			return fmt.Errorf("world %s exists without a tick; name another with --world", h.World)
		}
		say("continuing world %s from tick %d", h.World, r.Head)
		if w, err = engine.ResumeWorld(ctx, b, h.World, tables, opts); err != nil {
			return err
		}
		done = r.Published
	} else if !errors.Is(err, bucket.ErrNotExist) {
		return err
	} else {
		if w, err = engine.CreateWorld(ctx, b, h.World, tables, opts); err != nil {
			return err
		}
		for k, t := range tables {
			for i := range h.Entities {
				if _, err := w.Spawn(t.Name, engine.Values{"position_x": float64(i), "velocity_y": 1.0, fmt.Sprintf("kind%d_id", k): int64(i)}); err != nil {
					w.Close()
					return err
				}
			}
		}
	}
	defer w.Close()
	h.Generated = true
	if err := w.AddProcessor(historyStep(tables)); err != nil {
		return err
	}
	// Progress on a terminal; the rate once built, wherever stderr goes.
	status := progress.New(os.Stderr)
	desc := fmt.Sprintf("bench: world %s: ticks", h.World)
	start := time.Now()
	// Ticks are submitted, not stepped: up to the world's depth of them
	// compute and append while the ones before publish.
	for i := done; i < int64(h.Ticks); i++ {
		if _, err := w.Submit(ctx); err != nil {
			status.Done()
			return err
		}
		status.Step(desc, i+1, int64(h.Ticks))
	}
	_, err := w.Flush(ctx)
	status.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: world %s: %d ticks (%.0f ticks/s)\n", h.World, h.Ticks, float64(int64(h.Ticks)-done)/time.Since(start).Seconds())
	h.BuildSeconds = time.Since(start).Seconds()
	return nil
}

// historyStep is the bench world's system: every entity moves by its
// velocity.
func historyStep(tables []*engine.Table) engine.Processor {
	return func(tc *engine.TickContext) error {
		for _, t := range tables {
			f := tc.Frame(t.Name)
			x, y := f.Float64("position_x"), f.Float64("position_y")
			vx, vy := f.Float64("velocity_x"), f.Float64("velocity_y")
			for i := range x {
				x[i] += vx[i] * 0.01
				y[i] += vy[i] * 0.01
			}
		}
		return nil
	}
}

// historyMeasure measures one state of the world.
func historyMeasure(ctx context.Context, b bucket.Bucket, h *HistoryReport, tables []*engine.Table, self, dir string) (*HistoryPhase, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ph := &HistoryPhase{}
	name := ident(h.Table)
	filesVar := "'worldfs_files_" + h.Table + "_0'"
	db, st, err := historyOpenViews(ctx, b, h, ph, dir)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if ph.ViewsReusedSeconds, ph.ViewsReusedCPU, err = historyReused(ctx, b, h, dir); err != nil {
		return nil, err
	}
	if err := db.QueryRowContext(ctx, "SELECT len(getvariable("+filesVar+"))").Scan(&ph.FilesRead); err != nil {
		return nil, err
	}
	if err := historyQueries(ctx, db, h, ph, filesVar, name); err != nil {
		return nil, err
	}

	// A fresh worldfs sql process, three times on one cache directory.
	cacheDir := filepath.Join(dir, "sql-cache")
	for _, p := range []*historyProcess{&ph.SQLFirst, &ph.SQLBuiltWarm, &ph.SQLAgain} {
		if p == &ph.SQLBuiltWarm {
			// The kept scripts go, the rest of the cache stays: the next
			// process builds the views, on warm verification records.
			if err := os.RemoveAll(filepath.Join(cacheDir, "objects", cache.KeptPrefix)); err != nil {
				return nil, err
			}
		}
		if err := historySQL(ctx, self, h, cacheDir, ph.AtRows, p); err != nil {
			return nil, err
		}
	}

	if err := historyMount(ctx, b, h, ph, dir); err != nil {
		ph.MountError = err.Error()
		say("the mount was not measured: %v", err)
	}

	if err := historyObjects(ctx, b, h, st, tables, ph); err != nil {
		return nil, err
	}
	ph.PeakRSSBytes = peakRSS()
	return ph, nil
}

// historyOpenViews opens the views h.Runs times, each cold (a views
// directory of its own), into ph's medians; the last stays open for the
// queries, and st is the state it was built from.
func historyOpenViews(ctx context.Context, b bucket.Bucket, h *HistoryReport, ph *HistoryPhase, dir string) (db *stdsql.DB, st *index.State, err error) {
	var load, build, open, cpus []time.Duration
	for i := range h.Runs {
		say("opening the views (%d of %d)", i+1, h.Runs)
		if db != nil {
			db.Close()
		}
		start, cpu := time.Now(), cpuSeconds()
		var err error
		if st, _, err = index.Load(ctx, b, h.World); err != nil {
			return nil, nil, err
		}
		load = append(load, time.Since(start))
		s, err := wsql.BuildFrom(ctx, b, st, wsql.Options{Dir: filepath.Join(dir, fmt.Sprint("views-cold-", i))})
		if err != nil {
			return nil, nil, err
		}
		build = append(build, time.Since(start))
		if db, err = wsql.Open(ctx, s); err != nil {
			return nil, nil, err
		}
		open = append(open, time.Since(start))
		cpus = append(cpus, time.Duration((cpuSeconds()-cpu)*float64(time.Second)))
	}
	ph.ViewsLoadSeconds, ph.ViewsBuildSeconds = median(load).Seconds(), median(build).Seconds()
	ph.ViewsOpenSeconds, ph.ViewsOpenCPU = median(open).Seconds(), median(cpus).Seconds()
	return db, st, nil
}

// historyQueries times the whole-table count and <table>_at through the
// views and as raw read_parquet of the same files, into ph.
func historyQueries(ctx context.Context, db *stdsql.DB, h *HistoryReport, ph *HistoryPhase, filesVar, name string) error {
	queries := []struct {
		what, q string
		secs    *float64
		rows    *int64
	}{
		{"count(*)", "SELECT count(*) FROM " + name, &ph.CountSeconds, &ph.Rows},
		{"_at", fmt.Sprintf("SELECT count(*) FROM %s(%d)", ident(h.Table+"_at"), h.MidTick), &ph.AtSeconds, &ph.AtRows},
		{"raw count(*)", "SELECT count(*) FROM read_parquet(getvariable(" + filesVar + "))", &ph.RawCountSeconds, nil},
		{"raw _at", fmt.Sprintf("SELECT count(*) FROM read_parquet(getvariable(%s)) WHERE tick = %d", filesVar, h.MidTick), &ph.RawAtSeconds, nil},
	}
	// The queries take turns, round after round, so that a drift of the
	// machine's speed touches the views' and the raw reads alike; the
	// first round warms the page cache (and verifies the files the views
	// read: CountFirstSeconds, AtFirstSeconds).
	ds := make([][]time.Duration, len(queries))
	for i := range h.Runs + 1 {
		say("timing the queries (round %d of %d)", i+1, h.Runs+1)
		for k, q := range queries {
			var n int64
			t0 := time.Now()
			if err := db.QueryRowContext(ctx, q.q).Scan(&n); err != nil {
				return fmt.Errorf("%s: %w", q.q, err)
			}
			if i > 0 {
				ds[k] = append(ds[k], time.Since(t0))
			} else if k == 0 {
				ph.CountFirstSeconds = time.Since(t0).Seconds()
			} else if k == 1 {
				ph.AtFirstSeconds = time.Since(t0).Seconds()
			}
			if q.rows != nil {
				*q.rows = n
			}
		}
	}
	for k, q := range queries {
		*q.secs = median(ds[k]).Seconds()
	}
	// The raw reads read every file the views list, compacted or not;
	// they equal the views only where no file holds rows the views hide.
	ph.CountRatio = ph.CountSeconds / ph.RawCountSeconds
	ph.AtRatio = ph.AtSeconds / ph.RawAtSeconds
	return nil
}

// historySQL runs <table>_at(MidTick) in a fresh worldfs sql process
// (self) on cacheDir, into p: its time, CPU and peak RSS; it must answer
// atRows, as the views in process did.
func historySQL(ctx context.Context, self string, h *HistoryReport, cacheDir string, atRows int64, p *historyProcess) error {
	q := fmt.Sprintf("SELECT count(*) AS n FROM %s(%d)", ident(h.Table+"_at"), h.MidTick)
	say("a fresh worldfs sql: %s", q)
	proc, out, err := freshProcess(ctx, self, "sql", "--bucket", h.Bucket, "--world", h.World, "--cache-dir", cacheDir, "--format", "csv", q)
	*p = proc
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("n\n%d\n", atRows); out != want {
		return fmt.Errorf("worldfs sql answered %q, the views in process %q", out, want)
	}
	return nil
}

// historyObjects counts the bucket's objects, and per table its data
// objects and the files the catalog names, into ph.
func historyObjects(ctx context.Context, b bucket.Bucket, h *HistoryReport, st *index.State, tables []*engine.Table, ph *HistoryPhase) error {
	say("counting objects")
	for _, err := range b.List(ctx, "", "") {
		if err != nil {
			return err
		}
		ph.BucketObjects++
	}
	for _, t := range tables {
		var n int64
		for a, err := range b.List(ctx, index.RunDataPrefix(h.World, "main")+t.ID+"/", "") {
			if err != nil {
				return err
			}
			if strings.HasSuffix(a.Name, ".parquet") {
				n++
			}
		}
		ph.DataObjectsTable = append(ph.DataObjectsTable, n)
		named := map[string]bool{}
		var err error
		st.Ticks("main", 0, func(tk *index.Tick) bool {
			var tickTables []index.TableFragments
			if tickTables, err = tk.Tables(); err != nil {
				return false
			}
			for _, tf := range tickTables {
				if tf.Table == t.ID {
					for _, f := range tf.Fragments {
						named[f.Path] = true
					}
				}
			}
			return true
		})
		if err != nil {
			return err
		}
		ph.FilesNamed = append(ph.FilesNamed, int64(len(named)))
	}
	return nil
}

// historyReused times the views opened from a kept script: a build keeps
// it (in a cache of dir's), then Build reuses it and Open runs it.
func historyReused(ctx context.Context, b bucket.Bucket, h *HistoryReport, dir string) (secs, cpu float64, err error) {
	c, err := cache.Open(filepath.Join(dir, "reuse-cache"), cache.Options{})
	if err != nil {
		return 0, 0, err
	}
	opts := wsql.Options{Dir: filepath.Join(dir, "views"), Reuse: c}
	if _, err := wsql.Build(ctx, b, h.World, opts); err != nil {
		return 0, 0, err
	}
	builds := wsql.Builds()
	start, cpu0 := time.Now(), cpuSeconds()
	s, err := wsql.Build(ctx, b, h.World, opts)
	if err != nil {
		return 0, 0, err
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		return 0, 0, err
	}
	secs, cpu = time.Since(start).Seconds(), cpuSeconds()-cpu0
	db.Close()
	if wsql.Builds() != builds {
		return 0, 0, errors.New("the views were built again, not reused, though the catalog did not change")
	}
	return secs, cpu, nil
}

// historyGoals returns issue 11's goals after compaction with h's
// figures (the bounds are the goals at N = 100,000), and the ratio of
// the views open time to base's (a run at another N), if given.
func historyGoals(h *HistoryReport, base *HistoryReport) []historyGoal {
	ph := h.After
	if ph == nil {
		return nil
	}
	g := func(goal string, v, bound float64, note string) historyGoal {
		return historyGoal{Goal: goal, Value: v, Bound: bound, Met: v <= bound, Note: note}
	}
	var maxObjects int64
	for _, n := range ph.DataObjectsTable {
		maxObjects = max(maxObjects, n)
	}
	goals := []historyGoal{
		g("views open, built from the catalog (s)", ph.ViewsOpenSeconds, 0.3, fmt.Sprintf("in process, cold (an empty views directory): catalog load, build, DuckDB runs the script; CPU %.3f s", ph.ViewsOpenCPU)),
		g("views open, kept script reused (s)", ph.ViewsReusedSeconds, 0.3, fmt.Sprintf("in process, the catalog unchanged; CPU %.3f s", ph.ViewsReusedCPU)),
	}
	if base != nil && base.After != nil && base.After.ViewsOpenSeconds > 0 {
		cpuRatio := func(v, b float64) string {
			if b <= 0 {
				return ""
			}
			return fmt.Sprintf("CPU ratio %.2f", v/b)
		}
		goals = append(goals, g(fmt.Sprintf("views open, built: ratio to N = %d", base.Ticks), ph.ViewsOpenSeconds/base.After.ViewsOpenSeconds, 1.5,
			cpuRatio(ph.ViewsOpenCPU, base.After.ViewsOpenCPU)))
		if base.After.ViewsReusedSeconds > 0 {
			goals = append(goals, g(fmt.Sprintf("views open, reused: ratio to N = %d", base.Ticks), ph.ViewsReusedSeconds/base.After.ViewsReusedSeconds, 1.5,
				cpuRatio(ph.ViewsReusedCPU, base.After.ViewsReusedCPU)))
		}
	}
	goals = append(goals,
		g(fmt.Sprintf("fresh worldfs sql %s_at(%d), views built, cold (s)", h.Table, h.MidTick), ph.SQLFirst.Seconds, 0.5,
			fmt.Sprintf("an empty cache directory (no file verified before); CPU %.3f s", ph.SQLFirst.CPUSeconds)),
		g(fmt.Sprintf("fresh worldfs sql %s_at(%d), views built, warm (s)", h.Table, h.MidTick), ph.SQLBuiltWarm.Seconds, 0.5,
			fmt.Sprintf("the cache directory of the run before, its kept script removed (files verified, lists written); CPU %.3f s", ph.SQLBuiltWarm.CPUSeconds)),
		g(fmt.Sprintf("fresh worldfs sql %s_at(%d), views reused (s)", h.Table, h.MidTick), ph.SQLAgain.Seconds, 0.5,
			fmt.Sprintf("the cache directory of the run before; CPU %.3f s", ph.SQLAgain.CPUSeconds)),
		g("whole-table count(*) / raw read_parquet", ph.CountRatio, 1.15, "over the files the views list"),
		g("peak RSS of worldfs sql (MiB)", float64(max(ph.SQLFirst.PeakRSSBytes, ph.SQLBuiltWarm.PeakRSSBytes, ph.SQLAgain.PeakRSSBytes))/(1<<20), 300, ""),
		g("data objects per table", float64(maxObjects), float64(h.Ticks/4096+1024), "N / 4,096 + 1,024"),
	)
	return goals
}

// historyMount mounts the bucket (fresh, in process) and times ls of the
// run's ticks/ and open + read of the table's file of the middle tick.
func historyMount(ctx context.Context, b bucket.Bucket, h *HistoryReport, ph *HistoryPhase, dir string) error {
	mnt, _, done, err := benchMount(b, dir, "mount", wfs.Options{}, wfs.MountOptions{})
	if err != nil {
		return err
	}
	defer done()
	ticks := filepath.Join(mnt, h.World, "runs", "main", "ticks")
	say("ls %s", ticks)
	start := time.Now()
	out, err := exec.CommandContext(ctx, "ls", ticks).Output()
	if err != nil {
		return fmt.Errorf("ls %s: %w", ticks, err)
	}
	ph.LsSeconds = time.Since(start).Seconds()
	ph.LsEntries = strings.Count(string(out), "\n")
	p := filepath.Join(ticks, wfs.TickName(h.MidTick), h.Table+".parquet")
	start = time.Now()
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	ph.TickReadSeconds = time.Since(start).Seconds()
	ph.TickReadBytes = int64(len(data))
	return nil
}

// vmHWM is the peak resident set of process pid so far (0 once it is
// gone).
func vmHWM(pid int) int64 { return procStatus(pid, "VmHWM:") }

// vmRSS is the resident set of process pid now (0 once it is gone).
func vmRSS(pid int) int64 { return procStatus(pid, "VmRSS:") }

// procStatus reads one size (kB) of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

// ident quotes a SQL identifier.
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func printHistoryBench(out io.Writer, h *HistoryReport) {
	fmt.Fprintf(out, "world %s: %d ticks × %d archetypes × %d entities; %s measured at tick %d\n", h.World, h.Ticks, h.Archetypes, h.Entities, h.Table, h.MidTick)
	for _, p := range []struct {
		name string
		ph   *HistoryPhase
	}{{"before compaction", h.Before}, {"after compaction", h.After}} {
		ph := p.ph
		if ph == nil {
			fmt.Fprintf(out, "%s: not measured (--after-only)\n", p.name)
			continue
		}
		fmt.Fprintf(out, "%s: views open, built cold %.3f s (catalog load %.3f s, build %.3f s with it; reused %.3f s), %d files read by the table\n",
			p.name, ph.ViewsOpenSeconds, ph.ViewsLoadSeconds, ph.ViewsBuildSeconds, ph.ViewsReusedSeconds, ph.FilesRead)
		fmt.Fprintf(out, "  count(*) %.3f s (raw %.3f s, ratio %.2f); _at(t) %.3f s (raw %.3f s, ratio %.2f); first runs, verifying cold: %.3f s, %.3f s\n",
			ph.CountSeconds, ph.RawCountSeconds, ph.CountRatio, ph.AtSeconds, ph.RawAtSeconds, ph.AtRatio, ph.CountFirstSeconds, ph.AtFirstSeconds)
		fmt.Fprintf(out, "  worldfs sql _at(t): built cold %.3f s, peak RSS %.0f MiB; built warm %.3f s, %.0f MiB; reused %.3f s, %.0f MiB\n",
			ph.SQLFirst.Seconds, float64(ph.SQLFirst.PeakRSSBytes)/(1<<20), ph.SQLBuiltWarm.Seconds, float64(ph.SQLBuiltWarm.PeakRSSBytes)/(1<<20),
			ph.SQLAgain.Seconds, float64(ph.SQLAgain.PeakRSSBytes)/(1<<20))
		if ph.MountError != "" {
			fmt.Fprintf(out, "  mount: not measured (%s)\n", ph.MountError)
		} else {
			fmt.Fprintf(out, "  mount: ls ticks/ %.3f s (%d entries), open + read of a tick's file %.3f s (%d bytes)\n",
				ph.LsSeconds, ph.LsEntries, ph.TickReadSeconds, ph.TickReadBytes)
		}
		fmt.Fprintf(out, "  bucket objects %d; data objects per table %v; files the catalog names per table %v; peak RSS %.0f MiB\n",
			ph.BucketObjects, ph.DataObjectsTable, ph.FilesNamed, float64(ph.PeakRSSBytes)/(1<<20))
	}
	fmt.Fprintf(out, "compaction: %.3f s, %d windows, %d files replace %d; %d bytes written, %d of them tick indexes\n", h.CompactSeconds,
		h.Compaction.Windows, h.Compaction.Files, h.Compaction.FilesIn, h.Compaction.BytesOut+h.Compaction.IndexBytes, h.Compaction.IndexBytes)
	fmt.Fprintf(out, "goals after compaction (the bounds are issue 11's, at N = 100,000; this run N = %d):\n", h.Ticks)
	for _, g := range h.Goals {
		met := "met"
		if !g.Met {
			met = "NOT met"
		}
		note := ""
		if g.Note != "" {
			note = "; " + g.Note
		}
		fmt.Fprintf(out, "  %-58s %10.3f  (<= %g: %s%s)\n", g.Goal, g.Value, g.Bound, met, note)
	}
}
