package bench

import (
	"context"
	stdsql "database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/maintenance/maintenancetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// The synthetic mode of bench history (issue 27): worlds of N ticks whose
// history is what a long-lived compacted world leaves (every window of
// 4,096 ticks one compacted file per table, with its tick index; the tick
// fragments it replaced collected; a checkpoint of the tip), built in
// minutes through the catalog's own commit path and the engine's
// compaction writer, then measured at each N in one run.

// MillionReport is the result of bench history --synthetic.
type MillionReport struct {
	Bucket     string `json:"bucket"`
	Archetypes int    `json:"archetypes"`
	Entities   int    `json:"entities_per_archetype"`
	Runs       int    `json:"runs"`
	// LoadAverage is the machine's 1-minute load average at the start and
	// at the end of the run.
	LoadAverage [2]float64 `json:"load_average"`
	// Points, by ascending N.
	Points []*MillionPoint `json:"points"`
	Goals  []MillionGoal   `json:"goals"`
}

// MillionGoal is one goal of issue 27: its figure, its bound and whether
// it holds.
type MillionGoal struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Bound float64 `json:"bound"`
	Met   bool    `json:"met"`
	Note  string  `json:"note,omitempty"`
}

// MillionPoint is what one world of N ticks costs to read. Times are
// medians of Runs.
type MillionPoint struct {
	Ticks        int     `json:"ticks"`
	World        string  `json:"world"`
	Generated    bool    `json:"generated"`
	BuildSeconds float64 `json:"build_seconds,omitempty"`
	MidTick      int64   `json:"mid_tick"`
	Table        string  `json:"table"`
	// LoadSeconds: a cold index.Load of the whole state; LoadPeakHeap its
	// peak heap and LoadHeldBytes what it added to the live heap (the state
	// kept, after a collection).
	LoadSeconds   float64 `json:"load_seconds"`
	LoadPeakHeap  uint64  `json:"load_peak_heap_bytes"`
	LoadHeldBytes uint64  `json:"load_held_bytes"`
	// TickLoadSeconds: a cold load of what a reader of MidTick needs
	// then the tick read; TickHeldBytes what it added to the live heap,
	// the state kept.
	TickLoadSeconds  float64 `json:"tick_load_seconds"`
	TickLoadPeakHeap uint64  `json:"tick_load_peak_heap_bytes"`
	TickHeldBytes    uint64  `json:"tick_held_bytes"`
	// ViewsOpenSeconds: the views built cold in process (wsql.Build, which
	// loads the catalog as views read it, in an empty views directory,
	// without a kept script; wsql.Open).
	ViewsOpenSeconds float64 `json:"views_open_seconds"`
	// CountSeconds, RawCountSeconds: a whole-table count(*) through the
	// views and by read_parquet of the files they list, medians of
	// CountRounds alternating rounds (after a first round that verifies
	// and warms): at least Runs of them, and as many as countPairTime
	// holds.
	CountSeconds    float64 `json:"count_seconds"`
	RawCountSeconds float64 `json:"raw_count_seconds"`
	CountRatio      float64 `json:"count_to_raw_ratio"`
	CountRounds     int     `json:"count_rounds"`
	Rows            int64   `json:"rows"`
	// SQLAt: <table>_at(MidTick) by a fresh worldfs sql process with an
	// empty cache directory (median of Runs, each its own directory).
	SQLAt  historyProcess `json:"sql_at"`
	AtRows int64          `json:"at_rows"`
	// SQLToken: the same query by fresh processes pinned by the commit
	// token of MidTick (worldfs sql --token), each with an empty cache
	// directory. TokenNamesTick: the token names its tick (see
	// index.TokenTick); one that does not is looked up in every tick.
	SQLToken       historyProcess `json:"sql_token"`
	TokenNamesTick bool           `json:"token_names_tick"`
	// SQLAtReused: the same by fresh processes on the cache directory of
	// the first, which kept its script: the views are reused, not built.
	SQLAtReused historyProcess `json:"sql_at_reused"`
	// LsHeadSeconds: `ls ticks | head -1` through a fresh mount
	// (MountError: why it was not measured). Each figure below is the
	// first of its kind through its own fresh mount too: a stat of
	// ticks/<MidTick>, a read of world.json, a listing of tables/; of
	// ForkWorld, a fork of the world at MidTick (made once, then reused),
	// a stat of its tick MidTick-1 (its parent's) and `ls ticks | head -1`.
	LsHeadSeconds     float64 `json:"ls_head_seconds"`
	StatTickSeconds   float64 `json:"mount_stat_tick_seconds"`
	WorldJSONSeconds  float64 `json:"mount_world_json_seconds"`
	LsTablesSeconds   float64 `json:"mount_ls_tables_seconds"`
	ForkWorld         string  `json:"fork_world,omitempty"`
	ForkStatSeconds   float64 `json:"mount_fork_stat_tick_seconds"`
	ForkLsHeadSeconds float64 `json:"mount_fork_ls_head_seconds"`
	MountError        string  `json:"mount_error,omitempty"`
	// LogLimitSeconds: worldfs log --limit 10 by a fresh process.
	LogLimitSeconds float64 `json:"log_limit_seconds"`
}

// parseCompareAt parses --compare-at: a comma-separated list of tick
// counts, each positive and below ticks.
func parseCompareAt(s string, ticks int) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n >= ticks {
			return nil, usagef("--compare-at %q: each entry must be a tick count from 1 to below --ticks (%d)", s, ticks)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// benchMillion builds (or reuses) a synthetic world at each N of sizes and
// measures it.
func benchMillion(ctx context.Context, b bucket.Bucket, res *MillionReport, sizes []int, self, dir string) error {
	res.LoadAverage[0] = loadAverage()
	for _, n := range sizes {
		p := &MillionPoint{Ticks: n, World: fmt.Sprintf("bench-synthetic-%dx%dx%d", n, res.Archetypes, res.Entities), MidTick: int64(n / 2)}
		tables := benchTables(res.Archetypes)
		p.Table = tables[0].Name
		if err := syntheticWorld(ctx, b, p, tables, res.Entities); err != nil {
			return err
		}
		if err := measureMillion(ctx, b, res, p, self, filepath.Join(dir, fmt.Sprint(n))); err != nil {
			return fmt.Errorf("world %s: %w", p.World, err)
		}
		res.Points = append(res.Points, p)
	}
	res.LoadAverage[1] = loadAverage()
	res.Goals = MillionGoals(res)
	return nil
}

// syntheticWorld builds p's world or reuses it. Its ticks are published
// 32 to a slot by several callers, each window of 4,096 ticks as soon as
// its compacted files are written (their ticks' canonical files give the
// publications their sizes and digests); then one fragments.rewrite per
// window names the compacted files, and a checkpoint of the tip is
// written. The tick fragments the rewrites replace are never written:
// collection would have removed them.
func syntheticWorld(ctx context.Context, b bucket.Bucket, p *MillionPoint, tables []*engine.Table, entities int) error {
	if _, err := index.ReadMarker(ctx, b, p.World); err == nil {
		s, _, err := index.Load(ctx, b, p.World)
		if err != nil {
			return err
		}
		if r, _ := s.Run(index.DefaultRun); r.Published != int64(p.Ticks) || r.Head != int64(p.Ticks-1) {
			return fmt.Errorf("world %s exists with %d ticks (head %d), not %d: a build stopped midway? Use another bucket", p.World, r.Published, r.Head, p.Ticks)
		}
		say("reusing world %s (%d ticks)", p.World, p.Ticks)
		return nil
	} else if !errors.Is(err, bucket.ErrNotExist) {
		return err
	}
	start := time.Now()
	w, err := engine.CreateWorld(ctx, b, p.World, tables, engine.Options{NoMaintenance: true})
	if err != nil {
		return err
	}
	defer w.Close()
	frames := make([]*engine.Frame, len(tables))
	for k, t := range tables {
		frames[k] = engine.NewFrame(t)
		for i := range entities {
			if err := frames[k].Append(int64(i), engine.Values{"position_x": float64(i), "velocity_y": 1.0, fmt.Sprintf("kind%d_id", k): int64(i)}); err != nil {
				return err
			}
		}
	}
	cat, epoch := w.Catalog(), w.Epoch()
	status := progress.New(os.Stderr)
	defer status.Done()
	desc := fmt.Sprintf("bench: world %s: ticks published and compacted", p.World)
	const window = 4096
	for from := int64(0); from < int64(p.Ticks); from += window {
		to := min(from+window, int64(p.Ticks)) - 1
		ticks := make([]int64, 0, to-from+1)
		tokens := make([]string, 0, to-from+1)
		for t := from; t <= to; t++ {
			ticks = append(ticks, t)
			tokens = append(tokens, syntheticToken(p.World, t))
		}
		compacted := make([]index.TableFragments, len(tables))
		published := make([][]index.TableFragments, len(ticks))
		for k, t := range tables {
			f, canon, err := maintenancetest.WriteCompactedTicks(ctx, b, p.World, index.DefaultRun, frames[k], epoch, ticks, tokens)
			if err != nil {
				return err
			}
			compacted[k] = index.TableFragments{Table: t.ID, Fragments: []index.Fragment{f}}
			for i, e := range canon {
				published[i] = append(published[i], index.TableFragments{Table: t.ID, Fragments: []index.Fragment{{
					Path: index.TickFragmentPath(p.World, index.DefaultRun, t.ID, tokens[i]), Rows: e.Rows, Bytes: e.Size,
					Digest: fmt.Sprintf("sha256:%x", e.Digest)}}})
			}
		}
		if err := publishSynthetic(ctx, cat, ticks, tokens, published, epoch, int64(entities*len(tables))); err != nil {
			return err
		}
		tip, err := cat.Exact(ctx)
		if err != nil {
			return err
		}
		rw := &index.FragmentsRewrite{Run: index.DefaultRun, Span: &index.Span{From: from, To: to}, ReadSeq: tip.Seq, Tables: compacted}
		if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw}); err != nil {
			return fmt.Errorf("compaction of ticks %d..%d: %w", from, to, err)
		}
		status.Step(desc, to+1, int64(p.Ticks))
	}
	status.Done()
	say("world %s: writing a checkpoint", p.World)
	if _, err := cat.Checkpoint(ctx); err != nil {
		return err
	}
	p.Generated, p.BuildSeconds = true, time.Since(start).Seconds()
	say("world %s: %d ticks built in %.1f s", p.World, p.Ticks, p.BuildSeconds)
	return nil
}

// syntheticToken is tick t's commit token: one that names its tick, as
// the engine's (index.TickToken), its random bytes drawn from world and t.
func syntheticToken(world string, t int64) string {
	var r [16]byte
	binary.BigEndian.PutUint64(r[:], uint64(len(world))<<48|uint64(t))
	binary.BigEndian.PutUint64(r[8:], uint64(t)*0x9e3779b97f4a7c15)
	return index.TickToken(t, r)
}

// publishSynthetic publishes ticks, 256 to a request, from 16 callers.
func publishSynthetic(ctx context.Context, cat *index.Catalog, ticks []int64, tokens []string, tables [][]index.TableFragments, epoch, rows int64) error {
	const per, callers = 256, 16
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := c * per; lo < len(ticks) && errs[c] == nil; lo += callers * per {
				var entries []index.Entry
				for i := lo; i < min(lo+per, len(ticks)); i++ {
					entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
						Run: index.DefaultRun, Tick: ticks[i], CommitToken: tokens[i], WriterEpoch: epoch, NextEntity: rows,
						PublishedUnixMs: time.Now().UnixMilli(), Tables: tables[i]}})
				}
				_, errs[c] = cat.CommitAll(ctx, entries...)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureMillion measures p's world.
func measureMillion(ctx context.Context, b bucket.Bucket, res *MillionReport, p *MillionPoint, self, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var loads, tickLoads, opens []time.Duration
	var token string // MidTick's
	// Each round loads one tick, then the whole state; each timed inside
	// peakHeap, after the collection it starts with.
	for i := range res.Runs {
		say("world %s: cold loads (%d of %d)", p.World, i+1, res.Runs)
		var part *index.Partial
		var t *index.Tick
		var err error
		base := liveHeap()
		var took time.Duration
		p.TickLoadPeakHeap = max(p.TickLoadPeakHeap, peakHeap(func() {
			start := time.Now()
			part, t, err = loadOneTick(ctx, b, p.World, p.MidTick)
			took = time.Since(start)
		}))
		tickLoads = append(tickLoads, took)
		if err != nil {
			return err
		}
		p.TickHeldBytes = max(p.TickHeldBytes, heldSince(base))
		token = t.CommitToken
		runtime.KeepAlive(part)
		runtime.KeepAlive(t)
		var st *index.State
		base = liveHeap()
		p.LoadPeakHeap = max(p.LoadPeakHeap, peakHeap(func() {
			start := time.Now()
			st, _, err = index.Load(ctx, b, p.World)
			took = time.Since(start)
		}))
		loads = append(loads, took)
		if err != nil {
			return err
		}
		p.LoadHeldBytes = max(p.LoadHeldBytes, heldSince(base))
		runtime.KeepAlive(st)
	}
	p.LoadSeconds, p.TickLoadSeconds = median(loads).Seconds(), median(tickLoads).Seconds()

	name := ident(p.Table)
	filesVar := "'worldfs_files_" + p.Table + "_0'"
	var db *stdsql.DB
	for i := range res.Runs {
		say("world %s: opening the views cold (%d of %d)", p.World, i+1, res.Runs)
		if db != nil {
			db.Close()
		}
		start := time.Now()
		s, err := wsql.Build(ctx, b, p.World, wsql.Options{Dir: filepath.Join(dir, fmt.Sprint("views-cold-", i))})
		if err != nil {
			return err
		}
		if db, err = wsql.Open(ctx, s); err != nil {
			return err
		}
		opens = append(opens, time.Since(start))
	}
	defer db.Close()
	p.ViewsOpenSeconds = median(opens).Seconds()
	say("world %s: count(*) through the views and raw, in turns for at least %s", p.World, countPairTime)
	first, times, err := alternate(ctx, db, []string{"SELECT count(*) FROM " + name, "SELECT count(*) FROM read_parquet(getvariable(" + filesVar + "))"},
		res.Runs, countPairTime)
	if err != nil {
		return err
	}
	p.Rows, p.CountRounds = first[0], len(times[0])
	p.CountSeconds, p.RawCountSeconds = median(times[0]).Seconds(), median(times[1]).Seconds()
	p.CountRatio = p.CountSeconds / p.RawCountSeconds
	q := fmt.Sprintf("SELECT count(*) AS n FROM %s(%d)", ident(p.Table+"_at"), p.MidTick)
	if err := db.QueryRowContext(ctx, q).Scan(&p.AtRows); err != nil {
		return err
	}
	if p.AtRows != int64(res.Entities) {
		return fmt.Errorf("%s answered %d rows, the world has %d a tick", q, p.AtRows, res.Entities)
	}
	// Fresh worldfs sql processes, res.Runs of each: with an empty cache
	// directory each, pinned by MidTick's token with one each, and on the
	// cache directory of the first, which kept its script.
	want := fmt.Sprintf("n\n%d\n", p.AtRows)
	fresh := func(what string, cacheDir func(i int) string, extra ...string) (historyProcess, error) {
		var sqls, cpus []time.Duration
		var out historyProcess
		for i := range res.Runs {
			say("world %s: a fresh worldfs sql%s: %s (%d of %d)", p.World, what, q, i+1, res.Runs)
			args := append([]string{"sql", "--bucket", res.Bucket, "--world", p.World, "--cache-dir", cacheDir(i), "--format", "csv"}, extra...)
			proc, got, err := freshProcess(ctx, self, append(args, q)...)
			if err != nil {
				return out, err
			}
			if got != want {
				return out, fmt.Errorf("worldfs sql%s answered %q, the views in process %q", what, got, want)
			}
			sqls = append(sqls, time.Duration(proc.Seconds*float64(time.Second)))
			cpus = append(cpus, time.Duration(proc.CPUSeconds*float64(time.Second)))
			out.PeakRSSBytes = max(out.PeakRSSBytes, proc.PeakRSSBytes)
		}
		out.Seconds, out.CPUSeconds = median(sqls).Seconds(), median(cpus).Seconds()
		return out, nil
	}
	if p.SQLAt, err = fresh("", func(i int) string { return filepath.Join(dir, fmt.Sprint("sql-cache-", i)) }); err != nil {
		return err
	}
	_, p.TokenNamesTick = index.TokenTick(token)
	if p.SQLToken, err = fresh(fmt.Sprintf(" --token (tick %d's)", p.MidTick), func(i int) string { return filepath.Join(dir, fmt.Sprint("sql-token-cache-", i)) }, "--token", token); err != nil {
		return err
	}
	if p.SQLAtReused, err = fresh(" reusing the kept script", func(int) string { return filepath.Join(dir, "sql-cache-0") }); err != nil {
		return err
	}

	say("world %s: worldfs log --limit 10", p.World)
	proc, _, err := freshProcess(ctx, self, "log", "--bucket", res.Bucket, "--world", p.World, "--limit", "10")
	if err != nil {
		return err
	}
	p.LogLimitSeconds = proc.Seconds

	if err := millionMount(ctx, b, p, benchTables(res.Archetypes), dir); err != nil {
		p.MountError = err.Error()
		say("the mount was not measured: %v", err)
	}
	return nil
}

// countPairTime is how long the whole-table count(*) through the views and
// its raw read_parquet are timed: a count of a synthetic world takes
// milliseconds, and on a shared machine the median of a few rounds moves
// by more than the goal's margin (1.1).
const countPairTime = time.Second

// alternate runs qs on db in rounds, each query once a round in turn, so
// that a drift of the machine's speed touches them alike: a first round
// that warms (and verifies the files the views read), whose answers it
// returns, then timed rounds until at least minRounds (and one) have run
// and minTime has passed since the first (at most 10,000). times holds
// each query's times.
func alternate(ctx context.Context, db *stdsql.DB, qs []string, minRounds int, minTime time.Duration) (first []int64, times [][]time.Duration, err error) {
	first, times = make([]int64, len(qs)), make([][]time.Duration, len(qs))
	var start time.Time
	for round := 0; ; round++ {
		if round > max(minRounds, 1) && (time.Since(start) >= minTime || round > 10000) {
			break
		}
		if round == 1 {
			start = time.Now()
		}
		for k, q := range qs {
			var n int64
			t0 := time.Now()
			if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", q, err)
			}
			if round == 0 {
				first[k] = n
			} else {
				times[k] = append(times[k], time.Since(t0))
			}
		}
	}
	return first, times, nil
}

// loadOneTick is a cold start of a reader of one tick: the catalog state it
// needs (index.LoadFor), and the tick read from it.
func loadOneTick(ctx context.Context, b bucket.Bucket, world string, tick int64) (*index.Partial, *index.Tick, error) {
	p, _, err := index.LoadFor(ctx, b, world, index.Want{Run: index.DefaultRun, From: tick, To: tick})
	if err != nil {
		return nil, nil, err
	}
	t, ok, err := p.Tick(index.DefaultRun, tick)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("tick %d is not published", tick)
	}
	if _, err := t.Tables(); err != nil {
		return nil, nil, err
	}
	return p, t, nil
}

// liveHeap is the heap live after a collection.
func liveHeap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heldSince is what the live heap grew by since it was base.
func heldSince(base uint64) uint64 {
	if h := liveHeap(); h > base {
		return h - base
	}
	return 0
}

// freshProcess runs self with args and returns what it cost (its peak
// resident set sampled every 2 ms) and its standard output.
func freshProcess(ctx context.Context, self string, args ...string) (historyProcess, string, error) {
	var p historyProcess
	cmd := exec.CommandContext(ctx, self, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return p, "", fmt.Errorf("worldfs %s: %w", args[0], err)
	}
	// The child's rusage is no use: it was started sharing this
	// process's memory, whose peak its exec inherits. Its own high
	// water mark is sampled instead (it only grows).
	sampled := make(chan int64)
	stopSampling := make(chan struct{})
	go func() {
		var hwm int64
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			hwm = max(hwm, vmHWM(cmd.Process.Pid))
			select {
			case <-stopSampling:
				sampled <- hwm
				return
			case <-tk.C:
			}
		}
	}()
	err := cmd.Wait()
	p.Seconds = time.Since(t0).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.CPUSeconds = rusageSeconds(ru)
	}
	close(stopSampling)
	p.PeakRSSBytes = <-sampled
	if err != nil {
		return p, "", fmt.Errorf("worldfs %s: %w: %s", args[0], err, stderr.String())
	}
	return p, stdout.String(), nil
}

// millionMount times what a browser of the world does first, each
// through a fresh mount (see MillionPoint.LsHeadSeconds): of the world and
// of a fork of it at MidTick, made once with tables.
func millionMount(ctx context.Context, b bucket.Bucket, p *MillionPoint, tables []*engine.Table, dir string) error {
	p.ForkWorld = p.World + "-fork"
	if _, err := index.ReadMarker(ctx, b, p.ForkWorld); errors.Is(err, bucket.ErrNotExist) {
		say("world %s: forking it at tick %d as %s", p.World, p.MidTick, p.ForkWorld)
		w, err := engine.ForkWorld(ctx, b, p.World, p.ForkWorld, index.DefaultRun, p.MidTick, tables, engine.Options{NoMaintenance: true})
		if err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	run := func(world string) string { return filepath.Join(world, "runs", index.DefaultRun) }
	lsHead := `ls "$1" | head -1 | grep .`
	for i, probe := range []struct {
		what   string
		into   *float64
		script string
		path   string
	}{
		{"ls %s | head -1", &p.LsHeadSeconds, lsHead, filepath.Join(run(p.World), "ticks")},
		{"stat %s", &p.StatTickSeconds, `stat "$1" > /dev/null`, filepath.Join(run(p.World), "ticks", wfs.TickName(p.MidTick))},
		{"cat %s", &p.WorldJSONSeconds, `cat "$1" > /dev/null`, filepath.Join(p.World, "world.json")},
		{"ls %s", &p.LsTablesSeconds, `ls "$1" | grep . > /dev/null`, filepath.Join(run(p.World), "tables")},
		{"stat %s", &p.ForkStatSeconds, `stat "$1" > /dev/null`, filepath.Join(run(p.ForkWorld), "ticks", wfs.TickName(p.MidTick-1))},
		{"ls %s | head -1", &p.ForkLsHeadSeconds, lsHead, filepath.Join(run(p.ForkWorld), "ticks")},
	} {
		mnt, _, done, err := benchMount(b, dir, fmt.Sprint("mount-", i), wfs.Options{}, wfs.MountOptions{})
		if err != nil {
			return err
		}
		path := filepath.Join(mnt, probe.path)
		// The path's directories are looked up first, so that the time is
		// the probe's own.
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			done()
			return err
		}
		say("world %s: "+probe.what+" through a fresh mount", p.World, path)
		start := time.Now()
		out, err := exec.CommandContext(ctx, "sh", "-c", probe.script, "sh", path).CombinedOutput()
		*probe.into = time.Since(start).Seconds()
		done()
		if err != nil {
			return fmt.Errorf("%s: %w (%s)", fmt.Sprintf(probe.what, path), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// loadAverage is the machine's 1-minute load average (0 if unknown).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscanf(string(data), "%f", &l)
	return l
}

// MillionGoals returns issue 27's goals with res's figures: the largest N
// against its bounds and against each smaller N.
func MillionGoals(res *MillionReport) []MillionGoal {
	if len(res.Points) == 0 {
		return nil
	}
	g := func(name string, v, bound float64, note string) MillionGoal {
		return MillionGoal{Name: name, Value: v, Bound: bound, Met: v <= bound, Note: note}
	}
	top := res.Points[len(res.Points)-1]
	n := func(p *MillionPoint) string { return fmt.Sprintf("N = %d", p.Ticks) }
	goals := []MillionGoal{
		g(fmt.Sprintf("fresh worldfs sql %s_at(t) at %s (s)", top.Table, n(top)), top.SQLAt.Seconds, 0.3,
			fmt.Sprintf("an empty cache directory; CPU %.3f s; peak RSS %.0f MiB", top.SQLAt.CPUSeconds, float64(top.SQLAt.PeakRSSBytes)/(1<<20))),
	}
	for _, p := range res.Points[:len(res.Points)-1] {
		goals = append(goals, g(fmt.Sprintf("fresh worldfs sql _at(t): %s / %s", n(top), n(p)), top.SQLAt.Seconds/p.SQLAt.Seconds, 1.3,
			fmt.Sprintf("%.3f s / %.3f s", top.SQLAt.Seconds, p.SQLAt.Seconds)))
	}
	goals = append(goals, g(fmt.Sprintf("fresh worldfs sql _at(t) at %s, kept script reused (s)", n(top)), top.SQLAtReused.Seconds, 0.3,
		fmt.Sprintf("a new process on the cache directory of the first, which kept its script; CPU %.3f s; peak RSS %.0f MiB",
			top.SQLAtReused.CPUSeconds, float64(top.SQLAtReused.PeakRSSBytes)/(1<<20))))
	for _, p := range res.Points[:len(res.Points)-1] {
		goals = append(goals, g(fmt.Sprintf("fresh worldfs sql _at(t), kept script reused: %s / %s", n(top), n(p)), top.SQLAtReused.Seconds/p.SQLAtReused.Seconds, 1.3,
			fmt.Sprintf("%.3f s / %.3f s", top.SQLAtReused.Seconds, p.SQLAtReused.Seconds)))
	}
	// One token, as one tick: it reads the part holding its tick.
	goals = append(goals, g(fmt.Sprintf("fresh worldfs sql --token (tick t's) %s_at(t) at %s (s)", top.Table, n(top)), top.SQLToken.Seconds, 0.3,
		fmt.Sprintf("an empty cache directory; the token names its tick: %v; CPU %.3f s; peak RSS %.0f MiB",
			top.TokenNamesTick, top.SQLToken.CPUSeconds, float64(top.SQLToken.PeakRSSBytes)/(1<<20))))
	for _, p := range res.Points[:len(res.Points)-1] {
		goals = append(goals, g(fmt.Sprintf("fresh worldfs sql --token: %s / %s", n(top), n(p)), top.SQLToken.Seconds/p.SQLToken.Seconds, 1.3,
			fmt.Sprintf("%.3f s / %.3f s", top.SQLToken.Seconds, p.SQLToken.Seconds)))
	}
	for _, p := range res.Points[:len(res.Points)-1] {
		goals = append(goals, g(fmt.Sprintf("views open, built cold: %s / %s", n(top), n(p)), top.ViewsOpenSeconds/p.ViewsOpenSeconds, 1.3,
			fmt.Sprintf("%.3f s / %.3f s", top.ViewsOpenSeconds, p.ViewsOpenSeconds)))
	}
	goals = append(goals,
		g(fmt.Sprintf("cold load for one tick at %s (ms)", n(top)), top.TickLoadSeconds*1000, 10,
			fmt.Sprintf("the whole state: %.1f ms", top.LoadSeconds*1000)),
		g(fmt.Sprintf("catalog state held after reading one tick at %s (MiB)", n(top)), float64(top.TickHeldBytes)/(1<<20), 64,
			fmt.Sprintf("live heap of the process, state kept; peak %.0f MiB during the load; the whole state holds %.0f MiB",
				float64(top.TickLoadPeakHeap)/(1<<20), float64(top.LoadHeldBytes)/(1<<20))),
	)
	if top.MountError == "" {
		goals = append(goals, g(fmt.Sprintf("ls ticks | head -1 through the mount at %s (s)", n(top)), top.LsHeadSeconds, 0.1, "a fresh mount"))
	}
	for _, p := range res.Points {
		if p.Ticks >= 100000 || p == top {
			goals = append(goals, g(fmt.Sprintf("whole-table count(*) / raw read_parquet at %s", n(p)), p.CountRatio, 1.1,
				fmt.Sprintf("%.3f s / %.3f s, medians of %d rounds", p.CountSeconds, p.RawCountSeconds, p.CountRounds)))
		}
	}
	return goals
}

func printMillionBench(out io.Writer, res *MillionReport) {
	fmt.Fprintf(out, "synthetic compacted worlds, %d archetypes × %d entities; load average %.1f at the start, %.1f at the end\n",
		res.Archetypes, res.Entities, res.LoadAverage[0], res.LoadAverage[1])
	for _, p := range res.Points {
		built := "reused"
		if p.Generated {
			built = fmt.Sprintf("built in %.1f s", p.BuildSeconds)
		}
		fmt.Fprintf(out, "N = %d (world %s, %s):\n", p.Ticks, p.World, built)
		fmt.Fprintf(out, "  cold load %.1f ms (peak heap %.0f MiB, held %.0f MiB); for one tick %.1f ms (peak %.0f MiB, held %.0f MiB)\n",
			p.LoadSeconds*1000, float64(p.LoadPeakHeap)/(1<<20), float64(p.LoadHeldBytes)/(1<<20),
			p.TickLoadSeconds*1000, float64(p.TickLoadPeakHeap)/(1<<20), float64(p.TickHeldBytes)/(1<<20))
		fmt.Fprintf(out, "  views open cold %.3f s; count(*) %.3f s, raw %.3f s (ratio %.2f, %d rows; medians of %d rounds)\n",
			p.ViewsOpenSeconds, p.CountSeconds, p.RawCountSeconds, p.CountRatio, p.Rows, p.CountRounds)
		fmt.Fprintf(out, "  fresh worldfs sql %s_at(%d): %.3f s (CPU %.3f s, peak RSS %.0f MiB); kept script reused %.3f s (CPU %.3f s); worldfs log --limit 10: %.3f s\n",
			p.Table, p.MidTick, p.SQLAt.Seconds, p.SQLAt.CPUSeconds, float64(p.SQLAt.PeakRSSBytes)/(1<<20), p.SQLAtReused.Seconds, p.SQLAtReused.CPUSeconds, p.LogLimitSeconds)
		fmt.Fprintf(out, "  fresh worldfs sql --token (tick %d's; it names its tick: %v): %.3f s (CPU %.3f s, peak RSS %.0f MiB)\n",
			p.MidTick, p.TokenNamesTick, p.SQLToken.Seconds, p.SQLToken.CPUSeconds, float64(p.SQLToken.PeakRSSBytes)/(1<<20))
		if p.MountError != "" {
			fmt.Fprintf(out, "  mount: not measured (%s)\n", p.MountError)
		} else {
			fmt.Fprintf(out, "  through fresh mounts: ls ticks | head -1 %.3f s; stat of tick %d %.3f s; cat world.json %.3f s; ls tables/ %.3f s\n",
				p.LsHeadSeconds, p.MidTick, p.StatTickSeconds, p.WorldJSONSeconds, p.LsTablesSeconds)
			fmt.Fprintf(out, "  fork %s at tick %d: stat of tick %d %.3f s; ls ticks | head -1 %.3f s\n",
				p.ForkWorld, p.MidTick, p.MidTick-1, p.ForkStatSeconds, p.ForkLsHeadSeconds)
		}
	}
	fmt.Fprintln(out, "goals (issue 27):")
	for _, g := range res.Goals {
		met := "met"
		if !g.Met {
			met = "NOT met"
		}
		note := ""
		if g.Note != "" {
			note = "; " + g.Note
		}
		fmt.Fprintf(out, "  %-62s %10.3f  (<= %g: %s%s)\n", g.Name, g.Value, g.Bound, met, note)
	}
}
