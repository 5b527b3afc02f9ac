package sql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// Options pin what the views show.
type Options struct {
	// Run (default "main").
	Run string
	// AtTick pins the views to the state up to this tick (nil: the head).
	AtTick *int64
	// Only narrows the views to the rows of this one tick (with AtTick
	// set to it): only that tick's files are listed and read, so a
	// snapshot of one tick costs the same early or late in a long history
	// (legacy history files, which span ticks, are still read whole).
	Only bool
	// Token pins the views to the tick that commit token published.
	Token string
	// Cache holds local copies of a remote bucket's fragments (required
	// for buckets that cannot be read in place); BucketID names the bucket
	// in it.
	Cache    *cache.Disk
	BucketID string
	// Dir is where the views' fragment lists are written (content-addressed
	// Parquet files the script reads). Build requires it: worldfs passes
	// <cache-dir>/views, tests a temporary directory; nothing defaults to
	// the user's home. CopyTick and CopyFacts without it write their list
	// beside their output and remove it when the copy ends.
	Dir string
	// View, if set, is the lineage of (world, Run) already resolved from
	// open catalogs (a mount's): Build and BuildFrom read no catalog then,
	// only the table descriptions and the files.
	View *index.View
	// Verified remembers the bucket files read in place that were found to
	// match their catalog records (default: one kept in Dir/verified).
	Verified *cache.Verified
}

// ErrNoDir: Build was given no Options.Dir for the views' fragment lists.
var ErrNoDir = errors.New("sql options: Dir is required (the directory for the views' fragment lists, e.g. <cache-dir>/views)")

func (o Options) dir() (string, error) {
	d := o.Dir
	if d == "" {
		return "", ErrNoDir
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("views directory: %w", err)
	}
	return filepath.Abs(d)
}

// ErrNotFound: the world, run, tick or token named does not exist.
var ErrNotFound = errors.New("not found")

// fragment is one file of a table's visible history.
type fragment struct {
	world, run, table string
	object            string // the bucket object
	path              string // a file path DuckDB can read
	tick              int64
	token             string
	epoch, rows       int64
	filtered          bool // rows must match (tick, token); false: every row (unfiltered or legacy history)
	fact              bool // a completed claim's rows (seed 003), visible by its token
	proven            bool // filtered, and the catalog proves every row is (tick, token): no row check
	// keep, on a compacted file (proven, rows of many ticks), is the ticks
	// whose rows the views keep.
	keep *index.Span
	// first and last bound the ticks of the rows the file may show when it
	// is read as it is: its tick, or a compacted file's span within keep.
	first, last int64
	// manifest: not a file to read but a compacted tick's manifest entry
	// (object is the compacted file holding its rows), for worldfs_manifests.
	manifest bool
}

// Script is the SQL that defines a world's views.
type Script struct {
	World, Run string
	AtTick     int64 // math.MaxInt64: the head
	SQL        string
	Views      []string // the per-table component views, by name
	// FragmentList is the Parquet file (in Options.Dir) of the files the
	// views read, with the tick and token each was published under; SQL
	// reads it.
	FragmentList string
}

// Build reads the catalog (and, for forks, every ancestor's) and returns the
// view definitions. A corrupt catalog fails closed: no views.
func Build(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Script, error) {
	if v := opts.View; v != nil {
		if v.World != world || len(v.Segments) == 0 {
			return nil, fmt.Errorf("views of world %s: the view given is of world %s", world, v.World)
		}
		return BuildFrom(ctx, b, v.Segments[len(v.Segments)-1].State, opts)
	}
	own, _, err := index.Load(ctx, b, world)
	if err != nil {
		return nil, err
	}
	if _, merr := index.ReadMarker(ctx, b, world); !own.World.Created && errors.Is(merr, bucket.ErrNotExist) && !hasData(ctx, b, world) {
		return nil, fmt.Errorf("world %s: %w", lit(world), ErrNotFound)
	}
	return BuildFrom(ctx, b, own, opts)
}

// BuildFrom returns the view definitions of the world whose catalog state
// own is (ancestors are read from the bucket, unless opts.View, of this
// world and run, resolves them).
func BuildFrom(ctx context.Context, b bucket.Bucket, own *index.State, opts Options) (*Script, error) {
	world := own.World.ID
	path, err := pather(b, opts)
	if err != nil {
		return nil, err
	}
	if opts.Run == "" {
		opts.Run = "main"
	}
	dir, err := opts.dir()
	if err != nil {
		return nil, err
	}
	upTo := int64(math.MaxInt64)
	if opts.AtTick != nil {
		upTo = *opts.AtTick
	}
	if opts.Token != "" {
		tick, ok := tokenTick(own, opts.Run, opts.Token)
		if !ok {
			return nil, fmt.Errorf("world %s run %s: commit token %q: %w", world, opts.Run, opts.Token, ErrNotFound)
		}
		upTo = min(upTo, tick)
	}
	if opts.AtTick != nil || opts.Token != "" {
		if run, ok := own.Run(opts.Run); ok && upTo > run.Head && opts.AtTick != nil {
			return nil, fmt.Errorf("world %s run %s: tick %d is past the head %d: %w", world, opts.Run, upTo, run.Head, ErrNotFound)
		}
	}
	fpath, verified := verifier(b, path, opts, dir)
	var segs []index.Segment
	if v := opts.View; v != nil && v.World == world && v.Run == opts.Run {
		segs = v.Segments
	} else {
		load := index.LoadFrom(b)
		segs, err = index.Lineage(ctx, func(ctx context.Context, w string) (*index.State, error) {
			if w == world {
				return own, nil
			}
			return load(ctx, w)
		}, world, opts.Run)
		if err != nil {
			return nil, err
		}
	}
	// One fragment per table per published tick, usually: allocate once.
	n := 0
	for _, seg := range segs {
		if r, ok := seg.State.Run(seg.Run); ok {
			per := 1
			if t, ok := seg.State.Tick(seg.Run, r.Head); ok {
				per = max(1, len(t.Tables))
			}
			n += int(r.Published) * per
		}
	}
	frags := make([]fragment, 0, n)
	// The catalog's files: every filtered segment's ticks, then facts (each
	// completed claim's rows, at the tick the fact landed on, visible by the
	// claim's token).
	from := int64(math.MinInt64)
	if opts.Only {
		from = upTo
	}
	appendFiles := func(v *index.View, from, to int64) error {
		var ferr error
		v.Files(from, to, func(f index.File) bool {
			p, err := fpath(ctx, f.Fragment)
			if err != nil {
				ferr = err
				return false
			}
			first, last := f.Tick, f.Tick
			if f.Span != nil {
				first, last = max(f.Span.From, f.Keep.From), min(f.Span.To, f.Keep.To)
			}
			frags = append(frags, fragment{world: f.World, run: f.Run, table: f.Table, object: f.Path, path: p,
				tick: f.Tick, token: f.Token, epoch: f.Epoch, rows: f.Rows, filtered: true, fact: f.Fact, proven: !f.Check, keep: f.Keep,
				first: first, last: last})
			return true
		})
		return ferr
	}
	// A compacted tick's manifest names a file it shares with its span:
	// worldfs_manifests still lists it, tick by tick.
	view := &index.View{World: world, Run: opts.Run, Segments: segs}
	view.Ticks(from, upTo, func(t index.TickRef) bool {
		for _, tf := range t.Tables {
			for _, f := range tf.Fragments {
				if f.Span != nil {
					frags = append(frags, fragment{world: t.World, run: t.Run, table: tf.Table, object: f.Path, tick: t.Tick.Tick,
						token: t.CommitToken, epoch: t.WriterEpoch, rows: -1, filtered: true, manifest: true})
				}
			}
		}
		return true
	})
	if err := appendFiles(view, from, upTo); err != nil {
		return nil, err
	}
	infos := map[string]engine.TableInfo{} // by world/table id
	var lineage []string
	for i, seg := range segs {
		limit := min(seg.UpTo, upTo)
		if seg.Mode == index.Unfiltered {
			fs, err := listData(ctx, b, path, seg.World, seg.Run)
			if err != nil {
				return nil, err
			}
			frags = append(frags, fs...)
		}
		legacy, err := listLegacy(ctx, b, path, seg.World, seg.Run, limit)
		if err != nil {
			return nil, err
		}
		frags = append(frags, legacy...)
		if i < len(segs)-1 {
			lineage = append(lineage, fmt.Sprintf("(%d, %s, %s, %d)", i, lit(seg.World), lit(seg.Run), seg.UpTo))
		} else {
			lineage = append(lineage, fmt.Sprintf("(%d, %s, %s, NULL)", i, lit(seg.World), lit(seg.Run)))
		}
	}
	// Evaluation receipts are the world's, whatever run they judged.
	if err := appendFiles(index.OwnView(own, engine.EvaluationRun), math.MinInt64, math.MaxInt64); err != nil {
		return nil, err
	}
	if err := verified(ctx); err != nil {
		return nil, err
	}
	// Each table's description, once per table (not once per fragment:
	// a long history has millions).
	type tableKey struct{ world, table string }
	seen := map[tableKey]bool{}
	for _, f := range frags {
		if k := (tableKey{f.world, f.table}); !seen[k] {
			seen[k] = true
			if err := describe(ctx, b, infos, f.world, f.table); err != nil {
				return nil, err
			}
		}
	}
	return render(world, opts.Run, upTo, frags, infos, lineage, dir)
}

// describe reads the description of a world's table into infos, once.
func describe(ctx context.Context, b bucket.Bucket, infos map[string]engine.TableInfo, world, table string) error {
	key := world + "/" + table
	if _, ok := infos[key]; ok {
		return nil
	}
	ti, err := engine.ReadTableInfo(ctx, b, world, table)
	if err != nil {
		return fmt.Errorf("world %s: table %s has no description: %w", world, table, err)
	}
	infos[key] = ti
	return nil
}

func hasData(ctx context.Context, b bucket.Bucket, world string) bool {
	for range b.List(ctx, "data/"+world+"/", "") {
		return true
	}
	return false
}

func tokenTick(s *index.State, run, token string) (int64, bool) {
	var tick int64
	found := false
	s.Ticks(run, math.MinInt64, func(t *index.Tick) bool {
		if t.CommitToken == token {
			tick, found = t.Tick, true
			return false
		}
		return true
	})
	return tick, found
}

// listData lists an unfiltered segment's fragments (uncoordinated or
// pre-commit-identity history: no manifest names them).
func listData(ctx context.Context, b bucket.Bucket, path pathFunc, world, run string) ([]fragment, error) {
	var out []fragment
	for a, err := range b.List(ctx, "data/"+world+"/"+run+"/", "") {
		if err != nil {
			return nil, err
		}
		parts := strings.Split(a.Name, "/")
		if len(parts) != 6 || parts[4] == "v0.2" || !strings.HasSuffix(a.Name, ".parquet") {
			continue
		}
		p, err := path(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, fragment{world: world, run: run, table: parts[3], object: a.Name, path: p})
	}
	return out, nil
}

// listLegacy lists a segment's legacy (v0.2) table fragments: always
// visible epoch-0 history, read through the legacy-name fallback. Only the
// legacy prefixes of the tables the world describes are listed, never the
// world's whole data.
func listLegacy(ctx context.Context, b bucket.Bucket, path pathFunc, world, run string, upTo int64) ([]fragment, error) {
	var out []fragment
	for d, err := range b.List(ctx, "data/"+world+"/_tables/", "") {
		if err != nil {
			return nil, err
		}
		id := strings.TrimSuffix(strings.TrimPrefix(d.Name, "data/"+world+"/_tables/"), ".json")
		for a, err := range b.List(ctx, engine.LegacyPrefix(world, run, id), "") {
			if err != nil {
				return nil, err
			}
			if !strings.HasSuffix(a.Name, ".parquet") {
				continue
			}
			p, err := path(ctx, a.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, fragment{world: world, run: run, table: id, object: a.Name, path: p, tick: upTo})
		}
	}
	return out, nil
}

// pathFunc returns a local file DuckDB can read for an object.
type pathFunc func(ctx context.Context, name string) (string, error)

// pather reads local buckets in place and any other bucket through the
// disk cache.
func pather(b bucket.Bucket, opts Options) (pathFunc, error) {
	if lb, ok := b.(*local.Bucket); ok {
		return func(_ context.Context, name string) (string, error) { return lb.Path(name) }, nil
	}
	if opts.Cache == nil || opts.BucketID == "" {
		return nil, fmt.Errorf("views of %v: a remote bucket is read through the fragment cache; none was given", b)
	}
	return func(ctx context.Context, name string) (string, error) {
		return opts.Cache.Path(ctx, b, opts.BucketID, name)
	}, nil
}

// lit quotes a SQL string literal.
func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ident quotes a SQL identifier.
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// render writes the views. Per readable table name, the raw view unions
// the segment files of every table id with that name (a changed schema is
// a new table; legacy tables join by name), keeping only rows whose (tick,
// token) a manifest published, and epoch-0 rows; the component view
// projects away the commit columns. The fragment list (files, ticks and
// tokens) goes to a Parquet file in dir that the script reads, so the
// script stays small whatever the size of the catalog.
func render(world, run string, upTo int64, frags []fragment, infos map[string]engine.TableInfo, lineage []string, dir string) (*Script, error) {
	var manifests []fragment
	frags = slices.DeleteFunc(frags, func(f fragment) bool {
		if f.manifest {
			manifests = append(manifests, f)
		}
		return f.manifest
	})
	// Group by readable name, then by (world, table id) within a name (one
	// read_parquet each), keeping catalog order within a group: by index,
	// without copying the fragments.
	type group struct {
		name string
		ti   engine.TableInfo
	}
	type tableKey struct{ world, table string }
	groups := map[tableKey]int{}
	var gs []group
	gi := make([]int32, len(frags))
	for i := range frags {
		k := tableKey{frags[i].world, frags[i].table}
		g, ok := groups[k]
		if !ok {
			g = len(gs)
			groups[k] = g
			ti := infos[k.world+"/"+k.table]
			gs = append(gs, group{name: ti.Name, ti: ti})
		}
		gi[i] = int32(g)
	}
	var names []string
	partOf := make([]int32, len(gs)) // a group's part number within its name
	seen := map[string]int32{}
	for g := range gs {
		n, ok := seen[gs[g].name]
		if !ok {
			names = append(names, gs[g].name)
		}
		partOf[g], seen[gs[g].name] = n, n+1
	}
	slices.Sort(names)
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	order := make([]int32, len(frags))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		ga, gb := gs[gi[a]], gs[gi[b]]
		if c := rank[ga.name] - rank[gb.name]; c != 0 {
			return c
		}
		return int(partOf[gi[a]]) - int(partOf[gi[b]])
	})
	type part struct {
		ti       engine.TableInfo
		filtered bool
		lo, hi   string // the least and greatest published token
		// keep: the ticks whose rows the part shows, when it has compacted
		// files (nil: it has none).
		keep *index.Span
	}
	parts := map[string][]part{}
	list := make([]listRow, 0, len(frags))
	for _, i := range order {
		f, g := &frags[i], gi[i]
		name, pn := gs[g].name, int(partOf[g])
		ps := parts[name]
		for len(ps) <= pn {
			ps = append(ps, part{})
		}
		p := &ps[pn]
		p.ti = gs[g].ti
		if f.filtered {
			if !p.filtered || f.token < p.lo {
				p.lo = f.token
			}
			if !p.filtered || f.token > p.hi {
				p.hi = f.token
			}
			p.filtered = true
		}
		if f.keep != nil {
			p.keep = f.keep // the same bounds for every file of a part's segment
		}
		parts[name] = ps
		list = append(list, listRow{View: name, Part: int32(pn), Ord: int64(len(list)), World: f.world, Run: f.run,
			TableID: f.table, Tick: f.tick, CommitToken: f.token, WriterEpoch: f.epoch, Filtered: f.filtered, Fact: f.fact, Proven: f.proven,
			Object: f.object, Path: f.path, Rows: f.rows, Compacted: f.keep != nil, FirstTick: f.first, LastTick: f.last})
	}
	for _, f := range manifests {
		list = append(list, listRow{Part: -1, Ord: int64(len(list)), World: f.world, Run: f.run, TableID: f.table, Tick: f.tick,
			CommitToken: f.token, WriterEpoch: f.epoch, Filtered: true, Object: f.object, Rows: -1, Manifest: true})
	}
	listPath, err := writeList(dir, list)
	if err != nil {
		return nil, err
	}

	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("-- worldfs views of world %s, run %s", world, run)
	if upTo != math.MaxInt64 {
		w(", as of tick %d", upTo)
	}
	w(".\n-- Generated from the catalog; visible rows only (seed 000 §4).\n")
	w("-- The fragment list (each file, and the tick and commit token its manifest published) is read from\n-- %s.\n\n", listPath)
	w("CREATE OR REPLACE TEMP TABLE worldfs_fragments AS SELECT * FROM read_parquet(%s);\n", lit(listPath))
	script := &Script{World: world, Run: run, AtTick: upTo, FragmentList: listPath}
	for _, name := range names {
		// The component columns of the table's newest schema.
		var cols []string
		seen := map[string]bool{}
		for _, p := range parts[name] {
			for _, c := range p.ti.Columns {
				if c.Component != "" && !seen[c.Name] {
					seen[c.Name] = true
					cols = append(cols, ident(c.Name))
				}
			}
		}
		slices.Sort(cols)
		var qs, ats []string
		for i, p := range parts[name] {
			files := fmt.Sprintf("worldfs_files_%s_%d", name, i)
			w("SET VARIABLE %s = (SELECT list(path ORDER BY ord) FROM worldfs_fragments WHERE view = %s AND part = %d);\n", ident(files), lit(name), i)
			visible := ident(fmt.Sprintf("worldfs_visible_%s_%d", name, i))
			if p.filtered {
				w("CREATE OR REPLACE TEMP TABLE %s AS SELECT DISTINCT tick AS v_tick, commit_token AS v_token FROM worldfs_fragments WHERE view = %s AND part = %d AND filtered;\n",
					visible, lit(name), i)
			}
			legacy := !hasColumn(p.ti, engine.ColCommitToken)
			sel := "entity_id, tick, commit_token, writer_epoch"
			if legacy {
				sel = "entity_id, tick, '' AS commit_token, 0::BIGINT AS writer_epoch"
			}
			for _, c := range cols {
				if hasColumn(p.ti, strings.Trim(c, `"`)) {
					sel += ", " + c
				} else {
					sel += ", NULL AS " + c
				}
			}
			q := fmt.Sprintf("SELECT %s FROM read_parquet(getvariable(%s))", sel, lit(files))
			// at is the part's rows of tick t, for <table>_at(t).
			at := q + " WHERE tick = t"
			switch {
			case legacy:
				q += fmt.Sprintf(" WHERE tick <= %d", upTo)
				at = q + " AND tick = t"
			case p.filtered:
				witness, err := writeWitness(dir, p.ti)
				if err != nil {
					return nil, err
				}
				proven, checked := fmt.Sprintf("worldfs_proven_%s_%d", name, i), fmt.Sprintf("worldfs_checked_%s_%d", name, i)
				w("%s", provenFiles(name, i, proven, checked, witness))
				provenQ := fmt.Sprintf("SELECT %s FROM read_parquet(getvariable(%s))", sel, lit(proven))
				if p.keep != nil {
					// Compacted files hold other ticks' rows too.
					provenQ += fmt.Sprintf(" WHERE tick BETWEEN %d AND %d", p.keep.From, p.keep.To)
				}
				checkedQ := tokenCheck(fmt.Sprintf("SELECT %s FROM read_parquet(getvariable(%s))", sel, lit(checked)), visible, p.lo, p.hi)
				q = provenQ + "\n  UNION ALL BY NAME " + checkedQ
				// Of the files read as they are, only those whose tick
				// bounds hold t (the witness holds every tick): the others'
				// footers are never opened. (Fields by subscript: a macro
				// parameter reads f.lo as a string.)
				provenAt := fmt.Sprintf("SELECT %s FROM read_parquet([f['path'] FOR f IN getvariable(%s) IF f['lo'] <= t AND t <= f['hi']]) WHERE tick = t", sel, lit(proven+"_bounds"))
				if p.keep != nil {
					provenAt += fmt.Sprintf(" AND tick BETWEEN %d AND %d", p.keep.From, p.keep.To)
				}
				at = provenAt + "\n    UNION ALL BY NAME " + checkedQ + " AND tick = t"
			}
			qs = append(qs, q)
			ats = append(ats, at)
		}
		w("CREATE OR REPLACE TEMP VIEW %s AS\n  %s;\n", ident(name+"_raw"), strings.Join(qs, "\n  UNION ALL BY NAME "))
		w("CREATE OR REPLACE TEMP VIEW %s AS SELECT entity_id, tick, %s FROM %s;\n", ident(name), strings.Join(cols, ", "), ident(name+"_raw"))
		w("CREATE OR REPLACE TEMP MACRO %s(t) AS TABLE SELECT entity_id, tick, %s FROM (\n    %s);\n\n",
			ident(name+"_at"), strings.Join(cols, ", "), strings.Join(ats, "\n    UNION ALL BY NAME "))
		script.Views = append(script.Views, name)
	}
	w("CREATE OR REPLACE TEMP VIEW worldfs_manifests AS SELECT world, run, tick, commit_token, writer_epoch, table_id, object AS path, nullif(rows, -1) AS rows\n  FROM worldfs_fragments WHERE filtered AND NOT fact AND NOT compacted;\n")
	var factNames []string
	for _, name := range names {
		if engine.IsFactColumns(parts[name][0].ti.Columns) {
			factNames = append(factNames, name)
		}
	}
	w("%s", factViews(factNames))
	w("CREATE OR REPLACE TEMP VIEW worldfs_lineage AS SELECT * FROM (VALUES %s) l(segment, world, run, up_to_tick);\n", strings.Join(lineage, ", "))
	script.SQL = sb.String()
	return script, nil
}

// provenFiles splits the files of a filtered part, when the views are
// opened, into those read as they are (variable proven) and those read
// through the row check (variable checked). A file is read as is when
// every row is its publication's (tick, token): the catalog proves it for
// fragments stored under their own token, and for any other file its
// Parquet statistics may (every row group with tick and commit_token each
// of one value, the very pair its manifest published). Only the footers of
// files the catalog does not prove are read. Every other file (no
// statistics, a mixed or foreign stamp: a crashed attempt's rows handed in
// by mistake) keeps the row check. Each list starts with witness, an empty
// file of the table's schema, so that none is ever empty. Variable
// proven_bounds lists the files read as they are with the ticks their
// rows may hold (the witness first, holding every tick), for
// <table>_at(t). A file several claims name (a batch of facts shares one)
// is read once: each of its rows is kept under its own claim's token.
func provenFiles(view string, part int, proven, checked, witness string) string {
	where := fmt.Sprintf("view = %s AND part = %d AND filtered", lit(view), part)
	set, unproven := ident(proven+"_set"), proven+"_unproven"
	return fmt.Sprintf(`SET VARIABLE %[2]s = (SELECT list_prepend(%[6]s, coalesce(list(path), []::VARCHAR[])) FROM worldfs_fragments WHERE %[3]s AND NOT proven);
CREATE OR REPLACE TEMP TABLE %[1]s AS
  SELECT path FROM worldfs_fragments WHERE %[3]s AND proven
  UNION ALL
  SELECT f.path FROM worldfs_fragments f
  JOIN (SELECT file_name, path_in_schema AS col, stats_min_value AS lo, stats_max_value AS hi
        FROM parquet_metadata(getvariable(%[7]s)) WHERE path_in_schema IN ('tick', 'commit_token')) m ON m.file_name = f.path
  WHERE f.%[3]s AND NOT f.proven
  GROUP BY f.path, f.tick, f.commit_token
  HAVING bool_and(m.lo IS NOT NULL AND m.lo = m.hi AND m.lo = CASE m.col WHEN 'tick' THEN f.tick::VARCHAR ELSE f.commit_token END)
     AND count(*) FILTER (WHERE m.col = 'tick') = count(*) FILTER (WHERE m.col = 'commit_token');
SET VARIABLE %[4]s = (SELECT list_prepend(%[6]s, coalesce(list(path ORDER BY ord), []::VARCHAR[])) FROM (SELECT path, min(ord) AS ord FROM worldfs_fragments WHERE %[3]s AND path IN (SELECT path FROM %[1]s) GROUP BY path));
SET VARIABLE %[5]s = (SELECT list_prepend(%[6]s, coalesce(list(path ORDER BY ord), []::VARCHAR[])) FROM (SELECT path, min(ord) AS ord FROM worldfs_fragments WHERE %[3]s AND path NOT IN (SELECT path FROM %[1]s) GROUP BY path));
SET VARIABLE %[8]s = (SELECT list({'path': path, 'lo': first_tick, 'hi': last_tick} ORDER BY ord) FROM (
  SELECT %[6]s AS path, '%[9]d'::BIGINT AS first_tick, '%[10]d'::BIGINT AS last_tick, -1::BIGINT AS ord
  UNION ALL SELECT path, first_tick, last_tick, ord FROM worldfs_fragments WHERE %[3]s AND path IN (SELECT path FROM %[1]s)));
`, set, ident(unproven), where, ident(proven), ident(checked), lit(witness), lit(unproven), ident(proven+"_bounds"), int64(math.MinInt64), int64(math.MaxInt64))
}

// writeWitness writes (once) an empty Parquet file of ti's schema in dir
// and returns its path.
func writeWitness(dir string, ti engine.TableInfo) (string, error) {
	path := filepath.Join(dir, "empty-"+ti.ID+".parquet")
	if _, err := os.Stat(path); err == nil {
		touch(path) // in use again: collection counts from its last use
		return path, nil
	}
	t, err := engine.TableFromInfo(ti)
	if err != nil {
		return "", err
	}
	data, err := engine.EncodeFragment(engine.NewFrame(t), engine.Stamp{})
	if err != nil {
		return "", err
	}
	return path, writeAtomic(dir, path, data)
}

// tokenCheck keeps the rows of a group of manifest-named files whose
// (tick, commit_token) a manifest published, and epoch-0 rows: rows of
// crashed attempts or stale writers never match, even if their file is
// handed in. The first conjunct is a constant range on commit_token alone,
// which DuckDB pushes into the Parquet scan and checks against each row
// group's statistics, skipping foreign tokens outside it unread; the
// semi-join on the published (tick, token) pairs is the exact check.
func tokenCheck(q, visible, lo, hi string) string {
	rng := fmt.Sprintf("(commit_token = '' OR commit_token BETWEEN %s AND %s)", lit(lo), lit(hi))
	return q + " WHERE " + rng + " AND ((commit_token = '' AND writer_epoch = 0) OR (tick, commit_token) IN (SELECT v_tick, v_token FROM " + visible + "))"
}

func hasColumn(ti engine.TableInfo, name string) bool {
	return slices.ContainsFunc(ti.Columns, func(c engine.Column) bool { return c.Name == name })
}

// factViews defines worldfs_facts (every visible external fact of every
// fact table, by its FactMeta) and worldfs_receipts (visible evaluation receipts, their
// JSON columns typed), both empty when there are none.
func factViews(factNames []string) string {
	var facts []string
	receipts := false
	for _, name := range factNames {
		if name == engine.ReceiptTableName {
			receipts = true
			continue
		}
		facts = append(facts, fmt.Sprintf("SELECT entity_id AS fact_id, tick, %s AS table_name, fact_producer AS producer, fact_external_id AS external_id, fact_digest AS digest, commit_token FROM %s",
			lit(name), ident(name+"_raw")))
	}
	if len(facts) == 0 {
		facts = []string{"SELECT NULL::BIGINT AS fact_id, NULL::BIGINT AS tick, NULL::VARCHAR AS table_name, NULL::VARCHAR AS producer, NULL::VARCHAR AS external_id, NULL::VARCHAR AS digest, NULL::VARCHAR AS commit_token WHERE false"}
	}
	out := fmt.Sprintf("CREATE OR REPLACE TEMP VIEW worldfs_facts AS\n  %s;\n", strings.Join(facts, "\n  UNION ALL "))
	from := "(SELECT NULL::BIGINT AS entity_id, NULL::BIGINT AS tick, NULL::VARCHAR AS commit_token, NULL::VARCHAR AS receipt_evaluation_id, NULL::VARCHAR AS receipt_grader_id, NULL::VARCHAR AS receipt_contract, NULL::VARCHAR AS receipt_contract_digest, NULL::VARCHAR AS receipt_subject, NULL::VARCHAR AS receipt_subject_digest, NULL::VARCHAR AS receipt_outcomes WHERE false)"
	if receipts {
		from = ident(engine.ReceiptTableName + "_raw")
	}
	out += "CREATE OR REPLACE TEMP VIEW worldfs_receipts AS SELECT entity_id AS receipt_id, tick, receipt_evaluation_id AS evaluation_id, receipt_grader_id AS grader_id,\n" +
		"  receipt_contract::JSON AS contract, receipt_contract_digest AS contract_digest, receipt_subject::JSON AS subject, receipt_subject_digest AS subject_digest,\n" +
		"  receipt_outcomes::JSON AS outcomes, commit_token FROM " + from + ";\n"
	return out
}
