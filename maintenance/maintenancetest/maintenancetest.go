// Package maintenancetest builds what maintenance leaves, at once, for
// tests and benchmarks (worldfs bench history, million): nothing else
// imports it.
package maintenancetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// WriteCompactedTicks writes what compaction leaves of the given ticks of
// run: each tick's rows are f's rows stamped with (ticks[i], tokens[i],
// epoch), and they are written as one compacted file (its rows in tick,
// then entity order), byte for byte the file maintenance.Compact writes of
// those ticks (but for the intent in its name: none is held), with its
// tick index beside it. It returns the file's catalog record and each
// tick's canonical file (the fragment the tick's writer would have
// published: its size and sha256), so that a caller can publish the ticks
// and then commit the file with a span fragments.rewrite, as a long-lived
// world's compaction would have. It builds long histories in minutes;
// ticks must be ascending and f not empty.
func WriteCompactedTicks(ctx context.Context, b bucket.Bucket, world, run string, f *frame.Frame, epoch int64, ticks []int64, tokens []string) (index.Fragment, []frame.TickEntry, error) {
	t := f.Table
	if len(ticks) == 0 || len(ticks) != len(tokens) || f.Len() == 0 {
		return index.Fragment{}, nil, fmt.Errorf("table %s: %d ticks, %d tokens and %d rows a tick: a compacted file needs rows", t.Name, len(ticks), len(tokens), f.Len())
	}
	n := f.Len()
	stamp := func(i int) frame.Stamp { // of row i of the file: tick i/n's
		k := i / n
		return frame.Stamp{Tick: ticks[k], CommitToken: tokens[k], WriterEpoch: epoch}
	}
	all := frame.NewFrame(t)
	entries := make([]frame.TickEntry, len(ticks))
	runs := make([]frame.TickEntry, len(ticks))
	known := make(map[int64]frame.TickEntry, len(ticks))
	for i, tick := range ticks {
		if i > 0 && tick <= ticks[i-1] {
			return index.Fragment{}, nil, fmt.Errorf("table %s: tick %d after tick %d", t.Name, tick, ticks[i-1])
		}
		s := stamp(i * n)
		data, csv, err := frame.Encode(f, func(int) frame.Stamp { return s }, frame.CSVRecord, 0) // as frame.EncodeFragment writes it
		if err != nil {
			return index.Fragment{}, nil, err
		}
		runs[i] = frame.TickEntry{Tick: tick, Row: int64(i * n), Rows: int64(n)}
		e := runs[i]
		e.Size, e.Digest, e.CSVSize, e.CSVInFooter = int64(len(data)), sha256.Sum256(data), csv, true
		known[tick], entries[i] = e, e
		all.AppendFrame(f)
	}
	data, err := frame.EncodeCompacted(all, stamp)
	if err != nil {
		return index.Fragment{}, nil, fmt.Errorf("table %s: compacting: %w", t.Name, err)
	}
	digest := frame.Digest(data)
	path := index.CompactedPath(world, run, t.ID, strings.TrimPrefix(digest, "sha256:")[:32], "")
	attrs, err := bucket.CreateOnce(ctx, b, path, data)
	if err != nil {
		return index.Fragment{}, nil, fmt.Errorf("world %s: writing %s: %w", world, path, err)
	}
	fr := index.Fragment{Path: path, Rows: int64(all.Len()), Bytes: int64(len(data)), Digest: digest,
		Generation: attrs.Generation, Span: &index.Span{From: ticks[0], To: ticks[len(ticks)-1]}}
	x, _, err := frame.BuildTickIndex(t, data, runs, known, nil)
	if err != nil {
		return index.Fragment{}, nil, fmt.Errorf("world %s: %s: %w", world, path, err)
	}
	if _, err := frame.WriteTickIndex(ctx, b, fr, x); err != nil {
		return index.Fragment{}, nil, fmt.Errorf("world %s: %w", world, err)
	}
	return fr, entries, nil
}
