package integration

import (
	"context"
	"fmt"
	"iter"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine/enginetest"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// stateReads records the checkpoint parts (worlds/<w>/state/<hash>) and
// the parts' token filters read through it, by name, and counts the reads
// of checkpoints.
type stateReads struct {
	bucket.Bucket
	mu          sync.Mutex
	names       map[string]int
	filters     map[string]int
	checkpoints int
	// logDelay, if set, is how long each read of a log slot, or listing
	// of the log, takes, as on a remote bucket.
	logDelay atomic.Int64
}

func (s *stateReads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if d := time.Duration(s.logDelay.Load()); d > 0 && strings.Contains(name, "/log/") {
		if err := bucket.Sleep(ctx, d); err != nil {
			return nil, bucket.Attrs{}, err
		}
	}
	s.mu.Lock()
	if strings.Contains(name, "/state/") && strings.HasSuffix(name, ".tok") {
		s.filters[name]++
	} else if strings.Contains(name, "/state/") {
		s.names[name]++
	}
	if strings.Contains(name, "/checkpoints/") {
		s.checkpoints++
	}
	s.mu.Unlock()
	return s.Bucket.Get(ctx, name)
}

// List lists, taking logDelay first for a listing of the log.
func (s *stateReads) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	if d := time.Duration(s.logDelay.Load()); d > 0 && strings.Contains(prefix, "/log/") {
		if err := bucket.Sleep(ctx, d); err != nil {
			return func(yield func(bucket.Attrs, error) bool) { yield(bucket.Attrs{}, err) }
		}
	}
	return s.Bucket.List(ctx, prefix, startAfter)
}

// read returns how many distinct parts were read, and forgets them (and
// the filters read).
func (s *stateReads) read() int { return len(s.readNames()) }

// readNames returns the names of the parts read, and forgets them (and
// the filters read).
func (s *stateReads) readNames() map[string]int {
	parts, _ := s.take()
	return parts
}

// readWithFilters returns how many distinct parts and token filters were
// read, and forgets them.
func (s *stateReads) readWithFilters() (parts, filters int) {
	p, f := s.take()
	return len(p), len(f)
}

// take returns the names of the parts and of the token filters read, and
// forgets them.
func (s *stateReads) take() (parts, filters map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts, filters = s.names, s.filters
	s.names, s.filters = map[string]int{}, map[string]int{}
	return parts, filters
}

// checkpointsRead returns how many times a checkpoint was read, and
// forgets them.
func (s *stateReads) checkpointsRead() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.checkpoints
	s.checkpoints = 0
	return n
}

// coldTicks is the number of ticks of checkpointedWorld: past three
// checkpoint parts, so that its checkpoint holds four.
const coldTicks = 3*index.PartTicks + 100

// checkpointedWorld is a bucket holding world w, whose run main published
// ticks 0..coldTicks-1 before a checkpoint and two more after it (one
// fragment each, never written: only the catalog is read), read through
// a stateReads; publish publishes ticks from..to-1 more.
func checkpointedWorld(t *testing.T) (b *stateReads, publish func(from, to int64)) {
	t.Helper()
	return checkpointedWorldOf(t, coldTicks)
}

// checkpointedWorldOf is checkpointedWorld with ticks 0..n-1 before the
// checkpoint.
func checkpointedWorldOf(t *testing.T, n int64) (b *stateReads, publish func(from, to int64)) {
	t.Helper()
	return checkpointedWorldTokens(t, n, coldToken)
}

// checkpointedWorldTokens is checkpointedWorldOf with tick's token
// token(tick).
func checkpointedWorldTokens(t *testing.T, n int64, coldToken func(int64) string) (b *stateReads, publish func(from, to int64)) {
	t.Helper()
	b = &stateReads{Bucket: localBucket(t), names: map[string]int{}, filters: map[string]int{}}
	c, epoch, err := index.CreateWorld(ctxT(t), b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	publish = func(from, to int64) {
		var entries []index.Entry
		for tick := from; tick < to; tick++ {
			token := coldToken(tick)
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
	publish(0, n)
	if _, err := c.Checkpoint(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	publish(n, n+2)
	b.read()
	b.checkpointsRead()
	return b, publish
}

// coldToken is tick's token in checkpointedWorld: one that names its
// tick, as a writer's does.
func coldToken(tick int64) string { return index.TickToken(tick, [16]byte{7}) }

// A lookup of tokens/<token> of a token that names its tick, in a world
// the mount has not loaded, reads the part holding the tick (and the
// head's), as a lookup of the tick does; one its named tick does not
// carry is looked for in the parts whose token filters may hold it.
func TestColdTokenLookupReadsItsPart(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMount(t, b)
	tok := coldToken(5000)
	if got := xattr(t, mt.path("w", "tokens", tok), wfs.XattrTick); got != "5000" {
		t.Fatalf("tokens/%s is tick %q, want 5000", tok, got)
	}
	if n := b.read(); n != 2 {
		t.Fatalf("a lookup of the token of tick 5000 read %d of the checkpoint's 4 parts; want 2 (its own and the head's)", n)
	}
	// Named ticks the token is not of: found nowhere, after the named
	// part and the filter of the one part not read yet.
	if _, err := os.Lstat(mt.path("w", "tokens", index.TickToken(9000, [16]byte{8}))); !os.IsNotExist(err) {
		t.Fatalf("a lookup of a token no tick carries: %v", err)
	}
	if n, f := b.readWithFilters(); n != 1 || f != 1 {
		t.Fatalf("a lookup of a token that its named tick does not carry read %d parts and %d token filters; want 1 (the named tick's) and 1 (part 0's)", n, f)
	}
}

// oldToken is a token that does not name its tick, as those minted
// before tokens named their tick.
func oldToken(tick int64) string { return fmt.Sprintf("old-%d", tick) }

// A lookup of tokens/<token> of a token that does not name its tick, in
// a world the mount has not loaded, reads the token filters of the run's
// parts and the parts they say may hold it (and the head's), not every
// part; one no tick carries reads no part, and one published after the
// checkpoint is found.
func TestColdOldTokenLookupReadsItsCandidateParts(t *testing.T) {
	b, _ := checkpointedWorldTokens(t, coldTicks, oldToken)
	mt := testMount(t, b)
	if got := xattr(t, mt.path("w", "tokens", oldToken(5000)), wfs.XattrTick); got != "5000" {
		t.Fatalf("tokens/%s is tick %q, want 5000", oldToken(5000), got)
	}
	if n, f := b.readWithFilters(); n != 2 || f != 3 {
		t.Fatalf("a lookup of the token of tick 5000 read %d of the checkpoint's 4 parts and %d token filters; want 2 (its own and the head's) and 3 (the others')", n, f)
	}
	if _, err := os.Lstat(mt.path("w", "tokens", "old-none")); !os.IsNotExist(err) {
		t.Fatalf("a lookup of a token no tick carries: %v", err)
	}
	if n, f := b.readWithFilters(); n != 0 || f != 0 {
		t.Fatalf("a lookup of a token no tick carries read %d parts and %d token filters; want none (the filters are held)", n, f)
	}
	if got := xattr(t, mt.path("w", "tokens", oldToken(coldTicks+1)), wfs.XattrTick); got != fmt.Sprint(coldTicks+1) {
		t.Fatalf("tokens/%s is tick %q, want %d", oldToken(coldTicks+1), got, coldTicks+1)
	}
	if got := xattr(t, mt.path("w", "tokens", oldToken(100)), wfs.XattrTick); got != "100" {
		t.Fatalf("tokens/%s is tick %q, want 100", oldToken(100), got)
	}
	if n, f := b.readWithFilters(); n != 1 || f != 0 {
		t.Fatalf("lookups of the tokens of ticks %d and 100 read %d parts and %d token filters; want 1 (part 0) and none", coldTicks+1, n, f)
	}
}

// A lookup of a token that does not name its tick, in a world whose
// parts have no token filters (written by a worldfs that wrote none),
// has every part as a candidate: past coldKeepParts of them it goes
// through the world's catalog (the view), which the mount keeps and
// refreshes, not a cold state it would load anew for each lookup. With
// the filters it reads two parts and no catalog.
func TestColdOldTokenLookupWithoutFiltersUsesTheCatalog(t *testing.T) {
	const parts = 20
	b, _ := checkpointedWorldTokens(t, parts*index.PartTicks, oldToken)
	lookup := func() (resolved int64, read int) {
		t.Helper()
		mt := testMount(t, b)
		before := mountStats(t, mt).Ops["resolve"].Count
		b.read()
		if got := xattr(t, mt.path("w", "tokens", oldToken(5000)), wfs.XattrTick); got != "5000" {
			t.Fatalf("tokens/%s is tick %q, want 5000", oldToken(5000), got)
		}
		return mountStats(t, mt).Ops["resolve"].Count - before, b.read()
	}
	if resolved, read := lookup(); resolved != 0 || read != 2 {
		t.Fatalf("with token filters: %d resolves through the catalog, %d parts read; want none and 2", resolved, read)
	}
	ctx := ctxT(t)
	for a, err := range b.List(ctx, index.ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(a.Name, ".tok") {
			if err := bucket.DeleteOnce(ctx, b, a.Name, a.Generation); err != nil {
				t.Fatal(err)
			}
		}
	}
	if resolved, read := lookup(); resolved == 0 || read != parts {
		t.Fatalf("without token filters: %d resolves through the catalog, %d parts read; want the catalog's, every part (%d)", resolved, read, parts)
	}
}

// A lookup of one tick in a world the mount has not loaded reads the
// checkpoint part that holds it (and the head's, which the directories'
// times and the log after the checkpoint read), not the whole history:
// in ticks/, of its table's file, and in tables/<t>/; a tick that does
// not exist is absent, read the same way.
func TestColdTickLookupReadsItsPart(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMount(t, b)
	ticks := mt.path("w", "runs", "main", "ticks")
	if got := xattr(t, ticks+"/"+wfs.TickName(5000), wfs.XattrToken); got != coldToken(5000) {
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

// A listing of ticks/ or of tables/<t>/ of a world the mount has not
// loaded streams part by part: its first reply reaches the caller having
// read the first part (and the head's), and the whole listing is every
// tick in order.
func TestColdTickListingStreams(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMount(t, b)
	for _, c := range []struct{ dir, suffix string }{
		{mt.path("w", "runs", "main", "ticks"), ""},
		{mt.path("w", "runs", "main", "tables", "t"), ".parquet"},
	} {
		b.read()
		fd, err := syscall.Open(c.dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := syscall.Getdents(fd, buf)
		syscall.Close(fd)
		if err != nil || n == 0 {
			t.Fatalf("getdents %s: %d, %v", c.dir, n, err)
		}
		if read := b.read(); read > 2 {
			t.Fatalf("the first reply of a listing of %s read %d of the checkpoint's 4 parts; want 2 at most (the first and the head's)", c.dir, read)
		}
		names := ls(t, c.dir)
		if len(names) != coldTicks+2 {
			t.Fatalf("%s lists %d entries, want %d", c.dir, len(names), coldTicks+2)
		}
		for i, name := range names {
			if name != wfs.TickName(int64(i))+c.suffix {
				t.Fatalf("entry %d of %s is %s, want %s", i, c.dir, name, wfs.TickName(int64(i))+c.suffix)
			}
		}
	}
}

// The mount answers lookups in a world read cold from the partial state it
// read last, for as long as a catalog snapshot would be used (reading no
// checkpoint again, and only the parts it lacks); a tick that state lacks
// is looked for at the tip, so a tick published a moment ago is there.
func TestColdLookupsShareAState(t *testing.T) {
	b, publish := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	ticks := mt.path("w", "runs", "main", "ticks")
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(5000)); err != nil {
		t.Fatal(err)
	}
	b.read()
	b.checkpointsRead()
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(5001)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(9000)); err != nil {
		t.Fatal(err)
	}
	if parts, cps := b.read(), b.checkpointsRead(); parts != 1 || cps != 0 {
		t.Fatalf("lookups of ticks 5001 and 9000 after one of tick 5000 read %d parts and %d checkpoints; want 1 part (9000's) and no checkpoint", parts, cps)
	}
	publish(coldTicks+2, coldTicks+3)
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(coldTicks+2)); err != nil {
		t.Fatalf("a tick published after the mount's last read: %v", err)
	}
}

// A ctl command that succeeded refreshes every snapshot the mount reads,
// a world read cold included: after it, head names a tick another writer
// published, however long the mount's freshness.
func TestCtlRefreshesColdWorlds(t *testing.T) {
	b, publish := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	head := mt.path("w", "runs", "main", "head")
	if got, err := os.Readlink(head); err != nil || got != "ticks/"+wfs.TickName(coldTicks+1) {
		t.Fatalf("head of the cold world: %q, %v", got, err)
	}
	publish(coldTicks+2, coldTicks+3)
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"x","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create x: %v %+v", errno, a)
	}
	if got, err := os.Readlink(head); err != nil || got != "ticks/"+wfs.TickName(coldTicks+2) {
		t.Fatalf("head after a ctl command: %q, %v; want the tick published before it", got, err)
	}
}

// A published tick never changes: a lookup of one that the mount's cold
// state already holds reads nothing, however old that state is (a
// freshness of 1 ns makes every state stale at once); a tick of a part it
// lacks is looked for in a state brought to the tip. The lookups are made
// relative to an open ticks/ directory, so that only they reach the mount.
func TestColdLookupOfAHeldTickReadsNothing(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	at := ticksLookup(t, mt)
	lookup := func(n int64) {
		t.Helper()
		if err := at(n); err != nil {
			t.Fatalf("tick %d: %v", n, err)
		}
	}
	lookup(5000)
	b.read()
	b.checkpointsRead()
	for n := int64(5001); n < 5010; n++ {
		lookup(n)
	}
	if c, p := b.checkpointsRead(), b.read(); c != 0 || p != 0 {
		t.Fatalf("9 lookups of ticks the cold state holds read the checkpoint %d times and %d parts", c, p)
	}
	refreshes := mountStats(t, mt).Ops["cold refresh"].Count
	lookup(2*index.PartTicks + 1)
	if p, r := b.read(), mountStats(t, mt).Ops["cold refresh"].Count-refreshes; p != 1 || r == 0 {
		t.Fatalf("a lookup of a tick of a part the cold state lacks read %d parts and refreshed the state %d times; want its part, read in a state brought to the tip", p, r)
	}
}

// A lookup in tables/<t>/ of a world read cold may take its tick from a
// state read before maintenance moved the tick's rows (Mount.held); when a
// file that state names is gone, the lookup plans the tick again at the
// catalog's tip rather than failing. Here tick 41 is split (its rows in two
// fragments, sized by deriving its file at lookup), the mount reads tick
// 40 of the same part, then compaction moves tick 41's rows and its two
// fragments are deleted, as collection does past the retention.
func TestLookupFollowsRowsMovedSinceTheColdState(t *testing.T) {
	ctx := ctxT(t)
	b := localBucket(t)
	w := particleWorld(t, b, "w", 30)
	enginetest.Run(t, w, 79)
	splitFragment(t, b, "w", 40, "particle")
	splitFragment(t, b, "w", 41, "particle")
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	split := fragmentOf(t, b, 41)
	want, err := os.Stat(testMount(t, b).path("w", "runs", "main", "tables", "particle", wfs.TickName(41)+".parquet"))
	if err != nil {
		t.Fatal(err)
	}
	mt := testMount(t, b)
	file := func(n int64) string {
		return mt.path("w", "runs", "main", "tables", "particle", wfs.TickName(n)+".parquet")
	}
	if _, err := os.Stat(file(40)); err != nil {
		t.Fatal(err)
	}
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	if fragmentOf(t, b, 41).Span == nil {
		t.Fatal("tick 41 was not compacted")
	}
	for j := range 2 {
		name := strings.Replace(split.Path, "/0.parquet", fmt.Sprintf("/%d.parquet", j), 1)
		a, err := b.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, name, a.Generation); err != nil {
			t.Fatal(err)
		}
	}
	info, err := os.Stat(file(41))
	if err != nil {
		t.Fatalf("lookup of tick 41 after its fragments were collected: %v (a mount opened before sized it %d)", err, want.Size())
	}
	data, err := os.ReadFile(file(41))
	if err != nil || info.Size() != want.Size() || int64(len(data)) != want.Size() {
		t.Fatalf("tick 41: size %d at lookup, %d bytes read (%v); it has %d", info.Size(), len(data), err, want.Size())
	}
}

// Lookups of ticks not published yet, in a world read cold, share one
// refresh of the mount's state from the log's tail: a burst of them reads
// no checkpoint (the state is refreshed, not loaded anew), and concurrent
// ones wait for one refresh rather than each making its own. A tick
// published afterwards is found the same way.
func TestColdMissesShareOneRefresh(t *testing.T) {
	b, publish := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	ticks := mt.path("w", "runs", "main", "ticks")
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(5000)); err != nil {
		t.Fatal(err)
	}
	b.read()
	b.checkpointsRead()
	b.logDelay.Store(int64(20 * time.Millisecond)) // so that the lookups meet while a refresh reads
	before := mountStats(t, mt).Ops["cold refresh"].Count
	const misses = 32
	var wg sync.WaitGroup
	errs := make([]error, misses)
	for i := range misses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = os.Lstat(ticks + "/" + wfs.TickName(coldTicks+10+int64(i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !os.IsNotExist(err) {
			t.Fatalf("lookup of unpublished tick %d: %v", coldTicks+10+i, err)
		}
	}
	refreshes := mountStats(t, mt).Ops["cold refresh"].Count - before
	if cps := b.checkpointsRead(); cps != 0 || refreshes == 0 || refreshes > misses/4 {
		t.Fatalf("%d concurrent lookups of unpublished ticks read the checkpoint %d times and refreshed the state %d times; want no checkpoint and a few shared refreshes", misses, cps, refreshes)
	}
	publish(coldTicks+2, coldTicks+12)
	if _, err := os.Lstat(ticks + "/" + wfs.TickName(coldTicks+11)); err != nil {
		t.Fatalf("a tick published after the misses: %v", err)
	}
	if cps := b.checkpointsRead(); cps != 0 {
		t.Fatalf("finding a tick published since read the checkpoint %d times; want none (the log's tail)", cps)
	}
}

// A cold state whose refresh reads a part of a checkpoint that was
// replaced and collected since is loaded anew from the newest checkpoint:
// the lookup answers, it does not fail. Here a rewrite of tick 9000 (in a
// part the state never read) is checkpointed, and the old checkpoint's
// part holding tick 9000 is deleted, as collection does.
func TestColdRefreshAfterItsCheckpointWasCollected(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	lookup := ticksLookup(t, mt) // only the lookups under test refresh the state
	if err := lookup(5000); err != nil {
		t.Fatal(err)
	}
	collectReplacedParts(t, b, func(c *index.Catalog) { moveRows(t, c, 9000) })
	loads := mountStats(t, mt).Ops["cold load"].Count
	if err := lookup(9001); err != nil {
		t.Fatalf("a lookup after the cold state's checkpoint was collected: %v", err)
	}
	if n := mountStats(t, mt).Ops["cold load"].Count - loads; n != 1 {
		t.Fatalf("the lookup loaded %d cold states; want 1 (anew, from the newest checkpoint)", n)
	}
}

// newestCheckpointName returns the name of world w's newest checkpoint.
func newestCheckpointName(t *testing.T, b bucket.Bucket) string {
	t.Helper()
	var newest string
	for a, err := range b.List(ctxT(t), index.CheckpointPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		newest = a.Name
	}
	if newest == "" {
		t.Fatal("world w has no checkpoint")
	}
	return newest
}

// A cold state holds what its readers use lately: once lookups all over
// the history have grown it past a bound, it is loaded anew for the
// question asked rather than refreshed with every part it ever read.
func TestColdStateGivesBackPartsItGrew(t *testing.T) {
	const parts = 20
	b, _ := checkpointedWorldOf(t, parts*index.PartTicks)
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	lookup := ticksLookup(t, mt)
	if err := lookup(0); err != nil {
		t.Fatal(err)
	}
	loads := mountStats(t, mt).Ops["cold load"].Count
	for k := int64(1); k < parts; k++ {
		if err := lookup(k*index.PartTicks + 7); err != nil {
			t.Fatalf("tick of part %d: %v", k, err)
		}
	}
	if n := mountStats(t, mt).Ops["cold load"].Count - loads; n == 0 {
		t.Fatalf("lookups in %d parts of the history kept refreshing one cold state holding them all; it was never loaded anew", parts)
	}
}

// A listing of ticks/ held open while its checkpoint is replaced and the
// old one's parts are collected goes on, from a state loaded anew, with
// every tick once and in order (a file manager may hold a directory open
// for longer than collection keeps a replaced checkpoint).
func TestColdListingOutlivesItsCheckpoint(t *testing.T) {
	b, _ := checkpointedWorld(t)
	mt := testMount(t, b)
	f, err := os.Open(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first, err := f.Readdirnames(100)
	if err != nil {
		t.Fatal(err)
	}
	collectReplacedParts(t, b, func(c *index.Catalog) {
		moveRows(t, c, 5000) // parts 1 and 2, which the listing has not read
		moveRows(t, c, 9000)
	})
	rest, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatalf("the listing after its checkpoint was collected: %v", err)
	}
	names := append(first, rest...)
	if len(names) != coldTicks+2 {
		t.Fatalf("ticks/ listed %d entries, want %d", len(names), coldTicks+2)
	}
	for i, name := range names {
		if name != wfs.TickName(int64(i)) {
			t.Fatalf("entry %d is %s, want %s", i, name, wfs.TickName(int64(i)))
		}
	}
}

// collectReplacedParts commits what change commits to world w of b,
// checkpoints it, and deletes the parts of the checkpoint before that the
// new one no longer names, as collection does once it is replaced.
func collectReplacedParts(t *testing.T, b bucket.Bucket, change func(*index.Catalog)) {
	t.Helper()
	ctx := ctxT(t)
	old, err := index.CheckpointShards(ctx, b, "w", newestCheckpointName(t, b))
	if err != nil {
		t.Fatal(err)
	}
	c, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	change(c)
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	kept, err := index.CheckpointShards(ctx, b, "w", newestCheckpointName(t, b))
	if err != nil {
		t.Fatal(err)
	}
	collected := 0
	for _, name := range old {
		if slices.Contains(kept, name) {
			continue
		}
		a, err := b.Stat(ctx, index.ShardName("w", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, a.Name, a.Generation); err != nil {
			t.Fatal(err)
		}
		collected++
	}
	if collected == 0 {
		t.Fatal("the new checkpoint replaced none of the old one's parts")
	}
}

// moveRows commits, through c, a rewrite of tick's fragment of
// checkpointedWorld's world into another (never written) file, as
// maintenance moves rows.
func moveRows(t *testing.T, c *index.Catalog, tick int64) {
	t.Helper()
	tk, ok := c.Tip().Tick("main", tick)
	if !ok {
		t.Fatalf("no tick %d", tick)
	}
	tables, err := tk.Tables()
	if err != nil {
		t.Fatal(err)
	}
	rw := index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: &index.FragmentsRewrite{Run: "main", Tick: tick, Table: "t",
		Old: []string{tables[0].Fragments[0].Path}, New: []index.Fragment{{Path: index.FragmentPath("w", "main", "t", fmt.Sprint("moved", tick), 0), Rows: 1}}}}
	if _, err := c.Commit(ctxT(t), rw); err != nil {
		t.Fatal(err)
	}
}

// A lookup in a fork of a world read cold reads, of the parent, the part
// holding the tick it inherits (and the head's), not the parent's
// history: a tick inherited, the fork's head before it published one of
// its own, a table of that head; a listing of its ticks/ streams the
// parent's parts; then the fork's own tick and head. The parent's
// catalog is never opened.
func TestColdForkLookupReadsItsParentsPart(t *testing.T) {
	ctx := ctxT(t)
	b, _ := checkpointedWorld(t)
	forkAt := int64(coldTicks - 1)
	c, epoch, err := index.CreateWorld(ctx, b, "f", index.WorldCreate{Parent: "w", ForkRun: "main", ForkTick: forkAt, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mt := testMount(t, b)
	run := mt.path("f", "runs", "main")
	if got := xattr(t, run+"/ticks/"+wfs.TickName(5000), wfs.XattrToken); got != coldToken(5000) {
		t.Fatalf("the fork's tick 5000 has token %q, want its parent's %q", got, coldToken(5000))
	}
	if got, err := os.Readlink(run + "/head"); err != nil || got != "ticks/"+wfs.TickName(forkAt) {
		t.Fatalf("head of a fork with no tick of its own: %q, %v; want its fork point", got, err)
	}
	if _, err := os.Stat(run + "/tables/t/" + wfs.TickName(6000) + ".parquet"); err != nil {
		t.Fatal(err)
	}
	if n := b.read(); n > 3 {
		t.Fatalf("lookups of ticks 5000, 6000 and the head of a fork read %d of its parent's 4 parts; want the parts holding them", n)
	}
	// A listing of the fork's ticks/ streams its parent's a part at a
	// time too: its first reply reads the parent's first part (and the
	// one the log after the checkpoint touched).
	fd, err := syscall.Open(run+"/ticks", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := syscall.Getdents(fd, make([]byte, 4096)); err != nil || n == 0 {
		t.Fatalf("getdents of the fork's ticks/: %d, %v", n, err)
	}
	syscall.Close(fd)
	if n := b.read(); n > 2 {
		t.Fatalf("the first reply of a listing of the fork's ticks/ read %d of its parent's 4 parts; want 2 at most", n)
	}
	if names := ls(t, run+"/ticks"); len(names) != int(forkAt)+1 || names[len(names)-1] != wfs.TickName(forkAt) {
		t.Fatalf("the fork's ticks/ lists %d entries, the last %q; want its parent's 0..%d", len(names), names[len(names)-1], forkAt)
	}
	tok := "own-" + wfs.TickName(forkAt+1)
	if _, err := c.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: forkAt + 1, CommitToken: tok, WriterEpoch: epoch,
		Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("f", "main", "t", tok, 0), Rows: 1}}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := xattr(t, run+"/ticks/"+wfs.TickName(forkAt+1), wfs.XattrToken); got != tok {
		t.Fatalf("the fork's own tick: token %q, want %q", got, tok)
	}
	if got, err := os.Readlink(run + "/head"); err != nil || got != "ticks/"+wfs.TickName(forkAt+1) {
		t.Fatalf("head of a fork after its first tick: %q, %v; want that tick", got, err)
	}
	if _, err := os.Lstat(run + "/ticks/" + wfs.TickName(coldTicks+1)); !os.IsNotExist(err) {
		t.Fatalf("the parent's tick %d, after the fork point: %v; want absent", coldTicks+1, err)
	}
	if st := mountStats(t, mt); st.CatalogsOpen > 1 {
		t.Fatalf("%d catalogs open; want the fork's only (its parent is read cold)", st.CatalogsOpen)
	}
}

// A lookup in tokens/ of a fork of a token that does not name its tick
// reads its lineage one world at a time: of the parent, read cold, the
// token filters of the parts up to the fork point and the parts they
// say may hold the token, not the parent's history; it answers as the
// view of the whole states does: the parent's tick before the fork
// point, none past it, the parent's tick of a token the fork published
// too, the fork's own. The parent's catalog is never opened.
func TestColdForkOldTokenLookupReadsItsCandidateParts(t *testing.T) {
	ctx := ctxT(t)
	const parts = 6
	b, _ := checkpointedWorldTokens(t, parts*index.PartTicks, oldToken)
	forkAt := int64(2*index.PartTicks + 10) // in the parent's part 2 of 0..5
	c, epoch, err := index.CreateWorld(ctx, b, "f", index.WorldCreate{Parent: "w", ForkRun: "main", ForkTick: forkAt, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tok := range []string{"own", oldToken(100)} {
		tick := forkAt + 1 + int64(i)
		if _, err := c.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: tick, CommitToken: tok, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("f", "main", "t", tok, 0), Rows: 1}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := index.OpenView(ctx, index.LoadFrom(b), "f", "main")
	if err != nil {
		t.Fatal(err)
	}
	b.read()
	mt := testMount(t, b)
	for _, tc := range []struct {
		token          string
		parts, filters int // of the parent's
	}{
		{oldToken(5000), 1, 3},                      // part 1; the filters of parts 0..2
		{oldToken(3*index.PartTicks + 5), 0, 0},     // past the fork point: filters held
		{oldToken(100), 1, 0},                       // part 0: the parent's, not the fork's
		{"own", 0, 0},                               // the fork's own tick
		{oldToken(forkAt), 1, 0},                    // the fork point: part 2
		{oldToken(parts*index.PartTicks + 1), 0, 0}, // published after the checkpoint, past the fork point
	} {
		want := "none"
		if r, ok := v.Token(tc.token); ok {
			want = fmt.Sprint(r.Tick.Tick)
		}
		got, path := "none", mt.path("f", "tokens", tc.token)
		if _, err := os.Lstat(path); err == nil {
			got = xattr(t, path, wfs.XattrTick)
		} else if !os.IsNotExist(err) {
			t.Fatalf("tokens/%s: %v", tc.token, err)
		}
		if got != want {
			t.Errorf("tokens/%s of the fork is tick %s; the view says %s", tc.token, got, want)
		}
		if n, f := b.readWithFilters(); n != tc.parts || f != tc.filters {
			t.Errorf("a lookup of tokens/%s of the fork read %d of its parent's %d parts and %d token filters; want %d and %d", tc.token, n, parts, f, tc.parts, tc.filters)
		}
	}
	if st := mountStats(t, mt); st.CatalogsOpen > 1 {
		t.Fatalf("%d catalogs open; want the fork's only (its parent is read cold)", st.CatalogsOpen)
	}
}

// ticksLookup opens ticks/ of checkpointedWorld's world in mt and returns
// a lookup of one tick relative to it, so that only that lookup reaches
// the mount (no lookup of the path's directories, nor their times).
func ticksLookup(t *testing.T, mt *mounted) func(n int64) error {
	t.Helper()
	dir, err := os.Open(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return func(n int64) error {
		var st unix.Stat_t
		return unix.Fstatat(int(dir.Fd()), wfs.TickName(n), &st, 0)
	}
}

// summarizedWorld is a bucket holding world w whose run main published
// ticks 0..n-1 but 5001 of table t, and in its first part of table u too, each
// part's ticks then compacted into one file per table (no file is
// written: only the catalog is read), and checkpointed: every part of the
// checkpoint has a summary. It is read through a stateReads.
func summarizedWorld(t *testing.T, n int64) *stateReads {
	t.Helper()
	ctx := ctxT(t)
	b := &stateReads{Bucket: localBucket(t), names: map[string]int{}, filters: map[string]int{}}
	c, epoch, err := index.CreateWorld(ctx, b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, table := range []string{"t", "u"} {
		if _, err := b.Create(ctx, index.TableInfoPath("w", table), []byte(`{"id":"`+table+`","name":"`+table+`","columns":[]}`)); err != nil {
			t.Fatal(err)
		}
	}
	for from := int64(0); from < n; from += index.PartTicks {
		to := min(from+index.PartTicks, n) - 1
		tables := []string{"t"}
		if from == 0 {
			tables = append(tables, "u")
		}
		var entries []index.Entry
		for tick := from; tick <= to; tick++ {
			if tick == 5001 {
				continue // a gap: the part's stretch is not contiguous
			}
			token := coldToken(tick)
			var tfs []index.TableFragments
			for _, table := range tables {
				tfs = append(tfs, index.TableFragments{Table: table, Fragments: []index.Fragment{{Path: index.FragmentPath("w", "main", table, token, 0), Rows: 1}}})
			}
			entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch, Tables: tfs}})
		}
		if _, err := c.CommitAll(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		var compacted []index.TableFragments
		for _, table := range tables {
			compacted = append(compacted, index.TableFragments{Table: table, Fragments: []index.Fragment{{
				Path: index.FragmentPath("w", "main", table, fmt.Sprint("compacted-", from), 0), Rows: int64(len(entries)), Span: &index.Span{From: from, To: to}}}})
		}
		rw := &index.FragmentsRewrite{Run: "main", Span: &index.Span{From: from, To: to}, ReadSeq: c.Tip().Seq, Tables: compacted}
		if _, err := c.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b.read()
	return b
}

// A listing of tables/ of a long compacted world read cold plans from the
// summaries of its checkpoint's parts, as the SQL views do: it decodes no
// part and opens no catalog, and lists a table only its oldest part
// published. A fork whose fork point cuts a compacted stretch with a gap,
// which no summary can tell, plans from every tick and lists the same
// tables.
func TestColdTablesListingReadsSummaries(t *testing.T) {
	b := summarizedWorld(t, 3*index.PartTicks+100)
	if _, _, err := index.CreateWorld(ctxT(t), b, "f", index.WorldCreate{Parent: "w", ForkRun: "main", ForkTick: 5000, WriterMode: index.ModeResumable, CreatedUnixMs: 2}, "writer", index.Options{NoCompactor: true}); err != nil {
		t.Fatal(err)
	}
	mt := testMount(t, b)
	dir := mt.path("w", "runs", "main", "tables")
	if _, err := os.Stat(dir); err != nil { // the path's lookups read the head's part
		t.Fatal(err)
	}
	b.read()
	if got := ls(t, dir); !slices.Equal(got, []string{"t", "u"}) {
		t.Fatalf("tables/ of w lists %v, want [t u]", got)
	}
	for name := range b.readNames() {
		if !strings.HasSuffix(name, ".sum") && !strings.HasSuffix(name, ".sums") {
			t.Fatalf("a listing of tables/ decoded part %s; want the summaries only", name)
		}
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 0 {
		t.Fatalf("a listing of tables/ opened %d catalogs; want none", st.CatalogsOpen)
	}
	if got := ls(t, mt.path("f", "runs", "main", "tables")); !slices.Equal(got, []string{"t", "u"}) {
		t.Fatalf("tables/ of the fork lists %v, want [t u]", got)
	}
}

// A listing of ticks/ whose state was loaded anew after its checkpoint
// was collected can still be rewound (rewinddir, or a seek the kernel
// makes when a reply did not fit the reader's buffer): it lists every
// tick again from the first, in order.
func TestColdListingRewindsAfterItsCheckpoint(t *testing.T) {
	const ticks = 5*index.PartTicks + 100
	b, _ := checkpointedWorldOf(t, ticks)
	mt := testMount(t, b)
	fd, err := syscall.Open(mt.path("w", "runs", "main", "ticks"), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	all := func() []string {
		t.Helper()
		var names []string
		buf := make([]byte, 8192)
		for {
			n, err := syscall.Getdents(fd, buf)
			if err != nil {
				t.Fatalf("getdents after %d entries: %v", len(names), err)
			}
			if n == 0 {
				return names
			}
			_, _, names = syscall.ParseDirent(buf[:n], -1, names)
		}
	}
	// Read into part 2 (the listing has read parts 0..2), then replace
	// part 4: the rest is read from a state loaded anew at part 3.
	for read := 0; read < 3*index.PartTicks-1500; {
		buf := make([]byte, 4096)
		n, err := syscall.Getdents(fd, buf)
		if err != nil || n == 0 {
			t.Fatalf("getdents after %d entries: %d, %v", read, n, err)
		}
		c, _, _ := syscall.ParseDirent(buf[:n], -1, nil)
		read += c
	}
	collectReplacedParts(t, b, func(c *index.Catalog) { moveRows(t, c, 4*index.PartTicks+50) })
	all() // the rest, from a state loaded anew
	// An entry's offset is its position (Readdirent): seek to the 11th.
	if _, err := syscall.Seek(fd, 10, 0); err != nil {
		t.Fatal(err)
	}
	names := all()
	if len(names) != ticks+2-10 {
		t.Fatalf("ticks/ listed from offset 10 %d entries, want %d", len(names), ticks+2-10)
	}
	for i, name := range names {
		if name != wfs.TickName(int64(i+10)) {
			t.Fatalf("entry %d is %s, want %s", i+10, name, wfs.TickName(int64(i+10)))
		}
	}
}

// A listing of tables/ of a long world whose history is mostly not
// compacted (no summaries) opens its catalog and keeps it, as before
// summaries: the first listing decodes its parts once, a second none.
func TestTablesListingOfAnUncompactedWorldKeepsItsCatalog(t *testing.T) {
	const parts = 20
	b, _ := checkpointedWorldOf(t, parts*index.PartTicks)
	mt := testMount(t, b)
	dir := mt.path("w", "runs", "main", "tables")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{parts, 0} {
		b.read()
		if got := ls(t, dir); !slices.Equal(got, []string{"t"}) {
			t.Fatalf("tables/ lists %v, want [t]", got)
		}
		if n := b.read(); n < want || want == 0 && n != 0 {
			t.Fatalf("listing %d of tables/ of a world of %d parts without summaries decoded %d parts; want %d", i+1, parts, n, want)
		}
	}
	if st := mountStats(t, mt); st.CatalogsOpen != 1 {
		t.Fatalf("%d catalogs open; want the world's, kept", st.CatalogsOpen)
	}
}
