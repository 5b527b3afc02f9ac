package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/transfer"
)

// source makes world p (ticks 0..6, a fact, an evaluation receipt whose
// subject references an asset in the store) and its fork f (from tick 3,
// run to 8) in a memory bucket, and returns the bucket and the asset's
// object name.
func source(t *testing.T) (bucket.Bucket, string) {
	t.Helper()
	ctx := enginetest.Context(t)
	b := mem.New(mem.Options{})
	w := enginetest.World(t, b, "p", 6)
	if _, err := w.Ingest(ctx, enginetest.Reading("s1", 2.5)); err != nil {
		t.Fatal(err)
	}
	ref, err := engine.PutAsset(ctx, b, []byte("\x89PNG a frame the grader read"), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := engine.PinSubject(s, "main", -1, engine.Selector{Assets: []engine.AssetRef{ref}})
	if err != nil {
		t.Fatal(err)
	}
	con := engine.GraderContract{GraderID: "g", Implementation: "v1", Config: json.RawMessage(`{}`)}
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "e1", Subject: sub, Contract: con},
		func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "c", Verdict: engine.Pass}}, nil
		}); err != nil {
		t.Fatal(err)
	}
	// A checkpoint, with its parts' sidecars (a token filter each).
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	enginetest.Fork(t, b, "p", "f", 3, 8).Close()
	name, _ := engine.AssetPath(ref.Digest)
	return b, name
}

// objects returns every object of b, name to bytes.
func objects(t *testing.T, b bucket.Bucket) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for a, err := range b.List(context.Background(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := b.Get(context.Background(), a.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = data
	}
	return out
}

// generations returns every object of b, name to generation.
func generations(t *testing.T, b bucket.Bucket) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for a, err := range b.List(context.Background(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = a.Generation
	}
	return out
}

// sameObjects fails the test unless to holds every object of from, with
// the same bytes, and nothing else.
func sameObjects(t *testing.T, from, to bucket.Bucket) {
	t.Helper()
	want, got := objects(t, from), objects(t, to)
	for name, data := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(g, data) {
			t.Errorf("%s: copied %v (%d bytes, want %d)", name, ok, len(g), len(data))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: in the copy, not in the source", name)
		}
	}
}

// checkClean checks every fragment the catalogs of worlds in b record by
// the readers' rule (as worldfs check does), and wants them all whole and
// re-verified by their bytes (their generations are new).
func checkClean(t *testing.T, b bucket.Bucket, worlds ...string) {
	t.Helper()
	ctx := context.Background()
	v := cache.OpenVerified(t.TempDir())
	for _, w := range worlds {
		s, _, err := index.Load(ctx, b, w)
		if err != nil {
			t.Fatalf("%s in the copy: %v", w, err)
		}
		n := 0
		err = s.Fragments("", func(f index.FragmentRef) bool {
			n++
			r := cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
			if c, err := v.Check(ctx, b, "copy", r, false); err != nil || !c.Copied {
				t.Errorf("%s: %+v, %v", f.Path, c, err)
			}
			return true
		})
		if err != nil || n == 0 {
			t.Fatalf("%s: %d fragments, %v", w, n, err)
		}
	}
}

// A fork is copied only with the world whose history it reads: without
// it the copy is refused, naming both, and writes nothing. Mutation:
// lineage without its refusal copies the fork alone (err nil).
func TestCopyRefusesAForkWithoutItsParent(t *testing.T) {
	src, _ := source(t)
	dst := mem.New(mem.Options{})
	_, err := transfer.Copy(context.Background(), src, dst, []string{"f"}, transfer.Options{})
	var mp *transfer.MissingParentError
	if !errors.As(err, &mp) || mp.World != "f" || mp.Parent != "p" {
		t.Fatalf("copy of a fork alone: %v; want MissingParentError{f, p}", err)
	}
	if n := len(objects(t, dst)); n != 0 {
		t.Fatalf("the refused copy wrote %d objects", n)
	}
}

// A fork whose parent the destination already holds up to the fork point
// is copied alone, reading its history there; a copy of the parent that
// ends before the fork point does not serve (the refusal says so, and
// what to do), and once the parent is copied again it does. Mutation:
// lineage refusing every fork without its parent fails the first copy;
// inDestination not comparing the fork tick copies the fork onto the
// stale parent.
func TestCopyForkWhoseParentIsThere(t *testing.T) {
	ctx := enginetest.Context(t)
	src := mem.New(mem.Options{})
	p := enginetest.World(t, src, "p", 4)
	dst := mem.New(mem.Options{})
	if _, err := transfer.Copy(ctx, src, dst, []string{"p"}, transfer.Options{}); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, p, 9)
	p.Close()
	enginetest.Fork(t, src, "p", "f", 7, 11).Close()

	// The destination's p ends at tick 4, before the fork point 7.
	before := len(objects(t, dst))
	_, err := transfer.Copy(ctx, src, dst, []string{"f"}, transfer.Options{})
	var mp *transfer.MissingParentError
	if !errors.As(err, &mp) || mp.Parent != "p" || !strings.Contains(err.Error(), "the copy of p in") ||
		!strings.Contains(err.Error(), "ends at tick 4, before the fork point (tick 7 of run main); copy p again (a copy resumes)") {
		t.Fatalf("a fork onto a parent copied before its fork point: %v", err)
	}
	if n := len(objects(t, dst)); n != before {
		t.Fatalf("the refused copy wrote %d objects", n-before)
	}
	// p copied again (resumed), the fork copies alone and reads as in the
	// source: its parent's ticks up to 7, then its own.
	if _, err := transfer.Copy(ctx, src, dst, []string{"p"}, transfer.Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := transfer.Copy(ctx, src, dst, []string{"f"}, transfer.Options{})
	if err != nil || !slices.Equal(res.Worlds, []string{"f"}) || !slices.Equal(res.Present, []string{"p"}) {
		t.Fatalf("a fork whose parent is there: %+v %v", res, err)
	}
	for _, b := range []bucket.Bucket{src, dst} {
		v, err := index.OpenView(ctx, index.LoadFrom(b), "f", "main")
		if err != nil {
			t.Fatal(err)
		}
		var ticks []int64
		v.Ticks(0, 100, func(r index.TickRef) bool { ticks = append(ticks, r.Tick.Tick); return true })
		if len(ticks) != 12 || ticks[11] != 11 {
			t.Fatalf("fork f in %v shows ticks %v", b, ticks)
		}
	}
}

// A fork copied with its lineage, from a memory bucket to a local one,
// from there to GCS, GCS to GCS and GCS back to a memory bucket (fake-gcs-
// server), arrives whole each time: every object with its bytes (the
// referenced asset too), every fragment re-verified by its bytes under
// its new generation, and the source unchanged. A second run copies
// nothing and finds every object there.
//
// Mutation: Options.WithLineage ignored (lineage never adds the parent)
// fails the first copy with MissingParentError; plan leaving out
// referencedAssets fails sameObjects on assets/sha256/…; plan leaving out
// the checkpoint parts' token filters (".tok") fails it on them.
func TestCopyBetweenBucketKinds(t *testing.T) {
	ctx := context.Background()
	src, asset := source(t)
	gcstest.Start(t, "one", "two")
	dir := filepath.Join(t.TempDir(), "local")
	lb, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	open := func(url string) bucket.Bucket {
		b, err := bucketurl.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	chain := []bucket.Bucket{src, lb, open("gs://one/w"), open("gs://two/copy"), mem.New(mem.Options{})}
	if _, ok := objects(t, src)[asset]; !ok {
		t.Fatalf("the source lacks the asset %s", asset)
	}
	filters := 0
	for name := range objects(t, src) {
		if _, ok := index.ShardOfSidecar(name); ok && strings.HasSuffix(name, ".tok") {
			filters++
		}
	}
	if filters == 0 {
		t.Fatal("the source lacks a checkpoint part's token filter")
	}
	for i := 1; i < len(chain); i++ {
		from, to := chain[i-1], chain[i]
		before := generations(t, from)
		res, err := transfer.Copy(ctx, from, to, []string{"f"}, transfer.Options{WithLineage: true})
		if err != nil {
			t.Fatalf("%v to %v: %v", from, to, err)
		}
		if len(res.Worlds) != 2 || res.Worlds[0] != "p" || res.Worlds[1] != "f" || res.Copied == 0 || res.Skipped != 0 || res.Verified == 0 {
			t.Fatalf("%v to %v: %+v", from, to, res)
		}
		sameObjects(t, from, to)
		checkClean(t, to, "p", "f")
		again, err := transfer.Copy(ctx, from, to, []string{"f"}, transfer.Options{WithLineage: true})
		if err != nil || again.Copied != 0 || again.Skipped != res.Copied {
			t.Fatalf("%v to %v again: %+v, %v; want every object found there", from, to, again, err)
		}
		if after := generations(t, from); len(after) != len(before) {
			t.Fatalf("the source changed: %d objects, then %d", len(before), len(after))
		} else {
			for name, g := range before {
				if after[name] != g {
					t.Fatalf("the source's %s changed", name)
				}
			}
		}
	}
}

// A copy never carries damage across nor overwrites: a source fragment
// whose bytes differ from its record fails the copy, naming it, and is
// not written; a destination holding other bytes under a name the copy
// writes fails it with ErrDifferentObject and keeps its bytes.
//
// Mutation: one() without the CheckData of the source's bytes copies the
// damaged fragment and the first check fails; same() without the
// comparison skips the foreign object and the second check fails.
func TestCopyRefusesDamageAndNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	src, _ := source(t)
	s, _, err := index.Load(ctx, src, "p")
	if err != nil {
		t.Fatal(err)
	}
	var frag index.Fragment
	s.Fragments("main", func(f index.FragmentRef) bool { frag = f.Fragment; return false })
	data, a, err := src.Get(ctx, frag.Path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	src.Delete(ctx, frag.Path, a.Generation)
	src.Create(ctx, frag.Path, bad)
	dst := mem.New(mem.Options{})
	_, err = transfer.Copy(ctx, src, dst, []string{"p"}, transfer.Options{})
	var ce *cache.CorruptFragmentError
	if !errors.As(err, &ce) || ce.Name != frag.Path || ce.What != "sha256" {
		t.Fatalf("copy of a damaged fragment: %v", err)
	}
	if _, err := dst.Stat(ctx, frag.Path); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("the damaged fragment was copied: %v", err)
	}
	if _, err := dst.Stat(ctx, index.DirectoryPrefix+"p"); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("the world was listed in the destination of a failed copy: %v", err)
	}

	src, _ = source(t)
	dst = mem.New(mem.Options{})
	dst.Create(ctx, index.MarkerName("p"), []byte(`{"id":"p","format":1,"parent":"other"}`))
	_, err = transfer.Copy(ctx, src, dst, []string{"p"}, transfer.Options{})
	if !errors.Is(err, transfer.ErrDifferentObject) {
		t.Fatalf("copy over another world's marker: %v; want ErrDifferentObject", err)
	}
	if got, _, _ := dst.Get(ctx, index.MarkerName("p")); !bytes.Contains(got, []byte("other")) {
		t.Fatalf("the destination's marker was overwritten: %s", got)
	}
}
