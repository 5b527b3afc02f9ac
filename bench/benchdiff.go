package bench

import (
	"context"
	stdsql "database/sql"
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
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

func diffSpec(env Env) Bench {
	var url, world, fork, self, work, rawFiles, rawQuery *string
	var runs *int
	var after *int64
	return benchSpec[*diffBench]{
		name: "diff",
		summary: "measure changes over time and across worlds on a long world (as bench history builds): a diff of adjacent ticks and of ticks half the history apart, " +
			"a fork against its parent, one entity's trajectory (against raw read_parquet of the same files), _changes over 1,000 ticks; each a fresh worldfs sql process",
		example: "worldfs bench history --bucket ./long --ticks 10000 --after-only --json > h10k.json\n" +
			"  worldfs bench diff --bucket ./long --world bench-history-10000x4x50 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "the long world to measure (built by bench history; required)")
			fork = fs.String("fork", "", "its fork (default <world>-fork): made if missing, forked --after ticks before the head and run to the head")
			after = fs.Int64("after", 1000, "how many ticks the fork runs past its fork point (the diff compares the fork and its parent there)")
			runs = fs.Int("runs", 5, "fresh processes per query (the median is reported)")
			self = fs.String("worldfs", "", "the worldfs binary run as the fresh sql process (default: this one)")
			work = fs.String("dir", "", "work directory for the processes' caches (default: a temporary one, removed after)")
			rawFiles = fs.String("raw-files", "", "(internal) run the raw read_parquet baseline over the files listed in this file, and exit")
			rawQuery = fs.String("raw-query", "", "(internal) the baseline's query, with FILES where the list goes")
		},
		check: func(args []string) error {
			if len(args) != 0 || *runs < 1 || *after < 1 {
				return usagef("bench diff takes no arguments and positive --runs and --after")
			}
			if *rawFiles == "" && *world == "" {
				return usagef("bench diff: --world is required")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) {
			if *rawFiles != "" {
				return env.OpenBucket(ctx, "mem://raw-baseline") // the baseline reads files, not a bucket
			}
			if !strings.Contains(*url, "://") {
				if abs, err := filepath.Abs(*url); err == nil {
					*url = abs
				}
			}
			return env.OpenBucket(ctx, *url)
		},
		run: func(ctx context.Context, b bucket.Bucket) (*diffBench, error) {
			if *rawFiles != "" {
				return nil, rawBaseline(ctx, *rawFiles, *rawQuery)
			}
			if *fork == "" {
				*fork = *world + "-fork"
			}
			var err error
			if *self, err = selfOr(*self); err != nil {
				return nil, err
			}
			dir, remove, err := benchDir(*work, "worldfs-bench-diff-")
			if err != nil {
				return nil, err
			}
			defer remove()
			d := &diffBench{Bucket: *url, World: *world, Fork: *fork, Runs: *runs}
			return d, benchDiff(ctx, b, d, *self, dir, *after)
		},
		table: func(out io.Writer, d *diffBench) error {
			if d == nil {
				return nil
			}
			fmt.Fprintf(out, "world %s (head %d), fork %s at %d; %s, entity %d; medians of %d fresh processes\n", d.World, d.Head, d.Fork, d.ForkTick, d.Table, d.Entity, d.Runs)
			for _, q := range d.Queries {
				fmt.Fprintf(out, "  %-44s %7.3f s (first %6.3f s, CPU %6.3f s, %d rows)  bound %.2f s met %v\n", q.What, q.Seconds, q.FirstSeconds, q.CPUSeconds, q.Rows, q.Bound, q.Met)
			}
			fmt.Fprintf(out, "  trajectory / raw read_parquet, fresh processes: %.2f (bound 1.2); in process: %.2f (%.4f s / %.4f s)\n",
				d.TrajectoryRatio, d.InProcessRatio, d.InProcessViews, d.InProcessRaw)
			return nil
		},
	}.bench()
}

// diffBench is the result of bench diff.
type diffBench struct {
	Bucket   string `json:"bucket"`
	World    string `json:"world"`
	Fork     string `json:"fork"`
	Head     int64  `json:"head"`
	ForkTick int64  `json:"fork_tick"`
	Runs     int    `json:"runs"`
	Table    string `json:"table"`
	Entity   int64  `json:"entity"`
	// Queries: each timed in fresh worldfs sql processes (the first
	// builds the views, the later ones reuse the kept script).
	Queries []diffBenchQuery `json:"queries"`
	// TrajectoryRatio: the trajectory through the views over raw
	// read_parquet of the same files with the same filter, each a fresh
	// process (medians); InProcess*: the same two queries in one process,
	// taking turns.
	TrajectoryRatio float64 `json:"trajectory_to_raw_ratio"`
	InProcessViews  float64 `json:"in_process_views_seconds"`
	InProcessRaw    float64 `json:"in_process_raw_seconds"`
	InProcessRatio  float64 `json:"in_process_ratio"`
}

type diffBenchQuery struct {
	What         string   `json:"what"`
	Worlds       []string `json:"worlds"`
	Query        string   `json:"query"`
	Seconds      float64  `json:"seconds"`
	FirstSeconds float64  `json:"first_seconds"`
	CPUSeconds   float64  `json:"cpu_seconds"`
	Rows         int64    `json:"rows"`
	Bound        float64  `json:"bound_seconds"`
	Met          bool     `json:"met"`
}

// benchDiff makes the fork if missing, then times the queries.
func benchDiff(ctx context.Context, b bucket.Bucket, d *diffBench, self, dir string, after int64) error {
	s, _, err := index.Load(ctx, b, d.World)
	if err != nil {
		return err
	}
	r, ok := s.Run("main")
	if !ok || r.Head < after+2 {
		return fmt.Errorf("world %s: too few ticks for a fork %d ticks before its head", d.World, after)
	}
	d.Head, d.ForkTick = r.Head, r.Head-after
	tables, err := benchWorldTables(ctx, b, d.World)
	if err != nil {
		return err
	}
	d.Table = tables[0].Name
	if _, err := index.ReadMarker(ctx, b, d.Fork); err != nil {
		if err := diffFork(ctx, b, d, tables, after); err != nil {
			return err
		}
	}
	mid := d.Head / 2
	d.Entity = 7
	t := ident(d.Table)
	trajectory := fmt.Sprintf("SELECT tick, position_x, position_y FROM %s WHERE entity_id = %d ORDER BY tick", t, d.Entity)
	queries := []diffBenchQuery{
		{What: "diff of adjacent ticks", Worlds: []string{d.World}, Query: fmt.Sprintf("FROM %s(%d, %d)", ident(d.Table+"_diff"), mid, mid+1), Bound: 0.3},
		{What: fmt.Sprintf("diff of ticks %d apart", d.Head/2), Worlds: []string{d.World}, Query: fmt.Sprintf("FROM %s(%d, %d)", ident(d.Table+"_diff"), d.Head/4, d.Head/4+d.Head/2), Bound: 0.3},
		{What: fmt.Sprintf("fork against parent %d ticks after the fork", after), Worlds: []string{d.World, d.Fork},
			Query: fmt.Sprintf("FROM worldfs_diff(%s, %s, %d, %s, %d)", lit(d.Table), lit(d.World), d.Head, lit(d.Fork), d.Head), Bound: 0.3},
		{What: "one entity's trajectory", Worlds: []string{d.World}, Query: trajectory, Bound: 0.3},
		{What: "_changes over 1,000 ticks", Worlds: []string{d.World}, Query: fmt.Sprintf("FROM %s(%d, %d)", ident(d.Table+"_changes"), mid, mid+999), Bound: 1},
	}
	// The raw baseline reads the files the view reads, with the same
	// filter: the list from the views in process.
	views, err := openViews(ctx, b, d.World, filepath.Join(dir, "views"))
	if err != nil {
		return err
	}
	defer views.Close()
	listFile := filepath.Join(dir, "raw-files.txt")
	if err := writeRawFiles(ctx, views, d.Table, listFile); err != nil {
		return err
	}
	rawQuery := fmt.Sprintf("SELECT tick, position_x, position_y FROM read_parquet(FILES) WHERE entity_id = %d ORDER BY tick", d.Entity)

	cacheDir := filepath.Join(dir, "sql-cache")
	for i := range queries {
		q := &queries[i]
		if err := timeDiffQuery(ctx, self, d, cacheDir, q); err != nil {
			return err
		}
	}
	d.Queries = queries
	// The raw baseline in fresh processes, then both in this one, taking
	// turns.
	var raw []time.Duration
	for range d.Runs + 1 {
		wall, _, out, err := timeProcess(ctx, self, "bench", "diff", "--raw-files", listFile, "--raw-query", rawQuery)
		if err != nil {
			return fmt.Errorf("raw baseline: %w", err)
		}
		if got := int64(strings.Count(out, "\n")); got != queries[3].Rows {
			return fmt.Errorf("the raw baseline read %d rows, the views %d", got, queries[3].Rows)
		}
		raw = append(raw, wall)
	}
	d.TrajectoryRatio = queries[3].Seconds / median(raw[1:]).Seconds()
	inRaw := strings.Replace(rawQuery, "FILES", "getvariable('worldfs_files_"+d.Table+"_0')", 1)
	if d.InProcessViews, d.InProcessRaw, err = takeTurns(ctx, views, trajectory, inRaw, d.Runs); err != nil {
		return err
	}
	d.InProcessRatio = d.InProcessViews / d.InProcessRaw
	return nil
}

// takeTurns runs the views' query and the raw one in views' process,
// taking turns, runs+1 times each, and returns the medians of the last
// runs, in seconds.
func takeTurns(ctx context.Context, views *stdsql.DB, viewsQuery, rawQuery string, runs int) (viewsSecs, rawSecs float64, err error) {
	var vs, rs []time.Duration
	for k := range runs + 1 {
		for j, q := range []string{viewsQuery, rawQuery} {
			t0 := time.Now()
			var n int64
			if err := views.QueryRowContext(ctx, "SELECT count(*) FROM ("+q+")").Scan(&n); err != nil {
				return 0, 0, err
			}
			if k == 0 {
				continue
			}
			if j == 0 {
				vs = append(vs, time.Since(t0))
			} else {
				rs = append(rs, time.Since(t0))
			}
		}
	}
	return median(vs).Seconds(), median(rs).Seconds(), nil
}

// diffFork forks d.World at d.ForkTick into d.Fork and runs the fork
// after ticks.
func diffFork(ctx context.Context, b bucket.Bucket, d *diffBench, tables []*engine.Table, after int64) error {
	say("forking %s at tick %d into %s and running it %d ticks", d.World, d.ForkTick, d.Fork, after)
	w, err := engine.ForkWorld(ctx, b, d.World, d.Fork, "main", d.ForkTick, tables, engine.Options{NoMaintenance: true})
	if err != nil {
		return err
	}
	if err := w.AddProcessor(historyStep(tables)); err != nil {
		w.Close()
		return err
	}
	for range after {
		if _, err := w.Submit(ctx); err != nil {
			w.Close()
			return err
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return nil
}

// writeRawFiles writes to listFile the files the views read for table
// (one part only), one a line: what the raw baseline reads.
func writeRawFiles(ctx context.Context, views *stdsql.DB, table, listFile string) error {
	var n int
	if err := views.QueryRowContext(ctx, "SELECT count(*) FROM worldfs_fragments WHERE view = ? AND part > 0", table).Scan(&n); err != nil || n > 0 {
		return fmt.Errorf("table %s has files of several parts (%d, %v): the raw baseline reads one", table, n, err)
	}
	var files []string
	rows, err := views.QueryContext(ctx, "SELECT unnest(getvariable('worldfs_files_"+table+"_0'))")
	if err != nil {
		return err
	}
	for rows.Next() {
		var p string
		rows.Scan(&p)
		files = append(files, p)
	}
	rows.Close()
	return os.WriteFile(listFile, []byte(strings.Join(files, "\n")), 0o644)
}

// timeDiffQuery times q in fresh worldfs sql processes (self), the first
// on its own and then d.Runs more whose medians are reported.
func timeDiffQuery(ctx context.Context, self string, d *diffBench, cacheDir string, q *diffBenchQuery) error {
	say("%s: %s", q.What, q.Query)
	args := []string{"sql", "--bucket", d.Bucket, "--cache-dir", cacheDir, "--format", "csv"}
	for _, w := range q.Worlds {
		args = append(args, "--world", w)
	}
	args = append(args, q.Query)
	var secs, cpus []time.Duration
	for k := range d.Runs + 1 {
		wall, cpu, out, err := timeProcess(ctx, self, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", q.Query, err)
		}
		q.Rows = int64(strings.Count(out, "\n") - 1)
		if k == 0 {
			q.FirstSeconds = wall.Seconds()
			continue
		}
		secs, cpus = append(secs, wall), append(cpus, cpu)
	}
	q.Seconds, q.CPUSeconds = median(secs).Seconds(), median(cpus).Seconds()
	q.Met = q.Seconds <= q.Bound
	return nil
}

// benchWorldTables returns the tables of a bench history world.
func benchWorldTables(ctx context.Context, b bucket.Bucket, world string) ([]*engine.Table, error) {
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return nil, err
	}
	tables := benchTables(len(ids))
	for _, t := range tables {
		if _, err := frame.ReadTableInfo(ctx, b, world, t.ID); err != nil {
			return nil, fmt.Errorf("world %s is not a bench history world (no table %s): %w", world, t.Name, err)
		}
	}
	return tables, nil
}

// openViews opens the views of world in process.
func openViews(ctx context.Context, b bucket.Bucket, world, dir string) (*stdsql.DB, error) {
	s, err := wsql.Build(ctx, b, world, wsql.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	return wsql.Open(ctx, s)
}

// timeProcess runs self with args and returns its wall and CPU time and
// its output.
func timeProcess(ctx context.Context, self string, args ...string) (wall, cpu time.Duration, out string, err error) {
	cmd := exec.CommandContext(ctx, self, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err = cmd.Run()
	wall = time.Since(t0)
	if err != nil {
		return 0, 0, "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(rusageSeconds(ru) * float64(time.Second))
	}
	return wall, cpu, stdout.String(), nil
}

// rawBaseline runs query (FILES replaced by the files listed in list) in
// a plain DuckDB and prints its rows, one a line.
func rawBaseline(ctx context.Context, list, query string) error {
	data, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	var quoted []string
	for _, p := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		quoted = append(quoted, lit(p))
	}
	db, err := stdsql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, strings.Replace(query, "FILES", "["+strings.Join(quoted, ", ")+"]", 1))
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		fmt.Println(vals...)
	}
	return rows.Err()
}

// lit is s as a SQL string literal.
func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
