package maintenance_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
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
	said []maintenance.ByteRange
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

func (a *announced) Prefetch(ranges []maintenance.ByteRange) error {
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
	ctx := ctxT(t)
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
	table, x, data := compactedFileOf(t, b, particles.Tables()[0].ID, f)
	src := &announced{data: data}
	cf, err := maintenance.OpenCompactedFile(table, src, int64(len(data)), x)
	if err != nil {
		t.Fatal(err)
	}
	src.open = true
	for i, e := range x.Ticks {
		got, err := cf.TickFile(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := maintenance.TickFile(table, bytes.NewReader(data), int64(len(data)), e)
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
