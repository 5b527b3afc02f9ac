package check_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/check"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// check.World is worldfs check for a Go program: a compacted world's
// references are counted and each distinct file checked once; a byte
// flipped in a compacted file (its size and time kept) is found by
// reading the data, named with the ticks whose rows it loses and the
// replaced fragments that restore them; a run the world does not have is
// ErrNoRun.
func TestWorldChecksWhatTheCatalogNames(t *testing.T) {
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := enginetest.World(t, b, "w", 140)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: maintenance.NoRecent}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	opts := func(readData bool) check.Options { return checkOptions(t, readData) }
	res, err := check.World(ctx, b, "w", opts(true))
	if err != nil || len(res.Errors) != 0 || res.Fragments == 0 || res.References <= res.Fragments || res.Slots == 0 {
		t.Fatalf("a clean compacted world: %+v, %v; want no error, each file checked once and named more often", res, err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick(index.DefaultRun, 10)
	lost := enginetest.Tables(t, tk)[0].Fragments[0]
	if lost.Span == nil {
		t.Fatalf("tick 10 names %s, not a compacted file", lost.Path)
	}
	p, err := b.Path(lost.Path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	res, err = check.World(ctx, b, "w", opts(true))
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Fragment != lost.Path || res.Errors[0].What != "sha256" {
		t.Fatalf("a flipped byte, read: %+v, %v; want one sha256 error naming %s", res, err, lost.Path)
	}
	if len(res.Lost) != 1 || res.Lost[0].From != lost.Span.From || res.Lost[0].To != lost.Span.To || len(res.Lost[0].Restore) == 0 {
		t.Fatalf("lost: %+v; want ticks %d..%d, restorable from the replaced fragments", res.Lost, lost.Span.From, lost.Span.To)
	}
	if _, err := check.World(ctx, b, "w", check.Options{Run: "nope", Verified: opts(false).Verified}); !errors.Is(err, check.ErrNoRun) {
		t.Fatalf("run nope: %v; want ErrNoRun", err)
	}
}

// check --read-data verifies a compacted file's tick index summaries
// against its rows: an index whose summary of one tick's column differs
// (its checksum made good, as a summarizer's bug would write it) is an
// error naming the file, the tick and both numbers; without reading the
// data nothing is found.
func TestReadDataChecksTickIndexSummaries(t *testing.T) {
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opts := func(readData bool) check.Options { return checkOptions(t, readData) }
	tk := compactedWorld(t, b)
	var f index.Fragment
	for _, tf := range enginetest.Tables(t, tk) {
		if p := tf.Fragments[0]; p.Span != nil && tf.Table == particles.Tables()[0].ID {
			f = p
		}
	}
	x, err := frame.ReadTickIndex(ctx, b, f)
	if err != nil || len(x.Summaries) == 0 {
		t.Fatalf("the tick index of %s: %+v, %v", f.Path, x, err)
	}
	k := len(x.Ticks) / 2
	x.Summaries[0].Floats[k].Sum += 0.5
	name := index.TickIndexPath(f.Path)
	a, err := b.Stat(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, name, a.Generation); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, name, x.Encode()); err != nil {
		t.Fatal(err)
	}
	if res, err := check.World(ctx, b, "w", opts(false)); err != nil || len(res.Errors) != 0 {
		t.Fatalf("without reading the data: %+v, %v", res, err)
	}
	res, err := check.World(ctx, b, "w", opts(true))
	if err != nil || len(res.Errors) != 1 {
		t.Fatalf("a summary that is not the rows': %+v, %v; want one error", res, err)
	}
	e := res.Errors[0]
	want := fmt.Sprintf("tick %d column %s", x.Ticks[k].Tick, x.Summaries[0].Name)
	if e.What != "tick index" || e.Fragment != f.Path || !strings.Contains(e.Message, want) {
		t.Fatalf("the error: %+v; want the tick index of %s, %s", e, f.Path, want)
	}
}

// compactedWorld writes world w of 140 ticks into b and compacts every
// whole window; check --read-data finds it clean. It returns its tick 10.
func compactedWorld(t *testing.T, b bucket.Bucket) *index.Tick {
	t.Helper()
	ctx := enginetest.Context(t)
	w := enginetest.World(t, b, "w", 140)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: maintenance.NoRecent}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if res, err := check.World(ctx, b, "w", checkOptions(t, true)); err != nil || len(res.Errors) != 0 {
		t.Fatalf("a clean compacted world: %+v, %v", res, err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick(index.DefaultRun, 10)
	return tk
}

// checkOptions are a check's options, reading the data or not, with a
// memory of verified files of its own.
func checkOptions(t *testing.T, readData bool) check.Options {
	return check.Options{ReadData: readData, Verified: cache.OpenVerified(filepath.Join(t.TempDir(), "verified")), BucketID: "test"}
}

// check --read-data of a remote bucket reads each compacted file once:
// the bytes it hashes are the bytes it summarizes again.
func TestReadDataReadsARemoteCompactedFileOnce(t *testing.T) {
	b := &buckettest.Counting{Bucket: mem.New(mem.Options{})}
	tk := compactedWorld(t, b)
	compacted := 0
	for _, tf := range enginetest.Tables(t, tk) {
		for _, f := range tf.Fragments {
			if f.Span == nil {
				continue
			}
			compacted++
			if got := b.BytesOf(f.Path); got != f.Bytes {
				t.Errorf("%s (%d bytes): check --read-data read %d bytes of it", f.Path, f.Bytes, got)
			}
		}
	}
	if compacted == 0 {
		t.Fatal("tick 10 is in no compacted file")
	}
}
