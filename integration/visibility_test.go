package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// checkTick reads a tick directory whole and checks it against its own
// manifest: every table the manifest names is there, and every Parquet
// file's bytes are those the manifest describes (its digest). A partial
// tick fails it.
func checkTick(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return err
	}
	var man struct {
		Tables []struct {
			Name    string `json:"name"`
			Parquet *struct {
				Digest string `json:"digest"`
			} `json:"parquet"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(data, &man); err != nil {
		return err
	}
	if len(man.Tables) != 3 {
		return fmt.Errorf("%s: the manifest names %d tables, want 3", dir, len(man.Tables))
	}
	for _, tb := range man.Tables {
		got, err := os.ReadFile(filepath.Join(dir, tb.Name+".parquet"))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(got)
		if tb.Parquet == nil || "sha256:"+hex.EncodeToString(sum[:]) != tb.Parquet.Digest {
			return fmt.Errorf("%s/%s.parquet: %d bytes that are not the published fragment", dir, tb.Name, len(got))
		}
	}
	return nil
}

// readdirnames lists a directory in the order the mount gives.
func readdirnames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Readers running while ticks commit see only whole, published ticks:
// head always names a tick whose every table is there and is exactly the
// published bytes, and the ticks listed are contiguous from 0.
func TestReadersNeverSeePartialTicks(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 0)
	mt := testMount(t, b)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	reads := make([]int, 3)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				target, err := os.Readlink(mt.path("w", "runs", "main", "head"))
				if err == nil {
					err = checkTick(mt.path("w", "runs", "main", target))
				}
				if err == nil {
					var names []string
					names, err = readdirnames(mt.path("w", "runs", "main", "ticks"))
					for i, n := range names {
						if n != wfs.TickName(int64(i)) {
							err = fmt.Errorf("ticks/ lists %s at %d: not contiguous from 0", n, i)
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
				reads[r]++
			}
		}()
	}
	for w.Tick() < 40 {
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads[0]+reads[1]+reads[2] < 30 {
		t.Errorf("the readers checked only %v ticks; the test proves little", reads)
	}
}

// head (and ticks/) move within a second of a publish by another process's
// writer.
func TestHeadMovesWithinOneSecond(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 0)
	mt := testMount(t, b)
	head := mt.path("w", "runs", "main", "head")
	var worst time.Duration
	for range 5 {
		r, err := w.Step(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		published := time.Now()
		want := "ticks/" + wfs.TickName(r.Tick)
		for {
			got, _ := os.Readlink(head)
			if got == want {
				if _, err := os.Stat(filepath.Join(mt.path("w", "runs", "main"), got, "particle.parquet")); err != nil {
					t.Fatalf("head names %s, which does not resolve: %v", got, err)
				}
				break
			}
			if time.Since(published) > time.Second {
				t.Fatalf("head is %q a second after tick %d was published", got, r.Tick)
			}
			time.Sleep(10 * time.Millisecond)
		}
		worst = max(worst, time.Since(published))
		// The next publish lands at a random point of the freshness window.
		time.Sleep(time.Duration(r.Tick*97%400) * time.Millisecond)
	}
	t.Logf("head moved at most %v after a publish", worst)
}

// mountChild is the mount process the crash test kills: it mounts the
// bucket at p[0] on p[1].
func mountChild(p []string) int {
	bdir, dir := p[0], p[1]
	fail := func(err error) { fmt.Fprintln(os.Stderr, "mount child:", err); os.Exit(3) }
	b, err := local.Open(bdir)
	if err != nil {
		fail(err)
	}
	c, err := cache.Open(dir+".cache", cache.Options{})
	if err != nil {
		fail(err)
	}
	m, err := wfs.New(b, wfs.Options{Cache: c, Writer: quiet})
	if err != nil {
		fail(err)
	}
	srv, err := wfs.Serve(dir, m, wfs.MountOptions{})
	if err != nil {
		fail(err)
	}
	fmt.Println("mounted")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	srv.Unmount()
	return 0
}

func TestMain(m *testing.M) {
	crashtest.Main(m, map[string]crashtest.Func{"mount": mountChild, "ctlwriter": ctlWriter})
}

// Killing the mount process (SIGKILL) while ctl commits are in flight
// leaves the bucket intact: the catalog loads, every published tick's
// fragments are there with their digests, and the world resumes at its
// last published tick.
func TestCrashOfTheMountLeavesTheBucketIntact(t *testing.T) {
	requireFUSE(t)
	bdir, dir := t.TempDir(), t.TempDir()
	cmd := crashtest.Command("mount", bdir, dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		syscall.Unmount(dir, syscall.MNT_DETACH)
	})
	buf := make([]byte, 16)
	if n, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "mounted") {
		t.Fatalf("the mount child did not come up: %q %v", buf[:n], err)
	}
	mt := &mounted{dir: dir}
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	// Commit ticks through ctl until the child dies under them.
	committed := make(chan int64, 1000)
	done := make(chan struct{})
	var stopped error // why the commit loop stopped
	go func() {
		defer close(done)
		for i := int64(0); ; i++ {
			// Raw system calls: Go's poller would wait forever on an
			// EAGAIN from a FUSE file.
			fd, err := syscall.Open(mt.path("w", "ctl"), syscall.O_RDWR, 0)
			if err != nil {
				stopped = err
				return
			}
			var rows []string
			for e := range 200 {
				rows = append(rows, fmt.Sprintf(`{"entity_id":%d,"pos_x":%d,"pos_y":1}`, e, i))
			}
			_, err = syscall.Write(fd, fmt.Appendf(nil, `{"op":"commit_tick","frames":{"body":[%s]}}`+"\n", strings.Join(rows, ",")))
			syscall.Close(fd)
			if err != nil {
				stopped = err
				return
			}
			committed <- i
		}
	}()
	for n := 0; n < 10; n++ {
		select {
		case <-committed:
		case <-done:
			t.Fatalf("the commit loop stopped after %d commits, before the crash: %v", n, stopped)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		t.Errorf("detaching the dead mount: %v", err)
	}
	<-done
	close(committed)
	acked := int64(-1)
	for i := range committed {
		acked = i
	}

	b, err := local.Open(bdir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatalf("the catalog after the crash: %v", err)
	}
	run, _ := s.Run("main")
	if run.Head < acked || run.Published != run.Head+1 {
		t.Fatalf("after the crash: head %d, %d published; %d was acknowledged", run.Head, run.Published, acked)
	}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				data, _, err := b.Get(ctxT(t), f.Path)
				if err != nil || engine.Digest(data) != f.Digest {
					t.Errorf("tick %d: fragment %s: %v (or its digest differs)", tk.Tick, f.Path, err)
				}
			}
		}
		return true
	})
	w, err := engine.ResumeWorld(ctxT(t), b, "w", []*engine.Table{bodyTable(t)}, quiet)
	if err != nil {
		t.Fatalf("resume after the crash: %v", err)
	}
	defer w.Close()
	if w.Tick() != run.Head || w.Frame("body").Len() != 200 {
		t.Errorf("resumed at tick %d with %d rows; the head is %d", w.Tick(), w.Frame("body").Len(), run.Head)
	}
	if _, err := w.Step(ctxT(t)); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("a tick after the resume: %v", err)
	}
}
