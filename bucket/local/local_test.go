package local_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/internal/crashtest"
)

func TestMain(m *testing.M) {
	crashtest.Main(m, map[string]crashtest.Func{"writer": crashChild})
}

// content is what object number i holds: self-describing, sized from 0 to
// about 300 KB so that writes take several system calls.
func content(i int) []byte {
	size := (i * 7919) % (300 << 10)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "object %d size %d\n", i, size)
	r := rand.New(rand.NewPCG(uint64(i), 1))
	for buf.Len() < size {
		buf.WriteByte(byte('a' + r.IntN(26)))
	}
	return buf.Bytes()
}

// objName is object i's name: in a directory shared by all, or with
// WORLDFS_CRASH_NEWDIRS set, in a new directory of its own (as a tick's
// fragments are).
func objName(i int) string {
	if os.Getenv(newDirsEnv) != "" {
		return fmt.Sprintf("crash/%06d/0.parquet", i)
	}
	return fmt.Sprintf("crash/%06d", i)
}

const newDirsEnv = "WORLDFS_CRASH_NEWDIRS"

// crashChild creates objects in the bucket at args[0] from number args[1]
// on, printing each name once its Create returned, until it is killed.
func crashChild(args []string) int {
	b, err := local.Open(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	start, _ := strconv.Atoi(args[1])
	out := bufio.NewWriter(os.Stdout)
	for i := start; ; i++ {
		// CreateOnce: an object whose create landed just before the last
		// crash is found whole and taken as done.
		if _, err := bucket.CreateOnce(context.Background(), b, objName(i), content(i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		fmt.Fprintf(out, "ok %d\n", i)
		out.Flush()
	}
}

// startChild starts a writer process on dir creating from object start on.
func startChild(t *testing.T, dir string, start int, env ...string) *crashtest.Proc {
	t.Helper()
	cmd := crashtest.Command("writer", dir, strconv.Itoa(start))
	cmd.Env = append(cmd.Env, env...)
	return crashtest.Start(t, cmd)
}

// acknowledged parses the child's "ok N" lines.
func acknowledged(out []byte) []int {
	var acks []int
	for _, line := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "ok "); ok {
			i, err := strconv.Atoi(n)
			if err == nil {
				acks = append(acks, i)
			}
		}
	}
	return acks
}

// checkBucket asserts that every object in the bucket is complete, every
// acknowledged object exists, and returns the number of objects.
func checkBucket(t *testing.T, dir string, acks []int) int {
	t.Helper()
	b, err := local.Open(dir) // also cleans the crashed writer's temp files
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := bucket.Collect(b.List(ctx, "crash/", ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(a.Name, "crash/"), "/0.parquet"))
		if err != nil {
			t.Fatalf("unexpected object %s", a.Name)
		}
		got, _, err := b.Get(ctx, a.Name)
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("object %s is torn: %d bytes, want %d (%v)", a.Name, len(got), len(content(i)), err)
		}
	}
	for _, i := range acks {
		if _, err := b.Stat(ctx, objName(i)); err != nil {
			t.Fatalf("acknowledged object %s is gone: %v", objName(i), err)
		}
	}
	tmp, _ := os.ReadDir(filepath.Join(dir, bucket.ReservedPrefix, "tmp"))
	if len(tmp) != 0 {
		t.Fatalf("%d temporary files survive Open after the writer died", len(tmp))
	}
	return len(all)
}

// TestCrashAtRandomMoments kills a writer process with SIGKILL at random
// moments; every name must then hold a complete object or nothing, and every
// acknowledged create must be there.
func TestCrashAtRandomMoments(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	next, have, kills := 0, 0, 0
	for round := range 12 {
		c := startChild(t, dir, next)
		// Kill at a random moment once the writer is up and creating.
		select {
		case <-c.FirstLine():
		case <-time.After(time.Minute):
			t.Fatal("writer acknowledged nothing in a minute")
		}
		time.Sleep(time.Duration(r.IntN(30_000)) * time.Microsecond)
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		out, killed := c.Wait()
		acks := acknowledged(out)
		if killed {
			kills++
		} else {
			t.Fatalf("round %d: writer exited on its own: %v", round, c.Cmd.ProcessState)
		}
		n := checkBucket(t, dir, acks)
		if n < have {
			t.Fatalf("round %d: %d objects, had %d before", round, n, have)
		}
		have = n
		if len(acks) > 0 {
			next = acks[len(acks)-1] + 1
		}
	}
	if kills != 12 || have < 12 {
		t.Fatalf("%d kills, %d objects: the test did not exercise crashes", kills, have)
	}
	t.Logf("12 SIGKILLs, %d objects checked", have)
}

// TestCrashAtFailpoints kills the writer at each named point of Create, on
// its third object, and checks what that object must look like; with
// objects in one directory, and each in a new directory of its own (whose
// entry is synced while the data is).
func TestCrashAtFailpoints(t *testing.T) {
	for _, tc := range []struct {
		point  string
		landed bool // the third object is complete under its name
	}{
		{local.FailpointWritten, false},
		{local.FailpointSynced, false},
		{local.FailpointLinked, true},
		{local.FailpointDone, true},
	} {
		for _, newDirs := range []string{"", "1"} {
			name := tc.point
			if newDirs != "" {
				name += "/new-directories"
			}
			t.Run(name, func(t *testing.T) {
				t.Setenv(newDirsEnv, newDirs)
				crashAtFailpoint(t, tc.point, tc.landed)
			})
		}
	}
}

// crashAtFailpoint kills the writer at point on its third object and
// checks the bucket: the third object landed whole, or not at all.
func crashAtFailpoint(t *testing.T, point string, landed bool) {
	dir := t.TempDir()
	out := crashtest.KilledAt(t, point+"@3", "writer", dir, "0")
	acks := acknowledged(out)
	if len(acks) != 2 {
		t.Fatalf("writer acknowledged %v before the crash, want objects 0 and 1", acks)
	}
	tmp, _ := os.ReadDir(filepath.Join(dir, bucket.ReservedPrefix, "tmp"))
	if len(tmp) != 1 {
		t.Fatalf("%d temporary files after the crash, want the one in flight", len(tmp))
	}
	n := checkBucket(t, dir, []int{0, 1})
	want := 2
	if landed {
		want = 3
	}
	if n != want {
		t.Fatalf("%d objects after a crash at %s, want %d", n, point, want)
	}
}

func TestNamesStayInsideRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "bucket")
	b, err := local.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range append(buckettest.BadNames, "../sibling", "a/../../../etc/x") {
		if _, err := b.Create(ctx, name, []byte("x")); !errors.Is(err, bucket.ErrInvalidName) {
			t.Errorf("Create(%.40q) = %v, want ErrInvalidName", name, err)
		}
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) > 1 || len(entries) == 1 && entries[0].Name() != "bucket" {
		t.Fatalf("files appeared beside the bucket root: %v", entries)
	}
}

func TestObjectAndPrefixConflict(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Create(ctx, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(ctx, "a/b", []byte("y"))
	if err == nil || errors.Is(err, bucket.ErrExist) || !strings.Contains(err.Error(), "cannot hold other objects") {
		t.Fatalf("Create(a/b) under object a = %v, want a clear conflict error", err)
	}
	if _, err := b.Create(ctx, "d/e", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(ctx, "d", []byte("y"))
	if err == nil || errors.Is(err, bucket.ErrExist) || !strings.Contains(err.Error(), "directory of other objects") {
		t.Fatalf("Create(d) over prefix d/ = %v, want a clear conflict error", err)
	}
}

func TestOpenCleansOnlyDeadWritersTemp(t *testing.T) {
	dir := t.TempDir()
	if _, err := local.Open(dir); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, bucket.ReservedPrefix, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, "4194305-deadbeef") // above any pid_max
	live := filepath.Join(tmp, strconv.Itoa(os.Getpid())+"-cafe")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := local.Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead writer's temp file survived Open: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live writer's temp file was removed: %v", err)
	}
}

func TestPathReadsInPlace(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(context.Background(), "data/w/0.parquet", []byte("PAR1")); err != nil {
		t.Fatal(err)
	}
	p, err := b.Path("data/w/0.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "PAR1" {
		t.Fatalf("reading %s in place = %q, %v", p, got, err)
	}
}

// Opening and reading a bucket whose directory is missing makes nothing; the
// first write makes it.
func TestReadingMakesNothing(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "b")
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Exists(); ok || err != nil {
		t.Fatalf("Exists of a missing directory = %v, %v", ok, err)
	}
	if _, _, err := b.Get(ctx, "x"); !errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("Get in a missing bucket = %v, want ErrNotExist", err)
	}
	if _, err := b.Stat(ctx, "x"); !errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("Stat in a missing bucket = %v, want ErrNotExist", err)
	}
	if all, err := bucket.Collect(b.List(ctx, "", "")); len(all) != 0 || err != nil {
		t.Errorf("List of a missing bucket = %v, %v", all, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("opening and reading made the bucket's directory: %v", err)
	}
	if _, err := b.Create(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Exists(); !ok || err != nil {
		t.Fatalf("Exists after the first write = %v, %v", ok, err)
	}
}
