package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/maintenance"
)

// soakOptions are bench soak's flags (see soakSpec for their meaning).
type soakOptions struct {
	url, dir, self string
	duration       time.Duration
	windows        []int64
	recent         int64
	tickEvery      time.Duration
	emitters       int
	readers        int
	factsEvery     int
	optimizeEvery  time.Duration
	gcEvery        time.Duration
	checkEvery     time.Duration
	sqlEvery       time.Duration
	retentions     []time.Duration
	writerRetain   time.Duration
	seed           uint64
}

func soakSpec(env Env) Bench {
	var o soakOptions
	var windows, retentions *string
	var seed *uint64
	return benchSpec[*SoakReport]{
		name: "soak",
		summary: "run a writer of the reference simulation with background maintenance and small compaction windows while other processes " +
			"optimize, gc at a tiny retention, check --read-data and query with worldfs sql, and readers read a mount: " +
			"any absent fragment, wrong row or failed read of a visible tick fails it",
		example: "worldfs bench soak --duration 30m --dir /var/tmp/soak\n" +
			"  worldfs bench soak --duration 2m --windows 512,64,8 --tick-every 20ms --json",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.url, "bucket", "", "bucket URL to soak (default: a new local directory under --dir); the soak writes a new world soak-<time> in it")
			fs.StringVar(&o.dir, "dir", "", "work directory for the bucket, caches and the mount point (default: a temporary one, removed after a clean run; kept after a failure)")
			fs.StringVar(&o.self, "worldfs", "", "the worldfs binary run as the other processes: mount, optimize, gc, check, sql (default: this one)")
			fs.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the writer writes; the final checks follow")
			windows = fs.String("windows", "4096,512,64,8", "the compaction windows of the writer's background maintenance and of worldfs optimize, largest first, each a multiple of the next")
			fs.Int64Var(&o.recent, "recent", 8, "the newest ticks compaction leaves as written")
			fs.DurationVar(&o.tickEvery, "tick-every", 10*time.Millisecond, "the writer submits a tick this often (0: as fast as it can)")
			fs.IntVar(&o.emitters, "emitters", 4, "particle emitters of the simulation (about 130 rows a tick each)")
			fs.IntVar(&o.readers, "readers", 4, "goroutines reading random visible ticks' files through the mount")
			fs.IntVar(&o.factsEvery, "facts-every", 8, "the writer ingests one fact every this many ticks (0: none), so fact shards are compacted too")
			fs.DurationVar(&o.optimizeEvery, "optimize-every", 2*time.Second, "a worldfs optimize process starts about this often (each wait drawn from half to one and a half times it)")
			fs.DurationVar(&o.gcEvery, "gc-every", 3*time.Second, "a worldfs gc process starts about this often")
			fs.DurationVar(&o.checkEvery, "check-every", 30*time.Second, "a worldfs check --read-data process starts about this often")
			fs.DurationVar(&o.sqlEvery, "sql-every", 10*time.Second, "a fresh worldfs sql process compares the visible rows with what the writer committed about this often")
			retentions = fs.String("retentions", "1s,100ms,1ms", "the retentions worldfs gc --unsafe-retention runs with, one drawn at random each time")
			fs.DurationVar(&o.writerRetain, "writer-retention", time.Millisecond, "the retention of the writer's own background collection (CollectOptions.UnsafeRetention)")
			seed = fs.Uint64("seed", 0, "seed of the random intervals, ticks and files (default: from the clock; the report names it)")
		},
		check: func(args []string) error {
			if len(args) != 0 {
				return usagef("bench soak takes no arguments")
			}
			ws, err := parseTicks(*windows)
			if err == nil {
				err = (&maintenance.CompactOptions{Windows: ws, Run: "main"}).Validate()
			}
			if err != nil {
				return usagef("--windows %q: want tick counts, largest first, each a multiple of the next (e.g. 4096,512,64,8)", *windows)
			}
			o.windows = ws
			if strings.HasPrefix(o.url, "mem://") {
				return usagef("--bucket %s: the soak's other processes (mount, optimize, gc, check, sql) cannot open a bucket in this process's memory; give a directory or gs:// URL", o.url)
			}
			if o.retentions, err = parseDurations(*retentions); err != nil {
				return usagef("--retentions %q: %v (e.g. 1s,100ms,1ms)", *retentions, err)
			}
			switch {
			case o.duration <= 0 || o.recent < 1 || o.tickEvery < 0 || o.emitters < 1 || o.readers < 0 || o.factsEvery < 0:
				return usagef("bench soak: --duration, --recent and --emitters must be positive, --tick-every, --readers and --facts-every not negative")
			case o.optimizeEvery <= 0 || o.gcEvery <= 0 || o.checkEvery <= 0 || o.sqlEvery <= 0 || o.writerRetain <= 0:
				return usagef("bench soak: --optimize-every, --gc-every, --check-every, --sql-every and --writer-retention must be positive")
			}
			o.seed = *seed
			if o.seed == 0 {
				o.seed = uint64(time.Now().UnixNano())
			}
			return nil
		},
		run: func(ctx context.Context, _ bucket.Bucket) (*SoakReport, error) {
			return runSoak(ctx, env, o)
		},
		table:   printSoak,
		verdict: soakVerdict,
	}.bench()
}

// parseTicks parses a comma-separated list of tick counts.
func parseTicks(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number of ticks", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseDurations parses a comma-separated list of positive durations.
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive duration", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// SoakReport is what bench soak did and found. Failures is empty after a
// clean run; anything else fails the command.
type SoakReport struct {
	Bucket string `json:"bucket"`
	World  string `json:"world"`
	// Dir is the work directory (the bucket's, unless --bucket named
	// another; the caches; the mount point), kept after a failure.
	Dir     string  `json:"dir"`
	Seed    uint64  `json:"seed"`
	Windows []int64 `json:"windows"`
	Recent  int64   `json:"recent"`
	Seconds float64 `json:"seconds"`
	// Ticks were published by the writer (ticks 0..Ticks-1); Facts
	// ingested.
	Ticks       int64   `json:"ticks"`
	TicksPerSec float64 `json:"ticks_per_sec"`
	Facts       int64   `json:"facts"`
	// Compactions counts the log's fragments.rewrite entries by window
	// ("8", "64", …) and "facts" (a claim shard), whoever committed them
	// (the writer's background maintenance or worldfs optimize).
	Compactions map[string]int `json:"compactions"`
	// IntentsOpened and IntentsClosed count the log's intent entries;
	// IntentsExpired the intents gc closed because their lease ended.
	IntentsOpened  int `json:"intents_opened"`
	IntentsClosed  int `json:"intents_closed"`
	IntentsExpired int `json:"intents_expired"`
	// Optimizes, GCs, Checks and SQLs are the worldfs processes run (the
	// final check and sql included).
	Optimizes int `json:"optimize_runs"`
	// Refused: windows worldfs optimize and the writer's background
	// compaction found changed by the other and left.
	Refused int `json:"windows_refused"`
	GCs     int `json:"gc_runs"`
	// Deleted: objects the gc processes deleted, by kind.
	Deleted       int            `json:"gc_deleted"`
	DeletedByKind map[string]int `json:"gc_deleted_by_kind"`
	// WriterDeleted: objects the writer's own background collection
	// deleted.
	WriterDeleted int `json:"writer_gc_deleted"`
	Checks        int `json:"check_runs"`
	SQLs          int `json:"sql_runs"`
	// Stale counts the check and sql runs that met a file collected after
	// they had read the catalog (a reader of an older snapshot, which a
	// retention under maintenance.MinRetention does not protect) and that
	// the catalog's tip proved no longer named: not failures. Decided
	// against the tip, never by the error's text.
	Stale int `json:"stale_snapshot_runs"`
	// Reads counts the mount reads by kind (parquet, csv, manifest,
	// facts), each compared with what the writer committed.
	Reads     map[string]int `json:"reads"`
	ReadBytes int64          `json:"read_bytes"`
	// Samples are the memory and the bucket's size over the run.
	Samples  []SoakSample `json:"samples"`
	Failures []string     `json:"failures"`
}

// SoakSample is one sample of what the soak holds.
type SoakSample struct {
	Seconds float64 `json:"seconds"`
	Tick    int64   `json:"tick"`
	// RSS of the soak process (writer, readers, checks) and of the mount
	// process; HeapMiB the soak's Go heap in use.
	RSSMiB      float64 `json:"rss_mib"`
	MountRSSMiB float64 `json:"mount_rss_mib"`
	HeapMiB     float64 `json:"heap_mib"`
	// The world's objects in the bucket: all of them, and by prefix
	// (data/, the log, checkpoints, state/ shards).
	Objects         int     `json:"objects"`
	BucketMiB       float64 `json:"bucket_mib"`
	DataMiB         float64 `json:"data_mib"`
	LogMiB          float64 `json:"log_mib"`
	CheckpointsMiB  float64 `json:"checkpoints_mib"`
	StateMiB        float64 `json:"state_mib"`
	CachesMiB       float64 `json:"caches_mib"` // the work directory's caches (mount, sql, check)
	DataObjects     int     `json:"data_objects"`
	LogObjects      int     `json:"log_objects"`
	StateObjects    int     `json:"state_objects"`
	CheckpointCount int     `json:"checkpoints"`
}

// soakVerdict fails a report with failures, naming the first and where
// the evidence is.
func soakVerdict(r *SoakReport) error {
	if len(r.Failures) == 0 {
		return nil
	}
	return fmt.Errorf("bench soak failed (%d failures) after %.0f s, %d ticks; first: %s; the bucket %s and work directory %s are kept",
		len(r.Failures), r.Seconds, r.Ticks, r.Failures[0], r.Bucket, r.Dir)
}

func printSoak(out io.Writer, r *SoakReport) error {
	fmt.Fprintf(out, "soak of world %s in %s (seed %d): %.0f s, %d ticks (%.1f/s), %d facts; windows %v, recent %d\n",
		r.World, r.Bucket, r.Seed, r.Seconds, r.Ticks, r.TicksPerSec, r.Facts, r.Windows, r.Recent)
	var levels []string
	for _, w := range r.Windows {
		levels = append(levels, fmt.Sprintf("%d of %d ticks", r.Compactions[strconv.FormatInt(w, 10)], w))
	}
	levels = append(levels, fmt.Sprintf("%d of fact shards", r.Compactions["facts"]))
	fmt.Fprintf(out, "  compactions: %s; %d windows refused (changed by another compactor)\n", strings.Join(levels, ", "), r.Refused)
	fmt.Fprintf(out, "  intents: %d opened, %d closed (%d by gc after their lease)\n", r.IntentsOpened, r.IntentsClosed, r.IntentsExpired)
	var kinds []string
	for k, n := range r.DeletedByKind {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(kinds)
	fmt.Fprintf(out, "  processes: %d optimize, %d gc (%d objects deleted: %s), %d check --read-data, %d sql; the writer's own collection deleted %d\n",
		r.Optimizes, r.GCs, r.Deleted, strings.Join(kinds, ", "), r.Checks, r.SQLs, r.WriterDeleted)
	if r.Stale > 0 {
		fmt.Fprintf(out, "  %d check or sql runs met files collected after they read the catalog (older snapshots at a tiny retention; the tip names them no more)\n", r.Stale)
	}
	var reads []string
	for _, k := range []string{"parquet", "csv", "manifest", "facts"} {
		reads = append(reads, fmt.Sprintf("%d %s", r.Reads[k], k))
	}
	fmt.Fprintf(out, "  mount reads: %s (%.1f MiB), each compared with what the writer committed\n", strings.Join(reads, ", "), float64(r.ReadBytes)/(1<<20))
	fmt.Fprintf(out, "  %8s %9s %8s %9s %8s %8s %10s %8s %8s %8s %8s\n", "seconds", "tick", "rss MiB", "mount MiB", "heap MiB", "objects", "bucket MiB", "data", "log", "state", "caches")
	for _, s := range r.Samples {
		fmt.Fprintf(out, "  %8.0f %9d %8.0f %9.0f %8.0f %8d %10.1f %8.1f %8.1f %8.1f %8.1f\n", s.Seconds, s.Tick, s.RSSMiB, s.MountRSSMiB, s.HeapMiB,
			s.Objects, s.BucketMiB, s.DataMiB, s.LogMiB, s.StateMiB+s.CheckpointsMiB, s.CachesMiB)
	}
	if len(r.Failures) == 0 {
		fmt.Fprintln(out, "  failures: 0; the final worldfs check --read-data is clean")
		return nil
	}
	fmt.Fprintf(out, "  failures: %d\n", len(r.Failures))
	for _, f := range r.Failures {
		fmt.Fprintf(out, "  FAIL %s\n", f)
	}
	return nil
}

// soakDirs are the work directory's parts.
func soakDirs(work string) (bucketDir, mnt, mountCache, sqlCache, checkCache, gcCache string) {
	return filepath.Join(work, "bucket"), filepath.Join(work, "mnt"), filepath.Join(work, "mount-cache"),
		filepath.Join(work, "sql-cache"), filepath.Join(work, "check-cache"), filepath.Join(work, "gc-cache")
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
