package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

func init() {
	var url *string
	var writers, ticks *int
	register("", command{
		name:    "demo",
		summary: "create a world and commit ticks to its catalog from racing writers, then fence, checkpoint and cold-start it",
		example: "worldfs demo --bucket ./worldfs-data --writers 3 --ticks 300",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			writers = fs.Int("writers", 3, "concurrent writers (committers with their own store ids)")
			ticks = fs.Int("ticks", 300, "ticks to publish")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("demo takes no arguments")
			}
			if *writers <= 0 || *ticks <= 0 {
				return usagef("--writers and --ticks must be positive")
			}
			b, err := openBucket(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			return demo(ctx, b, *url, *writers, *ticks, out)
		},
	})
}

func demoPublish(world string, tick int64, token string, epoch int64) index.Entry {
	return index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
		Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
		Tables: []index.TableFragments{{Table: "Position", Fragments: []index.Fragment{{
			Path: fmt.Sprintf("data/%s/main/position/%s/0.parquet", world, token), Rows: 100, Bytes: 4096, Digest: "sha256:" + token}}}},
	}}
}

// demo walks through the control catalog: writers race to publish ticks
// (every tick is attempted by two of them; exactly one attempt wins), a new
// writer takes the fence and stales the others, a checkpoint is written,
// and a cold start from the bucket must equal the live state.
func demo(ctx context.Context, b bucket.Bucket, url string, writers, ticks int, out io.Writer) error {
	world := fmt.Sprintf("demo-%d", time.Now().UnixNano())
	first, epoch, err := index.CreateWorld(ctx, b, world, index.WorldCreate{}, "writer-0", index.Options{})
	if err != nil {
		return err
	}
	cats := []*index.Catalog{first}
	for range writers - 1 {
		c, err := index.Open(ctx, b, world, index.Options{})
		if err != nil {
			return err
		}
		cats = append(cats, c)
	}
	defer func() {
		for _, c := range cats {
			c.Close()
		}
	}()
	fmt.Fprintf(out, "bucket %s: world %s created, writer epoch %d\n", url, world, epoch)

	// Every tick is attempted by two writers with different tokens.
	start := time.Now()
	wins := make([]int, writers)
	conflicts := make([]int, writers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tick := range ticks {
				if tick%writers != w && (tick+1)%writers != w {
					continue
				}
				_, err := cats[w].Commit(ctx, demoPublish(world, int64(tick), fmt.Sprintf("w%d-t%d", w, tick), epoch))
				var ce *index.CatalogConflictError
				mu.Lock()
				switch {
				case err == nil:
					wins[w]++
				case errors.As(err, &ce):
					conflicts[w]++
				default:
					firstErr = err
				}
				mu.Unlock()
				if w == 0 && tick%100 == 0 {
					fmt.Fprintf(os.Stderr, "demo: tick %d/%d\n", tick, ticks)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	elapsed := time.Since(start)
	var slots, lost int64
	for w, c := range cats {
		st := c.Stats()
		slots += st.Slots
		lost += st.LostSlots
		fmt.Fprintf(out, "  writer %d: published %3d ticks, %3d conflicts (tick already published by another attempt), %3d slots won, %3d lost\n",
			w, wins[w], conflicts[w], st.Slots, st.LostSlots)
	}
	tip, err := first.Exact(ctx)
	if err != nil {
		return err
	}
	run, _ := tip.Run("main")
	fmt.Fprintf(out, "%d ticks published in %v by %d attempts in %d slots; head tick %d\n",
		run.Published, elapsed.Round(time.Millisecond), 2*ticks, slots, run.Head)
	if int(run.Published) != ticks {
		return fmt.Errorf("%d ticks visible, want %d", run.Published, ticks)
	}

	// A new writer takes the fence: the old epoch can publish no more.
	newer, err := index.Open(ctx, b, world, index.Options{})
	if err != nil {
		return err
	}
	cats = append(cats, newer)
	r, err := newer.Commit(ctx, index.Entry{Kind: index.KindFenceAcquire, FenceAcquire: &index.FenceAcquire{Holder: "writer-new", Resume: true}})
	if err != nil {
		return err
	}
	_, err = first.Commit(ctx, demoPublish(world, int64(ticks), "stale-attempt", epoch))
	var se *index.StaleWriterError
	if !errors.As(err, &se) {
		return fmt.Errorf("a fenced-out writer published: %v", err)
	}
	if _, err := newer.Commit(ctx, demoPublish(world, int64(ticks), "resumed", r.Epoch)); err != nil {
		return err
	}
	fmt.Fprintf(out, "fence moved to epoch %d: the old writer is refused (%v); the new one publishes tick %d\n", r.Epoch, err, ticks)

	// Checkpoint, then a cold start from the bucket must equal the live state.
	seq, err := newer.Checkpoint(ctx)
	if err != nil {
		return err
	}
	live, err := newer.Exact(ctx)
	if err != nil {
		return err
	}
	start = time.Now()
	cold, info, err := index.Load(ctx, b, world)
	if err != nil {
		return err
	}
	coldRun, _ := cold.Run("main")
	if cold.Seq != live.Seq || cold.Hash != live.Hash || coldRun != (index.Run{Name: "main", Head: int64(ticks), Published: int64(ticks + 1)}) {
		return fmt.Errorf("cold start at %d (%+v) differs from the live state at %d", cold.Seq, coldRun, live.Seq)
	}
	fmt.Fprintf(out, "checkpoint at sequence %d; cold start in %v replayed %d slots and matches the live state (sequence %d, hash %.12s)\n",
		seq, time.Since(start).Round(time.Microsecond), info.SlotsReplayed, cold.Seq, cold.Hash)
	allow := cold.Allowlist("main")
	fmt.Fprintf(out, "visibility of run main: %s; tick 0 admits %q only\n", allow.Mode, mustToken(cold, 0))
	return nil
}

func mustToken(s *index.State, tick int64) string {
	if t, ok := s.Tick("main", tick); ok {
		return t.CommitToken
	}
	return ""
}
