package sql

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/index"
)

// What a reader that aggregates a column per world and tick without
// reading every row needs of a sweep's plan (the web interface's sweep
// page, which takes the aggregates of compacted ticks from their tick
// indexes' column summaries): the compacted files each world's views read
// as they are, with the ticks each shows of them (CompactedReads), and
// the sweep without those files (Omit), whose views read the rest: each
// row of the sweep is then in exactly one of the two.

// CompactedRead is a compacted file a world's views read as it is (the
// catalog proves every row of it visible): its rows of ticks From..To
// are rows of the world's view, with no row check.
type CompactedRead struct {
	World   string // the world whose views read it (a fork reads its parent's files)
	TableID string
	File    index.Fragment // the catalog's entry of the file (File.Path: the bucket object)
	Path    string         // the file as the views read it
	From    int64
	To      int64
}

// viewReads is what a view of one world reads: its compacted files read
// as they are, and how many files besides.
type viewReads struct {
	compacted []CompactedRead
	others    int
}

// compactedReads sorts the rows of a world's fragment list by view into
// the compacted files read as they are (files, the catalog's entries of
// the compacted files, by object), each once with the span of ticks its
// rows show (as a sweep's views bound a file: the least first tick and
// the greatest last of its rows), and the count of the others.
func compactedReads(world string, list []listRow, files map[string]index.Fragment) map[string]viewReads {
	type key struct{ view, path string }
	other := map[key]bool{} // a file some row of which is not a compacted file read as it is
	for _, r := range list {
		if _, ok := files[r.Object]; !ok || !r.Compacted || !r.Filtered || !r.Proven || r.Fact {
			other[key{r.View, r.Path}] = true
		}
	}
	out := map[string]viewReads{}
	at := map[key]int{} // a compacted file's place in its view's reads
	for _, r := range list {
		k, v := key{r.View, r.Path}, out[r.View]
		if i, ok := at[k]; ok {
			c := &v.compacted[i]
			c.From, c.To = min(c.From, r.FirstTick), max(c.To, r.LastTick)
		} else if other[k] {
			v.others++
		} else {
			at[k] = len(v.compacted)
			v.compacted = append(v.compacted, CompactedRead{World: world, TableID: r.TableID, File: files[r.Object], Path: r.Path, From: r.FirstTick, To: r.LastTick})
		}
		out[r.View] = v
	}
	return out
}

// CompactedReads returns the compacted files the sweep's views of view
// read as they are, once per world that reads each, and whether they
// read other files too (rest: also when a world's views were reused from
// an earlier build, which does not list its reads); an error for a
// session that is not a sweep.
func (s *Script) CompactedReads(view string) (reads []CompactedRead, rest bool, err error) {
	if !s.sweep {
		return nil, false, errors.New("only a sweep's views list their compacted reads")
	}
	for _, p := range s.parts {
		r := p.reads[view]
		reads = append(reads, r.compacted...)
		rest = rest || p.reads == nil || r.others > 0
	}
	return reads, rest, nil
}

// Omit returns the sweep s whose views leave out the reads given (each
// one of CompactedReads): they read every other file as s's do.
func (s *Script) Omit(reads []CompactedRead) (*Script, error) {
	if !s.sweep {
		return nil, errors.New("only a sweep's views leave files out")
	}
	o := *s
	o.omit = slices.Clone(reads)
	return &o, nil
}

// omitted defines the table of the (world, path) reads a sweep's views
// leave out (Omit), and returns the condition on a row of
// worldfs_fragments that keeps it ("" when none is left out).
func (s *Script) omitted(sb *strings.Builder) string {
	if len(s.omit) == 0 {
		return ""
	}
	rows := make([]string, len(s.omit))
	for i, r := range s.omit {
		rows[i] = fmt.Sprintf("(%s, %s)", lit(r.World), lit(r.Path))
	}
	fmt.Fprintf(sb, "CREATE OR REPLACE TEMP TABLE worldfs_sweep_omitted AS SELECT * FROM (VALUES %s) o(world, path);\n", strings.Join(rows, ", "))
	return " AND NOT EXISTS (SELECT 1 FROM worldfs_sweep_omitted o WHERE o.world = worldfs_fragments.sweep_world AND o.path = worldfs_fragments.path)"
}
