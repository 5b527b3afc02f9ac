package fs

import (
	"context"
	"os"
	"strings"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// rowSet is a file the mount derives in Go from tables' rows: the rows
// of their fragments that the catalog's row visibility rule keeps, in the
// order the SQL views show them, encoded by package frame. It serves both
// a split tick (a tick whose table's rows no one file holds as they are:
// see snapFile) and a facts/ file (see factFile), so that a stat sizes
// either without DuckDB.
type rowSet struct {
	parts []rowPart // one per table (schema), each gathered alone
	// published: the (tick, token) pairs whose rows index.RowRule keeps;
	// tick, if not nil, keeps only that tick's rows.
	published pairs
	tick      *int64
	desc      bool // entity ids descending (the facts views' order), else ascending
	// encode writes the parts' gathered rows as the file's Parquet bytes.
	encode func([]frame.Gathered) ([]byte, error)
}

// rowPart is the fragments of one table a rowSet reads.
type rowPart struct {
	table *engine.Table
	frags []index.Fragment // read in this order; a path once
}

// pairs is a set of published (tick, token) pairs (index.Published).
type pairs map[index.Stamp]bool

func (p pairs) Publishes(tick int64, token string) bool {
	return p[index.Stamp{Tick: tick, Token: token}]
}

// keep decides whether a row belongs to the set: index.RowRule, the rule
// the SQL views render (rs.tick's rows alone, if it is set: frame.Gather
// reads no other).
func (rs *rowSet) keep(r frame.StampedRow) bool {
	return index.RowRule.Eval(index.Stamp{Tick: r.Tick, Token: r.CommitToken, Epoch: r.WriterEpoch}, rs.published)
}

// gathered returns the cache file called key holding rs's file in format:
// its Parquet file derived once (its fragments read, no DuckDB), and for
// FormatCSV that file rendered as CSV (frame.WriteCSV), once, under the
// key with its extension replaced. Either is then sized by the cache
// (cache.DerivedSize) with no row read.
func (m *Mount) gathered(ctx context.Context, key, format string, rs *rowSet) (string, error) {
	base, _ := strings.CutSuffix(key, "."+format)
	p, err := m.derive(ctx, base+"."+frame.FormatParquet, &m.stats.gathered, func(ctx context.Context, tmp string) error {
		data, err := m.gather(ctx, rs)
		if err != nil {
			return err
		}
		return os.WriteFile(tmp, data, 0o444)
	})
	if err != nil || format == frame.FormatParquet {
		return p, err
	}
	return m.derive(ctx, base+"."+frame.FormatCSV, &m.stats.rendered, func(ctx context.Context, tmp string) error {
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		return writeCSVFile(tmp, body{f: src}, base)
	})
}

// gather reads rs's fragments (on a local bucket the bucket's own files,
// else verified copies in the cache, each checked against its record) and
// returns its file's bytes.
func (m *Mount) gather(ctx context.Context, rs *rowSet) ([]byte, error) {
	parts := make([]frame.Gathered, len(rs.parts))
	for i, part := range rs.parts {
		var srcs []frame.Source
		seen := map[string]bool{}
		for _, f := range part.frags {
			if seen[f.Path] {
				continue
			}
			seen[f.Path] = true
			p, err := m.fragmentPath(ctx, f)
			if err != nil {
				return nil, err
			}
			file, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer file.Close()
			if f.Span != nil {
				m.stats.compactedOpened.Add(1)
			}
			if err := m.checkOpen(file, f); err != nil {
				return nil, err
			}
			size, err := body{f: file}.size()
			if err != nil {
				return nil, err
			}
			srcs = append(srcs, frame.Source{R: file, Size: size, Name: f.Path})
		}
		var err error
		if parts[i], err = frame.Gather(part.table, srcs, frame.Selection{Tick: rs.tick, Keep: rs.keep, Desc: rs.desc}); err != nil {
			return nil, err
		}
	}
	return rs.encode(parts)
}
