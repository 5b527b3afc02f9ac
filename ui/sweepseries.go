package ui

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	dsql "database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/sql"
)

// A sweep's aggregate per world and tick (SweepQuery.SeriesSQL) is
// answered in two parts that together hold every row of the sweep's
// view once (sql.Script.FileReads, Omit). The files the views read as
// they are are summarized per tick without DuckDB: a compacted file by
// its tick index's column summaries (min, max and sum of each tick's
// rows, read instead of the rows), a tick's own file by its rows (when
// there are no more than Options.SweepFileReads of them: a few ticks
// past the last compacted window). Every other row is DuckDB's, over the views
// without those files, as partial aggregates (count and sum for avg).
// The two are merged per world and tick: counts, sums (in 128 bits for
// an integer column) and extremes combine exactly; a floating sum (and
// so avg) adds the same values in another order than DuckDB's one query
// would, as DuckDB's own parallel plans do.

// summaryReads is how many files sweepSeries summarizes at once.
const summaryReads = 16

// colSummary is one file's summary of one column: its ticks and each
// tick's rows, and the column's stats of each tick.
type colSummary struct {
	ticks, rows []int64
	*frame.ColumnSummary
}

// summaries returns the summary of column (of type typ, as the views
// give it) of each file reads name (by the file's object), several at
// once: a compacted file's from its tick index, a tick's own from its
// rows (read through sw.ReadFile, checked as the views check it),
// unless more than Options.SweepFileReads are. A file without one (an
// index of an older format; a table without the column, or with it of
// another type, which the views cast; a tick's file past the bound) is
// not in it.
// A damaged index or file fails the request: it is not a reason to show
// other numbers.
func (s *Server) summaries(ctx context.Context, sw *sql.Script, reads []sql.FileRead, column string, typ frame.Type) (map[string]*colSummary, error) {
	var files []int // the first read of each file
	seen := map[string]bool{}
	loose := 0
	for i, r := range reads {
		if !seen[r.File.Path] {
			seen[r.File.Path] = true
			files = append(files, i)
			if !r.Compacted() {
				loose++
			}
		}
	}
	got := make([]*colSummary, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(summaryReads)
	for i, fi := range files {
		r := reads[fi]
		if !r.Compacted() && loose > s.opts.SweepFileReads {
			continue
		}
		g.Go(func() (err error) {
			got[i], err = summaryOf(gctx, s.opts.Bucket, sw, r, column, typ)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[string]*colSummary{}
	for i, fi := range files {
		if got[i] != nil {
			out[reads[fi].File.Path] = got[i]
		}
	}
	return out, nil
}

// summaryOf is summaries' summary of r's file (nil: none).
func summaryOf(ctx context.Context, b bucket.Bucket, sw *sql.Script, r sql.FileRead, column string, typ frame.Type) (*colSummary, error) {
	if !r.Compacted() {
		data, err := sw.ReadFile(r.Path)
		if err != nil {
			return nil, err
		}
		ticks, c, err := frame.SummarizeFile(bytes.NewReader(data), int64(len(data)), []frame.Column{{Name: column, Type: typ}})
		if errors.Is(err, frame.ErrNoColumn) || errors.Is(err, frame.ErrColumnType) {
			return nil, nil // DuckDB's to read: a column the file lacks is NULL, one of another type cast
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.File.Path, err)
		}
		return newColSummary(ticks, &c[0]), nil
	}
	x, err := frame.ReadTickIndex(ctx, b, r.File)
	if errors.Is(err, frame.ErrNoTickIndex) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, ok := x.Summary(column)
	if !ok || c.Type != typ {
		return nil, nil // DuckDB's to read, as above
	}
	return newColSummary(x.Ticks, c), nil
}

// newColSummary is the summary c of the ticks ticks.
func newColSummary(ticks []frame.TickEntry, c *frame.ColumnSummary) *colSummary {
	cs := &colSummary{ticks: make([]int64, len(ticks)), rows: make([]int64, len(ticks)), ColumnSummary: c}
	for k, e := range ticks {
		cs.ticks[k], cs.rows[k] = e.Tick, e.Rows
	}
	return cs
}

// coveredReads are the reads of a sweep whose files summaries
// summarizes of a column, and whether its views read others (rest).
type coveredReads struct {
	reads []sql.FileRead
	rest  bool
}

// seriesKey is one point of a sweep's series.
type seriesKey struct {
	world string
	tick  int64
}

// partial is an aggregate of some of a point's rows: their count of
// values, and of those values (has: at least one) the sum and extremes,
// as integers (an Int128 sum) or floats by the column's type.
type partial struct {
	n          int64
	has        bool
	isum       frame.Int128
	fsum       float64
	imin, imax int64
	fmin, fmax float64
}

// addInts merges n values of an integer column, of sum sum and extremes
// lo and hi.
func (p *partial) addInts(n int64, sum frame.Int128, lo, hi int64) {
	if !p.has {
		p.imin, p.imax = lo, hi
	}
	p.n, p.isum, p.has = p.n+n, p.isum.Add(sum), true
	p.imin, p.imax = min(p.imin, lo), max(p.imax, hi)
}

// addFloats merges n values of a floating column.
func (p *partial) addFloats(n int64, sum, lo, hi float64) {
	if !p.has || frame.FloatLess(lo, p.fmin) {
		p.fmin = lo
	}
	if !p.has || frame.FloatLess(p.fmax, hi) {
		p.fmax = hi
	}
	p.n, p.fsum, p.has = p.n+n, p.fsum+sum, true
}

// partialSQL is the part of q's aggregate DuckDB answers for the rows it
// reads: per world and tick, what merges into q.Agg (count and sum for
// avg).
func (q SweepQuery) partialSQL() string {
	c := quoteIdent(q.Column)
	aggs := map[string]string{
		"avg":   "count(" + c + "), sum(" + c + ")",
		"sum":   "count(" + c + "), sum(" + c + ")",
		"count": "count(" + c + ")",
		"min":   "count(" + c + "), min(" + c + ")",
		"max":   "count(" + c + "), max(" + c + ")",
	}[q.Agg]
	return fmt.Sprintf("SELECT world, tick, %s FROM %s GROUP BY world, tick", aggs, quoteIdent(q.Table))
}

// sweepSeries answers q over the sweep whole (its column of type typ)
// as described above, kept in whole's memory while the catalogs stay as
// they are, and says how many file reads the summaries answered.
func (s *Server) sweepSeries(ctx context.Context, worlds []string, q SweepQuery, whole *views, typ frame.Type) (*Result, int, error) {
	// Which reads the summaries answer is kept with the whole (a few
	// names per file), not the summaries (tens of KB each): a kept
	// answer then costs no file read, a new aggregate reads them again.
	key := q.Table + "\x00" + q.Column
	whole.Extra.mu.Lock()
	c, known := whole.Extra.mu.covered[key]
	whole.Extra.mu.Unlock()
	var sums map[string]*colSummary
	if !known {
		reads, rest, err := whole.Script.FileReads(q.Table)
		if err != nil {
			return nil, 0, err
		}
		c.rest = rest
		if sums, err = s.summaries(ctx, whole.Script, reads, q.Column, typ); err != nil {
			return nil, 0, err
		}
		var files []string // the compacted files whose rows are not read: checked as the views would check them
		for _, r := range reads {
			switch {
			case sums[r.File.Path] == nil:
				c.rest = true
			case r.Compacted():
				files = append(files, r.Path)
				fallthrough
			default:
				c.reads = append(c.reads, r)
			}
		}
		if err := whole.Script.CheckFiles(ctx, files); err != nil {
			return nil, 0, queryError{err}
		}
		whole.Extra.mu.Lock()
		if whole.Extra.mu.covered == nil {
			whole.Extra.mu.covered = map[string]coveredReads{}
		}
		whole.Extra.mu.covered[key] = c
		whole.Extra.mu.Unlock()
	}
	covered, rest := c.reads, c.rest
	res, err := s.remember(whole, "series\x00"+q.SeriesSQL(), func() (*Result, error) {
		start := time.Now()
		if sums == nil {
			var err error
			if sums, err = s.summaries(ctx, whole.Script, covered, q.Column, typ); err != nil {
				return nil, err
			}
		}
		points := map[seriesKey]*partial{}
		at := func(world string, tick int64) *partial {
			k := seriesKey{world, tick}
			p := points[k]
			if p == nil {
				p = &partial{}
				points[k] = p
			}
			return p
		}
		for _, r := range covered {
			cs := sums[r.File.Path]
			if cs == nil {
				return nil, fmt.Errorf("%s: summarized once, not again", r.File.Path)
			}
			lo, _ := slices.BinarySearch(cs.ticks, r.From)
			for k := lo; k < len(cs.ticks) && cs.ticks[k] <= r.To; k++ {
				p := at(r.World, cs.ticks[k])
				if cs.Ints != nil {
					st := cs.Ints[k]
					p.addInts(cs.rows[k], st.Sum, st.Min, st.Max)
				} else {
					st := cs.Floats[k]
					p.addFloats(cs.rows[k], st.Sum, st.Min, st.Max)
				}
			}
		}
		var notes string
		if rest {
			v, err := s.sweepRest(ctx, worlds, q.Run, whole, q.Table, covered)
			if err != nil {
				return nil, err
			}
			part := &Result{}
			err = s.runOn(ctx, v, q.partialSQL(), part, func(ctx context.Context, db *dsql.DB, w io.Writer) error {
				return sql.Values(ctx, db, q.partialSQL(), w, func([]string) error { return nil }, func(vals []any) error {
					world, ok1 := vals[0].(string)
					tick, ok2 := vals[1].(int64)
					if !ok1 || !ok2 {
						return fmt.Errorf("the sweep's partial aggregate: a point of (%T, %T)", vals[0], vals[1])
					}
					return mergeRow(at(world, tick), q.Agg, typ, vals[2:])
				})
			})
			if err != nil {
				return nil, err
			}
			notes = part.Notes
		}
		return s.seriesResult(q, typ, points, notes, start)
	})
	return res, len(covered), err
}

// mergeRow merges a row of partialSQL's (after world and tick: the
// count of values, then for every aggregate but count the sum, min or
// max of agg, as sql.Values types them) into p, a point of a column of
// type typ.
func mergeRow(p *partial, agg string, typ frame.Type, vals []any) error {
	n, ok := vals[0].(int64)
	if !ok {
		return fmt.Errorf("the sweep's partial aggregate: a count of %T", vals[0])
	}
	if agg == "count" || n == 0 {
		p.n += n
		return nil
	}
	isInt := typ == frame.Int32 || typ == frame.Int64
	var i frame.Int128
	var f float64
	switch x := vals[1].(type) {
	case int64:
		i = frame.Int128Of(x)
	case string: // an integer column's sum: a HUGEINT
		var err error
		if i, err = frame.ParseInt128(x); err != nil {
			return fmt.Errorf("the sweep's partial sum: %w", err)
		}
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		return fmt.Errorf("the sweep's partial aggregate: a value of %T", x)
	}
	_, wide := vals[1].(string)
	_, integer := vals[1].(int64)
	if isInt != (wide || integer) || wide && (agg == "min" || agg == "max") {
		return fmt.Errorf("the sweep's partial %s of a %s column is %T %v", agg, typ, vals[1], vals[1])
	}
	switch {
	case isInt && (agg == "avg" || agg == "sum"):
		p.n, p.isum, p.has = p.n+n, p.isum.Add(i), true
	case isInt: // min or max: an int64
		v := int64(i.Lo)
		p.addInts(n, frame.Int128{}, v, v)
	case agg == "avg", agg == "sum":
		p.n, p.fsum, p.has = p.n+n, p.fsum+f, true
	default:
		p.addFloats(n, 0, f, f)
	}
	return nil
}

// seriesResult renders points as SeriesSQL's answer: world, tick and
// the aggregate, ordered by world and tick, a value as the page reads it
// (an integer in full, a float in the shortest text that reads back as
// it, as DuckDB prints it: frame.AppendSQLFloat), NULL for a point
// without values; up to the server's bound on a result.
func (s *Server) seriesResult(q SweepQuery, typ frame.Type, points map[seriesKey]*partial, notes string, start time.Time) (*Result, error) {
	keys := make([]seriesKey, 0, len(points))
	for k := range points {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b seriesKey) int {
		if c := strings.Compare(a.world, b.world); c != 0 {
			return c
		}
		return cmp.Compare(a.tick, b.tick)
	})
	isInt := typ == frame.Int32 || typ == frame.Int64
	bits := 64
	if typ == frame.Float32 {
		bits = 32
	}
	res := &Result{SQL: q.SeriesSQL(), Columns: []string{"world", "tick", q.Agg + "_" + q.Column}, Rows: make([][]string, 0, len(keys)), Notes: notes}
	size := 0
	for _, k := range keys {
		p := points[k]
		var v string
		switch {
		case q.Agg == "count":
			v = strconv.FormatInt(p.n, 10)
		case !p.has:
			v = "NULL"
		case q.Agg == "avg" && isInt:
			v = sqlFloat(p.isum.Float()/float64(p.n), 64)
		case q.Agg == "avg":
			v = sqlFloat(p.fsum/float64(p.n), 64)
		case q.Agg == "sum" && isInt:
			v = p.isum.Big().String()
		case q.Agg == "sum":
			v = sqlFloat(p.fsum, 64)
		case q.Agg == "min" && isInt:
			v = strconv.FormatInt(p.imin, 10)
		case q.Agg == "max" && isInt:
			v = strconv.FormatInt(p.imax, 10)
		case q.Agg == "min":
			v = sqlFloat(p.fmin, bits)
		default:
			v = sqlFloat(p.fmax, bits)
		}
		row := []string{k.world, strconv.FormatInt(k.tick, 10), v}
		size += len(row[0]) + len(row[1]) + len(v) + 3
		if size > s.opts.MaxResultBytes {
			res.Truncated = true
			break
		}
		res.Rows = append(res.Rows, row)
	}
	res.ElapsedMs = ms(time.Since(start))
	return res, nil
}

// sweepRest returns the views of the sweep whole narrowed to table
// without the file reads covered (sql.Script.Omit), kept on the
// shelf while the whole is what the catalogs say; with none covered,
// the views narrowed to table (sweepTable).
func (s *Server) sweepRest(ctx context.Context, worlds []string, run string, whole *views, table string, covered []sql.FileRead) (*views, error) {
	if len(covered) == 0 {
		return s.sweepTable(ctx, worlds, run, whole, table)
	}
	h := sha256.New()
	for _, r := range covered {
		fmt.Fprintf(h, "%s\x00%s\x00", r.World, r.File.Path)
	}
	key := sweepKey(worlds, run, table+"\x00without "+hex.EncodeToString(h.Sum(nil)[:8]))
	return s.keep(ctx, key, whole.Seqs, func(context.Context) (*sql.Script, *memory, error) {
		sw, err := whole.Script.Only(table)
		if err != nil {
			return nil, nil, err
		}
		sw, err = sw.Omit(covered)
		return sw, &memory{tables: whole.Extra.tables}, err
	})
}

// sqlFloat is f (a float of bits bits) as DuckDB's CAST(f AS VARCHAR)
// writes it (frame.AppendSQLFloat).
func sqlFloat(f float64, bits int) string { return string(frame.AppendSQLFloat(nil, f, bits)) }
