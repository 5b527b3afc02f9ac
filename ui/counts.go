package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// The timeline's rows chart: rows per table per tick, the answer of
// CountsSQL, served binned for the range the chart shows (min, max and
// last of each bin, as TensorBoard and Grafana downsample a long series),
// so a chart of 100,000 ticks costs a few thousand points and a zoom asks
// again for the range it shows, down to every tick.
//
// The counts come from the catalog where it records them: a tick's own
// fragment holds exactly its rows (a proven fragment), a fact's its
// claim's, and a compacted file's tick index the rows of each of its ticks.
// Where it does not (a fragment whose rows a reader must filter, legacy or
// uncoordinated history, a compacted file without a tick index), they come
// from CountsSQL. Either way they are computed once per views (one catalog
// state) and kept with them.

// tickCounts is rows per tick of each view, ascending by tick; only ticks
// with rows (CountsSQL's groups).
type tickCounts struct {
	source string // "catalog" or "sql"
	tables []string
	series map[string]*countSeries
}

type countSeries struct{ ticks, rows []int64 }

// Default and largest bins of a rows chart.
const (
	defaultBins = 1000
	maxBins     = 5000
)

// RowsPerTick is the rows chart's data: CountsSQL's answer for ticks
// From..To, binned Width ticks to a bin (bin k holds ticks From+k*Width ..
// From+(k+1)*Width-1; Width 1: every tick as it is). X is each bin's first
// tick, only bins where some table has rows; each table's Min, Max and
// Last (its rows at the newest tick of the bin that has any) are per X,
// null where it has none. The answer equals BinnedCountsSQL.
type RowsPerTick struct {
	From   int64          `json:"from"`
	To     int64          `json:"to"`
	Width  int64          `json:"width"`
	Source string         `json:"source"`
	X      []int64        `json:"x"`
	Tables []BinnedSeries `json:"tables"`
}

// BinnedSeries is one table's bins.
type BinnedSeries struct {
	Table string   `json:"table"`
	Min   []*int64 `json:"min"`
	Max   []*int64 `json:"max"`
	Last  []*int64 `json:"last"`
}

// BinnedCountsSQL is the question RowsPerTick answers: CountsSQL's rows
// of ticks from..to, grouped width ticks to a bin.
func BinnedCountsSQL(views []string, from, to, width int64) string {
	return fmt.Sprintf("SELECT table_name, %d + (tick - %d) // %d * %d AS bin, min(n) AS min_n, max(n) AS max_n, arg_max(n, tick) AS last_n\n"+
		"FROM (%s)\nWHERE tick BETWEEN %d AND %d GROUP BY ALL ORDER BY table_name, bin", from, from, width, width, CountsSQL(views), from, to)
}

// Rows returns r as BinnedCountsSQL's rows.
func (r *RowsPerTick) Rows() [][]string {
	out := [][]string{}
	for _, s := range r.Tables {
		for i, x := range r.X {
			if s.Last[i] == nil {
				continue
			}
			out = append(out, []string{s.Table, itoa(x), itoa(*s.Min[i]), itoa(*s.Max[i]), itoa(*s.Last[i])})
		}
	}
	return out
}

// rowsPerTick answers the rows chart of (world, run) for ticks from..to
// (nil: the first or last tick with rows) in at most bins bins.
func (s *Server) rowsPerTick(ctx context.Context, world, run string, from, to *int64, bins int64) (*RowsPerTick, error) {
	if bins < 1 || bins > maxBins {
		return nil, badRequest(fmt.Errorf("bins is 1 to %d (bins=%d)", maxBins, bins))
	}
	if from != nil && to != nil && *from > *to {
		return nil, badRequest(fmt.Errorf("from %d is after to %d", *from, *to))
	}
	v, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	c, err := s.countsOf(ctx, world, run, v)
	if err != nil {
		return nil, err
	}
	return c.binned(from, to, bins), nil
}

// countsOf returns the rows per tick of views v, computed once.
func (s *Server) countsOf(ctx context.Context, world, run string, v *views) (*tickCounts, error) {
	v.Extra.mu.Lock()
	c := v.Extra.mu.counts
	v.Extra.mu.Unlock()
	if c != nil {
		return c, nil
	}
	r, err, _ := v.Extra.countsFlight.Do("", func() (any, error) {
		c, err := s.catalogCounts(context.WithoutCancel(ctx), v)
		if err != nil || c != nil {
			return c, err
		}
		res, err := s.queryOn(context.WithoutCancel(ctx), v, CountsSQL(v.Script.Views))
		if err != nil {
			return nil, err
		}
		if res.Truncated {
			return nil, fmt.Errorf("rows per tick of %s (run %s): the answer passes the server's bound on a result (MaxResultBytes)", world, run)
		}
		return sqlCounts(res)
	})
	if err != nil {
		return nil, err
	}
	c = r.(*tickCounts)
	v.Extra.mu.Lock()
	v.Extra.mu.counts = c
	v.Extra.mu.Unlock()
	return c, nil
}

// sqlCounts reads CountsSQL's answer.
func sqlCounts(res *Result) (*tickCounts, error) {
	c := &tickCounts{source: "sql", series: map[string]*countSeries{}}
	for _, r := range res.Rows {
		tick, err1 := strconv.ParseInt(r[1], 10, 64)
		n, err2 := strconv.ParseInt(r[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("reading rows per tick: %w", err)
		}
		c.add(r[0], tick, n)
	}
	return c, nil
}

func (c *tickCounts) add(table string, tick, n int64) {
	se := c.series[table]
	if se == nil {
		se = &countSeries{}
		c.series[table] = se
		c.tables = append(c.tables, table)
	}
	se.ticks = append(se.ticks, tick)
	se.rows = append(se.rows, n)
}

// sortSums orders each series by tick and sums the entries of one tick
// (a table of several ids, a tick's rows and its facts').
func (c *tickCounts) sortSums() {
	slices.Sort(c.tables)
	for _, se := range c.series {
		idx := make([]int, len(se.ticks))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(se.ticks[a], se.ticks[b]) })
		ticks, rows := make([]int64, 0, len(idx)), make([]int64, 0, len(idx))
		for _, i := range idx {
			if n := len(ticks); n > 0 && ticks[n-1] == se.ticks[i] {
				rows[n-1] += se.rows[i]
				continue
			}
			ticks, rows = append(ticks, se.ticks[i]), append(rows, se.rows[i])
		}
		se.ticks, se.rows = ticks, rows
	}
}

// catalogCounts computes rows per tick from the catalog and the tick
// indexes of compacted files: the files the views read (the view's, then
// the world's evaluation receipts, as sql.Build lists them), each file's
// rows at its tick. It returns nil when the catalog does not tell them.
func (s *Server) catalogCounts(ctx context.Context, v *views) (*tickCounts, error) {
	if v.Extra.view == nil || v.Script.Visible == nil {
		return nil, nil // a session, or files no catalog names
	}
	own := v.Extra.view.Segments[len(v.Extra.view.Segments)-1].State
	var files []index.File
	unknown := false
	collect := func(f index.File) bool {
		if f.Check || (f.Fact && f.Span != nil) {
			unknown = true // rows a reader filters; facts compacted together
			return false
		}
		files = append(files, f)
		return true
	}
	if err := v.Extra.view.Files(math.MinInt64, math.MaxInt64, collect); err != nil || unknown {
		return nil, err
	}
	if err := index.OwnView(own, index.EvaluationRun).Files(math.MinInt64, math.MaxInt64, collect); err != nil || unknown {
		return nil, err
	}
	// The tables' readable names, and the compacted files' tick indexes.
	var keys []string
	seen := map[string]bool{}
	var compacted []index.Fragment
	for _, f := range files {
		if k := f.World + "/" + f.Table; !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if f.Span != nil {
			compacted = append(compacted, f.Fragment)
		}
	}
	infos := make([]string, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, key := range keys {
		g.Go(func() error {
			world, id, _ := strings.Cut(key, "/")
			ti, err := frame.ReadTableInfo(gctx, s.opts.Bucket, world, id)
			if err != nil {
				return fmt.Errorf("world %s: table %s has no description: %w", world, id, err)
			}
			infos[i] = ti.Name
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	names := make(map[string]string, len(keys))
	for i, k := range keys {
		names[k] = infos[i]
	}
	indexes, err := s.tickIndexes(ctx, compacted)
	if errors.Is(err, frame.ErrNoTickIndex) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c := &tickCounts{source: "catalog", series: map[string]*countSeries{}}
	for _, f := range files {
		name := names[f.World+"/"+f.Table]
		switch {
		case f.Span != nil:
			x := indexes[f.Path]
			for i, t := range x.ticks {
				if t >= f.Keep.From && t <= f.Keep.To {
					c.add(name, t, x.rows[i])
				}
			}
		case f.Rows > 0:
			c.add(name, f.Tick, f.Rows)
		}
	}
	c.sortSums()
	return c, nil
}

// tickRows is a compacted file's ticks and their rows, from its tick
// index.
type tickRows struct{ ticks, rows []int64 }

// maxTickIndexes bounds the tick indexes the server keeps (a 4,096-tick
// window's takes 64 KiB); past it, it forgets them all.
const maxTickIndexes = 1024

// tickIndexes returns the ticks and rows of each compacted file, from
// the tick indexes the server keeps or reads now (by the file's digest: a
// compacted file is named by its content).
func (s *Server) tickIndexes(ctx context.Context, files []index.Fragment) (map[string]*tickRows, error) {
	out := make(map[string]*tickRows, len(files))
	s.mu.Lock()
	for _, f := range files {
		if x := s.mu.tickIndexes[f.Digest]; x != nil {
			out[f.Path] = x
		}
	}
	s.mu.Unlock()
	read := make([]*tickRows, len(files))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, f := range files {
		if out[f.Path] != nil {
			continue
		}
		g.Go(func() error {
			x, err := frame.ReadTickIndex(ctx, s.opts.Bucket, f)
			if err != nil {
				return err
			}
			r := &tickRows{ticks: make([]int64, len(x.Ticks)), rows: make([]int64, len(x.Ticks))}
			for j, e := range x.Ticks {
				r.ticks[j], r.rows[j] = e.Tick, e.Rows
			}
			read[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range files {
		if read[i] == nil {
			continue
		}
		out[f.Path] = read[i]
		if len(s.mu.tickIndexes) >= maxTickIndexes {
			clear(s.mu.tickIndexes)
		}
		s.mu.tickIndexes[f.Digest] = read[i]
	}
	return out, nil
}

// binned returns c's ticks from..to (nil: c's first or last) in at most
// bins bins.
func (c *tickCounts) binned(from, to *int64, bins int64) *RowsPerTick {
	out := &RowsPerTick{Source: c.source, X: []int64{}, Tables: []BinnedSeries{}}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, se := range c.series {
		if n := len(se.ticks); n > 0 {
			lo, hi = min(lo, se.ticks[0]), max(hi, se.ticks[n-1])
		}
	}
	if from != nil {
		lo = *from
	}
	if to != nil {
		hi = *to
	}
	if lo > hi {
		out.Width = 1
		return out
	}
	out.From, out.To = lo, hi
	// The span's ticks, rounded up to whole bins (in uint64: a span of
	// the whole int64 range has 2^64 ticks, one past int64).
	span := uint64(hi-lo) + 1
	w := span / uint64(bins)
	if span%uint64(bins) != 0 || w == 0 {
		w++
	}
	out.Width = int64(min(w, math.MaxInt64))
	bin := func(t int64) int64 { return int64(uint64(t-lo) / w) }
	// Which bins hold rows, then each table's value in them.
	held := map[int64]int{}
	var ks []int64
	ranges := make([][2]int, len(c.tables))
	for i, name := range c.tables {
		se := c.series[name]
		a, _ := slices.BinarySearch(se.ticks, lo)
		b, found := slices.BinarySearch(se.ticks, hi)
		if found {
			b++
		}
		ranges[i] = [2]int{a, b}
		prev := int64(-1)
		for j := a; j < b; j++ {
			if k := bin(se.ticks[j]); k != prev {
				prev = k
				if _, ok := held[k]; !ok {
					held[k] = 0
					ks = append(ks, k)
				}
			}
		}
	}
	slices.Sort(ks)
	for i, k := range ks {
		held[k] = i
		out.X = append(out.X, lo+k*out.Width)
	}
	for i, name := range c.tables {
		se := c.series[name]
		bs := BinnedSeries{Table: name, Min: make([]*int64, len(ks)), Max: make([]*int64, len(ks)), Last: make([]*int64, len(ks))}
		any := false
		for j := ranges[i][0]; j < ranges[i][1]; j++ {
			p := held[bin(se.ticks[j])]
			n := se.rows[j]
			if bs.Min[p] == nil || n < *bs.Min[p] {
				bs.Min[p] = &se.rows[j]
			}
			if bs.Max[p] == nil || n > *bs.Max[p] {
				bs.Max[p] = &se.rows[j]
			}
			bs.Last[p] = &se.rows[j] // ascending ticks: the newest is last
			any = true
		}
		if any {
			out.Tables = append(out.Tables, bs)
		}
	}
	return out
}
