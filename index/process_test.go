package index

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// The multi-process tests run this test binary as committer processes.
func TestMain(m *testing.M) {
	// The package's zstd encoders make their pools of state on first use,
	// bound to the goroutine group that used them: used first inside a
	// synctest bubble, they could not be used from another. Use them once
	// here, outside every bubble.
	encoder.EncodeAll(nil, nil)
	slotEncoder.EncodeAll(nil, nil)
	crashtest.Main(m, map[string]crashtest.Func{"committer": committerChild})
}

// committerChild publishes parts[3] ticks into world parts[1] of the bucket
// at URL parts[0] as writer parts[2] (every fourth one contested by all
// writers) and prints "ack TICK TOKEN" or "conflict TICK" for each.
func committerChild(parts []string) int {
	w, _ := strconv.Atoi(parts[2])
	n, _ := strconv.Atoi(parts[3])
	ctx := context.Background()
	b, err := bucketurl.Open(ctx, parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	c, err := Open(ctx, b, parts[1], Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	epoch := c.Tip().World.Epoch
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tick := int64(w*100000 + i)
			if i%4 == 0 {
				tick = int64(i)
			}
			token := fmt.Sprintf("w%d-%d", w, i)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := c.Commit(cctx, publish("r", tick, token, epoch))
			mu.Lock()
			defer mu.Unlock()
			var ce *CatalogConflictError
			switch {
			case err == nil:
				fmt.Fprintf(out, "ack %d %s\n", tick, token)
			case errors.As(err, &ce):
				fmt.Fprintf(out, "conflict %d\n", tick)
			default:
				fmt.Fprintf(out, "error %d %v\n", tick, err)
			}
			out.Flush()
		}()
	}
	wg.Wait()
	return 0
}

type childResult struct {
	acks      map[int64]string
	conflicts []int64
	errors    []string
	killed    bool
}

func runChildren(t *testing.T, url string, writers, n int, env ...string) []childResult {
	t.Helper()
	results := make([]childResult, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := crashtest.Command("committer", url, "w", strconv.Itoa(w), strconv.Itoa(n))
			cmd.Env = append(cmd.Env, env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			r := childResult{acks: map[int64]string{}}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.killed = true
			} else if err != nil {
				t.Errorf("writer %d: %v\n%s", w, err, stderr.String())
			}
			for _, line := range strings.Split(stdout.String(), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				tick, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "ack":
					r.acks[tick] = f[2]
				case "conflict":
					r.conflicts = append(r.conflicts, tick)
				case "error":
					r.errors = append(r.errors, line)
				}
			}
			results[w] = r
		}()
	}
	wg.Wait()
	return results
}

// verify checks the children's outcomes against the log: every
// acknowledged publish is in it with its token, every conflict is real,
// and nothing is in it that no writer attempted.
func verify(t *testing.T, b bucket.Bucket, results []childResult) *State {
	t.Helper()
	final, _, err := Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for w, r := range results {
		for tick, tok := range r.acks {
			tk, ok := final.Tick("r", tick)
			if !ok || tk.CommitToken != tok {
				t.Fatalf("writer %d: acknowledged tick %d (%s) is not in the log", w, tick, tok)
			}
			acked++
		}
		for _, tick := range r.conflicts {
			tk, ok := final.Tick("r", tick)
			if !ok || strings.HasPrefix(tk.CommitToken, fmt.Sprintf("w%d-", w)) {
				t.Fatalf("writer %d: conflict on tick %d, but the log has %+v", w, tick, tk)
			}
		}
		if len(r.errors) > 0 {
			t.Fatalf("writer %d: %v", w, r.errors)
		}
	}
	opsOnce(t, b, "w")
	final.Ticks("r", 0, func(tk *Tick) bool {
		if !strings.HasPrefix(tk.CommitToken, "w") {
			t.Fatalf("tick %d has token %s that no writer used", tk.Tick, tk.CommitToken)
		}
		return true
	})
	return final
}

// Committers in separate processes on one bucket, local and GCS (fake
// server in this process, reached over HTTP by the children).
func TestCommittersInSeparateProcesses(t *testing.T) {
	for _, backend := range []string{"local", "gcs"} {
		for _, writers := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d-writers", backend, writers), func(t *testing.T) {
				url := t.TempDir()
				if backend == "gcs" {
					gcstest.Start(t, "procs")
					url = "gs://procs/" + strconv.Itoa(writers)
				}
				b, err := bucketurl.Open(ctxT(t), url)
				if err != nil {
					t.Fatal(err)
				}
				c, _ := newWorld(t, b, "w", Options{NoCompactor: true})
				c.Close()
				const n = 120
				results := runChildren(t, url, writers, n)
				final := verify(t, b, results)
				acks, conflicts := 0, 0
				for _, r := range results {
					acks += len(r.acks)
					conflicts += len(r.conflicts)
				}
				contested := n / 4
				if run, _ := final.Run("r"); int(run.Published) != acks || acks+conflicts != writers*n || conflicts != contested*(writers-1) {
					t.Fatalf("%d published, %d acks, %d conflicts (want %d)", run.Published, acks, conflicts, contested*(writers-1))
				}
			})
		}
	}
}

// A committer killed at each failpoint of the commit path: the log stays
// readable, everything acknowledged is in it, and the survivors go on.
func TestCommitterCrashAtFailpoints(t *testing.T) {
	for _, point := range []string{FailpointBeforeSlot, FailpointSlotCreated} {
		t.Run(point, func(t *testing.T) {
			url := t.TempDir()
			b, _ := bucketurl.Open(ctxT(t), url)
			c, _ := newWorld(t, b, "w", Options{NoCompactor: true})
			c.Close()
			results := runChildren(t, url, 1, 200, crashtest.Failpoint(point+"@5"))
			if !results[0].killed {
				t.Fatalf("the committer did not die at %s", point)
			}
			final := verify(t, b, results)
			if point == FailpointSlotCreated && final.Slots <= 5 {
				t.Fatalf("%d slots: the fifth slot should have landed before the crash", final.Slots)
			}
			// Another process continues the same log.
			results = runChildren(t, url, 2, 40)
			verify(t, b, results)
		})
	}
}
