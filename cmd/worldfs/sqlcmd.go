package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// viewFlags are the flags that pick what the views show: a point (--at,
// --at-time, --token) pins a snapshot, the views showing that one tick;
// --until pins the history up to a point (README, "Time: points and
// ranges").
type viewFlags struct {
	url, run, token, cacheDir, at, atTime, until *string
	world                                        *worldsFlag
	// worlds and lineage pick the worlds of a sweep (sql.Sweep): a glob
	// of ids, or a world and every fork below it.
	worlds, lineage *string
	cacheSize       *int64
}

// worldsFlag is --world, which may be given more than once.
type worldsFlag []string

func (w *worldsFlag) String() string     { return strings.Join(*w, ",") }
func (w *worldsFlag) Set(v string) error { *w = append(*w, v); return nil }

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "worldfs")
	}
	return filepath.Join(os.TempDir(), "worldfs-cache")
}

// openCache opens the disk cache in dir and names the bucket at url in it.
func openCache(url, dir string, size int64) (*cache.Disk, string, error) {
	c, err := cache.Open(dir, cache.Options{MaxBytes: size})
	if err != nil {
		return nil, "", fmt.Errorf("cache %s: %w", dir, err)
	}
	return c, bucketID(url), nil
}

// bucketID names the bucket at url in the cache.
func bucketID(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

func worldsVar(fs *flag.FlagSet) *worldsFlag {
	w := &worldsFlag{}
	fs.Var(w, "world", "world to query (required); give it again for several worlds in one session: each world's views in a schema named after it, the first's also unqualified")
	return w
}

func addViewFlags(fs *flag.FlagSet) *viewFlags {
	v := addSessionFlags(fs)
	v.world = worldsVar(fs)
	v.worlds = fs.String("worlds", "", "a sweep: every world whose id matches this `GLOB` ('sweep-*'), read as one: each view and macro (particle, particle_at, _diff, _changes, _as_of) "+
		"over them all with a world column first, each world under its own visibility and lineage, joined by column name (a column a world lacks is NULL); "+
		"worldfs_worlds lists them (parent, fork tick, head tick, created, meta, tags); each world's own views in a schema named after it")
	v.lineage = fs.String("lineage", "", "a sweep of `WORLD` and every fork below it (its forks, theirs, …), read as one as --worlds reads them")
	v.at = fs.String("at", "", "the world at one `POINT`: the views show that tick alone (a snapshot). POINT is "+index.MomentForms+"; "+localZone())
	v.atTime = fs.String("at-time", "", "the world at a `TIME`: the views show the newest tick published at or before it alone (a snapshot; before the first tick, none). TIME is "+index.TimeForms+"; "+localZone())
	v.token = fs.String("token", "", "the world at the tick this commit `token` published: the views show that tick alone (a snapshot)")
	v.until = fs.String("until", "", "the history up to a `POINT`: the views show every tick up to it (what --at and --at-time pinned before they pinned one tick); POINT as --at takes it")
	return v
}

// localZone says which time zone the times typed without one are read
// in.
func localZone() string {
	name, _ := time.Now().Zone()
	return fmt.Sprintf("a time without a zone is local: %s (%s, from $TZ or the system)", name, time.Now().Format("-07:00"))
}

// addSessionFlags adds the flags of a session's bucket, run and cache;
// its views are of the head, of worlds named otherwise.
func addSessionFlags(fs *flag.FlagSet) *viewFlags {
	none, noneW, noneL := "", "", ""
	return &viewFlags{
		url:       bucketFlag(fs),
		world:     &worldsFlag{},
		worlds:    &noneW,
		lineage:   &noneL,
		run:       fs.String("run", index.DefaultRun, "run"),
		at:        &none,
		token:     &none,
		atTime:    &none,
		until:     &none,
		cacheDir:  fs.String("cache-dir", defaultCacheDir(), "where copies of a remote bucket's fragments, and the views' fragment lists, are kept"),
		cacheSize: sizeFlag(fs, "cache-size", cache.DefaultMaxBytes, "how much the fragment cache may hold"),
	}
}

// build returns the views, the directories no output may go into (the
// cache, and a local bucket's root), and done, which closes the bucket
// once the caller has used the views: views reused from a kept script
// read the catalog if a query reads worldfs_manifests.
func (v *viewFlags) build(ctx context.Context) (s *wsql.Script, refuse []string, done func(), err error) {
	switch {
	case *v.worlds != "" && *v.lineage != "":
		return nil, nil, nil, usagef("--worlds and --lineage each pick the worlds of a sweep; give one")
	case (*v.worlds != "" || *v.lineage != "") && len(*v.world) > 0:
		return nil, nil, nil, usagef("--world names worlds one schema each; --worlds and --lineage read a sweep as one: give one of them")
	case *v.worlds != "":
		return v.session(ctx, func(b bucket.Bucket) ([]string, error) { return index.MatchWorlds(ctx, b, *v.worlds) }, true)
	case *v.lineage != "":
		if err := index.ValidateWorldID(*v.lineage); err != nil {
			return nil, nil, nil, usagef("--lineage: %v", err)
		}
		return v.session(ctx, func(b bucket.Bucket) ([]string, error) { return index.LineageWorlds(ctx, b, *v.lineage) }, true)
	}
	return v.buildWorlds(ctx, *v.world)
}

// options are the views' options the flags give for worlds, refusing
// pins that do not go together.
func (v *viewFlags) options(worlds []string) (wsql.Options, error) {
	var given []string
	for _, f := range []struct{ name, value string }{{"at", *v.at}, {"at-time", *v.atTime}, {"token", *v.token}, {"until", *v.until}} {
		if f.value != "" {
			given = append(given, "--"+f.name)
		}
	}
	if len(given) > 1 {
		return wsql.Options{}, usagef("%s each pin the views; give one (one tick: --at, --at-time or --token; the history up to a point: --until)", strings.Join(given, " and "))
	}
	// The views' fragment lists live beside the fragment cache; a script
	// printed by worldfs views names its list there.
	opts := wsql.Options{Run: *v.run, Dir: filepath.Join(*v.cacheDir, "views")}
	now := time.Now()
	var m index.Moment
	var err error
	switch {
	case *v.at != "":
		m, err = index.ParseMoment(*v.at, now)
		opts.Only = true
		err = flagErr("at", err)
	case *v.atTime != "":
		var t time.Time
		t, err = index.ParseInstant(*v.atTime, now)
		m = index.Moment{Text: *v.atTime, Time: &t}
		opts.Only = true
		err = flagErr("at-time", err)
		if _, perr := index.ParseMoment(*v.atTime, now); err != nil && perr == nil {
			err = usagef("--at-time takes a time (%s); %q is a tick or a token: pin it with --at %s", index.TimeForms, *v.atTime, *v.atTime)
		}
	case *v.token != "":
		m = index.Moment{Text: *v.token, Token: *v.token}
		opts.Only = true
	case *v.until != "":
		m, err = index.ParseMoment(*v.until, now)
		err = flagErr("until", err)
	default:
		return opts, nil
	}
	if err != nil {
		return wsql.Options{}, err
	}
	if m.Token != "" && len(worlds) > 1 {
		return wsql.Options{}, usagef("a commit token names a commit of one world; with several worlds pin them with a tick or a time")
	}
	opts.At = &m
	return opts, nil
}

// flagErr is err, a bad value of --name, as a usage error naming the
// flag (nil if err is).
func flagErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return usagef("--%s: %v", name, err)
}

// buildWorlds is build of the views of worlds, one session.
func (v *viewFlags) buildWorlds(ctx context.Context, worlds []string) (s *wsql.Script, refuse []string, done func(), err error) {
	if len(worlds) == 0 {
		return nil, nil, nil, usagef("--world is required (or --worlds GLOB, --lineage W for a sweep)")
	}
	return v.session(ctx, func(bucket.Bucket) ([]string, error) { return worlds, nil }, false)
}

// pickError is the command's error for a failure to pick the worlds of
// --worlds or --lineage: a malformed glob is a usage error, no world
// matching (or no such world) is not found.
func pickError(err error) error {
	switch {
	case errors.Is(err, path.ErrBadPattern):
		return usagef("--worlds: %v", err)
	case errors.Is(err, index.ErrNotFound):
		return notFoundError{err.Error()}
	}
	return err
}

// session builds the views of the worlds pick names in the bucket: one
// session of a schema each (Join), or a sweep (Sweep).
func (v *viewFlags) session(ctx context.Context, pick func(bucket.Bucket) ([]string, error), sweep bool) (s *wsql.Script, refuse []string, done func(), err error) {
	refuse = []string{*v.cacheDir}
	b, err := openExisting(ctx, *v.url)
	if err != nil {
		return nil, nil, nil, err
	}
	worlds, err := pick(b)
	if err != nil {
		b.Close()
		return nil, nil, nil, pickError(err)
	}
	opts, err := v.options(worlds)
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	var mem *cache.Memory
	closeAll := func() {
		if mem != nil {
			mem.Close()
		}
		b.Close()
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if !sweep { // a sweep's worlds are the bucket's, listed
		for _, w := range worlds {
			if err := requireWorld(ctx, b, w); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	// The cache also keeps the scripts built, which a later process
	// reuses while the catalog is unchanged.
	c, id, err := openCache(*v.url, *v.cacheDir, *v.cacheSize)
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Reuse = c
	rb := b
	if lb, isLocal := bucket.As[bucket.Local](b); isLocal {
		refuse = append(refuse, lb.Root())
	} else {
		opts.Cache, opts.BucketID = c, id
		// Catalog objects (slots, shards, table descriptions) are small,
		// immutable and read often: keep them in memory too.
		if mem, err = cache.NewMemory(256 << 20); err != nil {
			return nil, nil, nil, err
		}
		rb = mem.Wrap(b)
	}
	if sweep {
		s, err = wsql.BuildSweep(ctx, rb, worlds, opts)
		return s, refuse, closeAll, err
	}
	var scripts []*wsql.Script
	for _, w := range worlds {
		ws, err := wsql.Build(ctx, rb, w, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		scripts = append(scripts, ws)
	}
	s, err = wsql.Join(scripts...)
	return s, refuse, closeAll, err
}

// sqlCmd is "worldfs sql".
func sqlCmd() command {
	var vf *viewFlags
	var format, outFile *string
	return command{
		name: "sql",
		summary: "run a read-only SQL query over a world's visible rows (DuckDB); views per table, _raw, _at(tick), _diff(a, b), _changes(from, to), _as_of(instant), " +
			"worldfs_ticks, worldfs_manifests, worldfs_lineage, worldfs_facts, worldfs_receipts; several --world in one session (worldfs_diff across them); --out FILE writes the result to a file",
		usage: "QUERY",
		example: `worldfs sql --bucket ./worldfs-data --world w1 "SELECT tick, count(*) FROM particle GROUP BY tick ORDER BY tick"` + "\n" +
			`  worldfs sql --bucket ./worldfs-data --world w1 --out /tmp/tick7.parquet "FROM particle_at(7)"` + "\n" +
			`  worldfs sql --bucket ./worldfs-data --world w1 --world w1-fork "FROM worldfs_diff('particle', 'w1', 170, 'w1-fork', 170)"`,
		flags: func(fs *flag.FlagSet) {
			vf = addViewFlags(fs)
			format = fs.String("format", "table", "output format: table, csv or json")
			outFile = fs.String("out", "", "write the result to this file instead, in the format its extension names: .csv, .json, .jsonl (.ndjson) or .parquet "+
				"(replaced if it exists; never inside the bucket or the cache)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 1 {
				return usagef("sql takes one QUERY (quote it)")
			}
			if *format != wsql.FormatTable && *format != wsql.FormatCSV && *format != wsql.FormatJSON {
				return usagef("--format is table, csv or json, not %q", *format)
			}
			if *outFile != "" {
				if isSet(fs, "format") {
					return usagef("--out takes its format from the file's extension; drop --format")
				}
				if _, ok := wsql.ExportFormats[strings.ToLower(filepath.Ext(*outFile))]; !ok {
					return usagef("--out %s: the format comes from the extension: .csv, .json, .jsonl (.ndjson) or .parquet", *outFile)
				}
			}
			s, refuse, done, err := vf.build(ctx)
			if err != nil {
				return err
			}
			defer done()
			if *outFile != "" {
				return wsql.Export(ctx, s, args[0], *outFile, refuse, stderrOf(ctx))
			}
			db, err := wsql.Open(ctx, s)
			if err != nil {
				return err
			}
			defer db.Close()
			return wsql.Run(ctx, db, args[0], *format, out, stderrOf(ctx))
		},
	}
}

// viewsCmd is "worldfs views".
func viewsCmd() command {
	var vf2 *viewFlags
	return command{
		name:    "views",
		summary: "print a world's view definitions as a SQL script for the DuckDB shell or Python's duckdb (it names files: run after gc collected them, it says so; print it again)",
		example: "worldfs views --bucket ./worldfs-data --world w1 > views.sql && duckdb -init views.sql",
		flags:   func(fs *flag.FlagSet) { vf2 = addViewFlags(fs) },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("views takes no arguments")
			}
			s, _, done, err := vf2.build(ctx)
			if err != nil {
				return err
			}
			defer done()
			text, err := s.SQL()
			if err != nil {
				return err
			}
			_, err = io.WriteString(out, text)
			if err == nil && len(s.Views) > 0 {
				_, err = fmt.Fprintf(out, "-- views: %s\n", strings.Join(s.Views, ", "))
			}
			return err
		},
	}
}

// parsePointFlag parses the point flag name takes (index.ParseMoment);
// nil when it is not given.
func parsePointFlag(name, text string) (*index.Moment, error) {
	if text == "" {
		return nil, nil
	}
	m, err := index.ParseMoment(text, time.Now())
	if err != nil {
		return nil, flagErr(name, err)
	}
	return &m, nil
}

// tickOf resolves m among the visible ticks of (world, run) in b, for a
// command that takes a tick: a point before the first tick names none.
func tickOf(ctx context.Context, b bucket.Bucket, world, run string, m index.Moment) (int64, error) {
	v, err := index.OpenView(ctx, index.LoadFrom(b), world, run)
	if err != nil {
		return 0, err
	}
	t, ok, err := m.InView(v, math.MaxInt64)
	if err != nil {
		return 0, fmt.Errorf("world %s run %s: %w", world, run, err)
	}
	if !ok {
		return 0, notFoundError{fmt.Sprintf("%s: no tick of world %s run %s was published at or before %s", m.Text, world, run, m.Time.Format(time.RFC3339))}
	}
	return t, nil
}
