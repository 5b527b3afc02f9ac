package iceberg

import (
	"fmt"
	"math"
	"testing"

	"github.com/worldfs/worldfs/index"
)

// newSince adds, of a table's file, what its snapshot up to last does not
// hold: a tick file after last, a compacted file after it whole, and of a
// compacted file across it the rows of the ticks after it, also when the
// plan started before last (another table's snapshot is older: the view
// kept the file from that earlier tick).
func TestNewSinceAddsWhatTheSnapshotLacks(t *testing.T) {
	span := &index.Span{From: 0, To: 4095}
	for _, c := range []struct {
		f     index.File
		last  int64
		added bool
		keep  string
	}{
		{index.File{Tick: 10}, 9, true, "<nil>"},
		{index.File{Tick: 9}, 9, false, "<nil>"},
		{index.File{Fragment: index.Fragment{Span: span}, Keep: &index.Span{From: 4096, To: 5000}}, 4095, false, "&{4096 5000}"},
		{index.File{Fragment: index.Fragment{Span: &index.Span{From: 4096, To: 8191}}, Keep: &index.Span{From: 4096, To: 5000}}, 4095, true, "&{4096 5000}"},
		{index.File{Fragment: index.Fragment{Span: span}, Keep: &index.Span{From: 4067, To: 5000}}, 4066, true, "&{4067 5000}"},
		{index.File{Fragment: index.Fragment{Span: span}, Keep: &index.Span{From: 100, To: 5000}}, 4066, true, "&{4067 5000}"},
		{index.File{Fragment: index.Fragment{Span: span}, Keep: &index.Span{From: math.MinInt64, To: 4066}}, 4066, false, "&{-9223372036854775808 4066}"},
	} {
		got, added := newSince(c.f, c.last)
		if added != c.added || added && fmt.Sprint(got.Keep) != c.keep {
			t.Errorf("newSince(%+v keep %v, %d) = keep %v, %v; want keep %s, %v", c.f.Span, c.f.Keep, c.last, got.Keep, added, c.keep, c.added)
		}
	}
}
