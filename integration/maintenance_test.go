package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// maintenanceBuckets are the buckets the maintenance tests run on: a local
// directory, and GCS through the real client against an in-process fake
// server (a mount of a remote bucket reads fragments through its cache).
var maintenanceBuckets = []struct {
	name string
	open func(t *testing.T) bucket.Bucket
}{
	{"local", func(t *testing.T) bucket.Bucket { return localBucket(t) }},
	{"gcs", func(t *testing.T) bucket.Bucket {
		gcstest.Start(t, "worlds")
		b, err := bucketurl.Open(context.Background(), "gs://worlds/maint")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
}

// A tick is immutable; where its rows live is not. A mount that read a
// tick before compaction moved its rows, and before collection deleted the
// files they left, reads the same rows afterwards through the same nodes
// (which the kernel keeps for an hour), never EIO; a file held open across
// collection keeps reading the bytes it opened; ticks never opened before
// and a new mount read the same rows too.
func TestMountFollowsCompactionAndCollection(t *testing.T) {
	for _, bk := range maintenanceBuckets {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.open(t)
			w := particleWorld(t, b, "w", 30)
			// Its catalog snapshots stay an hour, so its plans still
			// name the files collection deletes: each open must find
			// the tick again at the catalog's tip.
			mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
			db := duck(t)
			cols := "entity_id, tick, position_x, position_y, velocity_x, velocity_y"
			files := func(mt *mounted, tick int64) []string {
				dir := mt.path("w", "runs", "main", "ticks", strconv.FormatInt(tick, 10))
				return []string{
					filepath.Join(dir, "particle.parquet"),
					filepath.Join(dir, "particle.csv"),
					mt.path("w", "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", tick)),
					mt.path("w", "tokens", tokenOf(t, b, tick), "particle.parquet"),
				}
			}
			read := func(p string) []string {
				src := "read_parquet(" + lit(p) + ")"
				if filepath.Ext(p) == ".csv" {
					src = "read_csv(" + lit(p) + ")"
				}
				return rows(t, db, fmt.Sprintf("SELECT %s FROM %s ORDER BY entity_id", cols, src))
			}
			opened := []int64{5, 6}
			want := map[string][]string{}
			for _, tick := range opened {
				for _, p := range files(mt, tick) {
					if want[p] = read(p); len(want[p]) == 0 {
						t.Fatalf("%s has no rows; the comparison proves nothing", p)
					}
				}
			}
			held, err := os.Open(files(mt, 6)[0])
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			heldBytes, err := os.ReadFile(files(mt, 6)[0])
			if err != nil {
				t.Fatal(err)
			}
			old := fragmentOf(t, b, 5)

			// The writer goes on; compaction rewrites ticks 5 and 6, and
			// collection, with the replaced files past their retention,
			// deletes the fragments the mount first served.
			enginetest.Run(t, w, 150)
			if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
				t.Fatal(err)
			}
			if fragmentOf(t, b, 5).Span == nil {
				t.Fatal("tick 5 is not compacted; the test proves nothing")
			}
			later := func() time.Time { return time.Now().Add(time.Hour) }
			if _, err := maintenance.Collect(ctxT(t), b, w.Catalog(), maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true, Now: later}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Stat(ctxT(t), old.Path); !errors.Is(err, bucket.ErrNotExist) {
				t.Fatalf("collection left %s (%v); the test proves nothing", old.Path, err)
			}

			got, err := io.ReadAll(held)
			if err != nil || !bytes.Equal(got, heldBytes) {
				t.Errorf("a file held open across collection read %d bytes (%v), %d when it was opened", len(got), err, len(heldBytes))
			}
			fresh := testMount(t, b)
			for _, m := range []struct {
				name string
				mt   *mounted
			}{{"the mount that read them before", mt}, {"a new mount", fresh}} {
				for _, tick := range opened {
					for i, p := range files(m.mt, tick) {
						if g := read(p); !slices.Equal(g, want[files(mt, tick)[i]]) {
							t.Errorf("%s: %s has %d rows after compaction and collection, %d before", m.name, p, len(g), len(want[files(mt, tick)[i]]))
						}
						checkSize(t, p)
					}
				}
			}
			for _, p := range files(mt, 7) { // never opened before
				if len(read(p)) == 0 {
					t.Errorf("%s: no rows", p)
				}
			}
			if st := mountStats(t, mt); st.Replanned == 0 {
				t.Error("no open was planned again at the catalog's tip")
			}
			if head, err := os.Readlink(mt.path("w", "runs", "main", "head")); err != nil || filepath.Base(head) != "150" && filepath.Base(head) != fmt.Sprintf("%012d", 150) {
				t.Errorf("head -> %q (%v), want tick 150", head, err)
			}
		})
	}
}

// A reader loop through a mount, beside a writer whose own background
// maintenance compacts and collects (retention 1 ms) as it goes, sees each
// tick's rows unchanged every time it reads them and never an error.
func TestMountReadsUnderLiveMaintenance(t *testing.T) {
	b := localBucket(t)
	opts := enginetest.Quiet
	opts.NoMaintenance = false
	opts.Compaction = maintenance.CompactOptions{Recent: 8}
	opts.Collection = maintenance.CollectOptions{Retention: time.Millisecond, UnsafeRetention: true, Every: 1}
	w := particleWorld(t, b, "w", 20, opts)
	mt := testMount(t, b)
	db := duck(t)

	first := fragmentOf(t, b, 3)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		werr = enginetest.Drive(ctx, w, 420)
	}()
	seen := map[string][]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	reads, rereads := 0, 0
	for ctx.Err() == nil || reads < 100 {
		tick := rng.Int64N(20)
		if rng.IntN(2) == 0 {
			tick = rng.Int64N(max(headTick(t, mt), 21))
		}
		p := mt.path("w", "runs", "main", "ticks", strconv.FormatInt(tick, 10), "particle.parquet")
		r, err := db.Query(fmt.Sprintf("SELECT entity_id, position_x, position_y FROM read_parquet(%s) ORDER BY entity_id", lit(p)))
		if err != nil {
			t.Fatalf("read %d of tick %d: %v", reads, tick, err)
		}
		var got []string
		for r.Next() {
			var id int64
			var x, y float64
			if err := r.Scan(&id, &x, &y); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprint(id, x, y))
		}
		if err := r.Err(); err != nil {
			t.Fatalf("read %d of tick %d: %v", reads, tick, err)
		}
		r.Close()
		if prev, ok := seen[p]; ok {
			rereads++
			if !slices.Equal(prev, got) {
				t.Fatalf("tick %d read %d rows, %d the first time", tick, len(got), len(prev))
			}
		}
		seen[p] = got
		reads++
	}
	wg.Wait()
	if werr != nil && !errors.Is(werr, context.Canceled) {
		t.Fatal(werr)
	}
	if fragmentOf(t, b, 3).Span == nil {
		t.Fatal("the writer compacted nothing; the test proves nothing")
	}
	if _, err := b.Stat(ctxT(t), first.Path); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("collection left %s (%v); the test proves nothing", first.Path, err)
	}
	t.Logf("%d reads, %d of a tick read before", reads, rereads)
}

// headTick is the tick the mount's head of w's main run names. The
// reader asks the mount, not the World, which belongs to the goroutine
// driving it (World.Tick beside a running Drive is a data race).
func headTick(t *testing.T, mt *mounted) int64 {
	t.Helper()
	target, err := os.Readlink(mt.path("w", "runs", "main", "head"))
	if err != nil {
		t.Fatal(err)
	}
	tick, err := strconv.ParseInt(strings.TrimPrefix(target, "ticks/"), 10, 64)
	if err != nil {
		t.Fatalf("head -> %q: %v", target, err)
	}
	return tick
}

// checkSize: a file's st_size is the bytes a full read returns.
func checkSize(t *testing.T, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	info, err := os.Stat(p)
	if err != nil || info.Size() != int64(len(data)) {
		t.Errorf("%s: st_size %d (%v), a read returns %d bytes", p, info.Size(), err, len(data))
	}
}

// tickOf returns tick n of w as its catalog records it now.
func tickOf(t testing.TB, b bucket.Bucket, n int64) *index.Tick {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick("main", n)
	if !ok {
		t.Fatalf("no tick %d", n)
	}
	return tk
}

// fragmentOf returns tick n's (first) particle fragment as w's catalog
// records it now.
func fragmentOf(t testing.TB, b bucket.Bucket, n int64) index.Fragment {
	t.Helper()
	particle := particles.Tables()[0].ID
	for _, tf := range enginetest.Tables(t, tickOf(t, b, n)) {
		if tf.Table == particle && len(tf.Fragments) > 0 {
			return tf.Fragments[0]
		}
	}
	t.Fatalf("tick %d has no particle fragment", n)
	return index.Fragment{}
}

// tokenOf returns the commit token of tick n of w.
func tokenOf(t *testing.T, b bucket.Bucket, n int64) string {
	t.Helper()
	return tickOf(t, b, n).CommitToken
}

// A tick's manifest.json first looked up after a merge replaced the
// compacted file its rows were in and collection deleted that file, by a
// mount whose state of the world predates the merge (within its
// freshness), is planned again at the catalog's tip, as an open is: the
// same bytes as before, never EIO. (bench soak found it: at a retention
// of a millisecond a merge and gc fit within a mount's second.)
func TestManifestFollowsAMergeAndCollection(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 150)
	compact := func(windows ...int64) {
		t.Helper()
		if _, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10, Windows: windows}); err != nil {
			t.Fatal(err)
		}
	}
	compact(8)
	small := fragmentOf(t, b, 20)
	if small.Span == nil || small.Span.To-small.Span.From != 7 {
		t.Fatalf("tick 20 is in %+v, not a compacted file of 8 ticks; the test proves nothing", small)
	}
	manifest := func(mt *mounted) ([]byte, error) {
		return os.ReadFile(mt.path("w", "runs", "main", "ticks", wfs.TickName(20), "manifest.json"))
	}
	want, err := manifest(testMount(t, b))
	if err != nil {
		t.Fatal(err)
	}
	// The tokens/ listing opens the world's catalog in the mount, which
	// every later read of the world then uses (a state an hour fresh).
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Hour}, wfs.MountOptions{})
	if _, err := os.ReadDir(mt.path("w", "tokens")); err != nil {
		t.Fatal(err)
	}
	compact(64, 8)
	later := func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := maintenance.Collect(ctxT(t), b, w.Catalog(), maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true, Now: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctxT(t), small.Path); !errors.Is(err, bucket.ErrNotExist) || fragmentOf(t, b, 20).Span.To < 63 {
		t.Fatalf("tick 20 is in %+v and %s is left (%v); the test proves nothing", *fragmentOf(t, b, 20).Span, small.Path, err)
	}
	got, err := manifest(mt)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("manifest.json after the merge and collection: %v\n%s\nbefore:\n%s", err, got, want)
	}
	if st := mountStats(t, mt); st.Replanned == 0 {
		t.Error("the manifest was not planned again at the catalog's tip")
	}
}
