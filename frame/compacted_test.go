package frame_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// announced is a compacted file's bytes as a Prefetcher that checks the
// contract from the reader's side: once the file is open, every read must
// fall inside a range announced by a Prefetch since the last reset.
type announced struct {
	data []byte
	mu   sync.Mutex
	open bool // the file is open: reads must be announced
	said []frame.ByteRange
	bad  []string // reads outside what was announced
}

func (a *announced) ReadAt(p []byte, off int64) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open {
		in := false
		for _, r := range a.said {
			in = in || r.Off <= off && off+int64(len(p)) <= r.Off+r.Len
		}
		if !in {
			a.bad = append(a.bad, fmt.Sprintf("%d bytes at %d", len(p), off))
		}
	}
	return bytes.NewReader(a.data).ReadAt(p, off)
}

func (a *announced) Prefetch(ranges []frame.ByteRange) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.said = append(a.said, ranges...)
	return nil
}

// reset forgets what was announced and returns its bytes in all.
func (a *announced) reset() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := int64(0)
	for _, r := range a.said {
		n += r.Len
	}
	a.said = nil
	return n
}

// A compacted file read through a Prefetcher announces, before decoding a
// tick (or a block of ticks), every byte range the decoding reads: no
// read falls outside them, and one tick's ranges are its pages, a small
// part of the file (the ranges a remote bucket's reader fetches at once).
func TestCompactedFileAnnouncesThePagesItReads(t *testing.T) {
	table, x, data := wideCompactedFile(t)
	src := &announced{data: data}
	cf, err := frame.OpenCompactedFile(table, src, int64(len(data)), x)
	if err != nil {
		t.Fatal(err)
	}
	src.open = true
	for i, e := range x.Ticks {
		got, err := cf.TickFile(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := frame.TickFile(table, bytes.NewReader(data), int64(len(data)), e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tick %d: %d bytes rebuilt through a Prefetcher, %d by TickFile (%v)", e.Tick, len(got), len(want), err)
		}
		if len(src.bad) > 0 {
			t.Fatalf("tick %d: read %v, outside the ranges announced", e.Tick, src.bad)
		}
		if said := src.reset(); i == 0 && (said == 0 || said > int64(len(data))/8) {
			t.Fatalf("tick %d alone announced %d bytes of the file's %d; want its pages, a small part", e.Tick, said, len(data))
		}
	}
}

// A compacted file opened once rebuilds each of its ticks' files as
// TickFile does: one tick asked for alone decodes its own rows;
// rebuilding every tick in turn decodes each block of ticks once, not
// each tick's pages once per tick.
func TestCompactedFileDecodesEachBlockOnce(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 599)
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]index.TableFragments{}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				if f.Span != nil {
					holders[f.Path] = index.TableFragments{Table: tf.Table, Fragments: []index.Fragment{f}}
				}
			}
		}
		return true
	})
	checked := 0
	for _, tf := range holders {
		f := tf.Fragments[0]
		table, x, data := enginetest.CompactedFile(t, b, "w", tf.Table, f)
		cf, err := frame.OpenCompactedFile(table, bytes.NewReader(data), int64(len(data)), x)
		if err != nil {
			t.Fatal(err)
		}
		// One tick asked for alone decodes its own rows, not a block.
		if _, err := cf.TickFile(x.Ticks[len(x.Ticks)/2]); err != nil || cf.BlocksDecoded() != 0 {
			t.Fatalf("%s: one tick rebuilt decoded %d blocks (%v); want none", f.Path, cf.BlocksDecoded(), err)
		}
		for _, e := range x.Ticks {
			got, err := cf.TickFile(e)
			if err != nil {
				t.Fatal(err)
			}
			want, err := frame.TickFile(table, bytes.NewReader(data), int64(len(data)), e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s tick %d: %d bytes rebuilt through the opened file, %d by TickFile", f.Path, e.Tick, len(got), len(want))
			}
			checked++
		}
		if blocks := x.Rows/frame.BlockRows + 1; cf.BlocksDecoded() > blocks || len(x.Ticks) > 8 && cf.BlocksDecoded() >= int64(len(x.Ticks)) {
			t.Fatalf("%s: %d ticks of %d rows rebuilt in turn decoded %d blocks; at most %d", f.Path, len(x.Ticks), x.Rows, cf.BlocksDecoded(), blocks)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d ticks rebuilt", checked)
	}
}

// A swept compacted file (a glob reading every tick) decodes blocks of
// several pages, each shared by many ticks, and keeps two: every tick's
// file rebuilt from them is the one TickFile rebuilds from the file
// alone, whatever the order the ticks are asked in (forward, backward,
// far apart, from several readers at once, after ticks read unswept),
// and a sweep in order decodes each block once.
func TestSweptCompactedFileRebuildsEveryTickInAnyOrder(t *testing.T) {
	table, x, data := wideCompactedFile(t)
	if x.Rows < 4*frame.SweepRows {
		t.Fatalf("the compacted file has %d rows; want several blocks of %d", x.Rows, frame.SweepRows)
	}
	want := map[int64][]byte{}
	var err error
	for _, e := range x.Ticks {
		if want[e.Tick], err = frame.TickFile(table, bytes.NewReader(data), int64(len(data)), e); err != nil {
			t.Fatal(err)
		}
	}
	open := func() *frame.CompactedFile {
		cf, err := frame.OpenCompactedFile(table, bytes.NewReader(data), int64(len(data)), x)
		if err != nil {
			t.Fatal(err)
		}
		return cf
	}
	check := func(how string, cf *frame.CompactedFile, e frame.TickEntry) error {
		got, err := cf.TickFile(e)
		if err != nil {
			return fmt.Errorf("%s: tick %d: %w", how, e.Tick, err)
		}
		if !bytes.Equal(got, want[e.Tick]) {
			return fmt.Errorf("%s: tick %d: %d bytes rebuilt, %d by TickFile", how, e.Tick, len(got), len(want[e.Tick]))
		}
		return nil
	}
	forward := open()
	forward.Sweep()
	for _, e := range x.Ticks {
		if err := check("forward", forward, e); err != nil {
			t.Fatal(err)
		}
	}
	if blocks := x.Rows/frame.SweepRows + 1; forward.BlocksDecoded() > blocks {
		t.Fatalf("a sweep of %d rows in order decoded %d blocks; at most %d", x.Rows, forward.BlocksDecoded(), blocks)
	}
	backward := open()
	backward.Sweep()
	for i := len(x.Ticks) - 1; i >= 0; i-- {
		if err := check("backward", backward, x.Ticks[i]); err != nil {
			t.Fatal(err)
		}
	}
	scattered := open()
	scattered.Sweep()
	for k := range x.Ticks {
		if err := check("scattered", scattered, x.Ticks[k*37%len(x.Ticks)]); err != nil {
			t.Fatal(err)
		}
	}
	mixed := open()
	for _, e := range x.Ticks[:len(x.Ticks)/2] { // unswept first: blocks of the other size kept
		if err := check("unswept", mixed, e); err != nil {
			t.Fatal(err)
		}
	}
	mixed.Sweep()
	var g sync.WaitGroup
	errs := make(chan error, 4*len(x.Ticks))
	for r := range 4 {
		g.Go(func() {
			for k := range x.Ticks {
				// Each reader in its own order: strides through the file.
				if err := check(fmt.Sprintf("reader %d", r), mixed, x.Ticks[(k*(2*r+3)+r)%len(x.Ticks)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	g.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := mixed.Following(x.Ticks[3].Tick, 2); len(got) != 2 || got[0] != x.Ticks[4] || got[1] != x.Ticks[5] {
		t.Fatalf("the two ticks following tick %d: %+v", x.Ticks[3].Tick, got)
	}
	if got := mixed.Following(x.Ticks[len(x.Ticks)-1].Tick, 2); len(got) != 0 {
		t.Fatalf("ticks following the last: %+v", got)
	}
}

// A tick index of the first format (no CSV sizes), as a build before CSV
// sizes wrote it, is still read: its ticks are rebuilt as the fragments
// their writer published, without CSV sizes; so is one of the second
// (no column summaries), before the first. The current format under the
// first's name is damage, not a format.
func TestTickIndexOfTheFirstFormat(t *testing.T) {
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	noSizes := enginetest.Quiet
	noSizes.NoCSVSizes = true // as writers did before sizes were recorded
	w := enginetest.World(t, b, "w", 99, noSizes)
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	table := particles.Tables()[0].ID
	before := map[int64][]byte{} // each tick's fragment of the table
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			if tf.Table == table {
				data, _, err := b.Get(ctx, tf.Fragments[0].Path)
				if err != nil {
					t.Fatal(err)
				}
				before[tk.Tick] = data
			}
		}
		return true
	})
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if s, _, err = index.Load(ctx, b, "w"); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 5)
	var holder index.Fragment
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == table {
			holder = tf.Fragments[0]
		}
	}
	if holder.Span == nil {
		t.Fatal("tick 5 is not compacted; the test proves nothing")
	}
	tbl, x, data := enginetest.CompactedFile(t, b, "w", table, holder)
	v1, err := frame.EncodeV1(x)
	if err != nil {
		t.Fatal(err)
	}
	replace := func(name string, data []byte) {
		t.Helper()
		if a, err := b.Stat(ctx, name); err == nil {
			if err := b.Delete(ctx, name, a.Generation); err != nil {
				t.Fatal(err)
			}
		}
		if data != nil {
			if _, err := b.Create(ctx, name, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	replace(index.TickIndexPath(holder.Path), nil)
	replace(index.TickIndexPaths(holder.Path)[2], v1)
	y, err := frame.ReadTickIndex(ctx, b, holder)
	if err != nil || y.Version != 1 || len(y.Ticks) != len(x.Ticks) {
		t.Fatalf("the first format's index: %+v, %v", y, err)
	}
	for _, e := range y.Ticks {
		if e.CSVSize != 0 || e.CSVInFooter {
			t.Fatalf("tick %d: a first-format index records a CSV size (%d)", e.Tick, e.CSVSize)
		}
		got, err := frame.TickFile(tbl, bytes.NewReader(data), int64(len(data)), e)
		if err != nil || !bytes.Equal(got, before[e.Tick]) {
			t.Fatalf("tick %d through a first-format index: %d bytes (%v), the fragment had %d", e.Tick, len(got), err, len(before[e.Tick]))
		}
	}
	// The second format (no column summaries) beside the first: read
	// before it, its ticks rebuilt as with the third.
	replace(index.TickIndexPaths(holder.Path)[1], enginetest.TickIndexV2(x))
	y, err = frame.ReadTickIndex(ctx, b, holder)
	if err != nil || y.Version != 2 || len(y.Ticks) != len(x.Ticks) || y.Summaries != nil {
		t.Fatalf("the second format's index: %+v, %v", y, err)
	}
	for _, e := range y.Ticks {
		if e != x.Ticks[slices.IndexFunc(x.Ticks, func(f frame.TickEntry) bool { return f.Tick == e.Tick })] {
			t.Fatalf("tick %d: the second format's entry %+v", e.Tick, e)
		}
	}
	replace(index.TickIndexPaths(holder.Path)[1], nil)
	replace(index.TickIndexPaths(holder.Path)[2], x.Encode())
	if _, err := frame.ReadTickIndex(ctx, b, holder); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("a third-format index under the first's name: %v", err)
	}
}

// wideCompactedFile compacts a wide world of 2,000 ticks (all but the
// newest 10) and returns the compacted file of its particle table that
// holds tick 10, with the file's tick index.
func wideCompactedFile(t *testing.T) (*engine.Table, *frame.TickIndex, []byte) {
	t.Helper()
	ctx := enginetest.Context(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.Wide(t, b, "w", 2000, 74)
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil {
		t.Fatal(err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick("main", 10)
	if !ok {
		t.Fatal("no tick 10")
	}
	var f index.Fragment
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID {
			f = tf.Fragments[0]
		}
	}
	if f.Span == nil {
		t.Fatal("tick 10 is not compacted; the test proves nothing")
	}
	return enginetest.CompactedFile(t, b, "w", particles.Tables()[0].ID, f)
}
