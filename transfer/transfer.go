package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// FailpointCopied is hit after each object a copy creates in the
// destination (internal/failpoint), for crash tests.
const FailpointCopied = "transfer.copied"

// Options configure Copy.
type Options struct {
	// WithLineage copies, with each fork, the worlds whose history it
	// reads (its parent, and theirs). Without it a fork whose parent is
	// neither among the worlds copied nor already in the destination up to
	// the fork point is refused (MissingParentError).
	WithLineage bool
	// Parallel is how many objects are copied at once (default 8).
	Parallel int
	// Progress, if set, is called as objects are decided (copied or
	// skipped), from several goroutines.
	Progress func(Progress)
}

// Progress is how far a copy has got.
type Progress struct {
	Objects, TotalObjects int64 // objects decided, of those to decide
	Bytes, TotalBytes     int64 // their bytes
}

// Result is what a copy did.
type Result struct {
	// Worlds copied, parents before their forks.
	Worlds []string
	// Present are the parents a fork copied reads that the destination
	// already held up to the fork point: not copied again.
	Present []string
	// Copied objects and their bytes; Skipped objects the destination
	// already held with the same bytes (a resumed copy).
	Copied, Skipped, Bytes int64
	// Verified counts the copied or skipped objects checked against the
	// catalog's sha256 (fragments); the others (catalog objects, table
	// descriptions, replaced fragments not yet collected) are compared
	// byte for byte with the source when the destination holds them.
	Verified int64
}

// MissingParentError: a fork was to be copied without the world it was
// forked from, whose history it reads. Nothing was written.
type MissingParentError struct {
	World, Parent string
	// Stale, if set, says why the destination's world of the parent's
	// name does not serve: another world, or a copy that ends before the
	// fork point.
	Stale string
}

func (e *MissingParentError) Error() string {
	if e.Stale != "" {
		return fmt.Sprintf("world %s is a fork of %s and reads its history, and %s; copy %s again (a copy resumes), or pass --with-lineage to bring it along",
			e.World, e.Parent, e.Stale, e.Parent)
	}
	return fmt.Sprintf("world %s is a fork of %s and reads its history; copy %s too, or pass --with-lineage to bring it along",
		e.World, e.Parent, e.Parent)
}

// ErrDifferentObject: the destination holds an object under a name the
// copy writes, with other bytes (another world of the same name, or
// damage). It is never overwritten.
var ErrDifferentObject = errors.New("the destination holds different bytes under this name")

// Worlds returns every world of b, by id.
func Worlds(ctx context.Context, b bucket.Bucket) ([]string, error) {
	ms, err := index.ListWorlds(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out, nil
}

// object is one object to copy, with the catalog's record of it if it has
// one.
type object struct {
	name string
	size int64
	rec  cache.Record // zero: unrecorded
}

// Copy copies worlds from one bucket to another (see the package doc). A
// refusal (no such world, a fork without its parent) writes nothing.
func Copy(ctx context.Context, from, to bucket.Bucket, worlds []string, opts Options) (Result, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	order, present, err := lineage(ctx, from, to, worlds, opts.WithLineage)
	if err != nil {
		return Result{}, err
	}
	// Plan every world before the first write: its catalog listed first,
	// then its records loaded, then its data listed, so that every
	// fragment a listed slot names is among the data listed.
	var phases [][]object
	var total Progress
	for _, w := range order {
		ps, err := plan(ctx, from, w)
		if err != nil {
			return Result{}, err
		}
		for _, p := range ps {
			total.TotalObjects += int64(len(p))
			for _, o := range p {
				total.TotalBytes += o.size
			}
		}
		phases = append(phases, ps...)
	}
	c := &copier{from: from, to: to, opts: opts, total: total}
	for _, p := range phases {
		if err := c.phase(ctx, p); err != nil {
			return c.result(order, present), err
		}
	}
	return c.result(order, present), nil
}

// lineage returns worlds, and with withLineage the worlds their history
// reads, parents before forks, each once; and, without withLineage, the
// parents the destination to already holds up to the fork point
// (inDestination), which a fork is copied without.
func lineage(ctx context.Context, b, to bucket.Bucket, worlds []string, withLineage bool) ([]string, []string, error) {
	markers := map[string]index.Marker{}
	var read func(w string) (index.Marker, error)
	read = func(w string) (index.Marker, error) {
		if m, ok := markers[w]; ok {
			return m, nil
		}
		m, err := index.ReadMarker(ctx, b, w)
		if errors.Is(err, bucket.ErrNotExist) {
			return m, fmt.Errorf("world %s: no such world in %v: %w", w, b, err)
		}
		if err != nil {
			return m, fmt.Errorf("world %s: %w", w, err)
		}
		markers[w] = m
		return m, nil
	}
	want := map[string]bool{}
	for _, w := range worlds {
		want[w] = true
	}
	var present []string
	queue := slices.Clone(worlds)
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		m, err := read(w)
		if err != nil {
			return nil, nil, err
		}
		if m.Parent == "" || want[m.Parent] || slices.Contains(present, m.Parent) {
			continue
		}
		if !withLineage {
			pm, err := read(m.Parent)
			if err != nil {
				return nil, nil, err
			}
			stale, err := inDestination(ctx, b, to, pm, m)
			if err != nil {
				return nil, nil, err
			}
			if stale != "" {
				if stale == notThere {
					stale = ""
				}
				return nil, nil, &MissingParentError{World: w, Parent: m.Parent, Stale: stale}
			}
			present = append(present, m.Parent)
			continue
		}
		want[m.Parent] = true
		queue = append(queue, m.Parent)
	}
	// Parents first: a world's depth in its lineage, then its name.
	depth := func(w string) int {
		d := 0
		for m := markers[w]; m.Parent != ""; m = markers[m.Parent] {
			d++
		}
		return d
	}
	var out []string
	for w := range want {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := depth(out[i]), depth(out[j])
		if di != dj {
			return di < dj
		}
		return out[i] < out[j]
	})
	return out, present, nil
}

// notThere: inDestination found no world of the parent's name.
const notThere = "not there"

// inDestination tells whether to already holds the parent (marker pm)
// whose history the fork (marker child) reads, as from holds it up to the
// fork point: a world of that name with the same marker, whose run shows
// the fork tick under the same commit token (a copy holds a prefix of its
// source's log, so it then holds every tick the fork reads). It returns
// "" if so, else why not (notThere: no world of that name).
func inDestination(ctx context.Context, from, to bucket.Bucket, pm, child index.Marker) (string, error) {
	dm, err := index.ReadMarker(ctx, to, pm.ID)
	if errors.Is(err, bucket.ErrNotExist) {
		return notThere, nil
	}
	if err != nil {
		return "", fmt.Errorf("world %s in %v: %w", pm.ID, to, err)
	}
	if dm != pm {
		return fmt.Sprintf("%v holds another world named %s", to, pm.ID), nil
	}
	src, err := index.OpenView(ctx, index.LoadFrom(from), pm.ID, child.ForkRun)
	if err != nil {
		return "", fmt.Errorf("world %s: %w", pm.ID, err)
	}
	want, ok := src.Tick(child.ForkTick)
	if !ok {
		return "", fmt.Errorf("world %s: its fork point, tick %d of run %s of %s, is not visible in %v", child.ID, child.ForkTick, child.ForkRun, pm.ID, from)
	}
	dst, err := index.OpenView(ctx, index.LoadFrom(to), pm.ID, child.ForkRun)
	if err != nil {
		return fmt.Sprintf("the copy of %s in %v does not read whole (%v)", pm.ID, to, err), nil
	}
	got, ok := dst.Tick(child.ForkTick)
	if ok && got.CommitToken != want.CommitToken {
		return fmt.Sprintf("%v holds another world named %s (its tick %d, the fork point, was committed under another token)", to, pm.ID, child.ForkTick), nil
	}
	if !ok {
		head := "no tick"
		if h, ok := dst.Head(); ok {
			head = fmt.Sprintf("tick %d", h.Tick.Tick)
		}
		return fmt.Sprintf("the copy of %s in %v ends at %s, before the fork point (tick %d of run %s)", pm.ID, to, head, child.ForkTick, child.ForkRun), nil
	}
	return "", nil
}

// plan lists world w's objects in the order they are copied: its data and
// assets, then its catalog, then its marker, then its directory entry.
func plan(ctx context.Context, b bucket.Bucket, w string) ([][]object, error) {
	list := func(prefix string) ([]object, error) {
		var out []object
		for a, err := range b.List(ctx, prefix, "") {
			if err != nil {
				return nil, fmt.Errorf("world %s: listing %s: %w", w, prefix, err)
			}
			out = append(out, object{name: a.Name, size: a.Size})
		}
		return out, nil
	}
	catalog, err := list(index.WorldPrefix(w))
	if err != nil {
		return nil, err
	}
	var marker []object
	catalog = slices.DeleteFunc(catalog, func(o object) bool {
		if o.name == index.MarkerName(w) {
			marker = append(marker, o)
			return true
		}
		return false
	})
	if len(marker) == 0 {
		return nil, fmt.Errorf("world %s: no marker in %v: %w", w, b, bucket.ErrNotExist)
	}
	s, _, err := index.Load(ctx, b, w)
	if err != nil {
		return nil, fmt.Errorf("world %s: loading its catalog: %w", w, err)
	}
	recs := map[string]cache.Record{}
	var receipts []cache.Record
	err = s.Fragments("", func(f index.FragmentRef) bool {
		r := cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
		recs[f.Path] = r
		if f.Run == index.EvaluationRun {
			receipts = append(receipts, r)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", w, err)
	}
	data, err := list(index.DataPrefix(w))
	if err != nil {
		return nil, err
	}
	for i, o := range data {
		if r, ok := recs[o.name]; ok {
			data[i].rec = r
		}
	}
	assets, err := referencedAssets(ctx, b, receipts)
	if err != nil {
		return nil, err
	}
	data = append(data, assets...)
	entry := index.DirectoryPrefix + w
	a, err := b.Stat(ctx, entry)
	if err != nil {
		return nil, fmt.Errorf("world %s: its directory entry: %w", w, err)
	}
	return [][]object{data, catalog, marker, {{name: entry, size: a.Size}}}, nil
}

type copier struct {
	from, to bucket.Bucket
	opts     Options
	total    Progress

	objects, bytes           atomic.Int64 // decided
	copied, skipped, written atomic.Int64
	verified                 atomic.Int64
	progressMu               sync.Mutex
}

func (c *copier) result(order, present []string) Result {
	return Result{Worlds: order, Present: present, Copied: c.copied.Load(), Skipped: c.skipped.Load(), Bytes: c.written.Load(), Verified: c.verified.Load()}
}

// phase copies objects, several at a time; the next phase starts only when
// every object of this one is in the destination.
func (c *copier) phase(ctx context.Context, objects []object) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Parallel)
	for _, o := range objects {
		g.Go(func() error {
			if err := c.one(ctx, o); err != nil {
				return err
			}
			p := Progress{Objects: c.objects.Add(1), Bytes: c.bytes.Add(o.size),
				TotalObjects: c.total.TotalObjects, TotalBytes: c.total.TotalBytes}
			if c.opts.Progress != nil {
				c.progressMu.Lock()
				c.opts.Progress(p)
				c.progressMu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// one copies object o, or skips it if the destination holds its bytes.
func (c *copier) one(ctx context.Context, o object) error {
	if _, err := c.to.Stat(ctx, o.name); err == nil {
		return c.same(ctx, o)
	} else if !errors.Is(err, bucket.ErrNotExist) {
		return err
	}
	data, _, err := c.from.Get(ctx, o.name)
	if err != nil {
		return fmt.Errorf("copying %s: %w", o.name, err)
	}
	if o.rec.Recorded() {
		// Never carry damage across: the source's bytes must be the
		// catalog's.
		if err := o.rec.CheckData("", data); err != nil {
			return fmt.Errorf("copying from %v: %w", c.from, err)
		}
		c.verified.Add(1)
	}
	_, err = bucket.CreateOnce(ctx, c.to, o.name, data)
	if errors.Is(err, bucket.ErrExist) {
		return c.same(ctx, o) // created meanwhile, or by an answer lost
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", o.name, err)
	}
	c.copied.Add(1)
	c.written.Add(int64(len(data)))
	failpoint.Hit(FailpointCopied)
	return nil
}

// same checks that the destination's object o holds o's bytes: a
// fragment's by the catalog's sha256, anything else by the source's
// bytes. Then o is skipped.
func (c *copier) same(ctx context.Context, o object) error {
	got, _, err := c.to.Get(ctx, o.name)
	if err != nil {
		return fmt.Errorf("reading %s in %v: %w", o.name, c.to, err)
	}
	if o.rec.Recorded() && o.rec.Digest != "" {
		if err := o.rec.CheckData("", got); err != nil {
			return fmt.Errorf("%s in %v: %w: %w", o.name, c.to, ErrDifferentObject, err)
		}
		c.verified.Add(1)
	} else {
		want, _, err := c.from.Get(ctx, o.name)
		if err != nil {
			return fmt.Errorf("copying %s: %w", o.name, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s in %v: %w (%d bytes, the source's %d); it is never overwritten", o.name, c.to, ErrDifferentObject, len(got), len(want))
		}
	}
	c.skipped.Add(1)
	return nil
}
