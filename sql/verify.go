package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
)

// recordPath returns a local file DuckDB can read for a fragment the
// catalog records, checked against its record (cache.Record) before
// DuckDB reads it.
type recordPath func(ctx context.Context, f index.Fragment) (string, error)

// Record is the catalog's record of f, as the cache checks it.
func Record(f index.Fragment) cache.Record {
	return cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
}

// VerifiedMemory returns the memory of verified files that views whose
// fragment lists live in dir (Options.Dir) keep, so that another reader
// (worldfs check) that verifies a file spares the views hashing it.
func VerifiedMemory(dir string) *cache.Verified {
	return cache.OpenVerified(filepath.Join(dir, "verified"))
}

// verifier returns the fragment paths of the views and the checks of
// those a local bucket holds: its files are read in place and checked
// only when a query is about to read them (checks), so that the cost of
// verifying follows what a query touches, not the length of history. A
// remote bucket's fragments are verified as they are fetched into the
// cache; one found missing or damaged then is listed under a path of its
// own (lostPath) that the checks fail every query reading it on, and the
// views are built all the same.
func verifier(b bucket.Bucket, path pathFunc, opts Options, dir string) (recordPath, *checks) {
	if _, ok := bucket.As[bucket.Local](b); ok {
		v := opts.Verified
		if v == nil {
			v = VerifiedMemory(dir)
		}
		c := &checks{v: v, files: map[string]cache.Record{}}
		return func(ctx context.Context, f index.Fragment) (string, error) {
			p, err := path(ctx, f.Path)
			if err != nil {
				return "", err
			}
			if r := Record(f); r.Recorded() {
				c.files[p] = r
			}
			return p, nil
		}, c
	}
	c := &checks{}
	return func(ctx context.Context, f index.Fragment) (string, error) {
		if !Record(f).Recorded() {
			return path(ctx, f.Path)
		}
		if opts.Cache == nil {
			return "", fmt.Errorf("fragment %s: a remote bucket is read through the fragment cache; none was given", f.Path)
		}
		p, err := opts.Cache.VerifiedPath(ctx, b, opts.BucketID, Record(f))
		if errors.Is(err, cache.ErrCorruptFragment) {
			p = lostPath(dir, f.Path)
			if c.lost == nil {
				c.lost = map[string]error{}
			}
			c.lost[p] = err
			return p, nil
		}
		return p, err
	}, c
}

// lostPath is the path the views list a remote bucket's file under when
// it was found missing or damaged as it was fetched: no such file exists,
// so that a script printed for another DuckDB fails on it too, naming the
// object.
func lostPath(dir, object string) string {
	return filepath.Join(dir, "lost", filepath.FromSlash(object))
}

// checks are the files of a script that must be verified before DuckDB
// reads them (local bucket files read in place), by path, with their
// records, and the files found missing or damaged while the views were
// built (a remote bucket's), by the path the lists name them by, with
// what is wrong. Built once, then only read.
type checks struct {
	v     *cache.Verified
	files map[string]cache.Record
	lost  map[string]error
}

// The script names the lists of files DuckDB reads through the functions
// checkedFunc and checkedNowFunc (see reader): the script a user prints
// reads them as they are (Script.SQL), the one worldfs runs verifies them
// first. Two functions of one argument, not one with a flag: DuckDB binds
// and folds the function at every query of a view (twice: when the query
// is prepared and when it runs), and a constant argument more costs each
// of those. A list goes to them and back as one string, its paths joined
// by a line break (listSep): the driver converts a list's elements one by
// one, ~4 ms for 5,000 paths, at every bind of a view, and one string in
// one copy. Both sides split it alike (a path holding a line break
// would split into paths DuckDB does not find: it fails, unread).
const (
	checkedFunc, checkedNowFunc = "worldfs_checked", "worldfs_checked_now"
	listSep                     = "\n"
	// markers in the rendered text, replaced by plainSQL and checkedSQL.
	markLazy, markEager, markEnd, markEndEager = "\x01", "\x03", "\x02", "\x04"
)

// verifiedList wraps a list of files that a read_parquet of a view reads when
// a query reads the view.
func verifiedList(list string) string { return markLazy + list + markEnd }

// verifiedListNow wraps a list of files read while the script runs.
func verifiedListNow(list string) string { return markEager + list + markEndEager }

var (
	plainSQL   = strings.NewReplacer(markLazy, "", markEager, "", markEnd, "", markEndEager, "")
	checkedSQL = strings.NewReplacer(
		markLazy, "string_split("+checkedFunc+"(array_to_string(", markEager, "string_split("+checkedNowFunc+"(array_to_string(",
		markEnd, ", chr(10))), chr(10))", markEndEager, ", chr(10))), chr(10))")
)

// reader verifies, for one database, the files its queries read: DuckDB
// evaluates worldfs_checked(list) (worldfs_checked_now(list): now) when it
// binds the read_parquet (or parquet_metadata) around it, before it opens a file, so the files a
// query's plan names are verified (size and generation, then the sha256
// unless remembered) as the query starts, and a mismatch fails it. Files
// not in checks (a remote bucket's cached copies, verified as fetched;
// the views' own lists and witnesses) pass as they are.
//
// While the script itself runs (defining), DuckDB binds each view once to
// learn its columns, reading only the first file of its list (a witness,
// for the lists of catalog files): only that one is verified then, unless
// now (a list the script reads whole).
//
// A file missing or damaged fails only the queries whose lists name it,
// with a LostFileError naming its table, its ticks and the object (read
// from the views' fragment lists, lists); a list the script reads whole
// is given to DuckDB without it (see verify).
type reader struct {
	c        *checks
	lists    []string // the fragment lists of the views (one per world of a session)
	defining atomic.Bool
	mu       sync.Mutex
	ok       map[string]bool // verified for this database
	// INVARIANT: pending is the number of files of c.files not in ok.
	// Once it is 0 (every file of every view verified: in a world of one
	// table, after its first whole-table query) and no file was found lost
	// as the views were built, a check looks at no list, however long. A database that has not read every table's
	// files still looks each path of a list up.
	pending int
}

// newReader returns the reader of a database of s's views.
func newReader(s *Script) *reader {
	r := &reader{c: s.checks, ok: map[string]bool{}}
	if r.c != nil {
		r.pending = len(r.c.files)
	}
	parts := s.parts
	if parts == nil {
		parts = []*Script{s}
	}
	for _, p := range parts {
		if p.FragmentList != "" {
			r.lists = append(r.lists, p.FragmentList)
		}
	}
	return r
}

// register makes worldfs_checked and worldfs_checked_now of r available
// on db.
func (r *reader) register(ctx context.Context, db *sql.DB) error {
	return withTypes(ctx, db, func(conn *sql.Conn, str, _, _ duckdb.TypeInfo) error {
		if err := duckdb.RegisterScalarUDF(conn, checkedFunc, checkedUDF{r, []duckdb.TypeInfo{str}, str, false}); err != nil {
			return err
		}
		return duckdb.RegisterScalarUDF(conn, checkedNowFunc, checkedUDF{r, []duckdb.TypeInfo{str}, str, true})
	})
}

// withTypes calls fn, which registers a function, with a connection of db
// (what one connection registers, the database has) and the types
// VARCHAR, BIGINT and BOOLEAN.
func withTypes(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn, str, bigint, boolean duckdb.TypeInfo) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var ts [3]duckdb.TypeInfo
	for i, t := range []duckdb.Type{duckdb.TYPE_VARCHAR, duckdb.TYPE_BIGINT, duckdb.TYPE_BOOLEAN} {
		if ts[i], err = duckdb.NewTypeInfo(t); err != nil {
			return err
		}
	}
	return fn(conn, ts[0], ts[1], ts[2])
}

type checkedUDF struct {
	r      *reader
	in     []duckdb.TypeInfo
	result duckdb.TypeInfo
	now    bool // the whole list, even while the script runs
}

func (u checkedUDF) Config() duckdb.ScalarFuncConfig {
	return duckdb.ScalarFuncConfig{InputTypeInfos: u.in, ResultTypeInfo: u.result}
}

func (u checkedUDF) Executor() duckdb.ScalarFuncExecutor {
	return duckdb.ScalarFuncExecutor{RowContextExecutor: func(ctx context.Context, vals []driver.Value) (any, error) {
		joined, ok := vals[0].(string)
		if !ok {
			return vals[0], nil // NULL
		}
		list := strings.Split(joined, listSep)
		if u.r.defining.Load() && !u.now && len(list) > 1 {
			list, joined = list[:1], list[0]
		}
		read, err := u.r.verify(ctx, list, u.now)
		if err == nil && (len(read) == 0 || slices.Contains(read, "")) {
			// An empty list joins to "", which splits into one empty
			// path: the working directory, to DuckDB. No file to read
			// fails, as read_parquet([]) does.
			err = errNoFiles
		}
		if err != nil {
			if s, ok := ctx.Value(sinkKey{}).(*sink); ok {
				s.set(err)
			}
			return nil, err
		}
		if len(read) == len(list) {
			return joined, nil
		}
		return strings.Join(read, listSep), nil
	}}
}

// errNoFiles: a view's list of files to read holds none (an _at of a
// tick no file's bounds hold, such as NULL), or an empty path.
var errNoFiles = errors.New("no file to read: the list of files of a view holds none")

// verify checks the files of list not yet verified for this database and
// returns the list DuckDB is to read. A file found missing or damaged
// fails it with a LostFileError, unless drop: then it returns list
// without such files. The script reads one list whole as it runs (the
// footers of the files the catalog does not prove, to learn which need the
// row check): a file dropped from it keeps the row check, and the queries
// that read it fail on it, not the views.
func (r *reader) verify(ctx context.Context, list []string, drop bool) ([]string, error) {
	if r.c == nil {
		return list, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == 0 && len(r.c.lost) == 0 {
		return list, nil
	}
	var bad map[string]bool
	for {
		p, err := r.check(ctx, list, bad)
		if err == nil {
			break
		}
		if p == "" {
			return nil, err
		}
		if !drop {
			return nil, lostFile(r.lists, p, err)
		}
		if bad == nil {
			bad = map[string]bool{}
		}
		bad[p] = true
	}
	if len(bad) == 0 {
		return list, nil
	}
	return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return bad[p] }), nil
}

// check verifies the files of list not yet verified for this database,
// but those in skip. A file missing or damaged is the error, with its path
// in list; any other failure is the error with no path.
func (r *reader) check(ctx context.Context, list []string, skip map[string]bool) (string, error) {
	var batch *cache.Batch // none while every file was verified before
	var queued []string
	for _, p := range list {
		if skip[p] {
			continue
		}
		if err, ok := r.c.lost[p]; ok {
			return p, err
		}
		rec, ok := r.c.files[p]
		if !ok || r.ok[p] {
			continue
		}
		if batch == nil {
			batch = r.c.v.Batch()
		}
		if err := batch.Add(p, rec); err != nil {
			if errors.Is(err, cache.ErrCorruptFragment) {
				return p, err
			}
			return "", err
		}
		queued = append(queued, p)
	}
	if batch == nil {
		return "", nil
	}
	if err := batch.Wait(ctx); err != nil {
		var cf *cache.CorruptFragmentError
		if errors.As(err, &cf) {
			for _, p := range queued {
				if p == cf.File || cf.File == "" && r.c.files[p].Name == cf.Name {
					return p, cf
				}
			}
		}
		return "", err
	}
	for _, p := range queued {
		if !r.ok[p] { // a list may name a file twice
			r.ok[p] = true
			r.pending--
		}
	}
	return "", nil
}

// sink receives the first verification error of the queries run with its
// context (withSink), so that the caller gets it as it is
// (cache.CorruptFragmentError), not only as DuckDB's text of it.
type sink struct {
	mu  sync.Mutex
	err error
}

type sinkKey struct{}

func (s *sink) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// withSink returns ctx carrying a sink for verification errors.
func withSink(ctx context.Context) (context.Context, *sink) {
	s := &sink{}
	return context.WithValue(ctx, sinkKey{}, s), s
}

// or returns err, or the verification error behind it if there was one.
func (s *sink) or(err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return err
}
