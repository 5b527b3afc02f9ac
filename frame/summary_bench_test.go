package frame_test

import (
	"testing"

	"github.com/worldfs/worldfs/frame"
)

// BenchmarkSummaries measures what column summaries add to a compacted
// file's tick index: BuildTickIndex of a file of 512 ticks of 200 rows
// (four float64 and one int64 component column) whose ticks are all
// known from their sources' indexes (compaction's usual case: only the
// summaries are computed), against EncodeCompacted of the same rows (the
// file compaction writes), per row.
//
//	go test ./frame -run '^$' -bench Summaries -benchmem
func BenchmarkSummaries(b *testing.B) {
	pos, _ := frame.NewComponent("position", frame.Field{Name: "x", Type: frame.Float64}, frame.Field{Name: "y", Type: frame.Float64})
	vel, _ := frame.NewComponent("velocity", frame.Field{Name: "x", Type: frame.Float64}, frame.Field{Name: "y", Type: frame.Float64})
	ttl, _ := frame.NewComponent("ttl", frame.Field{Name: "remaining", Type: frame.Int64})
	tbl, err := frame.NewDeclaredTable("bench", pos, vel, ttl)
	if err != nil {
		b.Fatal(err)
	}
	const ticks, rows = 512, 200
	all := frame.NewFrame(tbl)
	var stamps []frame.Stamp
	var runs []frame.TickEntry
	known := map[int64]frame.TickEntry{}
	for tick := range int64(ticks) {
		f := frame.NewFrame(tbl)
		for e := range int64(rows) {
			v := float64(tick*rows+e) * 0.37
			if err := f.Append(e, frame.Values{"position_x": v, "position_y": -v, "velocity_x": v / 3, "velocity_y": 1.0, "ttl_remaining": tick - e}); err != nil {
				b.Fatal(err)
			}
			stamps = append(stamps, frame.Stamp{Tick: tick, CommitToken: "tok", WriterEpoch: 1})
		}
		e := frame.TickEntry{Tick: tick, Row: tick * rows, Rows: rows, Size: 1, CSVSize: 1}
		runs, known[tick] = append(runs, e), e
		all.AppendFrame(f)
	}
	stamp := func(i int) frame.Stamp { return stamps[i] }
	data, err := frame.EncodeCompacted(all, stamp)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			if _, err := frame.EncodeCompacted(all, stamp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(ticks*rows), "ns/row")
	})
	b.Run("index", func(b *testing.B) {
		for range b.N {
			if _, _, err := frame.BuildTickIndex(tbl, data, append([]frame.TickEntry(nil), runs...), known, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(ticks*rows), "ns/row")
	})
}
