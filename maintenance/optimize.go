package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// OptimizeOptions is what Optimize does.
type OptimizeOptions struct {
	// Compact is the compaction's (its Run is the run whose tick indexes
	// are written too).
	Compact CompactOptions
	// DryRun: count what the run lacks (tick indexes, damaged ones,
	// sidecars, reference lists); compact and write nothing.
	DryRun bool
	// ExportRefs writes the reference lists that the latest versions of
	// the world's exports lack (an older worldfs wrote them) or hold
	// damaged, and counts them (dryRun: counts only). Exports own their
	// format, and maintenance imports no exporter: the caller passes
	// theirs (export/iceberg's WriteReferenceLists). Nil: none written.
	ExportRefs func(ctx context.Context, b bucket.Bucket, world string, dryRun bool) (RefLists, error)
	// IndexProgress, if set, hears of each compacted file given its tick
	// index (TickIndexOptions.Progress).
	IndexProgress func(done, total int)
}

// RefLists counts the reference lists of a world's exports that
// OptimizeOptions.ExportRefs found missing or damaged, and wrote.
type RefLists struct {
	Tables, Missing, Damaged, Written int
}

// OptimizeResult is what Optimize did (with DryRun: found to do).
type OptimizeResult struct {
	World, Run string
	DryRun     bool
	// Compact: the compaction (none with DryRun); Seconds, its duration.
	Compact CompactResult
	Seconds float64
	// Sidecars: the summaries and token filters written (DryRun: missing).
	Sidecars index.SidecarCounts
	// TickIndexes: the tick indexes of compacted files written before
	// them (DryRun: missing, damaged, another build's).
	TickIndexes TickIndexResult
	// RefLists: the exports' reference lists.
	RefLists RefLists
	// Done: every step ran. An error beside it is the damaged tick
	// indexes' (TickIndexes.Damaged, index.ErrCorrupt); without it, the
	// step that failed ended Optimize.
	Done bool
}

// Optimize is worldfs optimize, on the world whose catalog cat is: first
// the exports' reference lists an older worldfs left out (collection
// deletes nothing of the world while one is missing), then compaction of
// the run (Compact), then the summaries and token filters of the tick
// shards that lack them (index.WriteSidecars: a views build reads the
// summaries instead of every tick record, a lookup of a token that names
// no tick the filters), then the tick indexes of the compacted files
// written before them (WriteTickIndexes: a mount sizes their ticks from
// those instead of deriving each from its rows). Safe beside a live
// writer, as each of them is.
//
// Damaged tick indexes are left as they are (TickIndexResult.Damaged)
// and make the error Optimize returns beside a result that is Done; any
// other error ends it.
func Optimize(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts OptimizeOptions) (OptimizeResult, error) {
	world := cat.World()
	res := OptimizeResult{World: world, Run: opts.Compact.Run, DryRun: opts.DryRun}
	if res.Run == "" {
		res.Run = index.DefaultRun
	}
	xopts := TickIndexOptions{Run: res.Run, Workers: opts.Compact.Workers, DryRun: opts.DryRun, Progress: opts.IndexProgress}
	if opts.DryRun {
		return res, optimizeDry(ctx, b, cat, opts, xopts, &res)
	}
	var err error
	if res.RefLists, err = exportRefs(ctx, b, world, opts); err != nil {
		return res, err
	}
	start := time.Now()
	res.Compact, err = Compact(ctx, b, cat, opts.Compact)
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		return res, err
	}
	if res.Sidecars, err = index.WriteSidecars(ctx, b, world, false); err != nil {
		return res, fmt.Errorf("world %s: tick shard summaries and token filters: %w", world, err)
	}
	res.TickIndexes, err = WriteTickIndexes(ctx, b, cat, xopts)
	res.Done = err == nil || len(res.TickIndexes.Damaged) > 0
	return res, err
}

// optimizeDry is Optimize with DryRun.
func optimizeDry(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts OptimizeOptions, xopts TickIndexOptions, res *OptimizeResult) error {
	var err error
	if res.Sidecars, err = index.WriteSidecars(ctx, b, res.World, true); err != nil {
		return fmt.Errorf("world %s: tick shard summaries and token filters: %w", res.World, err)
	}
	res.TickIndexes, err = WriteTickIndexes(ctx, b, cat, xopts)
	if err != nil && len(res.TickIndexes.Damaged) == 0 {
		return err
	}
	refs, rerr := exportRefs(ctx, b, res.World, opts)
	res.RefLists = refs
	if rerr != nil {
		return rerr
	}
	res.Done = true
	return err
}

// exportRefs runs opts.ExportRefs, if set.
func exportRefs(ctx context.Context, b bucket.Bucket, world string, opts OptimizeOptions) (RefLists, error) {
	if opts.ExportRefs == nil {
		return RefLists{}, nil
	}
	refs, err := opts.ExportRefs(ctx, b, world, opts.DryRun)
	if err != nil {
		return refs, fmt.Errorf("world %s: the reference lists of its exports: %w", world, err)
	}
	return refs, nil
}
