package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
)

func fsSpec(env Env) Bench {
	var dir *string
	var mb, ticks, files, worlds *int
	return benchSpec[*fsBench]{
		name:    "fs",
		summary: "measure the mount on a local bucket: sequential read vs a direct read, cold and warm ls -l of a big ticks/, open + first byte; or (--worlds N) a mount of N small worlds",
		example: "worldfs bench fs --mb 1024 --ticks 100000 --json\n  worldfs bench fs --worlds 100000 --dir /var/tmp/worlds   # ls -l of the root, every head once, memory, a new world",
		flags: func(fs *flag.FlagSet) {
			dir = fs.String("dir", "", "work directory for the bucket, cache and mount point (default: a temporary one, removed after)")
			mb = fs.Int("mb", 512, "size of the large snapshot file, MiB")
			ticks = fs.Int("ticks", 100000, "ticks in the world whose ticks/ directory is listed")
			files = fs.Int("files", 200, "snapshot files for the open + first byte latency")
			worlds = fs.Int("worlds", 0, "measure a mount of this many small worlds instead (reused from --dir when there)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *mb < 1 || *ticks < 1 || *files < 1 || *worlds < 0 {
				return usagef("bench fs takes no arguments and positive --mb, --ticks, --files (and --worlds)")
			}
			return nil
		},
		run: func(ctx context.Context, _ bucket.Bucket) (*fsBench, error) {
			work, remove, err := benchDir(*dir, "worldfs-bench-fs-")
			if err != nil {
				return nil, err
			}
			defer remove()
			if *worlds > 0 {
				w, err := benchWorlds(ctx, work, *worlds)
				return &fsBench{Worlds: w}, err
			}
			return benchFS(ctx, work, *mb, *ticks, *files)
		},
		table: func(out io.Writer, res *fsBench) error {
			if w := res.Worlds; w != nil {
				fmt.Fprintf(out, "%d worlds: ls of the root %.3f s; ls -l cold %.3f s, warm %.3f s\n", w.Worlds, w.LsSeconds, w.LsLColdSeconds, w.LsLWarmSeconds)
				fmt.Fprintf(out, "every head once: p50 %.3f ms, p99 %.3f ms, max %.3f ms; resident %.0f MiB before, %.0f MiB after (%d catalogs open)\n",
					w.HeadRead.P50ms, w.HeadRead.P99ms, w.HeadRead.MaxMs, w.RSSBeforeMiB, w.RSSAfterMiB, w.CatalogsOpen)
				fmt.Fprintf(out, "a world created while mounted was listed after %.3f s\n", w.NewWorldSeconds)
				return nil
			}
			fmt.Fprintf(out, "sequential read of %d MiB (warm page cache): direct %.0f MiB/s, through the mount %.0f MiB/s (%.2fx)\n",
				*mb, res.DirectMiBps, res.MountMiBps, res.ReadRatio)
			fmt.Fprintf(out, "ls -l of ticks/ with %d ticks: cold %.3f s, warm %.3f s; without xattrs (--xattrs=false): cold %.3f s, warm %.3f s\n",
				res.ListEntries, res.ListColdSeconds, res.ListWarmSeconds, res.ListColdNoXattrs, res.ListWarmNoXattrs)
			fmt.Fprintf(out, "open + first byte: first open p50 %.3f ms p99 %.3f ms; again p50 %.3f ms p99 %.3f ms\n",
				res.FirstOpen.P50ms, res.FirstOpen.P99ms, res.Reopen.P50ms, res.Reopen.P99ms)
			for _, f := range []struct {
				name string
				r    [2]fioResult
			}{{"sequential 1 MiB", res.FioSequential}, {"random 4 KiB", res.FioRandom}} {
				if f.r[0].IOPS > 0 {
					fmt.Fprintf(out, "fio %s reads: direct %.0f MiB/s (%.0f IOPS, p50 %.1f us, p99 %.1f us); through the mount %.0f MiB/s (%.0f IOPS, p50 %.1f us, p99 %.1f us)\n",
						f.name, f.r[0].MiBps, f.r[0].IOPS, f.r[0].P50us, f.r[0].P99us, f.r[1].MiBps, f.r[1].IOPS, f.r[1].P50us, f.r[1].P99us)
				}
			}
			return nil
		},
	}.bench()
}

type fsBench struct {
	FileBytes       int64   `json:"file_bytes"`
	DirectMiBps     float64 `json:"direct_mib_per_s"`
	MountMiBps      float64 `json:"mount_mib_per_s"`
	ReadRatio       float64 `json:"read_ratio"`
	Passthrough     bool    `json:"passthrough"`
	ListEntries     int     `json:"list_entries"`
	ListColdSeconds float64 `json:"ls_l_cold_seconds"`
	ListWarmSeconds float64 `json:"ls_l_warm_seconds"`
	// The same on a mount without extended attributes (--xattrs=false).
	ListColdNoXattrs float64       `json:"ls_l_cold_seconds_no_xattrs"`
	ListWarmNoXattrs float64       `json:"ls_l_warm_seconds_no_xattrs"`
	FirstOpen        stats.Summary `json:"open_first_byte_first"`
	Reopen           stats.Summary `json:"open_first_byte_again"`
	// fio on the large file: [0] direct, [1] through the mount (zero
	// without fio).
	FioSequential [2]fioResult `json:"fio_sequential_1m"`
	FioRandom     [2]fioResult `json:"fio_random_4k"`
	// Worlds is the many-worlds mode's result (--worlds), alone.
	Worlds *worldsBench `json:"worlds,omitempty"`
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

// benchFS builds three worlds in a local bucket under work (one large
// tick, many small ticks, a catalog of many ticks), mounts it, and
// measures.
func benchFS(ctx context.Context, work string, mb, ticks, files int) (*fsBench, error) {
	res := &fsBench{}
	b, err := local.Open(filepath.Join(work, "bucket"))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	quiet := engine.Options{Catalog: index.Options{NoCompactor: true}}
	cols, _ := engine.NewComponent("v", engine.Field{Name: "a", Type: engine.Float64}, engine.Field{Name: "b", Type: engine.Float64},
		engine.Field{Name: "c", Type: engine.Float64}, engine.Field{Name: "d", Type: engine.Float64})
	body, _ := engine.NewTable("body", cols)

	// A world whose tick 0 is one large fragment (random doubles barely
	// compress: about 32 bytes a row).
	say("writing a %d MiB snapshot", mb)
	big, err := engine.CreateWorld(ctx, b, "big", []*engine.Table{body}, quiet)
	if err != nil {
		return nil, err
	}
	defer big.Close()
	rows := mb << 20 / 32
	big.AddProcessor(randomRows(rows))
	rc, err := big.Step(ctx)
	if err != nil {
		return nil, err
	}
	direct, err := b.Path(rc.Appends[0].Path)
	if err != nil {
		return nil, err
	}

	// A world of small ticks, for open latency.
	say("committing %d small ticks", files)
	small, err := engine.CreateWorld(ctx, b, "small", []*engine.Table{body}, quiet)
	if err != nil {
		return nil, err
	}
	defer small.Close()
	small.AddProcessor(func(tc *engine.TickContext) error {
		return tc.Frame("body").Insert(tc.Tick, engine.Values{"v_a": float64(tc.Tick)})
	})
	for range files {
		if _, err := small.Step(ctx); err != nil {
			return nil, err
		}
	}

	// A catalog of many ticks (the cold start benchmark's builder).
	say("publishing %d ticks", ticks)
	many := &coldStartBench{World: "many"}
	if err := buildWorld(ctx, b, many, ticks, 0); err != nil {
		return nil, err
	}

	mounts := 0
	mountAt := func(mo wfs.MountOptions) (string, func(), error) {
		mounts++
		mnt, srv, done, err := benchMount(b, work, fmt.Sprintf("mnt-%d", mounts), wfs.Options{}, mo)
		if err != nil {
			return "", nil, err
		}
		res.Passthrough = srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0
		return mnt, done, nil
	}

	// ls -l, cold (a fresh mount: its catalog not yet loaded) and warm, with
	// extended attributes and without.
	var mnt string
	unmount := func() {}
	defer func() { unmount() }()
	for _, noX := range []bool{true, false} {
		unmount()
		if mnt, unmount, err = mountAt(wfs.MountOptions{NoXattrs: noX}); err != nil {
			return nil, err
		}
		tdir := filepath.Join(mnt, "many", "runs", "main", "ticks")
		if err := timeLs(ctx, tdir, ticks, noX, res); err != nil {
			return nil, err
		}
	}

	// Open + first byte, first time and again.
	for _, rec := range []*stats.Summary{&res.FirstOpen, &res.Reopen} {
		if *rec, err = timeOpens(mnt, files); err != nil {
			return nil, err
		}
	}

	// Sequential reads, warm page cache: each path read once first, then
	// the best of three.
	say("reading %d MiB directly and through the mount", mb)
	var n int64
	if res.DirectMiBps, n, err = bestRead(direct); err != nil {
		return nil, err
	}
	res.FileBytes = n
	var m int64
	if res.MountMiBps, m, err = bestRead(filepath.Join(mnt, "big", "runs", "main", "ticks", wfs.TickName(0), "body.parquet")); err != nil {
		return nil, err
	}
	if m != n {
		return nil, fmt.Errorf("the mount served %d bytes of a %d-byte fragment", m, n)
	}
	res.ReadRatio = res.MountMiBps / res.DirectMiBps

	// fio on the same bytes, direct and through the mount, when it is
	// installed (Debian's fio).
	if err := fioReads(ctx, direct, filepath.Join(mnt, "big", "runs", "main", "ticks", wfs.TickName(0), "body.parquet"), res); err != nil {
		return nil, err
	}
	return res, nil
}

// randomRows fills a frame of body to rows rows of random doubles, which
// barely compress (about 32 bytes a row).
func randomRows(rows int) engine.Processor {
	return func(tc *engine.TickContext) error {
		f := tc.Frame("body")
		for e := f.Len(); e < rows; e++ {
			if err := f.Append(int64(e), nil); err != nil {
				return err
			}
		}
		r := rand.New(rand.NewPCG(1, 2))
		for _, c := range []string{"v_a", "v_b", "v_c", "v_d"} {
			for i, col := 0, f.Float64(c); i < len(col); i++ {
				col[i] = r.Float64()
			}
		}
		return nil
	}
}

// timeLs times ls -l of tdir (ticks entries) twice, cold then warm, into
// res's figures for a mount with extended attributes or without (noX).
func timeLs(ctx context.Context, tdir string, ticks int, noX bool, res *fsBench) error {
	for i, cold := range []bool{true, false} {
		say("ls -l of %d ticks (%s, xattrs %v)", ticks, map[bool]string{true: "cold", false: "warm"}[cold], !noX)
		start := time.Now()
		out, err := exec.CommandContext(ctx, "ls", "-l", tdir).Output()
		if err != nil {
			return fmt.Errorf("ls -l %s: %w", tdir, err)
		}
		secs := time.Since(start).Seconds()
		res.ListEntries = strings.Count(string(out), "\n") - 1 // the "total" line
		switch {
		case noX && i == 0:
			res.ListColdNoXattrs = secs
		case noX:
			res.ListWarmNoXattrs = secs
		case i == 0:
			res.ListColdSeconds = secs
		default:
			res.ListWarmSeconds = secs
		}
	}
	return nil
}

// timeOpens times open and first byte of each of the files small ticks'
// fragments under mnt.
func timeOpens(mnt string, files int) (stats.Summary, error) {
	var r stats.Recorder
	start := time.Now()
	for t := range files {
		p := filepath.Join(mnt, "small", "runs", "main", "ticks", wfs.TickName(int64(t)), "body.parquet")
		s := time.Now()
		f, err := os.Open(p)
		if err != nil {
			return stats.Summary{}, err
		}
		var one [1]byte
		_, err = f.Read(one[:])
		f.Close()
		if err != nil {
			return stats.Summary{}, fmt.Errorf("first byte of %s: %w", p, err)
		}
		r.Add(time.Since(s))
	}
	return r.Summarize(time.Since(start)), nil
}

// bestRead reads file p four times and returns the best throughput of the
// last three (the first warms the page cache), in MiB/s, and its size.
func bestRead(p string) (float64, int64, error) {
	best := 0.0
	var n int64
	buf := make([]byte, 1<<20)
	for i := range 4 {
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		n = 0
		for {
			k, err := f.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return 0, 0, err
			}
		}
		f.Close()
		if i > 0 {
			best = max(best, float64(n)/(1<<20)/time.Since(start).Seconds())
		}
	}
	return best, n, nil
}

// fioReads runs fio on the same bytes, direct and mounted, when it is
// installed (Debian's fio).
func fioReads(ctx context.Context, direct, mounted string, res *fsBench) error {
	if _, err := exec.LookPath("fio"); err == nil {
		for _, job := range []struct {
			name, rw, bs string
			out          *[2]fioResult
		}{{"sequential 1 MiB reads", "read", "1M", &res.FioSequential}, {"random 4 KiB reads", "randread", "4k", &res.FioRandom}} {
			for i, p := range []string{direct, mounted} {
				say("fio: %s of %s", job.name, p)
				if job.out[i], err = runFio(ctx, p, job.rw, job.bs); err != nil {
					return err
				}
			}
		}
	} else {
		say("fio is not installed: no fio figures (apt-get install fio)")
	}
	return nil
}

// fioResult is one fio job's read figures.
type fioResult struct {
	MiBps float64 `json:"mib_per_s"`
	IOPS  float64 `json:"iops"`
	P50us float64 `json:"clat_p50_us"`
	P99us float64 `json:"clat_p99_us"`
}

// runFio reads path with fio (psync, through a warm page cache: fio would
// drop the direct file's pages first, not the mount's; 5 s) and
// returns its figures.
func runFio(ctx context.Context, path, rw, bs string) (fioResult, error) {
	out, err := exec.CommandContext(ctx, "fio", "--name=worldfs", "--filename="+path, "--readonly", "--rw="+rw, "--bs="+bs,
		"--ioengine=psync", "--invalidate=0", "--runtime=5", "--time_based", "--output-format=json").Output()
	if err != nil {
		return fioResult{}, fmt.Errorf("fio %s %s: %w", rw, path, err)
	}
	var doc struct {
		Jobs []struct {
			Read struct {
				BwBytes float64 `json:"bw_bytes"`
				IOPS    float64 `json:"iops"`
				Clat    struct {
					Percentile map[string]float64 `json:"percentile"`
				} `json:"clat_ns"`
			} `json:"read"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Jobs) != 1 {
		return fioResult{}, fmt.Errorf("fio %s %s: unreadable output (%v)", rw, path, err)
	}
	r := doc.Jobs[0].Read
	return fioResult{MiBps: r.BwBytes / (1 << 20), IOPS: r.IOPS,
		P50us: r.Clat.Percentile["50.000000"] / 1e3, P99us: r.Clat.Percentile["99.000000"] / 1e3}, nil
}
