package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/frame"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
	wsql "github.com/worldfs/worldfs/sql"
)

func compactedSpec(env Env) Bench {
	var url, world, table, dir *string
	var files, runs *int
	var globOnly *bool
	return benchSpec[*compactedBench]{
		name:    "fs-compacted",
		summary: "measure a compacted world's tick files through a fresh mount: stat at lookup, open + first byte (first and again), st_size against the bytes read, ls -l of ticks/ and tables/<t>/, a cold glob read against the views",
		example: "worldfs bench fs-compacted --bucket /var/tmp/h --world bench-history-10000x4x50 --files 200 --json",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "the world (required; e.g. one bench history built and compacted)")
			table = fs.String("table", "", "the table whose files are read (default: the first by name)")
			files = fs.Int("files", 200, "compacted ticks read, chosen at random (seeded) across the compacted history")
			dir = fs.String("dir", "", "work directory for the cache and mount point (default: a temporary one, removed after)")
			runs = fs.Int("runs", 3, "cold globs through a fresh mount and over a local copy of its files, in alternation")
			globOnly = fs.Bool("glob-only", false, "measure only the cold glob through the mount against the local copy (no stat, open or ls -l)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *world == "" || *files < 1 || *runs < 1 {
				return usagef("bench fs-compacted takes no arguments, a --world, a positive --files and a positive --runs")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenExisting(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*compactedBench, error) {
			work, remove, err := benchDir(*dir, "worldfs-bench-fs-compacted-")
			if err != nil {
				return nil, err
			}
			defer remove()
			return benchCompacted(ctx, b, work, *world, *table, *files, *runs, *globOnly)
		},
		table: func(out io.Writer, res *compactedBench) error {
			fmt.Fprintf(out, "world %s, table %s: %d of %d ticks compacted\n", res.World, res.Table, res.Compacted, res.Ticks)
			if !res.GlobOnly {
				compactedTable(out, res)
			}
			c := res.Copy
			fmt.Fprintf(out, "cold %s over %d files: through a fresh mount %s s (median %.3f; CPU %s s), over a local copy %s s (median %.3f; CPU %s s): %.2fx; answers equal (%d rows, sum %d); copied in %.3f s; load average %.2f to %.2f\n",
				c.Query, c.Files, seconds(c.MountSeconds), c.MountMedian, seconds(c.MountCPU), seconds(c.LocalSeconds), c.LocalMedian, seconds(c.LocalCPU), c.Ratio, c.Rows, c.Sum, c.CopySeconds, c.Load[0], c.Load[1])
			fmt.Fprintf(out, "the same over a FUSE loopback of the local copy (go-fuse's, serving the files as they are: FUSE's own cost) %s s (median %.3f): %.2fx the local copy; the mount %.2fx the loopback\n",
				seconds(c.LoopbackSeconds), c.LoopbackMedian, c.LoopbackRatio, c.FloorRatio)
			return nil
		},
	}.bench()
}

type compactedBench struct {
	World     string `json:"world"`
	Table     string `json:"table"`
	Ticks     int    `json:"ticks"`
	Compacted int    `json:"compacted_ticks"`
	Files     int    `json:"files"`
	// Indexed: files read whose compacted file has a tick index.
	Indexed   int           `json:"indexed"`
	Stat      stats.Summary `json:"stat_at_lookup"`
	ZeroSizes int           `json:"zero_sizes_at_lookup"`
	FirstOpen stats.Summary `json:"open_first_byte_first"`
	Reopen    stats.Summary `json:"open_first_byte_again"`
	// FirstOpenFetched: the compacted files' bytes the first opens read
	// from a remote bucket (the mount's compacted_bytes_fetched; 0 on a
	// local bucket, read in place); GlobFetched, the glob's.
	FirstOpenFetched int64 `json:"compacted_bytes_fetched_first_opens"`
	GlobFetched      int64 `json:"compacted_bytes_fetched_glob"`
	SizeMismatches   int   `json:"size_mismatches"`
	// Listings on a fresh mount (cold) and again (warm).
	LsTicks  [2]float64 `json:"ls_l_ticks_seconds"` // ls -l of ticks/
	LsTable  [2]float64 `json:"ls_l_table_seconds"` // ls -l of tables/<table>/
	LsTicksN int        `json:"ls_l_ticks_entries"` // entries listed
	LsTableN int        `json:"ls_l_table_entries"`
	// A cold read_parquet of tables/<table>/*.parquet through a fresh
	// mount against a cold build of the views and the same query, in
	// this process (count(*) and sum(entity_id): equal, or the bench fails).
	GlobSeconds  float64 `json:"glob_through_mount_seconds"`
	ViewsSeconds float64 `json:"views_seconds"`
	GlobRatio    float64 `json:"glob_over_views"`
	GlobRows     int64   `json:"glob_rows"`
	// GlobOnly: only Copy was measured.
	GlobOnly bool       `json:"glob_only,omitempty"`
	Copy     copiedGlob `json:"glob_against_local_copy"`
}

// copiedGlob is issue 39's measure: a cold read_parquet of every file of
// tables/<table>/ through a fresh mount (its own cache, nothing read
// before) against the same query over a copy of those files on a local
// disk (copied through the mount, then synced), each in a fresh DuckDB
// database, alternating, runs of each; every answer must be the same or
// the bench fails.
type copiedGlob struct {
	Query        string    `json:"query"`
	Files        int       `json:"files"`
	Rows         int64     `json:"rows"`
	Sum          int64     `json:"sum"`
	MountSeconds []float64 `json:"mount_seconds"`
	LocalSeconds []float64 `json:"local_seconds"`
	// This process's CPU time (user + system) during each query: DuckDB's
	// and, through the mount, the mount's too (it serves in process).
	MountCPU    []float64 `json:"mount_cpu_seconds"`
	LocalCPU    []float64 `json:"local_cpu_seconds"`
	MountMedian float64   `json:"mount_median_seconds"`
	LocalMedian float64   `json:"local_median_seconds"`
	// Ratio: MountMedian over LocalMedian (issue 39's goal: at most 1.5).
	Ratio float64 `json:"mount_over_local"`
	// The same query through a fresh FUSE loopback of the local copy
	// (go-fuse's, each file served as it is on disk, mounted as the
	// mount is): what any FUSE file system costs before it does any
	// work of its own. LoopbackRatio is its median over LocalMedian,
	// FloorRatio MountMedian over its median.
	LoopbackSeconds []float64  `json:"loopback_seconds"`
	LoopbackMedian  float64    `json:"loopback_median_seconds"`
	LoopbackRatio   float64    `json:"loopback_over_local"`
	FloorRatio      float64    `json:"mount_over_loopback"`
	CopySeconds     float64    `json:"copy_seconds"`
	Load            [2]float64 `json:"load_average"` // 1-minute, at the start and the end
}

// benchCompacted mounts b (fresh cache under work) and measures the files
// of table in files compacted ticks of world.
func benchCompacted(ctx context.Context, b bucket.Bucket, work, world, table string, files, runs int, globOnly bool) (*compactedBench, error) {
	res := &compactedBench{World: world, GlobOnly: globOnly}
	s, _, err := index.Load(ctx, b, world)
	if err != nil {
		return nil, err
	}
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // id → name
	for _, id := range ids {
		info, err := frame.ReadTableInfo(ctx, b, world, id)
		if err != nil {
			return nil, err
		}
		names[id] = info.Name
	}
	if table == "" {
		for _, n := range names {
			if table == "" || n < table {
				table = n
			}
		}
	}
	res.Table = table
	var ticks []int64
	holders := map[int64]index.Fragment{}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		res.Ticks++
		tables, terr := tk.Tables()
		if terr != nil {
			err = terr
			return false
		}
		for _, tf := range tables {
			if names[tf.Table] != table || len(tf.Fragments) == 0 || tf.Fragments[0].Span == nil {
				continue
			}
			ticks = append(ticks, tk.Tick)
			for _, f := range tf.Fragments {
				if f.Span.From <= tk.Tick && tk.Tick <= f.Span.To {
					holders[tk.Tick] = f
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	res.Compacted = len(ticks)
	if len(ticks) == 0 {
		return nil, fmt.Errorf("world %s: no tick of table %s is compacted", world, table)
	}
	r := rand.New(rand.NewPCG(7, 11))
	r.Shuffle(len(ticks), func(i, j int) { ticks[i], ticks[j] = ticks[j], ticks[i] })
	ticks = ticks[:min(files, len(ticks))]
	slices.Sort(ticks)
	res.Files = len(ticks)
	if globOnly {
		if err := benchCopiedGlob(ctx, b, work, world, table, runs, &res.Copy); err != nil {
			return nil, err
		}
		return res, nil
	}
	for _, n := range ticks {
		if h, ok := holders[n]; ok {
			for _, name := range index.TickIndexPaths(h.Path) {
				if _, err := b.Stat(ctx, name); err == nil {
					res.Indexed++
					break
				}
			}
		}
	}

	mnt, _, done, err := benchMount(b, work, "mnt", wfs.Options{}, wfs.MountOptions{})
	if err != nil {
		return nil, err
	}
	defer done()
	dir := filepath.Join(mnt, world, "runs", "main", "ticks")
	if _, err := os.Stat(dir); err != nil { // the catalog loads here, not in the first stat
		return nil, err
	}
	path := func(n int64) string { return filepath.Join(dir, wfs.TickName(n), table+".parquet") }

	say("stat of %d compacted ticks' %s.parquet", len(ticks), table)
	sizes := map[int64]int64{}
	var rec stats.Recorder
	start := time.Now()
	for _, n := range ticks {
		s := time.Now()
		info, err := os.Stat(path(n))
		if err != nil {
			return nil, err
		}
		rec.Add(time.Since(s))
		sizes[n] = info.Size()
		if info.Size() == 0 {
			res.ZeroSizes++
		}
	}
	res.Stat = rec.Summarize(time.Since(start))

	say("open + first byte, first and again")
	for i, sum := range []*stats.Summary{&res.FirstOpen, &res.Reopen} {
		var rec stats.Recorder
		start := time.Now()
		for _, n := range ticks {
			s := time.Now()
			f, err := os.Open(path(n))
			if err != nil {
				return nil, err
			}
			var one [1]byte
			_, err = f.Read(one[:])
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("first byte of %s: %w", path(n), err)
			}
			rec.Add(time.Since(s))
		}
		*sum = rec.Summarize(time.Since(start))
		if i == 0 {
			if res.FirstOpenFetched, err = compactedFetched(mnt); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range ticks {
		data, err := os.ReadFile(path(n))
		if err != nil {
			return nil, err
		}
		if int64(len(data)) != sizes[n] {
			res.SizeMismatches++
		}
	}
	if err := benchMountReads(ctx, b, work, world, table, res); err != nil {
		return nil, err
	}
	if err := benchCopiedGlob(ctx, b, work, world, table, runs, &res.Copy); err != nil {
		return nil, err
	}
	return res, nil
}

// compactedFetched returns the compacted files' bytes the mount at mnt
// fetched from its bucket so far (its .worldfs/stats).
func compactedFetched(mnt string) (int64, error) {
	data, err := os.ReadFile(filepath.Join(mnt, ".worldfs", "stats"))
	if err != nil {
		return 0, err
	}
	var st wfs.StatsSnapshot
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("%s/.worldfs/stats: %w", mnt, err)
	}
	return st.CompactedFetched, nil
}

// benchMountReads measures, each on a fresh mount and cache, ls -l of
// ticks/ and of tables/<table>/ (cold, then warm), and a cold glob read of
// tables/<table>/*.parquet through the mount against a cold build of the
// views answering the same query.
func benchMountReads(ctx context.Context, b bucket.Bucket, work, world, table string, res *compactedBench) error {
	fresh := func(name string) (string, func(), error) {
		mnt, _, done, err := benchMount(b, work, name, wfs.Options{}, wfs.MountOptions{})
		return mnt, done, err
	}
	mnt, done, err := fresh("ls")
	if err != nil {
		return err
	}
	for _, l := range []struct {
		dir   string
		times *[2]float64
		n     *int
	}{{filepath.Join(mnt, world, "runs", "main", "ticks"), &res.LsTicks, &res.LsTicksN},
		{filepath.Join(mnt, world, "runs", "main", "tables", table), &res.LsTable, &res.LsTableN}} {
		for i := range 2 {
			say("ls -l %s (%s)", l.dir, []string{"cold", "warm"}[i])
			start := time.Now()
			out, err := exec.CommandContext(ctx, "ls", "-l", l.dir).Output()
			if err != nil {
				done()
				return fmt.Errorf("ls -l %s: %w", l.dir, err)
			}
			l.times[i] = time.Since(start).Seconds()
			*l.n = strings.Count(string(out), "\n") - 1
		}
	}
	done()

	q := "SELECT count(*), sum(entity_id) FROM %s"
	var viewRows, viewSum, globRows, globSum int64
	say("the views, built cold: %s", fmt.Sprintf(q, table))
	start := time.Now()
	vc, err := cache.Open(filepath.Join(work, "views-cache"), cache.Options{})
	if err != nil {
		return err
	}
	// The cache serves a remote bucket's fragments; a local one is read in place.
	sc, err := wsql.Build(ctx, b, world, wsql.Options{Dir: filepath.Join(work, "views"), Cache: vc, BucketID: "bench"})
	if err != nil {
		return err
	}
	vdb, err := wsql.Open(ctx, sc)
	if err != nil {
		return err
	}
	err = vdb.QueryRowContext(ctx, fmt.Sprintf(q, table)).Scan(&viewRows, &viewSum)
	vdb.Close()
	if err != nil {
		return err
	}
	res.ViewsSeconds = time.Since(start).Seconds()

	if mnt, done, err = fresh("glob"); err != nil {
		return err
	}
	defer done()
	glob := filepath.Join(mnt, world, "runs", "main", "tables", table, "*.parquet")
	say("read_parquet of %s through a fresh mount", glob)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	start = time.Now()
	if err := db.QueryRowContext(ctx, fmt.Sprintf(q, "read_parquet('"+glob+"')")).Scan(&globRows, &globSum); err != nil {
		return err
	}
	res.GlobSeconds = time.Since(start).Seconds()
	if res.GlobFetched, err = compactedFetched(mnt); err != nil {
		return err
	}
	if globRows != viewRows || globSum != viewSum {
		return fmt.Errorf("the glob through the mount read %d rows (sum %d), the views %d (sum %d)", globRows, globSum, viewRows, viewSum)
	}
	res.GlobRows, res.GlobRatio = globRows, res.GlobSeconds/res.ViewsSeconds
	return nil
}

// benchCopiedGlob measures res (see copiedGlob): runs cold globs of
// tables/<table>/*.parquet, each through a mount of its own (a fresh
// cache), and as many over a copy of the files on a local disk (under
// work, made through the first mount after its glob), in alternation.
func benchCopiedGlob(ctx context.Context, b bucket.Bucket, work, world, table string, runs int, res *copiedGlob) error {
	res.Load[0] = loadAverage()
	res.Query = "SELECT count(*), sum(entity_id) FROM read_parquet('<dir>/*.parquet')"
	local := filepath.Join(work, "local-copy")
	if err := os.RemoveAll(local); err != nil {
		return err
	}
	var answer [2]int64
	query := func(dir string, cpu *[]float64) (float64, error) {
		db, err := sql.Open("duckdb", "")
		if err != nil {
			return 0, err
		}
		defer db.Close()
		var got [2]int64
		start, cpu0 := time.Now(), cpuSeconds()
		q := strings.ReplaceAll(res.Query, "<dir>", dir)
		if err := db.QueryRowContext(ctx, q).Scan(&got[0], &got[1]); err != nil {
			return 0, err
		}
		took := time.Since(start).Seconds()
		*cpu = append(*cpu, cpuSeconds()-cpu0)
		if answer == ([2]int64{}) {
			answer = got
		} else if got != answer {
			return 0, fmt.Errorf("%s: %d rows (sum %d), another run read %d (sum %d)", q, got[0], got[1], answer[0], answer[1])
		}
		return took, nil
	}
	for i := range runs {
		name := fmt.Sprintf("glob-copy-%d", i)
		mnt, _, done, err := benchMount(b, work, name, wfs.Options{}, wfs.MountOptions{})
		if err != nil {
			return err
		}
		dir := filepath.Join(mnt, world, "runs", "main", "tables", table)
		say("cold glob %d of %d through a fresh mount: %s", i+1, runs, dir)
		took, err := query(dir, &res.MountCPU)
		if err == nil && i == 0 {
			say("copying %s to %s", dir, local)
			start := time.Now()
			err = copyDir(dir, local)
			res.CopySeconds = time.Since(start).Seconds()
			syscall.Sync() // the copy written back before it is read: no writeback in its timing
		}
		done()
		os.RemoveAll(filepath.Join(work, name+"-cache"))
		if err != nil {
			return err
		}
		res.MountSeconds = append(res.MountSeconds, took)
		say("cold glob %d of %d over the local copy", i+1, runs)
		if took, err = query(local, &res.LocalCPU); err != nil {
			return err
		}
		res.LocalSeconds = append(res.LocalSeconds, took)
		say("cold glob %d of %d through a FUSE loopback of the local copy", i+1, runs)
		if took, err = loopbackQuery(work, local, query); err != nil {
			return err
		}
		res.LoopbackSeconds = append(res.LoopbackSeconds, took)
	}
	entries, err := os.ReadDir(local)
	if err != nil {
		return err
	}
	res.Files, res.Rows, res.Sum = len(entries), answer[0], answer[1]
	res.MountMedian, res.LocalMedian = medianSeconds(res.MountSeconds), medianSeconds(res.LocalSeconds)
	res.Ratio = res.MountMedian / res.LocalMedian
	res.LoopbackMedian = medianSeconds(res.LoopbackSeconds)
	res.LoopbackRatio, res.FloorRatio = res.LoopbackMedian/res.LocalMedian, res.MountMedian/res.LoopbackMedian
	res.Load[1] = loadAverage()
	return os.RemoveAll(local)
}

// loopbackQuery runs query over dir through a fresh go-fuse loopback
// mount of it, mounted with the options the mount's own are (see
// wfs.Serve), and unmounts it.
func loopbackQuery(work, dir string, query func(dir string, cpu *[]float64) (float64, error)) (float64, error) {
	mnt, err := os.MkdirTemp(work, "loopback-") // a run's own: one a failed unmount left stays
	if err != nil {
		return 0, err
	}
	root, err := gofs.NewLoopbackRoot(dir)
	if err != nil {
		return 0, err
	}
	// The files do not change while it is mounted: the kernel keeps what
	// it looked up, as the mount's snapshot entries let it.
	keep := time.Hour
	srv, err := gofs.Mount(mnt, root, &gofs.Options{EntryTimeout: &keep, AttrTimeout: &keep, MountOptions: fuse.MountOptions{
		DirectMount:       os.Geteuid() == 0,
		MaxReadAhead:      1 << 20,
		ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
	}})
	if err != nil {
		return 0, fmt.Errorf("mounting a loopback of %s: %w", dir, err)
	}
	var cpu []float64
	took, err := query(mnt, &cpu)
	if uerr := srv.Unmount(); uerr != nil {
		return 0, errors.Join(err, fmt.Errorf("unmounting the loopback of %s: %w", dir, uerr))
	}
	return took, errors.Join(err, os.Remove(mnt))
}

// medianSeconds returns the median of xs (the mean of the middle two of an even
// count).
func medianSeconds(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// seconds prints xs as a list of seconds.
func seconds(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

// compactedTable prints the measures of res other than Copy.
func compactedTable(out io.Writer, res *compactedBench) {
	fmt.Fprintf(out, "%d files read (%d with a tick index)\n", res.Files, res.Indexed)
	fmt.Fprintf(out, "stat at lookup: p50 %.3f ms p99 %.3f ms; %d reported size 0\n", res.Stat.P50ms, res.Stat.P99ms, res.ZeroSizes)
	fmt.Fprintf(out, "open + first byte: first open p50 %.3f ms p99 %.3f ms max %.3f ms; again p50 %.3f ms p99 %.3f ms; %d compacted bytes fetched by the first opens\n",
		res.FirstOpen.P50ms, res.FirstOpen.P99ms, res.FirstOpen.MaxMs, res.Reopen.P50ms, res.Reopen.P99ms, res.FirstOpenFetched)
	fmt.Fprintf(out, "st_size at lookup differs from the bytes a full read returns for %d of %d files\n", res.SizeMismatches, res.Files)
	fmt.Fprintf(out, "ls -l of ticks/ (%d entries): cold %.3f s, warm %.3f s; of tables/%s/ (%d): cold %.3f s, warm %.3f s\n",
		res.LsTicksN, res.LsTicks[0], res.LsTicks[1], res.Table, res.LsTableN, res.LsTable[0], res.LsTable[1])
	fmt.Fprintf(out, "read_parquet of tables/%s/*.parquet through a fresh mount: %.3f s for %d rows (%d compacted bytes fetched); the views built cold, same query: %.3f s (%.2fx)\n",
		res.Table, res.GlobSeconds, res.GlobRows, res.GlobFetched, res.ViewsSeconds, res.GlobRatio)
}

// copyDir copies the files of directory src into a new directory dst, in
// the order of their names (cp -r copies in the order of their inode
// numbers, which through the mount are hashes: ticks far apart, each
// decoded alone).
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o444); err != nil {
			return err
		}
	}
	return nil
}
