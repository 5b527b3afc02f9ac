package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A compacted file written before tick indexes (or whose index was lost)
// has none: a reader then derives each of its ticks' files from its rows
// when it needs its size. WriteTickIndexes gives every such file of a run
// the index compaction would have written beside it: the same builder
// (frame.IndexCompactedFile: frame.BuildTickIndex, every tick encoded,
// none known from a source) and the same create-only write
// (frame.WriteTickIndex), so the index is byte for byte
// the one compaction writes for that file: for a file whose ticks' writers
// recorded CSV sizes, the one it wrote when it made the file; otherwise
// the one it writes when the file is a source of a compaction (a
// compacted file without an index: unrecordedCSV marks none of its
// ticks). Each tick's canonical file then records its CSV size in its
// footer, as the mount derives it without an index, so that a tick's
// size is the same before and after its file is indexed: the fragments
// the rows came from are gone, and with them what their footers recorded.
//
// A file whose index is of an older format (before CSV sizes, or before
// column summaries) gets one of the current format beside it, each tick
// keeping the entry the older one records (frame.BuildTickIndex with
// those ticks known: the same sizes, so the mount serves the same bytes)
// and its columns summarized from the file's rows: the index compaction
// writes for the file today. The older one stays until collection
// deletes it with its file; readers read the newest.

// TickIndexOptions tune WriteTickIndexes.
type TickIndexOptions struct {
	// Run whose compacted files are indexed (default index.DefaultRun).
	Run string
	// Workers bounds the files indexed at once (default GOMAXPROCS).
	Workers int
	// DryRun: count the files without a tick index; write nothing.
	DryRun bool
	// Progress, if set, hears of each file as it is done.
	Progress func(done, total int)
}

// EnsureDefaults fills in the defaults of the fields left zero and
// returns o.
func (o *TickIndexOptions) EnsureDefaults() *TickIndexOptions {
	if o.Run == "" {
		o.Run = index.DefaultRun
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// Validate checks the options once their defaults are in.
func (o *TickIndexOptions) Validate() error {
	if err := index.ValidateRunName(o.Run); err != nil {
		return fmt.Errorf("tick index options: Run: %w", err)
	}
	return nil
}

// TickIndexResult sums up a WriteTickIndexes call.
type TickIndexResult struct {
	Files   int // compacted files of ticks the catalog names
	Missing int // of them without a tick index
	// Older: of them with a tick index of an older format only (written
	// again in the current one, Written counting it too).
	Older   int
	Written int   // tick indexes written (none with DryRun)
	Ticks   int64 // ticks they record
	Bytes   int64 // their bytes
	// Gone: files without one that were collected before they were read
	// (a compaction replaced them meanwhile): nothing to index.
	Gone int
	// Damaged: the tick indexes that are damaged (index.ErrCorrupt, each
	// error naming one), left as they are: a reader of their ticks fails
	// (EIO) until one deletes the index, and a run after that writes it.
	Damaged []error
	// Foreign: the tick indexes written by an encoder of other bytes
	// (another build), left as they are: this build derives those ticks.
	Foreign []string
}

// WriteTickIndexes writes the tick index of each compacted file of ticks
// of the run that lacks one (see above). It is safe beside a live writer,
// compaction and collection: it only creates names (an index another run
// wrote meanwhile is the same bytes), and a file collected before it is
// read is skipped (its index, if written just before, is an orphan that
// collection deletes). A damaged index is never replaced: it is reported
// (Damaged), with the error wrapping index.ErrCorrupt returned after the
// other files are done.
func WriteTickIndexes(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts TickIndexOptions) (TickIndexResult, error) {
	var res TickIndexResult
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return res, err
	}
	s, err := cat.Exact(ctx)
	if err != nil {
		return res, err
	}
	world := s.World.ID
	type file struct {
		table string
		index.Fragment
	}
	var files []file
	seen := map[string]bool{}
	s.Ticks(opts.Run, math.MinInt64, func(t *index.Tick) bool {
		var tables []index.TableFragments
		if tables, err = t.Tables(); err != nil {
			return false
		}
		for _, tf := range tables {
			for _, f := range tf.Fragments {
				if f.Span != nil && !seen[f.Path] {
					seen[f.Path] = true
					files = append(files, file{tf.Table, f})
				}
			}
		}
		return true
	})
	if err != nil {
		return res, fmt.Errorf("world %s: %w", world, err)
	}
	res.Files = len(files)
	var mu sync.Mutex
	tables := map[string]*frame.Table{}
	table := func(ctx context.Context, id string) (*frame.Table, error) {
		mu.Lock()
		t, ok := tables[id]
		mu.Unlock()
		if ok {
			return t, nil
		}
		info, err := frame.ReadTableInfo(ctx, b, world, id)
		if err != nil {
			return nil, fmt.Errorf("world %s: table %s has no description: %w", world, id, err)
		}
		if t, err = frame.TableFromInfo(info); err != nil {
			return nil, err
		}
		mu.Lock()
		tables[id] = t
		mu.Unlock()
		return t, nil
	}
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Workers)
	for _, f := range files {
		g.Go(func() error {
			var r TickIndexResult
			err := missingTickIndex(gctx, b, f.Fragment, func(ctx context.Context) (*frame.Table, error) { return table(ctx, f.table) }, opts.DryRun, &r)
			mu.Lock()
			defer mu.Unlock()
			res.Missing += r.Missing
			res.Older += r.Older
			res.Written += r.Written
			res.Ticks += r.Ticks
			res.Bytes += r.Bytes
			res.Gone += r.Gone
			res.Damaged = append(res.Damaged, r.Damaged...)
			res.Foreign = append(res.Foreign, r.Foreign...)
			if err != nil {
				return fmt.Errorf("world %s: %w", world, err)
			}
			done++
			if opts.Progress != nil {
				opts.Progress(done, len(files))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	slices.Sort(res.Foreign)
	if len(res.Damaged) > 0 {
		return res, fmt.Errorf("world %s: %d damaged tick indexes left as they are (delete them, then run again to write them): %w", world, len(res.Damaged), errors.Join(res.Damaged...))
	}
	return res, nil
}

// missingTickIndex writes the tick index of the compacted file f if it
// has none (counting it in r), as compaction writes one.
func missingTickIndex(ctx context.Context, b bucket.Bucket, f index.Fragment, table func(context.Context) (*frame.Table, error), dryRun bool, r *TickIndexResult) error {
	old, err := frame.ReadTickIndex(ctx, b, f)
	var known map[int64]frame.TickEntry
	switch {
	case err == nil && old.Version == frame.TickIndexVersion:
		return nil
	case err == nil: // the newest there is of an older format
		known = make(map[int64]frame.TickEntry, len(old.Ticks))
		for _, e := range old.Ticks {
			known[e.Tick] = e
		}
		r.Older++
	case errors.Is(err, index.ErrCorrupt):
		r.Damaged = append(r.Damaged, err)
		return nil
	case !errors.Is(err, frame.ErrNoTickIndex):
		return err
	default:
		for _, name := range index.TickIndexPaths(f.Path) {
			_, err := b.Stat(ctx, name)
			if err == nil {
				r.Foreign = append(r.Foreign, name) // there, of another encoder
				return nil
			}
			if !errors.Is(err, bucket.ErrNotExist) {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		r.Missing++
	}
	if dryRun {
		return nil
	}
	t, err := table(ctx)
	if err != nil {
		return err
	}
	data, _, err := b.Get(ctx, f.Path)
	if errors.Is(err, bucket.ErrNotExist) {
		r.Gone++ // collected since the catalog was read: replaced
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", f.Path, err)
	}
	if frame.Digest(data) != f.Digest {
		return fmt.Errorf("%s does not match its catalog digest: %w", f.Path, index.ErrCorrupt)
	}
	x, err := frame.IndexCompactedFile(t, data, known)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	n, err := frame.WriteTickIndex(ctx, b, f, x)
	if err != nil {
		return err
	}
	r.Written++
	r.Ticks += int64(len(x.Ticks))
	r.Bytes += n
	return nil
}
