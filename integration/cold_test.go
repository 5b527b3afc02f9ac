package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// stateReads records the checkpoint parts (worlds/<w>/state/<hash>) read
// through it, by name.
type stateReads struct {
	bucket.Bucket
	mu    sync.Mutex
	names map[string]int
}

func (s *stateReads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if strings.Contains(name, "/state/") {
		s.mu.Lock()
		s.names[name]++
		s.mu.Unlock()
	}
	return s.Bucket.Get(ctx, name)
}

// read returns how many distinct parts were read, and forgets them.
func (s *stateReads) read() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.names)
	s.names = map[string]int{}
	return n
}

// coldTicks is the number of ticks of checkpointedWorld: past three
// checkpoint parts, so that its checkpoint holds four.
const coldTicks = 3*index.PartTicks + 100

// checkpointedWorld is a bucket holding world w, whose run main published
// ticks 0..coldTicks-1 before a checkpoint and two more after it (one
// fragment each, never written: only the catalog is read), read through
// a stateReads.
func checkpointedWorld(t *testing.T) *stateReads {
	t.Helper()
	b := &stateReads{Bucket: localBucket(t), names: map[string]int{}}
	c, epoch, err := index.CreateWorld(ctxT(t), b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	publish := func(from, to int64) {
		var entries []index.Entry
		for tick := from; tick < to; tick++ {
			token := fmt.Sprintf("%032x", tick)
			entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
				Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
				Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("w", "main", "t", token, 0), Rows: 1}}}}}})
		}
		for len(entries) > 0 {
			k := min(len(entries), 2000)
			if _, err := c.CommitAll(ctxT(t), entries[:k]...); err != nil {
				t.Fatal(err)
			}
			entries = entries[k:]
		}
	}
	if _, err := b.Create(ctxT(t), index.TableInfoPath("w", "t"), []byte(`{"id":"t","name":"t","columns":[]}`)); err != nil {
		t.Fatal(err)
	}
	publish(0, coldTicks)
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	publish(coldTicks, coldTicks+2)
	b.read()
	return b
}

// A lookup of one tick in a world the mount has not loaded reads the
// checkpoint part that holds it (and the head's, which the directories'
// times and the log after the checkpoint read), not the whole history:
// in ticks/, of its table's file, and in tables/<t>/; a tick that does
// not exist is absent, read the same way.
func TestColdTickLookupReadsItsPart(t *testing.T) {
	b := checkpointedWorld(t)
	mt := testMount(t, b)
	ticks := mt.path("w", "runs", "main", "ticks")
	if got := xattr(t, ticks+"/"+wfs.TickName(5000), wfs.XattrToken); got != fmt.Sprintf("%032x", 5000) {
		t.Fatalf("tick 5000's token: %q", got)
	}
	if n := b.read(); n != 2 {
		t.Fatalf("a lookup of tick 5000 read %d of the checkpoint's 4 parts; want 2 (its own and the head's)", n)
	}
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(2*index.PartTicks+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(coldTicks+5)); !os.IsNotExist(err) {
		t.Fatalf("a lookup of a tick never published: %v", err)
	}
	if n := b.read(); n > 2 {
		t.Fatalf("lookups of ticks %d and %d read %d parts; want 2 at most", 2*index.PartTicks+1, coldTicks+5, n)
	}
	for _, p := range []string{
		ticks + "/" + wfs.TickName(6000) + "/t.parquet",
		mt.path("w", "runs", "main", "tables", "t", wfs.TickName(7000)+".parquet"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if n := b.read(); n > 2 {
			t.Fatalf("a lookup of %s read %d of the checkpoint's 4 parts; want 2 at most (its own and the head's)", p, n)
		}
	}
}

// A listing of ticks/ of a world the mount has not loaded streams part by
// part: its first reply reaches the caller having read the first part
// (and the head's), and the whole listing is every tick in order.
func TestColdTickListingStreams(t *testing.T) {
	b := checkpointedWorld(t)
	mt := testMount(t, b)
	ticks := mt.path("w", "runs", "main", "ticks")
	fd, err := syscall.Open(ticks, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := syscall.Getdents(fd, buf)
	syscall.Close(fd)
	if err != nil || n == 0 {
		t.Fatalf("getdents: %d, %v", n, err)
	}
	if read := b.read(); read > 2 {
		t.Fatalf("the first reply of a listing of ticks/ read %d of the checkpoint's 4 parts; want 2 at most (the first and the head's)", read)
	}
	names := ls(t, ticks)
	if len(names) != coldTicks+2 {
		t.Fatalf("ticks/ lists %d entries, want %d", len(names), coldTicks+2)
	}
	for i, name := range names {
		if name != wfs.TickName(int64(i)) {
			t.Fatalf("entry %d of ticks/ is %s, want %s", i, name, wfs.TickName(int64(i)))
		}
	}
}
