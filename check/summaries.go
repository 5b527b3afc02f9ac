package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// summaries verifies, for --read-data, what the tick index of f (a
// compacted file) records of each numeric column per tick (its column
// summaries, which the web interface's sweep page shows in place of the
// rows) against the file's rows: the summarized columns summarized
// again from them (frame.SummarizeFile, one pass over its ticks) must
// give the index's ticks and the same numbers, bit for bit (the same
// sums in the same order). A file
// without an index, or with one of a format before summaries, has
// nothing to verify; a damaged index is an error, as it is to the mount.
// data is the file's bytes as the check of its sha256 read them (a remote
// bucket's object; nil: the file is read here).
func summaries(ctx context.Context, b bucket.Bucket, f index.Fragment, data []byte) error {
	if f.Span == nil {
		return nil
	}
	x, err := frame.ReadTickIndex(ctx, b, f)
	if errors.Is(err, frame.ErrNoTickIndex) {
		return nil
	}
	if err != nil || len(x.Summaries) == 0 {
		return err
	}
	src, size, done, err := readerOf(ctx, b, f.Path, data)
	if err != nil {
		return err
	}
	defer done()
	cols := make([]frame.Column, len(x.Summaries))
	for i, s := range x.Summaries {
		cols[i] = frame.Column{Name: s.Name, Type: s.Type}
	}
	ticks, sums, err := frame.SummarizeFile(src, size, cols)
	if err != nil {
		return err
	}
	if len(ticks) != len(x.Ticks) {
		return fmt.Errorf("the file holds %d ticks, its tick index %d", len(ticks), len(x.Ticks))
	}
	for k, e := range x.Ticks {
		if ticks[k].Tick != e.Tick || ticks[k].Rows != e.Rows {
			return fmt.Errorf("tick %d: the file holds %d rows of tick %d there, its tick index %d", e.Tick, ticks[k].Rows, ticks[k].Tick, e.Rows)
		}
		for i := range sums {
			if got, want := &sums[i], &x.Summaries[i]; !sameStats(got, want, k) {
				return fmt.Errorf("tick %d column %s: the rows give %s, the tick index records %s", e.Tick, want.Name, stats(got, k), stats(want, k))
			}
		}
	}
	return nil
}

// readerOf opens object name of b for reading at offsets: data if it was
// read already, a local bucket's file in place, another's object read
// whole.
func readerOf(ctx context.Context, b bucket.Bucket, name string, data []byte) (io.ReaderAt, int64, func(), error) {
	if data != nil {
		return bytes.NewReader(data), int64(len(data)), func() {}, nil
	}
	if l, ok := bucket.As[bucket.Local](b); ok {
		p, err := l.Path(name)
		if err != nil {
			return nil, 0, nil, err
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, nil, err
		}
		return f, st.Size(), func() { f.Close() }, nil
	}
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, 0, nil, err
	}
	return bytes.NewReader(data), int64(len(data)), func() {}, nil
}

// sameStats reports whether a and b summarize tick k alike, bit for bit.
func sameStats(a, b *frame.ColumnSummary, k int) bool {
	if a.Type != b.Type || len(a.Ints) != len(b.Ints) || len(a.Floats) != len(b.Floats) {
		return false
	}
	if a.Ints != nil {
		return a.Ints[k] == b.Ints[k]
	}
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	fa, fb := a.Floats[k], b.Floats[k]
	return same(fa.Min, fb.Min) && same(fa.Max, fb.Max) && same(fa.Sum, fb.Sum)
}

// stats prints tick k of s.
func stats(s *frame.ColumnSummary, k int) string {
	if s.Ints != nil {
		st := s.Ints[k]
		return fmt.Sprintf("min %d max %d sum %s", st.Min, st.Max, st.Sum.Big())
	}
	st := s.Floats[k]
	return fmt.Sprintf("min %v max %v sum %v", st.Min, st.Max, st.Sum)
}
