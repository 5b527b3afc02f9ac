package maintenance

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// WriteCompactedTicks writes what compaction leaves of the given ticks of
// run: each tick's rows are f's rows stamped with (ticks[i], tokens[i],
// epoch), and they are written as one compacted file (its rows in tick,
// then entity order) with its tick index beside it, through the code
// Compact writes them with. It returns the file's catalog record and each
// tick's canonical file (the fragment the tick's writer would have
// published: its size and sha256), so that a caller can publish the ticks
// and then commit the file with a span fragments.rewrite, as a long-lived
// world's compaction would have. It builds long histories for benchmarks
// in minutes; ticks must be ascending and f not empty.
func WriteCompactedTicks(ctx context.Context, b bucket.Bucket, world, run string, f *frame.Frame, epoch int64, ticks []int64, tokens []string) (index.Fragment, []frame.TickEntry, error) {
	t := f.Table
	if len(ticks) == 0 || len(ticks) != len(tokens) || f.Len() == 0 {
		return index.Fragment{}, nil, fmt.Errorf("table %s: %d ticks, %d tokens and %d rows a tick: a compacted file needs rows", t.Name, len(ticks), len(tokens), f.Len())
	}
	in := &sourceFiles{}
	known := make(map[int64]frame.TickEntry, len(ticks))
	entries := make([]frame.TickEntry, len(ticks))
	keys := make([]rowKey, 0, len(ticks)*f.Len())
	for i, tick := range ticks {
		if i > 0 && tick <= ticks[i-1] {
			return index.Fragment{}, nil, fmt.Errorf("table %s: tick %d after tick %d", t.Name, tick, ticks[i-1])
		}
		s := frame.Stamp{Tick: tick, CommitToken: tokens[i], WriterEpoch: epoch}
		data, csv, err := frame.Encode(f, func(int) frame.Stamp { return s }, frame.CSVRecord, 0) // as EncodeFragment writes it
		if err != nil {
			return index.Fragment{}, nil, err
		}
		file, err := openFragment(t, data)
		if err != nil {
			return index.Fragment{}, nil, err
		}
		e := frame.TickEntry{Tick: tick, Row: int64(len(keys)), Rows: int64(f.Len()), Size: int64(len(data)), Digest: sha256.Sum256(data),
			CSVSize: csv, CSVInFooter: true}
		known[tick], entries[i] = e, e
		row := 0
		for _, rg := range file.RowGroups() {
			g := int32(len(in.groups))
			in.groups = append(in.groups, rg)
			for r := range rg.NumRows() {
				keys = append(keys, rowKey{tick: tick, entity: f.Entities[row], group: g, row: int32(r)})
				row++
			}
		}
	}
	data, err := in.encode(t, keys)
	if err != nil {
		return index.Fragment{}, nil, fmt.Errorf("table %s: compacting: %w", t.Name, err)
	}
	c := &compactor{b: b, world: world, opts: CompactOptions{Run: run}}
	fr, err := c.write(ctx, t, data, int64(len(keys)), index.Span{From: ticks[0], To: ticks[len(ticks)-1]})
	if err != nil {
		return index.Fragment{}, nil, err
	}
	if err := c.writeTickIndex(ctx, t, fr, data, keys, known, nil, &CompactResult{}); err != nil {
		return index.Fragment{}, nil, err
	}
	return fr, entries, nil
}
