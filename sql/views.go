package sql

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// Token pins the views to the tick that commit token published.
	Token string
	// Cache holds local copies of a remote bucket's fragments (required
	// for buckets that cannot be read in place); BucketID names the bucket
	// in it.
	Cache    *cache.Disk
	BucketID string
}

// ErrNotFound: the world, run, tick or token named does not exist.
var ErrNotFound = errors.New("not found")

// fragment is one file of a table's visible history.
type fragment struct {
	world, table string
	path         string // a file path DuckDB can read
	tick         int64
	token        string
	filtered     bool // rows must match (tick, token); false: every row (unfiltered or legacy history)
}

// Script is the SQL that defines a world's views.
type Script struct {
	World, Run string
	AtTick     int64 // math.MaxInt64: the head
	SQL        string
	Views      []string // the per-table component views, by name
}

// Build reads the catalog (and, for forks, every ancestor's) and returns the
// view definitions. A corrupt catalog fails closed: no views.
func Build(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Script, error) {
	path, err := pather(b, opts)
	if err != nil {
		return nil, err
	}
	if opts.Run == "" {
		opts.Run = "main"
	}
	own, _, err := index.Load(ctx, b, world)
	if err != nil {
		return nil, err
	}
	if _, merr := index.ReadMarker(ctx, b, world); !own.World.Created && errors.Is(merr, bucket.ErrNotExist) && !hasData(ctx, b, world) {
		return nil, fmt.Errorf("world %q: %w", world, ErrNotFound)
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
	segs, err := index.Lineage(ctx, index.LoadFrom(b), world, opts.Run)
	if err != nil {
		return nil, err
	}
	var frags []fragment
	infos := map[string]engine.TableInfo{} // by table id
	var manifests, lineage []string
	for i, seg := range segs {
		limit := min(seg.UpTo, upTo)
		if seg.Mode == index.Unfiltered {
			fs, err := listData(ctx, b, path, seg.World, seg.Run)
			if err != nil {
				return nil, err
			}
			frags = append(frags, fs...)
		} else {
			var ferr error
			seg.State.Ticks(seg.Run, math.MinInt64, func(t *index.Tick) bool {
				if t.Tick > limit {
					return false
				}
				for _, tf := range t.Tables {
					for _, f := range tf.Fragments {
						p, err := path(ctx, f.Path)
						if err != nil {
							ferr = err
							return false
						}
						frags = append(frags, fragment{seg.World, tf.Table, p, t.Tick, t.CommitToken, true})
						manifests = append(manifests, fmt.Sprintf("(%s, %s, %d, %s, %d, %s, %s, %d)",
							lit(seg.World), lit(seg.Run), t.Tick, lit(t.CommitToken), t.WriterEpoch, lit(tf.Table), lit(f.Path), f.Rows))
					}
				}
				return true
			})
			if ferr != nil {
				return nil, ferr
			}
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
	for _, f := range frags {
		key := f.world + "/" + f.table
		if _, ok := infos[key]; ok {
			continue
		}
		ti, err := engine.ReadTableInfo(ctx, b, f.world, f.table)
		if err != nil {
			return nil, fmt.Errorf("world %s: table %s has no description: %w", f.world, f.table, err)
		}
		infos[key] = ti
	}
	return render(world, opts.Run, upTo, frags, infos, manifests, lineage), nil
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
		out = append(out, fragment{world: world, table: parts[3], path: p})
	}
	return out, nil
}

// listLegacy lists a segment's legacy (v0.2) table fragments: always
// visible epoch-0 history, read through the legacy-name fallback.
func listLegacy(ctx context.Context, b bucket.Bucket, path pathFunc, world, run string, upTo int64) ([]fragment, error) {
	var out []fragment
	for a, err := range b.List(ctx, "data/"+world+"/"+run+"/", "") {
		if err != nil {
			return nil, err
		}
		parts := strings.Split(a.Name, "/")
		if len(parts) != 6 || parts[4] != "v0.2" {
			continue
		}
		p, err := path(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, fragment{world: world, table: parts[3], path: p, tick: upTo})
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
// projects away the commit columns.
func render(world, run string, upTo int64, frags []fragment, infos map[string]engine.TableInfo, manifests, lineage []string) *Script {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("-- worldfs views of world %s, run %s", world, run)
	if upTo != math.MaxInt64 {
		w(", as of tick %d", upTo)
	}
	w(".\n-- Generated from the catalog; visible rows only (seed 000 §4).\n\n")

	byName := map[string][]fragment{}
	names := []string{}
	for _, f := range frags {
		name := infos[f.world+"/"+f.table].Name
		if _, ok := byName[name]; !ok {
			names = append(names, name)
		}
		byName[name] = append(byName[name], f)
	}
	slices.Sort(names)
	script := &Script{World: world, Run: run, AtTick: upTo}
	for _, name := range names {
		fs := byName[name]
		// The component columns of the table's newest schema.
		var cols []string
		seen := map[string]bool{}
		for _, f := range fs {
			for _, c := range infos[f.world+"/"+f.table].Columns {
				if c.Component != "" && !seen[c.Name] {
					seen[c.Name] = true
					cols = append(cols, ident(c.Name))
				}
			}
		}
		slices.Sort(cols)
		var parts []string
		var tokens []string
		var pairs []string
		for _, group := range groupByTable(fs, infos) {
			ti := infos[group[0].world+"/"+group[0].table]
			legacy := !slices.ContainsFunc(ti.Columns, func(c engine.Column) bool { return c.Name == engine.ColCommitToken })
			var paths []string
			filtered := false
			for _, f := range group {
				paths = append(paths, lit(f.path))
				if f.filtered {
					filtered = true
					tokens = append(tokens, lit(f.token))
					pairs = append(pairs, fmt.Sprintf("(%d, %s)", f.tick, lit(f.token)))
				}
			}
			sel := "entity_id, tick, commit_token, writer_epoch"
			if legacy {
				sel = "entity_id, tick, '' AS commit_token, 0::BIGINT AS writer_epoch"
			}
			for _, c := range cols {
				if hasColumn(ti, strings.Trim(c, `"`)) {
					sel += ", " + c
				} else {
					sel += ", NULL AS " + c
				}
			}
			q := fmt.Sprintf("SELECT %s FROM read_parquet([%s])", sel, strings.Join(paths, ", "))
			switch {
			case legacy:
				q += fmt.Sprintf(" WHERE tick <= %d", upTo)
			case filtered:
				// Rows of crashed attempts or stale writers never match a
				// published (tick, token); the IN list lets DuckDB prune
				// row groups by their token statistics.
				q += " WHERE (commit_token = '' AND writer_epoch = 0) OR (commit_token IN (" + strings.Join(dedupe(tokens), ", ") +
					") AND (tick, commit_token) IN (SELECT tick, commit_token FROM " + ident("worldfs_visible_"+name) + "))"
			}
			parts = append(parts, q)
		}
		if len(pairs) > 0 {
			w("CREATE OR REPLACE TEMP TABLE %s AS SELECT * FROM (VALUES %s) v(tick, commit_token);\n",
				ident("worldfs_visible_"+name), strings.Join(dedupe(pairs), ", "))
		} else {
			w("CREATE OR REPLACE TEMP TABLE %s (tick BIGINT, commit_token VARCHAR);\n", ident("worldfs_visible_"+name))
		}
		w("CREATE OR REPLACE TEMP VIEW %s AS\n  %s;\n", ident(name+"_raw"), strings.Join(parts, "\n  UNION ALL BY NAME "))
		w("CREATE OR REPLACE TEMP VIEW %s AS SELECT entity_id, tick, %s FROM %s;\n", ident(name), strings.Join(cols, ", "), ident(name+"_raw"))
		w("CREATE OR REPLACE TEMP MACRO %s(t) AS TABLE SELECT * FROM %s WHERE tick = t;\n\n", ident(name+"_at"), ident(name))
		script.Views = append(script.Views, name)
	}
	if len(manifests) > 0 {
		w("CREATE OR REPLACE TEMP VIEW worldfs_manifests AS SELECT * FROM (VALUES %s)\n  m(world, run, tick, commit_token, writer_epoch, table_id, path, rows);\n", strings.Join(manifests, ", "))
	} else {
		w("CREATE OR REPLACE TEMP VIEW worldfs_manifests AS SELECT NULL::VARCHAR AS world, NULL::VARCHAR AS run, NULL::BIGINT AS tick, NULL::VARCHAR AS commit_token, NULL::BIGINT AS writer_epoch, NULL::VARCHAR AS table_id, NULL::VARCHAR AS path, NULL::BIGINT AS rows WHERE false;\n")
	}
	w("CREATE OR REPLACE TEMP VIEW worldfs_lineage AS SELECT * FROM (VALUES %s) l(segment, world, run, up_to_tick);\n", strings.Join(lineage, ", "))
	script.SQL = sb.String()
	return script
}

func hasColumn(ti engine.TableInfo, name string) bool {
	return slices.ContainsFunc(ti.Columns, func(c engine.Column) bool { return c.Name == name })
}

// groupByTable splits fragments by (world, table id), in first-seen order.
func groupByTable(fs []fragment, infos map[string]engine.TableInfo) [][]fragment {
	idx := map[string]int{}
	var out [][]fragment
	for _, f := range fs {
		k := f.world + "/" + f.table
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], f)
	}
	return out
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
