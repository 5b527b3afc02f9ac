package sql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// What a reader that aggregates a column per world and tick without
// DuckDB needs of a sweep's plan (the web interface's sweep page, which
// takes the aggregates of compacted ticks from their tick indexes'
// column summaries and reads a few loose ticks' files itself): the files
// each world's views read as they are, with the ticks each shows of them
// (FileReads), a way to read one as the views would (ReadFile), and the
// sweep without some of them (Omit), whose views read the rest: each row
// of the sweep is then in exactly one of the two.

// FileRead is a file a world's views read as it is (filtered, and the
// catalog proves every row of it visible; not a fact's): its rows of
// ticks From..To are rows of the world's view, with no row check. A
// compacted file's File is its catalog entry; a tick's own file has
// only File.Path.
type FileRead struct {
	World string         // the world whose views read it (a fork reads its parent's files)
	File  index.Fragment // File.Path: the bucket object
	Path  string         // the file as the views read it (ReadFile, CheckFiles)
	From  int64
	To    int64
}

// Compacted reports whether r is of a compacted file.
func (r FileRead) Compacted() bool { return r.File.Span != nil }

// viewReads is what a view of one world reads: its files read as they
// are, and how many files besides.
type viewReads struct {
	asIs   []FileRead
	others int
}

// lazyReads is what each view of one world reads (fileReads), found from
// the world's fragment list once a reader asks (a sweep's page), not by
// every build: a long history of loose ticks lists a file per tick and
// table, which only such a reader needs sorted. compacted: the catalog's
// entries of the compacted files the views read, by object.
type lazyReads struct {
	compacted map[string]index.Fragment
	once      sync.Once
	byView    map[string]viewReads
	err       error
}

// of returns what each view of the world whose fragment list is at list
// reads.
func (l *lazyReads) of(world, list string) (map[string]viewReads, error) {
	l.once.Do(func() {
		rows, err := parquet.ReadFile[listRow](list)
		if err != nil {
			l.err = fmt.Errorf("world %s: the views' fragment list: %w", world, err)
			return
		}
		l.byView = fileReads(world, rows, l.compacted)
	})
	return l.byView, l.err
}

// fileReads sorts the rows of a world's fragment list by view into the
// files read as they are (compacted, the catalog's entries of the
// compacted files, by object), each once with the span of ticks its rows
// show (as a sweep's views bound a file: the least first tick and the
// greatest last of its rows), and the count of the others.
func fileReads(world string, list []listRow, compacted map[string]index.Fragment) map[string]viewReads {
	type key struct{ view, path string }
	other := map[key]bool{} // a file some row of which is not read as it is
	for _, r := range list {
		_, known := compacted[r.Object]
		if r.Compacted && !known || !r.Filtered || !r.Proven || r.Fact {
			other[key{r.View, r.Path}] = true
		}
	}
	out := map[string]viewReads{}
	at := map[key]int{} // a file's place in its view's reads
	for _, r := range list {
		k, v := key{r.View, r.Path}, out[r.View]
		if i, ok := at[k]; ok {
			c := &v.asIs[i]
			c.From, c.To = min(c.From, r.FirstTick), max(c.To, r.LastTick)
		} else if other[k] {
			v.others++
		} else {
			f := index.Fragment{Path: r.Object}
			if r.Compacted {
				f = compacted[r.Object]
			}
			at[k] = len(v.asIs)
			v.asIs = append(v.asIs, FileRead{World: world, File: f, Path: r.Path, From: r.FirstTick, To: r.LastTick})
		}
		out[r.View] = v
	}
	return out
}

// FileReads returns the files the sweep's views of view read as they
// are, once per world that reads each, and whether they read other files
// too (rest: also when a world's views were reused from an earlier
// build, which does not list its reads); an error for a session that is
// not a sweep.
func (s *Script) FileReads(view string) (reads []FileRead, rest bool, err error) {
	if !s.sweep {
		return nil, false, errors.New("only a sweep's views list the files they read as they are")
	}
	for _, p := range s.parts {
		if p.reads == nil {
			rest = true
			continue
		}
		byView, err := p.reads.of(p.World, p.FragmentList)
		if err != nil {
			return nil, false, err
		}
		r := byView[view]
		reads = append(reads, r.asIs...)
		rest = rest || r.others > 0
	}
	return reads, rest, nil
}

// ReadFile returns the bytes of the file at path (a FileRead's Path), as
// the views would read them: a local bucket's file checked against its
// catalog record (size, then sha256), a remote bucket's copy as it was
// verified when fetched; a file found missing or damaged is an error
// naming it.
func (s *Script) ReadFile(path string) ([]byte, error) {
	if s.checks != nil {
		if err, ok := s.checks.lost[path]; ok {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if s.checks == nil {
		return data, nil
	}
	if rec, ok := s.checks.files[path]; ok {
		if err := rec.CheckData(path, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// Omit returns the sweep s whose views leave out the reads given (each
// one of FileReads): they read every other file as s's do.
func (s *Script) Omit(reads []FileRead) (*Script, error) {
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

// CheckFiles checks the files at paths (FileReads' Paths) as the views
// check a file before DuckDB reads it (its size and generation against
// its catalog record, its sha256 unless remembered; a remote bucket's
// copy was checked as it was fetched): for a reader that takes what a
// file holds from elsewhere (its tick index's summaries) and must not
// show what the views would refuse to read. The first file missing or
// damaged is the error (a LostFileError).
func (s *Script) CheckFiles(ctx context.Context, paths []string) error {
	_, err := newReader(s).verify(ctx, paths, false)
	return err
}

// WorldRecord is what worldfs_worlds shows of a world of a session: its
// record, and the newest tick its views show (nil: none).
type WorldRecord struct {
	World index.World
	Head  *int64
}

// Records returns each world's row of worldfs_worlds, in the session's
// order, as the views hold them; an error if some world's views were
// reused from an earlier build, which does not keep it.
func (s *Script) Records() ([]WorldRecord, error) {
	parts := s.parts
	if parts == nil {
		parts = []*Script{s}
	}
	out := make([]WorldRecord, len(parts))
	for i, p := range parts {
		if p.record == nil {
			return nil, fmt.Errorf("world %s: views reused from an earlier build keep no record of the world", p.World)
		}
		out[i] = WorldRecord{World: p.record.world, Head: p.record.head}
	}
	return out, nil
}

// unionTypes is the type each component column of a view of parts has:
// the widest of every table id's (frame.UnionType), as the union of
// their rows gives it.
func unionTypes(parts []part) (map[string]frame.Type, error) {
	out := map[string]frame.Type{}
	for _, p := range parts {
		for _, c := range p.ti.Columns {
			if c.Component == "" {
				continue
			}
			t, ok := out[c.Name]
			if !ok {
				out[c.Name] = c.Type
				continue
			}
			u, err := frame.UnionType(t, c.Type)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.Name, err)
			}
			out[c.Name] = u
		}
	}
	return out, nil
}

// ColumnType returns the type column of view has in the session's
// views (the widest its table ids give it in every world, as their
// union gives it); false if no world's view has it.
func (s *Script) ColumnType(view, column string) (frame.Type, bool, error) {
	parts := s.parts
	if parts == nil {
		parts = []*Script{s}
	}
	var out frame.Type
	for _, p := range parts {
		t, ok := p.types[view][column]
		switch {
		case p.types == nil:
			return "", false, fmt.Errorf("world %s: views reused from an earlier build keep no column types", p.World)
		case !ok:
		case out == "":
			out = t
		default:
			u, err := frame.UnionType(out, t)
			if err != nil {
				return "", false, fmt.Errorf("view %s column %s: %w", view, column, err)
			}
			out = u
		}
	}
	return out, out != "", nil
}
