package iceberg_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

func ctxT(t *testing.T) context.Context { return enginetest.Context(t) }

// history builds world p and its fork f: facts (one an orphan under a
// pending claim), a crashed attempt's fragment, a stale writer's late
// rows, a receipt, and a fork at tick 100.
func history(t *testing.T, b bucket.Bucket) {
	ctx := ctxT(t)
	a := enginetest.World(t, b, "p", 40)
	defer a.Close()
	if _, err := a.Ingest(ctx, enginetest.Reading("a", 1.5)); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, a, 150)
	enginetest.Orphan(t, b, "p", a.Catalog(), enginetest.Reading("c", 9))
	data, err := engine.EncodeFragment(a.Frame("particle"), engine.Stamp{Tick: 100, CommitToken: "crashed", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, index.FragmentPath("p", "main", particles.Tables()[0].ID, "crashed", 0), data); err != nil {
		t.Fatal(err)
	}
	bw := enginetest.Resume(t, b, "p", 151)
	defer bw.Close()
	particles.Schedule(a)
	if _, err := a.Step(ctx); err == nil {
		t.Fatal("the stale writer published")
	}
	s, _ := bw.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", 151, engine.Selector{})
	if _, err := bw.Evaluate(ctx, engine.Evaluation{ID: "ev", Subject: sub, Contract: engine.GraderContract{GraderID: "g", Implementation: "1"}},
		func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "c", Verdict: engine.Pass}}, nil
		}); err != nil {
		t.Fatal(err)
	}
	f := enginetest.Fork(t, b, "p", "f", 100, 140)
	f.Close()
}

func compact(t *testing.T, b bucket.Bucket, world string) {
	t.Helper()
	ctx := ctxT(t)
	cat, err := index.Open(ctx, b, world, index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10, MinFacts: 1})
	if err != nil || res.Windows == 0 {
		t.Fatalf("compaction of %s: %+v, %v", world, res, err)
	}
	if _, err = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Run: engine.EvaluationRun, MinFacts: 1}); err != nil {
		t.Fatal(err)
	}
}

// viewRows is every visible row of each table the views of world show
// (pinned to at, if set), one line per row, sorted.
func viewRows(t *testing.T, b bucket.Bucket, world string, at *int64, c *cache.Disk) map[string][]string {
	t.Helper()
	opts := wsql.Options{AtTick: at, Dir: t.TempDir()}
	if c != nil {
		opts.Cache, opts.BucketID = c, "test-bucket"
	}
	s, err := wsql.Build(ctxT(t), b, world, opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]string{}
	for _, name := range s.Views {
		out[name] = query(t, db, fmt.Sprintf("SELECT * FROM %q", name+"_raw"))
	}
	return out
}

func query(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, line(m))
	}
	slices.Sort(out)
	return out
}

// line prints a row's columns by name, so two readers' rows compare.
func line(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%v ", k, m[k])
	}
	return sb.String()
}

// bucketIO lets iceberg-go read a bucket it has no client for (GCS
// through the fake server): URIs under base are the bucket's objects.
type bucketIO struct {
	b    bucket.Bucket
	base string
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f memFile) Stat() (iofs.FileInfo, error) { return f, nil }
func (f memFile) Close() error                 { return nil }
func (f memFile) Name() string                 { return f.name }
func (f memFile) Size() int64                  { return f.size }
func (f memFile) Mode() iofs.FileMode          { return 0o444 }
func (f memFile) ModTime() time.Time           { return time.Time{} }
func (f memFile) IsDir() bool                  { return false }
func (f memFile) Sys() any                     { return nil }

func (o bucketIO) Open(name string) (icebergio.File, error) {
	obj, ok := strings.CutPrefix(name, o.base)
	if !ok {
		return nil, &iofs.PathError{Op: "open", Path: name, Err: iofs.ErrNotExist}
	}
	data, _, err := o.b.Get(context.Background(), obj)
	if err != nil {
		return nil, &iofs.PathError{Op: "open", Path: name, Err: err}
	}
	return memFile{bytes.NewReader(data), name, int64(len(data))}, nil
}

func (o bucketIO) Remove(name string) error { return iofs.ErrPermission }

// scanRows reads an exported table with iceberg-go's own scan (of
// snapshot id, or the current one if 0), one line per row, sorted.
func scanRows(t *testing.T, fsys icebergio.IO, metadata string, id int64) []string {
	t.Helper()
	ctx := ctxT(t)
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "t"}, metadata,
		func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
	if err != nil {
		t.Fatalf("iceberg-go cannot open %s: %v", metadata, err)
	}
	var opts []table.ScanOption
	if id != 0 {
		opts = append(opts, table.WithSnapshotID(id))
	}
	at, err := tbl.Scan(opts...).ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("iceberg-go cannot scan %s: %v", metadata, err)
	}
	defer at.Release()
	var out []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			m := map[string]any{}
			for c, col := range rec.Columns() {
				m[rec.ColumnName(c)] = value(t, col, r)
			}
			out = append(out, line(m))
		}
	}
	slices.Sort(out)
	return out
}

func value(t *testing.T, col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	}
	t.Fatalf("unexpected Arrow column %T", col)
	return nil
}

// same checks that the export res of world (pinned to at) holds exactly
// the rows its views show, table by table, read with iceberg-go.
func same(t *testing.T, b bucket.Bucket, fsys icebergio.IO, res *iceberg.Result, at *int64, c *cache.Disk) {
	t.Helper()
	want := viewRows(t, b, res.World, at, c)
	got := map[string]bool{}
	for _, tr := range res.Tables {
		got[tr.Table] = true
		rows := scanRows(t, fsys, tr.Metadata, 0)
		if !slices.Equal(rows, want[tr.Table]) {
			t.Fatalf("world %s table %s: the export reads %d rows, the views show %d:\n%s", res.World, tr.Table, len(rows), len(want[tr.Table]), diff(want[tr.Table], rows))
		}
	}
	for name, rows := range want {
		if !got[name] && len(rows) > 0 {
			t.Fatalf("world %s: table %s (%d rows) was not exported", res.World, name, len(rows))
		}
	}
}

func diff(want, got []string) string {
	var sb strings.Builder
	n := 0
	for _, r := range got {
		if !slices.Contains(want, r) && n < 5 {
			fmt.Fprintf(&sb, "  extra:   %s\n", r)
			n++
		}
	}
	for _, r := range want {
		if !slices.Contains(got, r) && n < 10 {
			fmt.Fprintf(&sb, "  missing: %s\n", r)
			n++
		}
	}
	return sb.String()
}

func export(t *testing.T, b bucket.Bucket, opts iceberg.Options) *iceberg.Result {
	t.Helper()
	res, err := iceberg.Export(ctxT(t), b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func table_(res *iceberg.Result, name string) iceberg.TableResult {
	for _, tr := range res.Tables {
		if tr.Table == name {
			return tr
		}
	}
	return iceberg.TableResult{}
}

// The export of each world, pinned or at the head, before and after
// compaction, and after more ticks, reads (with iceberg-go) exactly as the
// views: crashed attempts, a stale writer's rows and an orphan fact stay
// out, the fork sees its parent up to the fork point, compaction becomes
// a replace, more ticks an append.
func TestExportReadsAsTheViews(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	history(t, b)
	fsys := icebergio.LocalFS{}
	at := int64(90)
	first := map[string]*iceberg.Result{}
	for _, w := range []string{"p", "f"} {
		first[w] = export(t, b, iceberg.Options{World: w})
		same(t, b, fsys, first[w], nil, nil)
		pinned := export(t, b, iceberg.Options{World: w, AtTick: &at, Prefix: "pinned/" + w})
		same(t, b, fsys, pinned, &at, nil)
		if again := export(t, b, iceberg.Options{World: w}); table_(again, "particle").Operation != "" || table_(again, "particle").Version != 1 {
			t.Fatalf("world %s: a second export of the same head wrote %+v", w, table_(again, "particle"))
		}
	}
	for _, w := range []string{"p", "f"} {
		compact(t, b, w)
	}
	for _, w := range []string{"p", "f"} {
		res := export(t, b, iceberg.Options{World: w})
		same(t, b, fsys, res, nil, nil)
		if p := table_(res, "particle"); p.Operation != "replace" || p.Removed == 0 || p.Version != 2 {
			t.Fatalf("world %s: the export after compaction: %+v; want a replace", w, p)
		}
		// The first snapshot still reads as it did.
		if rows := scanRows(t, fsys, table_(res, "particle").Metadata, table_(first[w], "particle").SnapshotID); len(rows) != int(table_(first[w], "particle").Rows) {
			t.Fatalf("world %s: the first snapshot reads %d rows after compaction, held %d", w, len(rows), table_(first[w], "particle").Rows)
		}
	}
	// The fork's parent is compacted past the fork point: its kept rows
	// are a filtered copy under the export prefix.
	if res := export(t, b, iceberg.Options{World: "f", AtTick: &at, Prefix: "pinned/f"}); table_(res, "particle").Rewritten == 0 {
		t.Fatalf("the fork's export rewrote nothing: %+v", table_(res, "particle"))
	} else {
		same(t, b, fsys, res, &at, nil)
	}
	w := enginetest.Resume(t, b, "p", 200)
	w.Close()
	res := export(t, b, iceberg.Options{World: "p"})
	same(t, b, fsys, res, nil, nil)
	if p := table_(res, "particle"); p.Operation != "append" || p.Removed != 0 || p.Added != 49 {
		t.Fatalf("the export of 49 more ticks: %+v; want an append of their 49 files", p)
	}
}

// childEnv names the bucket directory a child process exports from.
const childEnv = "WORLDFS_TEST_EXPORT_CHILD"

// TestMain lets a test run an export in a child process, to kill it at a
// failpoint.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		b, err := local.Open(dir)
		if err == nil {
			_, err = iceberg.Export(context.Background(), b, iceberg.Options{World: "w"})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	crashtest.Main(m, map[string]crashtest.Func{"export": exportChild})
}

// exportChild exports world args[1] of the bucket in directory args[0]
// and prints the result as JSON.
func exportChild(args []string) int {
	b, err := local.Open(args[0])
	if err == nil {
		var res *iceberg.Result
		if res, err = iceberg.Export(context.Background(), b, iceberg.Options{World: args[1]}); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(res)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func small(t *testing.T, b bucket.Bucket, last int64) {
	t.Helper()
	w := enginetest.World(t, b, "w", last)
	defer w.Close()
	if _, err := w.Ingest(ctxT(t), enginetest.Reading("a", 2.5)); err != nil {
		t.Fatal(err)
	}
}

func more(t *testing.T, b bucket.Bucket, last int64) {
	t.Helper()
	w := enginetest.Resume(t, b, "w", last)
	defer w.Close()
}

// versions is each exported table's newest metadata version.
func versions(t *testing.T, b bucket.Bucket) map[string]int {
	t.Helper()
	out := map[string]int{}
	for a, err := range b.List(ctxT(t), "export/iceberg/w/main/", "") {
		if err != nil {
			t.Fatal(err)
		}
		rest := strings.TrimPrefix(a.Name, "export/iceberg/w/main/")
		tbl, file, _ := strings.Cut(rest, "/metadata/v")
		if n, ok := strings.CutSuffix(file, ".metadata.json"); ok {
			var v int
			fmt.Sscan(n, &v)
			out[tbl] = max(out[tbl], v)
		}
	}
	return out
}

// An export killed before or after a table's commit leaves every table's
// newest metadata valid, holding the previous export or the new one,
// never a part; the next export completes it.
func TestExportKilledAtFailpoints(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	small(t, b, 20)
	fsys := icebergio.LocalFS{}
	prev := export(t, b, iceberg.Options{World: "w"})
	at := prev.Tick
	more(t, b, 30)
	// Tables export in name order: debris and reading do not change, so
	// the first kill comes after emitter's commit, before particle's; the
	// second right after particle's, whose retry finds the manifests the
	// first child wrote.
	wantVersions := []map[string]int{{"debris": 1, "emitter": 2, "particle": 1, "reading": 1}, {"debris": 1, "emitter": 2, "particle": 2, "reading": 1}}
	for i, point := range []string{iceberg.FailpointWritten + "@2", iceberg.FailpointCommitted + "@1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, "WORLDFS_FAILPOINT="+point)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the export was not killed at %s: %v\n%s", point, err, out)
		}
		vs := versions(t, b)
		if !maps.Equal(vs, wantVersions[i]) {
			t.Fatalf("versions after a kill at %s: %v, want %v", point, vs, wantVersions[i])
		}
		// Every table reads as one of the two states, through its newest
		// metadata version.
		for name, v := range vs {
			m := fmt.Sprintf("file://%s/export/iceberg/w/main/%s/metadata/v%d.metadata.json", dir, name, v)
			pin := &at
			if v == 2 {
				pin = nil
			}
			if got, want := scanRows(t, fsys, m, 0), viewRows(t, b, "w", pin, nil)[name]; !slices.Equal(got, want) {
				t.Fatalf("after a kill at %s, table %s v%d reads %d rows, want %d", point, name, v, len(got), len(want))
			}
		}
	}
	res := export(t, b, iceberg.Options{World: "w"})
	same(t, b, fsys, res, nil, nil)
	if vs := versions(t, b); !maps.Equal(vs, wantVersions[1]) {
		t.Fatalf("versions after the export completed: %v, want %v", vs, wantVersions[1])
	}
}

// An export of a pinned tick is deterministic: the same history gives
// the same metadata bytes, and exporting it again writes nothing.
func TestExportIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	small(t, b, 12)
	copyDir := t.TempDir()
	if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	c, _ := local.Open(copyDir)
	at := int64(10)
	opts := iceberg.Options{World: "w", AtTick: &at, Base: "file:///worlds/"}
	r1, r2 := export(t, b, opts), export(t, c, opts)
	for i, tr := range r1.Tables {
		name := strings.TrimPrefix(tr.Metadata, "file:///worlds/")
		d1, _, err1 := b.Get(ctxT(t), name)
		d2, _, err2 := c.Get(ctxT(t), name)
		if err1 != nil || err2 != nil || !bytes.Equal(d1, d2) || tr.SnapshotID != r2.Tables[i].SnapshotID {
			t.Fatalf("table %s: two exports of tick %d differ (%v, %v)", tr.Table, at, err1, err2)
		}
	}
	if again := export(t, b, opts); again.Tables[0].Operation != "" || again.Tables[0].Version != 1 {
		t.Fatalf("exporting tick %d again wrote %+v", at, again.Tables[0])
	}
}

// Collection keeps every file a live export snapshot names, even replaced
// by compaction past the retention, by the reference list of the
// export's latest version, which names exactly what the snapshots'
// manifests name; once the snapshot expires (a new version, a smaller
// list), what only it named goes. A reference list damaged, missing
// (written by an older worldfs) or not readable at all stops collection
// of the world's data, saying why; optimize's upgrade, or an export
// again, writes it.
func TestCollectionKeepsExportedFiles(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	small(t, b, 100)
	fsys := icebergio.LocalFS{}
	first := export(t, b, iceberg.Options{World: "w"})
	firstRows := scanRows(t, fsys, table_(first, "particle").Metadata, 0)
	compact(t, b, "w")
	second := export(t, b, iceberg.Options{World: "w"})
	if table_(second, "particle").Operation != "replace" {
		t.Fatalf("after compaction: %+v", table_(second, "particle"))
	}
	later := func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }
	collect := func() (maintenance.CollectResult, error) {
		t.Helper()
		cat, err := index.Open(ctxT(t), b, "w", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer cat.Close()
		return maintenance.Collect(ctxT(t), b, cat, maintenance.CollectOptions{Now: later})
	}
	gc := func() maintenance.CollectResult {
		t.Helper()
		res, err := collect()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The lists name what the manifests name (iceberg.Refs reads them).
	sameRefs := func(when string) map[string]bool {
		t.Helper()
		refs, err := iceberg.Refs(ctxT(t), b, "w")
		if err != nil || len(refs) == 0 {
			t.Fatalf("%s: refs: %d, %v", when, len(refs), err)
		}
		listed, err := maintenance.ExportReferences(ctxT(t), b, "w")
		if err != nil || !maps.Equal(listed, refs) {
			t.Fatalf("%s: the reference lists name %d objects (%v), the manifests %d", when, len(listed), err, len(refs))
		}
		return refs
	}
	gc()
	if got := scanRows(t, fsys, table_(second, "particle").Metadata, table_(first, "particle").SnapshotID); !slices.Equal(got, firstRows) {
		t.Fatalf("after gc the first export snapshot reads %d rows, held %d", len(got), len(firstRows))
	}
	refs := sameRefs("after the second export")
	for name := range refs {
		if _, err := b.Stat(ctxT(t), name); err != nil {
			t.Fatalf("gc deleted %s, which an export snapshot names: %v", name, err)
		}
	}
	// Expiring the first snapshot writes a version with a smaller list.
	ex, err := iceberg.Expire(ctxT(t), b, iceberg.Options{World: "w"}, later())
	if err != nil || len(ex) == 0 || ex[0].Removed != 1 {
		t.Fatalf("expire: %+v, %v", ex, err)
	}
	if after := sameRefs("after expiry"); len(after) >= len(refs) {
		t.Fatalf("after expiry the exports reference %d objects, before %d", len(after), len(refs))
	}
	// The particle table's latest list, damaged: collection deletes
	// nothing of the world's data, and says which export and what to do.
	loc := index.IcebergTable(iceberg.DefaultPrefix("w", index.DefaultRun), "particle")
	v, err := frame.LatestExportVersion(ctxT(t), b, loc)
	if err != nil {
		t.Fatal(err)
	}
	list, err := frame.ReadExportRefs(ctxT(t), b, loc, v)
	if err != nil {
		t.Fatal(err)
	}
	good, _, _ := b.Get(ctxT(t), list.Name())
	damaged := slices.Clone(good)
	damaged[len(damaged)/2] ^= 1
	buckettest.Replace(t, b, list.Name(), damaged)
	before := dataObjects(t, b, "w")
	_, err = collect()
	if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), "export "+loc) || !strings.Contains(err.Error(), "worldfs optimize --world w") {
		t.Fatalf("collection with a damaged reference list: %v; want it to fail closed, naming the export and optimize", err)
	}
	if after := dataObjects(t, b, "w"); !slices.Equal(after, before) {
		t.Fatalf("collection with a damaged reference list deleted %d data objects", len(before)-len(after))
	}
	// optimize's upgrade writes it again.
	if up, err := iceberg.WriteReferenceLists(ctxT(t), b, "w", false); err != nil || up.Damaged != 1 || up.Written != 1 {
		t.Fatalf("writing the damaged list again: %+v, %v", up, err)
	}
	// Missing (the version written by an older worldfs): the same, and
	// an export again (nothing to export) writes it.
	buckettest.Replace(t, b, list.Name(), nil)
	if _, err = collect(); !errors.Is(err, frame.ErrNoExportRefs) || !strings.Contains(err.Error(), "worldfs export iceberg --world w") {
		t.Fatalf("collection without a reference list: %v; want it to fail closed, naming optimize and export", err)
	}
	if after := dataObjects(t, b, "w"); !slices.Equal(after, before) {
		t.Fatalf("collection without a reference list deleted %d data objects", len(before)-len(after))
	}
	if res := export(t, b, iceberg.Options{World: "w"}); table_(res, "particle").Operation != "" {
		t.Fatalf("the export again: %+v; want nothing exported", table_(res, "particle"))
	}
	sameRefs("after the list was written again")
	if res := gc(); res.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("after the snapshot expired, gc collected no replaced fragment: %+v", res)
	}
	same(t, b, fsys, second, nil, nil)
	// A version collection cannot read a list of stops it.
	if _, err := b.Create(ctxT(t), "export/iceberg/w/main/particle/metadata/v9.metadata.json", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(); !errors.Is(err, frame.ErrNoExportRefs) {
		t.Fatalf("collection with export metadata it cannot read a list of: %v; want it to fail closed", err)
	}
}

// dataObjects lists the names of world's data objects.
func dataObjects(t *testing.T, b bucket.Bucket, world string) []string {
	t.Helper()
	var out []string
	for a, err := range b.List(ctxT(t), index.DataPrefix(world), "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Name)
	}
	return out
}

// The same on GCS (the real client against the fake server): gs:// URIs
// in the metadata, read back with iceberg-go through the bucket.
func TestExportOnGCS(t *testing.T) {
	gcstest.Start(t, "worlds")
	b, err := bucketurl.Open(context.Background(), "gs://worlds/prod")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	small(t, b, 15)
	res := export(t, b, iceberg.Options{World: "w"})
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Tables {
		if !strings.HasPrefix(tr.Metadata, "gs://worlds/prod/export/iceberg/w/main/") {
			t.Fatalf("metadata at %s", tr.Metadata)
		}
	}
	fsys := bucketIO{b: b, base: "gs://worlds/prod/"}
	same(t, b, fsys, res, nil, c)
	data, _, err := b.Get(ctxT(t), strings.TrimPrefix(table_(res, "particle").Metadata, "gs://worlds/prod/"))
	if err != nil || !bytes.Contains(data, []byte(`"gs://worlds/prod/export/iceberg/w/main/particle/metadata/snap-`)) {
		t.Fatalf("the metadata does not name its manifest list by gs:// URI: %v", err)
	}
	more(t, b, 25)
	res = export(t, b, iceberg.Options{World: "w"})
	same(t, b, fsys, res, nil, c)
}

// Following keeps the export at the head: after more ticks, an export of
// the new head follows from the change feed.
func TestFollowExportsNewTicks(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	small(t, b, 5)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	exports := make(chan *iceberg.Result, 16)
	done := make(chan error, 1)
	go func() {
		done <- iceberg.Follow(ctx, b, iceberg.Options{World: "w"}, time.Millisecond, func(r *iceberg.Result) { exports <- r })
	}()
	if r := <-exports; r.Tick != 5 {
		t.Fatalf("the first export is of tick %d, want 5", r.Tick)
	}
	more(t, b, 9)
	for followed := false; !followed; {
		select {
		case r := <-exports:
			if followed = r.Tick == 9; followed {
				same(t, b, icebergio.LocalFS{}, r, nil, nil)
			}
		case err := <-done:
			t.Fatalf("following ended before tick 9 was exported: %v", err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A file a manifest names that the catalog does not prove (not stored
// under the tick's own token) is row-checked: the rows published under
// the tick's token are exported, a crashed attempt's rows in the same
// file are not; a file of foreign rows only is left out.
func TestUnprovenFilesAreFiltered(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	small(t, b, 5)
	mixedTick(t, b)
	res := export(t, b, iceberg.Options{World: "w"})
	same(t, b, icebergio.LocalFS{}, res, nil, nil)
	if p := table_(res, "particle"); p.Rewritten != 1 {
		t.Fatalf("particle: %+v; want the mixed file rewritten with its visible rows", p)
	}
}

// mixedTick publishes tick 6 of world w (5 ticks) with two particle files
// the catalog does not prove: one mixing the tick's rows with a crashed
// attempt's, one of the crashed attempt's rows only. It returns the
// mixed file's name.
func mixedTick(t *testing.T, b bucket.Bucket) string {
	ctx := ctxT(t)
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	s, _ := cat.Exact(ctx)
	var particle *engine.Table
	for _, tb := range particles.Tables() {
		if tb.Name == "particle" {
			particle = tb
		}
	}
	tk, _ := s.Tick("main", 5)
	var frame *engine.Frame
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particle.ID {
			data, _, _ := b.Get(ctx, tf.Fragments[0].Path)
			if frame, err = engine.DecodeFragment(particle, data, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	epoch := s.World.Epoch
	published, _ := engine.EncodeFragment(frame, engine.Stamp{Tick: 6, CommitToken: "tok6", WriterEpoch: epoch})
	crashed, _ := engine.EncodeFragment(frame, engine.Stamp{Tick: 6, CommitToken: "crashed6", WriterEpoch: epoch})
	var mixed bytes.Buffer
	pf, _ := parquet.OpenFile(bytes.NewReader(published), int64(len(published)))
	cf, _ := parquet.OpenFile(bytes.NewReader(crashed), int64(len(crashed)))
	pw := parquet.NewWriter(&mixed, pf.Schema())
	for _, rg := range append(pf.RowGroups(), cf.RowGroups()...) {
		if _, err := pw.WriteRowGroup(rg); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	var frags []index.Fragment
	for token, data := range map[string][]byte{"mixed": mixed.Bytes(), "foreign": crashed} {
		name := index.FragmentPath("w", "main", particle.ID, token, 0)
		a, err := b.Create(ctx, name, data)
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, index.Fragment{Path: name, Rows: int64(frame.Len()), Bytes: a.Size, Digest: engine.Digest(data), Generation: a.Generation})
	}
	slices.SortFunc(frags, func(a, b index.Fragment) int { return strings.Compare(a.Path, b.Path) })
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: 6,
		CommitToken: "tok6", WriterEpoch: epoch, Tables: []index.TableFragments{{Table: particle.ID, Fragments: frags}}}}); err != nil {
		t.Fatal(err)
	}
	return index.FragmentPath("w", "main", particle.ID, "mixed", 0)
}

// reads is a bucket that records the names it is asked to read whole.
type reads struct {
	*buckettest.Counting
	mu    sync.Mutex
	names []string
}

func (r *reads) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	r.mu.Lock()
	r.names = append(r.names, name)
	r.mu.Unlock()
	return r.Counting.Get(ctx, name)
}

// read returns and forgets the names read so far that contain part.
func (r *reads) read(part string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.names {
		if strings.Contains(n, part) {
			out = append(out, n)
		}
	}
	r.names = nil
	r.Gets.Store(0)
	return out
}

// An export after more ticks plans only the new ticks and appends their
// files as one new manifest: it reads the previous manifest list, none of
// the previous manifests, and reads back as the views. Compaction of
// exported ticks makes the next export full (a replace), which reads back
// the same; the one after it is incremental again.
func TestIncrementalExportReadsOnlyNewFiles(t *testing.T) {
	dir := t.TempDir()
	lb, _ := local.Open(dir)
	r := &reads{Counting: &buckettest.Counting{Bucket: lb}}
	fsys := icebergio.LocalFS{}
	small(t, lb, 100)
	first := export(t, r, iceberg.Options{World: "w"})
	more(t, lb, 120)
	r.read("")
	res := export(t, r, iceberg.Options{World: "w"})
	p := table_(res, "particle")
	if !p.Incremental || p.Operation != "append" || p.Added != 20 || p.Files != table_(first, "particle").Files+20 {
		t.Fatalf("the export of 20 more ticks: %+v; want an incremental append of their 20 files", p)
	}
	if got := r.read("/metadata/"); len(got) == 0 || slices.ContainsFunc(got, func(n string) bool { return strings.HasSuffix(n, "-m0.avro") }) {
		t.Fatalf("the incremental export read %v; want the manifest lists only, no manifest", got)
	}
	same(t, lb, fsys, res, nil, nil)
	// The first snapshot still reads as it did.
	if rows := scanRows(t, fsys, p.Metadata, table_(first, "particle").SnapshotID); len(rows) != int(table_(first, "particle").Rows) {
		t.Fatalf("the first snapshot reads %d rows, held %d", len(rows), table_(first, "particle").Rows)
	}
	// Compaction of exported ticks: a full export, a replace.
	compact(t, lb, "w")
	res = export(t, r, iceberg.Options{World: "w"})
	if p := table_(res, "particle"); p.Incremental || p.Operation != "replace" || p.Removed == 0 {
		t.Fatalf("the export after compaction: %+v; want a full replace", p)
	}
	same(t, lb, fsys, res, nil, nil)
	more(t, lb, 130)
	r.read("")
	res = export(t, r, iceberg.Options{World: "w"})
	if p := table_(res, "particle"); !p.Incremental || p.Operation != "append" || p.Added != 10 {
		t.Fatalf("the export of 10 more ticks after compaction: %+v; want an incremental append", p)
	}
	if got := r.read("-m0.avro"); len(got) != 0 {
		t.Fatalf("the incremental export %+v read the manifests %v", res.Tables, got)
	}
	same(t, lb, fsys, res, nil, nil)
}

// A file the catalog does not prove is read and checked once: an export
// planned in full later decides it from its stamps record and reuses the
// filtered copy, unread; a fact landing at the exported tick makes its own
// table's export full, not the others'.
func TestCheckedFileIsReused(t *testing.T) {
	lb, _ := local.Open(t.TempDir())
	r := &reads{Counting: &buckettest.Counting{Bucket: lb}}
	small(t, lb, 5)
	mixed := mixedTick(t, lb)
	first := export(t, r, iceberg.Options{World: "w"})
	if p := table_(first, "particle"); p.Rewritten != 1 || len(r.read(mixed)) != 1 {
		t.Fatalf("the first export: %+v; want the mixed file read once and rewritten", p)
	}
	w := enginetest.Resume(t, lb, "w", 6)
	if _, err := w.Ingest(ctxT(t), enginetest.Reading("late", 3.5)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	res := export(t, r, iceberg.Options{World: "w"})
	if p, f := table_(res, "particle"), table_(res, "reading"); !p.Incremental || p.Operation != "" || f.Incremental || f.Added != 1 {
		t.Fatalf("the export after a fact landed at tick 6: particle %+v, reading %+v; want particle unchanged, reading planned in full with the new fact", p, f)
	}
	same(t, lb, icebergio.LocalFS{}, res, nil, nil)
	r.read("")
	res = export(t, r, iceberg.Options{World: "w", Full: true})
	if p := table_(res, "particle"); p.Incremental || p.Reused != 1 || p.Rewritten != 0 || p.Added != 0 || p.Removed != 0 {
		t.Fatalf("a full export: %+v; want the filtered copy reused, the same files", p)
	}
	if got := r.read(mixed); len(got) != 0 {
		t.Fatalf("the full export read the checked file again: %v", got)
	}
	same(t, lb, icebergio.LocalFS{}, res, nil, nil)
}

// History the catalog does not name cannot be exported: a world continued
// from legacy (pre-commit-identity) tables, whose rows carry no commit
// columns, and an uncoordinated world, whose every row is visible. Each is
// refused with an error naming why, and nothing is written.
func TestExportRefusesHistoryTheCatalogDoesNotName(t *testing.T) {
	b, w := enginetest.Legacy(t, "../../testdata/legacy", "legacyworld", 7)
	w.Close()
	_, err := iceberg.Export(ctxT(t), b, iceberg.Options{World: "legacyworld"})
	if err == nil || !strings.Contains(err.Error(), "legacy (pre-commit-identity) history") {
		t.Fatalf("export of a world with legacy tables: %v", err)
	}
	if objs, _ := bucket.Collect(b.List(ctxT(t), "export/", "")); len(objs) != 0 {
		t.Fatalf("a refused export wrote %d objects, e.g. %s", len(objs), objs[0].Name)
	}

	u, err := engine.Uncoordinated(ctxT(t), "bare", b, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, u, 3)
	u.Close()
	_, err = iceberg.Export(ctxT(t), b, iceberg.Options{World: "bare"})
	if err == nil || !strings.Contains(err.Error(), "history without manifests (uncoordinated) cannot be exported") {
		t.Fatalf("export of an uncoordinated world: %v", err)
	}
}

// Invariant 16 for an export: an export held between planning its files
// and committing its metadata, while a compaction replaces every file it
// planned and collection runs at a retention of a millisecond, commits a
// version that reads back whole (with iceberg-go): the intent it holds
// pins what it planned. Once it landed, its reference list keeps them
// from the next collection. The same for a fork's export, whose
// parent's files are compacted and collected: it holds an intent on the
// parent's catalog too.
func TestCollectionKeepsAnExportInFlight(t *testing.T) {
	for _, c := range []struct {
		name string
		// exported is the world exported, maintained the world whose
		// files it names that is compacted and collected.
		exported, maintained string
		build                func(t *testing.T, b bucket.Bucket)
	}{
		{"world", "w", "w", func(t *testing.T, b bucket.Bucket) { small(t, b, 100) }},
		{"fork", "f", "p", func(t *testing.T, b bucket.Bucket) {
			enginetest.World(t, b, "p", 100).Close()
			enginetest.Fork(t, b, "p", "f", 90, 110).Close()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b, _ := local.Open(dir)
			c.build(t, b)
			cmd := crashtest.Command("export", dir, c.exported)
			wait, release := crashtest.Hold(t, cmd, iceberg.FailpointPlanned, t.TempDir())
			p := crashtest.Start(t, cmd)
			wait()
			planned := dataObjects(t, b, c.maintained)
			cat, err := index.Open(ctxT(t), b, c.maintained, index.Options{NoCompactor: true})
			if err != nil {
				t.Fatal(err)
			}
			defer cat.Close()
			if res, err := maintenance.Compact(ctxT(t), b, cat, maintenance.CompactOptions{Recent: 1, MinFacts: 1}); err != nil || res.Windows == 0 {
				t.Fatalf("compaction: %+v, %v", res, err)
			}
			// Every tick fragment of the window is replaced: only the pin
			// of the export's intent keeps them from a collection at 1 ms.
			replaced := unnamed(t, b, cat, planned)
			collectNow(t, b, cat)
			release()
			out, killed := p.Wait()
			if killed || !p.Cmd.ProcessState.Success() {
				t.Fatalf("the held export: %v", p.Cmd.ProcessState)
			}
			var res iceberg.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("the export printed %q: %v", out, err)
			}
			fsys := icebergio.LocalFS{}
			same(t, b, fsys, &res, nil, nil)
			refs, err := iceberg.Refs(ctxT(t), b, c.maintained)
			if err != nil {
				t.Fatal(err)
			}
			kept := slices.DeleteFunc(replaced, func(n string) bool { return !refs[n] })
			if len(kept) < 64 {
				t.Fatalf("the export names %d of the files the compaction replaced; want those of every tick of a window", len(kept))
			}
			// The intent is closed; the version's reference list keeps them.
			collectNow(t, b, cat)
			same(t, b, fsys, &res, nil, nil)
			for _, name := range kept {
				if _, err := b.Stat(ctxT(t), name); err != nil {
					t.Fatalf("%s, which the export names, is gone: %v", name, err)
				}
			}
		})
	}
}

// unnamed returns those of names that cat's catalog does not name.
func unnamed(t *testing.T, b bucket.Bucket, cat *index.Catalog, names []string) []string {
	t.Helper()
	s, err := cat.Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	if err := s.Fragments("", func(r index.FragmentRef) bool {
		named[r.Path] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if !named[n] && strings.HasSuffix(n, ".parquet") {
			out = append(out, n)
		}
	}
	return out
}

// collectNow collects world w at a retention of a millisecond.
func collectNow(t *testing.T, b bucket.Bucket, cat *index.Catalog) maintenance.CollectResult {
	t.Helper()
	res, err := maintenance.Collect(ctxT(t), b, cat, maintenance.CollectOptions{Retention: time.Millisecond, UnsafeRetention: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A fork's export names its parent's files in place, up to the fork
// point: it is registered in the parent's registry too, so the parent's
// collection keeps them after a compaction of the parent replaced them.
func TestParentsCollectionKeepsItsForksExport(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	enginetest.World(t, b, "p", 100).Close()
	enginetest.Fork(t, b, "p", "f", 80, 120).Close()
	res := export(t, b, iceberg.Options{World: "f"})
	compact(t, b, "p")
	cat, err := index.Open(ctxT(t), b, "p", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	gc, err := maintenance.Collect(ctxT(t), b, cat, maintenance.CollectOptions{Now: func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }})
	if err != nil || gc.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("the parent's collection: %+v, %v; want replaced fragments collected", gc, err)
	}
	same(t, b, icebergio.LocalFS{}, res, nil, nil)
	kept, err := maintenance.ExportReferences(ctxT(t), b, "p")
	if err != nil || len(kept) == 0 {
		t.Fatalf("what the parent's collection keeps: %d objects, %v", len(kept), err)
	}
}

// An export of an unchanged world writes nothing, planned in full or
// incrementally: the intents of the exports before it (entries that
// change no row) neither disrupt an incremental plan nor make a full
// plan's snapshot stale.
func TestExportAgainWritesNothing(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	small(t, b, 12)
	for _, full := range []bool{true, true, false, true} {
		res := export(t, b, iceberg.Options{World: "w", Full: full})
		for _, tr := range res.Tables {
			if tr.Version != 1 {
				t.Fatalf("export again (full %v): table %s: %+v; want nothing written after version 1", full, tr.Table, tr)
			}
		}
	}
}
