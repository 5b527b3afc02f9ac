package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints of compaction, in order.
const (
	// FailpointCompactWritten: a compacted file is durable; the catalog
	// does not name it yet.
	FailpointCompactWritten = "engine.compact.written"
	// FailpointCompactCommitted: the catalog names the compacted files.
	FailpointCompactCommitted = "engine.compact.committed"
)

// Compaction windows, largest first: a compacted file covers ticks of one
// aligned window. A run's history below the recent ticks is cut into the
// largest windows that fit, then smaller ones (LSM-like levels: 64 ticks,
// then 512, then 4,096), so a table of N ticks has about N/4,096 files plus
// a bounded tail, and each row is rewritten once per level.
var compactWindows = []int64{4096, 512, 64}

// CompactOptions tune Compact.
type CompactOptions struct {
	// Run to compact (default "main").
	Run string
	// Recent is how many of the newest ticks stay as written (default
	// 256): they are what live readers read most.
	Recent int64
	// TargetRows bounds the rows of one compacted file (default 1<<20,
	// what DuckDB scans well in one file); a window holding more is cut
	// into several files at tick boundaries.
	TargetRows int64
	// MinFacts is how many facts of one claim shard (a fixed 1/256 of a
	// run's claims) wait in fragments of their own before they are
	// compacted together (default 16).
	MinFacts int
	// Tables, if set, limits compaction to these tables (by name or id).
	Tables []string
	// Progress, if set, hears of each window as it is done.
	Progress func(CompactProgress)
}

func (o *CompactOptions) ensureDefaults() {
	if o.Run == "" {
		o.Run = "main"
	}
	if o.Recent <= 0 {
		o.Recent = 256
	}
	if o.TargetRows <= 0 {
		o.TargetRows = 1 << 20
	}
	if o.MinFacts <= 0 {
		o.MinFacts = 16
	}
}

// CompactProgress reports one window.
type CompactProgress struct {
	Span      index.Span
	Done      int // windows done so far
	Total     int // windows planned
	Compacted bool
}

// CompactResult sums up a Compact call.
type CompactResult struct {
	Windows  int   // windows rewritten
	Facts    int   // claim shards whose facts were compacted
	Refused  int   // windows another compactor or a publish changed first
	Files    int   // compacted files written
	FilesIn  int   // files they replace
	Rows     int64 // rows rewritten
	BytesIn  int64
	BytesOut int64
}

// Compact rewrites the small fragments of a world's run into compacted
// files, window by window: each holds exactly the visible rows of its
// ticks, every column kept as it was (commit columns included), ordered by
// tick then entity, and one fragments.rewrite entry per window makes
// readers switch at once (seed 000 §7). It is safe to run beside a live
// writer and beside other compactors: a window whose ticks changed since
// they were read is refused by the catalog, and its file is left for
// collection. A crash at any moment leaves the history as it was or as
// compacted, never anything between.
func Compact(ctx context.Context, b bucket.Bucket, cat *index.Catalog, opts CompactOptions) (CompactResult, error) {
	opts.ensureDefaults()
	var res CompactResult
	s, err := cat.Exact(ctx)
	if err != nil {
		return res, err
	}
	var windows []index.Span
	if run, ok := s.Run(opts.Run); ok { // a run of facts alone has no ticks
		bound, start := run.Head-opts.Recent, int64(0)
		for _, w := range compactWindows {
			for ; start+w-1 <= bound; start += w {
				windows = append(windows, index.Span{From: start, To: start + w - 1})
			}
		}
	}
	c := &compactor{b: b, cat: cat, world: s.World.ID, opts: opts, tables: map[string]*Table{}}
	for i, span := range windows {
		done, err := c.window(ctx, span, &res)
		if err != nil {
			return res, err
		}
		if opts.Progress != nil {
			opts.Progress(CompactProgress{Span: span, Done: i + 1, Total: len(windows), Compacted: done})
		}
	}
	return res, c.facts(ctx, &res)
}

// facts compacts the completed facts of the run, claim shard by claim
// shard: a shard whose facts wait in MinFacts fragments of their own, or
// in more compacted files than their rows need, is rewritten into
// compacted files of its facts, named by one fragments.rewrite entry.
func (c *compactor) facts(ctx context.Context, res *CompactResult) error {
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return err
	}
	type shard struct {
		sources map[string][]source // by table id
		order   []string
		own     int            // facts in fragments of their own
		files   map[string]int // path → its source in sources
		rows    int64
	}
	shards := map[int64]*shard{}
	var keys []int64
	s.Claims(c.opts.Run, func(cl *index.Claim) bool {
		if cl.State != index.ClaimComplete || len(cl.Tables) != 1 || !c.wanted(ctx, cl.Tables[0].Table) {
			return true
		}
		k := index.ClaimShardOf(cl.Key)
		sh := shards[k]
		if sh == nil {
			sh = &shard{sources: map[string][]source{}, files: map[string]int{}}
			shards[k] = sh
			keys = append(keys, k)
		}
		id := cl.Tables[0].Table
		if _, ok := sh.sources[id]; !ok {
			sh.order = append(sh.order, id)
		}
		for _, f := range cl.Tables[0].Fragments {
			if i, ok := sh.files[f.Path]; ok {
				// A batch's fragment, shared with other claims: this
				// shard's rewrite keeps the rows of its own claims alone.
				if src := &sh.sources[id][i]; src.tokens != nil {
					src.tokens[cl.CommitToken] = true
					sh.rows += f.Rows
					sh.own++
				}
				continue
			}
			sh.files[f.Path] = len(sh.sources[id])
			sh.rows += f.Rows
			src := source{Fragment: f, tick: cl.Tick, token: cl.CommitToken}
			if f.Span == nil {
				sh.own++
				src.tokens = map[string]bool{cl.CommitToken: true}
			}
			sh.sources[id] = append(sh.sources[id], src)
		}
		return true
	})
	allow := s.Allowlist(c.opts.Run)
	for _, k := range keys {
		sh := shards[k]
		if sh.own < c.opts.MinFacts && int64(len(sh.files)) <= max(1, (sh.rows+c.opts.TargetRows-1)/c.opts.TargetRows)+int64(sh.own) {
			continue
		}
		rw := &index.FragmentsRewrite{Run: c.opts.Run, Facts: true, ClaimShard: k, ReadSeq: s.Seq}
		for _, id := range sh.order {
			t, err := c.table(ctx, id)
			if err != nil {
				return err
			}
			// The facts' rows sort by tick then fact id, like ticks'.
			files, err := c.rewrite(ctx, t, sh.sources[id], allow, res)
			if err != nil {
				return err
			}
			rw.Tables = append(rw.Tables, index.TableFragments{Table: id, Fragments: files})
		}
		_, err := c.cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw})
		switch {
		case errors.Is(err, index.ErrRefused):
			res.Refused++ // completed or compacted meanwhile
		case err != nil:
			return fmt.Errorf("world %s: compaction of the facts of claim shard %d: %w", c.world, k, err)
		default:
			failpoint.Hit(FailpointCompactCommitted)
			res.Facts++
		}
	}
	return nil
}

// add sums o into r.
func (r *CompactResult) add(o CompactResult) {
	r.Windows += o.Windows
	r.Facts += o.Facts
	r.Refused += o.Refused
	r.Files += o.Files
	r.FilesIn += o.FilesIn
	r.Rows += o.Rows
	r.BytesIn += o.BytesIn
	r.BytesOut += o.BytesOut
}

type compactor struct {
	b      bucket.Bucket
	cat    *index.Catalog
	world  string
	opts   CompactOptions
	tables map[string]*Table // by id
}

// source is one file a window's table reads, and how to keep its rows.
type source struct {
	index.Fragment
	tick  int64
	token string
	// tokens, for a fact fragment, are the claims whose rows the rewrite
	// keeps: a batch's fragment holds other shards' facts too.
	tokens map[string]bool
}

// window compacts the ticks of span if some table there has more files than
// its rows need. It reports whether it did.
func (c *compactor) window(ctx context.Context, span index.Span, res *CompactResult) (bool, error) {
	s, err := c.cat.Exact(ctx)
	if err != nil {
		return false, err
	}
	allow := s.Allowlist(c.opts.Run)
	var order []string
	sources := map[string][]source{}
	listed := map[string]bool{}
	s.Ticks(c.opts.Run, span.From, func(t *index.Tick) bool {
		if t.Tick > span.To {
			return false
		}
		for _, tf := range t.Tables {
			if !c.wanted(ctx, tf.Table) {
				continue
			}
			if _, ok := sources[tf.Table]; !ok {
				order = append(order, tf.Table)
			}
			for _, f := range tf.Fragments {
				if f.Span != nil {
					if listed[f.Path] {
						continue
					}
					listed[f.Path] = true
				}
				sources[tf.Table] = append(sources[tf.Table], source{Fragment: f, tick: t.Tick, token: t.CommitToken})
			}
		}
		return true
	})
	// A window is done when each table there is compacted files only, no
	// more of them than its rows need.
	needed := false
	for _, id := range order {
		var rows int64
		for _, src := range sources[id] {
			rows += src.Rows
			needed = needed || src.Span == nil
		}
		needed = needed || int64(len(sources[id])) > max(1, (rows+c.opts.TargetRows-1)/c.opts.TargetRows)
	}
	if !needed {
		return false, nil
	}
	rw := &index.FragmentsRewrite{Run: c.opts.Run, Span: &span, ReadSeq: s.Seq}
	for _, id := range order {
		t, err := c.table(ctx, id)
		if err != nil {
			return false, err
		}
		files, err := c.rewrite(ctx, t, sources[id], allow, res)
		if err != nil {
			return false, err
		}
		rw.Tables = append(rw.Tables, index.TableFragments{Table: id, Fragments: files})
	}
	_, err = c.cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw})
	if errors.Is(err, index.ErrRefused) {
		res.Refused++ // a publish or another compactor moved the window first
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("world %s: compaction of ticks %d..%d: %w", c.world, span.From, span.To, err)
	}
	failpoint.Hit(FailpointCompactCommitted)
	res.Windows++
	return true, nil
}

// wanted reports whether table id is one CompactOptions.Tables names.
func (c *compactor) wanted(ctx context.Context, id string) bool {
	if len(c.opts.Tables) == 0 || slices.Contains(c.opts.Tables, id) {
		return true
	}
	t, err := c.table(ctx, id)
	return err == nil && slices.Contains(c.opts.Tables, t.Name)
}

// table returns the schema of table id, read once.
func (c *compactor) table(ctx context.Context, id string) (*Table, error) {
	if t, ok := c.tables[id]; ok {
		return t, nil
	}
	info, err := ReadTableInfo(ctx, c.b, c.world, id)
	if err != nil {
		return nil, fmt.Errorf("world %s: table %s has no description: %w", c.world, id, err)
	}
	t, err := TableFromInfo(info)
	if err != nil {
		return nil, err
	}
	c.tables[id] = t
	return t, nil
}

// rewrite reads the visible rows of a table's sources and writes them as
// compacted files of at most TargetRows rows each (cut at tick
// boundaries), returning their catalog records.
func (c *compactor) rewrite(ctx context.Context, t *Table, sources []source, allow *index.Allowlist, res *CompactResult) ([]index.Fragment, error) {
	tickCol, tokenCol, epochCol, entityCol := t.Column(ColTick), t.Column(ColCommitToken), t.Column(ColWriterEpoch), t.Column(ColEntity)
	var rows []parquet.Row
	for _, src := range sources {
		data, _, err := c.b.Get(ctx, src.Path)
		if err != nil {
			return nil, fmt.Errorf("world %s: reading %s: %w", c.world, src.Path, err)
		}
		if Digest(data) != src.Digest {
			return nil, fmt.Errorf("world %s: fragment %s does not match its catalog digest", c.world, src.Path)
		}
		res.BytesIn += int64(len(data))
		res.FilesIn++
		proven := src.Span != nil || index.Proven(c.world, c.opts.Run, t.ID, src.token, src.Fragment)
		err = readRows(t, data, func(r parquet.Row) {
			token := string(r[tokenCol].ByteArray())
			if !proven && !allow.Admits(r[tickCol].Int64(), token, r[epochCol].Int64()) {
				return
			}
			if src.tokens != nil && !src.tokens[token] {
				return
			}
			rows = append(rows, r.Clone())
		})
		if err != nil {
			return nil, fmt.Errorf("world %s: reading %s: %w", c.world, src.Path, err)
		}
	}
	slices.SortStableFunc(rows, func(a, b parquet.Row) int {
		return cmp.Or(cmp.Compare(a[tickCol].Int64(), b[tickCol].Int64()), cmp.Compare(a[entityCol].Int64(), b[entityCol].Int64()))
	})
	var out []index.Fragment
	for lo := 0; lo < len(rows) || (lo == 0 && len(out) == 0); {
		hi := min(len(rows), lo+int(c.opts.TargetRows))
		for hi < len(rows) && hi > lo && rows[hi][tickCol].Int64() == rows[hi-1][tickCol].Int64() {
			hi++ // a tick's rows stay in one file
		}
		f, err := c.write(ctx, t, rows[lo:hi], sources)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		res.Files++
		res.Rows += int64(hi - lo)
		res.BytesOut += f.Bytes
		if hi == lo {
			break
		}
		lo = hi
	}
	return out, nil
}

// write stores rows as one compacted file, durably, named by its digest.
// Its span is the ticks of its rows (for an empty file, of its sources).
func (c *compactor) write(ctx context.Context, t *Table, rows []parquet.Row, sources []source) (index.Fragment, error) {
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, t.schema, parquet.Compression(zstdCodec), parquet.PageBufferSize(64<<10),
		parquet.MaxRowsPerRowGroup(RowGroupRows))
	if _, err := w.WriteRows(rows); err != nil {
		return index.Fragment{}, fmt.Errorf("table %s: compacting: %w", t.Name, err)
	}
	if err := w.Close(); err != nil {
		return index.Fragment{}, fmt.Errorf("table %s: compacting: %w", t.Name, err)
	}
	data := buf.Bytes()
	digest := Digest(data)
	span := index.Span{From: sources[0].tick, To: sources[len(sources)-1].tick}
	if sources[0].Span != nil {
		span.From = sources[0].Span.From
	}
	if last := sources[len(sources)-1]; last.Span != nil {
		span.To = last.Span.To
	}
	if len(rows) > 0 {
		tickCol := t.Column(ColTick)
		span = index.Span{From: rows[0][tickCol].Int64(), To: rows[len(rows)-1][tickCol].Int64()}
	}
	path := index.CompactedPath(c.world, c.opts.Run, t.ID, strings.TrimPrefix(digest, "sha256:")[:32])
	attrs, err := bucket.CreateOnce(ctx, c.b, path, data)
	if err != nil {
		return index.Fragment{}, fmt.Errorf("world %s: writing %s: %w", c.world, path, err)
	}
	failpoint.Hit(FailpointCompactWritten)
	return index.Fragment{Path: path, Rows: int64(len(rows)), Bytes: int64(len(data)), Digest: digest,
		Generation: attrs.Generation, Span: &span}, nil
}

// readRows calls fn with each row of a fragment of t, in the table's column
// order (a fragment of another schema is refused: a changed schema is a
// new table).
func readRows(t *Table, data []byte, fn func(parquet.Row)) error {
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	leaves := file.Schema().Columns()
	if len(leaves) != len(t.Columns) {
		return fmt.Errorf("%d columns, table %s has %d", len(leaves), t.Name, len(t.Columns))
	}
	for i, path := range leaves {
		if path[len(path)-1] != t.Columns[i].Name {
			return fmt.Errorf("column %d is %s, table %s has %s", i, path[len(path)-1], t.Name, t.Columns[i].Name)
		}
	}
	buf := make([]parquet.Row, 256)
	for _, rg := range file.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(buf)
			for _, r := range buf[:n] {
				fn(r)
			}
			if err != nil {
				rr.Close()
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
		}
	}
	return nil
}

// maintainer runs a world's background compaction.
type maintainer struct {
	mu struct {
		sync.Mutex
		running   bool
		next      int64 // the tick that triggers the next run
		stopped   bool
		err       error // the last run's failure
		result    CompactResult
		runs      int // compaction runs so far
		collected int // objects collection deleted
	}
	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

// maintain starts a background compaction of the world's run when tick is
// a window past the last one's trigger and none is running.
func (w *World) maintain(tick int64) {
	if w.cat == nil || w.opts.NoMaintenance {
		return
	}
	m := &w.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	opts := w.opts.Compaction
	opts.Run = w.opts.Run
	opts.ensureDefaults()
	if m.mu.stopped || m.mu.running || tick < max(m.mu.next, opts.Recent+compactWindows[len(compactWindows)-1]-1) {
		return
	}
	if m.ctx == nil {
		m.ctx, m.cancel = context.WithCancel(context.Background())
	}
	m.mu.running, m.mu.next = true, tick+compactWindows[len(compactWindows)-1]
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		res, err := Compact(m.ctx, w.b, w.cat, opts)
		if err == nil {
			// The world's receipts (their own run, facts alone).
			ropts := opts
			ropts.Run = EvaluationRun
			var rres CompactResult
			rres, err = Compact(m.ctx, w.b, w.cat, ropts)
			res.add(rres)
		}
		m.mu.Lock()
		m.mu.runs++
		collect := err == nil && w.opts.Collection.Every >= 0 && m.mu.runs%max(1, cmp.Or(w.opts.Collection.Every, 8)) == 0
		m.mu.Unlock()
		var gc CollectResult
		if collect {
			copts := w.opts.Collection
			copts.Run, copts.DryRun, copts.Report, copts.Progress = w.opts.Run, false, nil, nil
			copts.MaxDeletes = cmp.Or(copts.MaxDeletes, 1000)
			gc, err = Collect(m.ctx, w.b, w.cat, copts)
		}
		if m.ctx.Err() != nil {
			err = nil // stopped by Close: no failure, the next open goes on
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mu.running, m.mu.err = false, err
		m.mu.collected += gc.Deleted
		m.mu.result.add(res)
	}()
}

// stop cancels a running compaction and waits for it.
func (m *maintainer) stop() {
	m.mu.Lock()
	m.mu.stopped = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
}

// Maintenance reports what the world's background compaction has done so
// far, and its last failure (nil if it succeeded or never ran). Collected
// says how many objects its collection deleted.
func (w *World) Maintenance() (CompactResult, error) {
	w.maint.mu.Lock()
	defer w.maint.mu.Unlock()
	return w.maint.mu.result, w.maint.mu.err
}

// Collected reports how many objects the world's background collection
// has deleted so far.
func (w *World) Collected() int {
	w.maint.mu.Lock()
	defer w.maint.mu.Unlock()
	return w.maint.mu.collected
}
