package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/stats"
)

// worldsBench is bench fs --worlds: a mount of many small worlds.
type worldsBench struct {
	Worlds          int           `json:"worlds"`
	BuildSeconds    float64       `json:"build_seconds"` // 0: reused
	LsSeconds       float64       `json:"ls_root_seconds"`
	LsLColdSeconds  float64       `json:"ls_l_root_cold_seconds"`
	LsLWarmSeconds  float64       `json:"ls_l_root_warm_seconds"`
	RSSBeforeMiB    float64       `json:"rss_before_heads_mib"`
	RSSAfterMiB     float64       `json:"rss_after_heads_mib"`
	CatalogsOpen    int           `json:"catalogs_open_after_heads"`
	HeadRead        stats.Summary `json:"head_read"`
	NewWorldSeconds float64       `json:"new_world_listed_seconds"`
}

// smallWorldID names the i-th world of the many-worlds bench.
func smallWorldID(i int) string { return fmt.Sprintf("m%07d", i) }

// createSmallWorld creates world id with one table's two ticks in its
// catalog (no data files: the root, world directories and head read only
// catalogs).
func createSmallWorld(ctx context.Context, b bucket.Bucket, id string) error {
	c, epoch, err := index.CreateWorld(ctx, b, id, index.WorldCreate{WriterMode: index.ModeResumable}, "bench", index.Options{NoCompactor: true})
	if err != nil {
		return err
	}
	defer c.Close()
	var entries []index.Entry
	for tick := range int64(2) {
		token := fmt.Sprintf("%032x", tick)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(id, "main", "t", token, 0), Rows: 10}}}}}})
	}
	_, err = c.CommitAll(ctx, entries...)
	return err
}

// benchWorlds builds (or reuses) n small worlds in a local bucket under
// work, mounts it, and measures the root's listings, every world's head
// read once (latency and the mount's resident memory before and after),
// and how long a world created while mounted takes to be listed.
func benchWorlds(ctx context.Context, work string, n int) (*worldsBench, error) {
	res := &worldsBench{Worlds: n}
	b, err := local.Open(filepath.Join(work, "bucket"))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	have, err := index.ListWorldEntries(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(have) < n {
		say("creating %d small worlds (%d there)", n-len(have), len(have))
		start := time.Now()
		var done atomic.Int64
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4 * runtime.GOMAXPROCS(0))
		for i := len(have); i < n; i++ {
			g.Go(func() error {
				if k := done.Add(1); k%10000 == 0 {
					say("%d worlds", k)
				}
				return createSmallWorld(gctx, b, smallWorldID(i))
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		res.BuildSeconds = time.Since(start).Seconds()
	}

	mnt, _, done, err := benchMount(b, work, "mnt", wfs.Options{}, wfs.MountOptions{})
	if err != nil {
		return nil, err
	}
	defer done()

	timed := func(args ...string) (float64, string, error) {
		start := time.Now()
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		return time.Since(start).Seconds(), string(out), nil
	}
	say("ls and ls -l of the root")
	if res.LsSeconds, _, err = timed("ls", mnt); err != nil {
		return nil, err
	}
	if res.LsLColdSeconds, _, err = timed("ls", "-l", mnt); err != nil {
		return nil, err
	}
	if res.LsLWarmSeconds, _, err = timed("ls", "-l", mnt); err != nil {
		return nil, err
	}

	rss := func() float64 {
		runtime.GC()
		debug.FreeOSMemory()
		return float64(vmRSS(os.Getpid())) / (1 << 20)
	}
	res.RSSBeforeMiB = rss()
	say("reading the head of %d worlds", n)
	var r stats.Recorder
	start := time.Now()
	for i := range n {
		s := time.Now()
		if _, err := os.Readlink(filepath.Join(mnt, smallWorldID(i), "runs", "main", "head")); err != nil {
			return nil, err
		}
		r.Add(time.Since(s))
	}
	res.HeadRead = r.Summarize(time.Since(start))
	res.RSSAfterMiB = rss()
	if data, err := os.ReadFile(filepath.Join(mnt, ".worldfs", "stats")); err == nil {
		var st wfs.StatsSnapshot
		if json.Unmarshal(data, &st) == nil {
			res.CatalogsOpen = st.CatalogsOpen
		}
	}

	say("creating a world while mounted")
	if _, err := os.ReadDir(mnt); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("new%d", time.Now().UnixNano())
	if err := createSmallWorld(ctx, b, id); err != nil {
		return nil, err
	}
	created := time.Now()
	for {
		names, err := readNames(mnt)
		if err != nil {
			return nil, err
		}
		if slices.Contains(names, id) {
			break
		}
		if time.Since(created) > time.Minute {
			return nil, fmt.Errorf("world %s not listed a minute after it was created", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.NewWorldSeconds = time.Since(created).Seconds()
	return res, nil
}

// readNames lists a directory's names.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
