package sql_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/race"
	"github.com/worldfs/worldfs/maintenance/maintenancetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// summaryTables are the tables of the summarized worlds: two, with an
// entity count and a value.
func summaryTables(t *testing.T) []*engine.Table {
	t.Helper()
	var out []*engine.Table
	for i := range 2 {
		c, err := engine.NewComponent(fmt.Sprintf("kind%d", i), engine.Field{Name: "v", Type: engine.Float64})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := engine.NewTable(fmt.Sprintf("arch%d", i), c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tb)
	}
	return out
}

// frameAt is table k's rows at tick tk: three entities whose value
// says the tick.
func frameAt(t *testing.T, tb *engine.Table, k int, tk int64) *engine.Frame {
	t.Helper()
	f := engine.NewFrame(tb)
	for e := range int64(3) {
		if err := f.Append(e, engine.Values{fmt.Sprintf("kind%d_v", k): float64(tk) + float64(e)/10}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// publishCompacted publishes ticks from..to of w (run main), every
// step-th, as a long compacted history has them: one compacted file per
// table and window of span tick numbers, each window's ticks first published under their
// canonical files (never written: collection would have removed them),
// then replaced by a span fragments.rewrite.
func publishCompacted(t *testing.T, b bucket.Bucket, w *engine.World, tables []*engine.Table, from, to, span, step int64) {
	t.Helper()
	ctx := ctxT(t)
	cat := w.Catalog()
	for lo := from; lo <= to; lo += span {
		hi := min(lo+span-1, to)
		var ticks []int64
		var tokens []string
		for tk := lo; tk <= hi; tk += step {
			ticks = append(ticks, tk)
			tokens = append(tokens, fmt.Sprintf("%s-%08d", w.ID(), tk))
		}
		compacted := make([]index.TableFragments, len(tables))
		published := make([][]index.TableFragments, len(ticks))
		for k, tb := range tables {
			f, canon, err := maintenancetest.WriteCompactedTicks(ctx, b, w.ID(), index.DefaultRun, frameAt(t, tb, k, lo), w.Epoch(), ticks, tokens)
			if err != nil {
				t.Fatal(err)
			}
			compacted[k] = index.TableFragments{Table: tb.ID, Fragments: []index.Fragment{f}}
			for i, e := range canon {
				published[i] = append(published[i], index.TableFragments{Table: tb.ID, Fragments: []index.Fragment{{
					Path: index.TickFragmentPath(w.ID(), index.DefaultRun, tb.ID, tokens[i]), Rows: e.Rows, Bytes: e.Size,
					Digest: fmt.Sprintf("sha256:%x", e.Digest)}}})
			}
		}
		var entries []index.Entry
		for i, tk := range ticks {
			entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
				Run: index.DefaultRun, Tick: tk, CommitToken: tokens[i], WriterEpoch: w.Epoch(), NextEntity: 3, Tables: published[i]}})
		}
		if _, err := cat.CommitAll(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		tip, err := cat.Exact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rw := &index.FragmentsRewrite{Run: index.DefaultRun, Span: &index.Span{From: lo, To: hi}, ReadSeq: tip.Seq, Tables: compacted}
		if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw}); err != nil {
			t.Fatal(err)
		}
	}
}

// publishFresh publishes ticks from..to of w, each table's rows in a
// fragment of its own, as a writer does.
func publishFresh(t *testing.T, b bucket.Bucket, w *engine.World, tables []*engine.Table, from, to int64) {
	t.Helper()
	ctx := ctxT(t)
	var entries []index.Entry
	for tk := from; tk <= to; tk++ {
		token := index.TickToken(tk, [16]byte{byte(len(w.ID())), byte(tk)}) // a writer's: it names its tick
		var fl []index.TableFragments
		for k, tb := range tables {
			data, err := engine.EncodeFragment(frameAt(t, tb, k, tk), engine.Stamp{Tick: tk, CommitToken: token, WriterEpoch: w.Epoch()})
			if err != nil {
				t.Fatal(err)
			}
			path := index.TickFragmentPath(w.ID(), index.DefaultRun, tb.ID, token)
			a, err := b.Create(ctx, path, data)
			if err != nil {
				t.Fatal(err)
			}
			fl = append(fl, index.TableFragments{Table: tb.ID, Fragments: []index.Fragment{{Path: path, Rows: 3, Bytes: int64(len(data)),
				Digest: engine.Digest(data), Generation: a.Generation}}})
		}
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: index.DefaultRun, Tick: tk, CommitToken: token, WriterEpoch: w.Epoch(), NextEntity: 3, Tables: fl}})
	}
	if _, err := w.Catalog().CommitAll(ctx, entries...); err != nil {
		t.Fatal(err)
	}
}

// summarizedWorlds returns a local bucket, in a directory of the test's
// own, holding world "s": ticks 0..8999 compacted in windows of 3,000 (so
// that a window spans two tick shards of 4,096 and a shard holds two
// windows), ticks 9000..9049 fresh, and a fact; and its fork "f" at tick
// 5000 (inside a window) with fresh ticks 5001..5020. Each has a
// checkpoint at its tip: the shards of s holding only compacted ticks (0
// and 1) are summarized, the one holding fresh ticks (2) is not. The
// worlds are built once per test binary (writing 9,000 ticks was most of
// each test's time, under the race detector minutes) and each test gets a
// copy of the bucket's files, their modification times (a local object's
// generation) kept.
func summarizedWorlds(t *testing.T) *local.Bucket {
	t.Helper()
	summarized.once.Do(func() {
		dir := t.TempDir()
		buildSummarizedWorlds(t, dir)
		summarized.files = readBucketFiles(t, dir)
	})
	if summarized.files == nil {
		t.Fatal("the summarized worlds were not built (see the first test that asked for them)")
	}
	dir := t.TempDir()
	for name, f := range summarized.files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, f.mtime, f.mtime); err != nil {
			t.Fatal(err)
		}
	}
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// summarized is what summarizedWorlds built: the bucket's files by
// slash-separated path under its root.
var summarized struct {
	once  sync.Once
	files map[string]bucketFile
}

// bucketFile is a file of a local bucket: its bytes and its modification
// time.
type bucketFile struct {
	data  []byte
	mtime time.Time
}

// readBucketFiles reads every regular file under dir.
func readBucketFiles(t *testing.T, dir string) map[string]bucketFile {
	t.Helper()
	files := map[string]bucketFile{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = bucketFile{data: data, mtime: info.ModTime()}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// buildSummarizedWorlds builds the worlds summarizedWorlds returns in a
// local bucket at dir.
func buildSummarizedWorlds(t *testing.T, dir string) {
	t.Helper()
	ctx := ctxT(t)
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tables := summaryTables(t)
	w, err := engine.CreateWorld(ctx, b, "s", tables, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	publishCompacted(t, b, w, tables, 0, 8999, 3000, 1)
	publishFresh(t, b, w, tables, 9000, 9049)
	if _, err := w.Ingest(ctx, enginetest.Reading("r1", 2.5)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := engine.ForkWorld(ctx, b, "s", "f", index.DefaultRun, 5000, tables, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	publishFresh(t, b, f, tables, 5001, 5020)
	if _, err := f.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
}

// summaries returns the names of world's shard summaries.
func summaries(t *testing.T, b bucket.Bucket, world string) []string {
	t.Helper()
	return shardObjects(t, b, world, func(name string) bool {
		_, ok := index.ShardOfSummary(name)
		return ok
	})
}

// shardObjects returns the names of world's objects beside its
// checkpoints' shards that keep accepts.
func shardObjects(t *testing.T, b bucket.Bucket, world string, keep func(name string) bool) []string {
	t.Helper()
	var out []string
	for a, err := range b.List(ctxT(t), index.ShardPrefix(world), "") {
		if err != nil {
			t.Fatal(err)
		}
		if keep(a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

// viewAnswers is what the views of world (with opts) say: the files they
// read with their ticks and bounds, the visible span, and rows through
// DuckDB, whole, at a tick inside a window and across a shard's edge.
func viewAnswers(t *testing.T, s *wsql.Script) string {
	t.Helper()
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	qs := []string{
		"SELECT * EXCLUDE (path) FROM worldfs_fragments ORDER BY ALL",
		"SELECT tick, count(*), sum(round(kind1_v * 10)::BIGINT) FROM arch1 GROUP BY tick HAVING tick % 997 = 0 OR tick BETWEEN 4090 AND 4100 OR tick > 5990 AND tick < 6003 ORDER BY tick",
		"SELECT * FROM arch1_at(5000) ORDER BY ALL",
		"SELECT * FROM arch1_at(4096) ORDER BY ALL",
		"SELECT fact_id, tick, external_id FROM worldfs_facts ORDER BY ALL",
		"SELECT count(*), min(tick), max(tick) FROM worldfs_ticks",
		"SELECT count(*), min(tick), max(tick) FROM worldfs_manifests",
	}
	if slices.Contains(s.Views, "arch0") {
		qs = append(qs, "SELECT count(*), min(tick), max(tick), sum(round(kind0_v * 10)::BIGINT) FROM arch0", "SELECT * FROM arch0_at(9010) ORDER BY ALL")
	}
	return fmt.Sprintf("visible %+v\n", s.Visible) + dump(t, db, qs...)
}

// fullBuild builds the views of world from its whole catalog state (every
// tick record decoded).
func fullBuild(t *testing.T, b bucket.Bucket, world string, opts wsql.Options) *wsql.Script {
	t.Helper()
	own, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wsql.BuildFrom(ctxT(t), b, own, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Views planned from the summaries of compacted tick shards are the views
// planned from every tick record: the same files (with their ticks and
// bounds), the same visible span and the same rows through DuckDB, for a
// world of compacted and fresh ticks with a fact, for its fork inside a
// window, and pinned inside a window; and the build reads no summarized
// shard: with those shards gone it still builds the same views.
func TestViewsFromSummariesAreTheViewsFromEveryTick(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	if got := summaries(t, b, "s"); len(got) != 2 {
		t.Fatalf("world s has summaries %v, want those of its two compacted shards", got)
	}
	at := int64(5000)
	cases := []struct {
		world string
		opts  wsql.Options
	}{
		{"s", wsql.Options{}},
		{"f", wsql.Options{}},
		{"s", wsql.Options{AtTick: &at}},
		{"f", wsql.Options{Table: "arch1"}},
	}
	want := make([]string, len(cases))
	for i, c := range cases {
		c.opts.Dir = t.TempDir()
		want[i] = viewAnswers(t, fullBuild(t, b, c.world, c.opts))
		if !strings.Contains(want[i], "-- 1 rows of SELECT fact_id") && c.world == "s" && c.opts.AtTick == nil {
			t.Fatalf("the views of s show no fact:\n%s", want[i])
		}
	}
	// The summarized shards are not read: move them away.
	hide(t, b)
	for i, c := range cases {
		c.opts.Dir = t.TempDir()
		s, err := wsql.Build(ctx, b, c.world, c.opts)
		if err != nil {
			t.Fatalf("views of %s (%+v) without the summarized shards: %v", c.world, c.opts, err)
		}
		// worldfs_ticks and worldfs_manifests read every tick: they load
		// the shards, so they are compared with the shards back.
		restore(t, b)
		if got := viewAnswers(t, s); got != want[i] {
			t.Fatalf("views of %s (%+v) from summaries differ from those from every tick:\n%s", c.world, c.opts, firstDiff(want[i], got))
		}
		hide(t, b)
	}
}

// Views pinned by a token that names its tick read the part holding that
// tick, not every tick: with the summarized shards moved away, views of
// world s by the token of fresh tick 9020, and of fork f by its tick
// 5010's, are the views at those ticks.
func TestViewsByATokenReadItsTicksPart(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	for _, c := range []struct {
		world string
		tick  int64
	}{{"s", 9020}, {"f", 5010}} {
		at := c.tick
		want := viewAnswers(t, fullBuild(t, b, c.world, wsql.Options{AtTick: &at, Dir: t.TempDir()}))
		tip, _, err := index.Load(ctx, b, c.world)
		if err != nil {
			t.Fatal(err)
		}
		tk, ok := tip.Tick(index.DefaultRun, c.tick)
		if !ok {
			t.Fatalf("%s has no tick %d", c.world, c.tick)
		}
		hide(t, b)
		s, err := wsql.Build(ctx, b, c.world, wsql.Options{Token: tk.CommitToken, Dir: t.TempDir()})
		restore(t, b)
		if err != nil {
			t.Fatalf("views of %s by the token of tick %d without the summarized shards: %v", c.world, c.tick, err)
		}
		if got := viewAnswers(t, s); got != want {
			t.Fatalf("views of %s by the token of tick %d differ from those at the tick:\n%s", c.world, c.tick, firstDiff(want, got))
		}
	}
	// A token naming a tick that does not carry it is looked up in
	// every tick, and found nowhere.
	forged := index.TickToken(9020, [16]byte{9})
	if _, err := wsql.Build(ctx, b, "s", wsql.Options{Token: forged, Dir: t.TempDir()}); !errors.Is(err, wsql.ErrNotFound) {
		t.Fatalf("views by token %s, which no tick carries: %v", forged, err)
	}
}

// Views pinned by a token that does not name its tick (here, one of the
// compacted ticks of world s) read the parts its token filters may hold
// (index.Want.Token), not every tick: with the summarized shards 0 and 1
// moved away, views of s by the token of tick 8500 (in shard 2, with the
// fresh ticks) are the views at that tick.
func TestViewsByAnOldTokenReadItsCandidateParts(t *testing.T) {
	b := summarizedWorlds(t)
	at := int64(8500)
	want := viewAnswers(t, fullBuild(t, b, "s", wsql.Options{AtTick: &at, Dir: t.TempDir()}))
	token := fmt.Sprintf("s-%08d", at)
	if _, named := index.TokenTick(token); named {
		t.Fatalf("token %s names a tick", token)
	}
	hide(t, b)
	s, err := wsql.Build(ctxT(t), b, "s", wsql.Options{Token: token, Dir: t.TempDir()})
	restore(t, b)
	if err != nil {
		t.Fatalf("views of s by the token of tick %d without the summarized shards: %v", at, err)
	}
	if got := viewAnswers(t, s); got != want {
		t.Fatalf("views of s by the token of tick %d differ from those at the tick:\n%s", at, firstDiff(want, got))
	}
}

// hide and restore move the summarized shards of world s away and back.
func hide(t *testing.T, b *local.Bucket) { moveShards(t, b, "", ".away") }

func restore(t *testing.T, b *local.Bucket) { moveShards(t, b, ".away", "") }

func moveShards(t *testing.T, b *local.Bucket, from, to string) {
	t.Helper()
	for _, name := range summaries(t, b, "s") {
		shard, _ := index.ShardOfSummary(name)
		if err := os.Rename(filepath.Join(b.Root(), shard+from), filepath.Join(b.Root(), shard+to)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkpointSummaries returns the names of world's checkpoint summaries
// objects (the summaries of a checkpoint's tick shards in one).
func checkpointSummaries(t *testing.T, b bucket.Bucket, world string) []string {
	t.Helper()
	return shardObjects(t, b, world, func(name string) bool { return strings.HasSuffix(name, ".sums") })
}

// removeCheckpointSummaries removes the checkpoint summaries objects of
// worlds: the views read the shards' own summaries then.
func removeCheckpointSummaries(t *testing.T, b *local.Bucket, worlds ...string) {
	t.Helper()
	for _, w := range worlds {
		for _, name := range checkpointSummaries(t, b, w) {
			if err := os.Remove(filepath.Join(b.Root(), name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A summary with a byte flipped fails the views closed (ErrCorrupt),
// wherever the byte is; it is never a reason to read the shard instead:
// the checkpoint's summaries object the views read, or, without it, a
// shard's own.
func TestAFlippedSummaryFailsTheViewsClosed(t *testing.T) {
	b := summarizedWorlds(t)
	objects := checkpointSummaries(t, b, "s")
	if len(objects) == 0 {
		t.Fatal("no checkpoint summaries object of s")
	}
	for _, name := range []string{objects[len(objects)-1], ""} {
		if name == "" {
			removeCheckpointSummaries(t, b, "s", "f")
			name = summaries(t, b, "s")[0]
		}
		path := filepath.Join(b.Root(), name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{0, len(data) / 2, len(data) - 1} {
			bad := append([]byte(nil), data...)
			bad[at] ^= 0x20
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, world := range []string{"s", "f"} {
				_, err := wsql.Build(ctxT(t), b, world, wsql.Options{Dir: t.TempDir()})
				if !errors.Is(err, index.ErrCorrupt) {
					t.Fatalf("views of %s with byte %d of summary %s flipped: %v, want ErrCorrupt", world, at, name, err)
				}
			}
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A catalog written without summaries (by a worldfs that wrote none)
// builds the same views, from every tick.
func TestViewsOfACatalogWithoutSummaries(t *testing.T) {
	b := summarizedWorlds(t)
	want := viewAnswers(t, fullBuild(t, b, "f", wsql.Options{Dir: t.TempDir()}))
	removeCheckpointSummaries(t, b, "s", "f")
	for _, w := range []string{"s", "f"} {
		for _, name := range summaries(t, b, w) {
			if err := os.Remove(filepath.Join(b.Root(), name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := wsql.Build(ctxT(t), b, "f", wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := viewAnswers(t, s); got != want {
		t.Fatalf("views of a catalog without summaries differ:\n%s", firstDiff(want, got))
	}
}

// Where a summary does not tell what the views' bounds cut (a pin inside
// a stretch of ticks numbered with gaps: its newest tick at or before
// the pin), the views are planned from every tick: the same views.
func TestViewsFromSummariesOfTicksWithGaps(t *testing.T) {
	ctx := ctxT(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tables := summaryTables(t)
	w, err := engine.CreateWorld(ctx, b, "g", tables, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Ticks 0, 2, ..., 8190 (under the race detector 0, 16, ..., 8176: the
	// pins below fall in a gap and on a tick alike): two shards, one file.
	step := int64(2)
	if race.Enabled {
		step = 16
	}
	publishCompacted(t, b, w, tables, 0, 8191, 8192, step)
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if got := summaries(t, b, "g"); len(got) != 2 {
		t.Fatalf("world g has summaries %v, want two", got)
	}
	for _, at := range []*int64{nil, ptr[int64](4001), ptr[int64](4096), ptr[int64](8000)} {
		want := viewAnswers(t, fullBuild(t, b, "g", wsql.Options{AtTick: at, Dir: t.TempDir()}))
		s, err := wsql.Build(ctx, b, "g", wsql.Options{AtTick: at, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := viewAnswers(t, s); got != want {
			t.Fatalf("views of g at %v from summaries differ from those from every tick:\n%s", at, firstDiff(want, got))
		}
	}
}

// What reads every tick of views planned from summaries (worldfs_ticks,
// worldfs_manifests) reads the very catalog states the views were
// planned from: a tick published since is neither shown nor a reason to
// fail the query.
func TestTicksOfSummarizedViewsAreThoseOfTheirStates(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	s, err := wsql.Build(ctx, b, "s", wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := index.Open(ctx, b, "s", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: index.DefaultRun, Tick: 9050,
		CommitToken: "later", WriterEpoch: cat.Tip().World.Epoch}}); err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := dump(t, db, "SELECT count(*), min(tick), max(tick) FROM worldfs_ticks", "SELECT count(DISTINCT tick), max(tick) FROM worldfs_manifests")
	if want := "9050 0 9049\n-- 1 rows of SELECT count(*), min(tick), max(tick) FROM worldfs_ticks\n9050 9049\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("the ticks of views built before tick 9050 was published:\n%s\nwant\n%s", got, want)
	}
}

// worldfs_ticks of summarized views decodes their shards when first
// queried. If by then a newer checkpoint replaced the one planned from
// and collection deleted its parts, the query says the catalog changed
// (ErrCatalogChanged), not that it is corrupt; a failure is not kept, so
// the same views answer once the parts are readable.
func TestTicksOfViewsWhosePartsWereCollected(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	_, db := builtViews(t, b, "s", wsql.Options{})
	count := func() (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM worldfs_ticks").Scan(&n)
		return n, err
	}
	c, err := index.Open(ctx, b, "s", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Commit(ctx, index.Entry{Kind: index.KindFenceAcquire, FenceAcquire: &index.FenceAcquire{Holder: "later"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	hide(t, b) // as collection deletes a replaced checkpoint's parts
	// The error comes back through DuckDB's table function as text.
	if _, err := count(); err == nil || !strings.Contains(err.Error(), wsql.ErrCatalogChanged.Error()) || strings.Contains(err.Error(), index.ErrCorrupt.Error()) {
		t.Fatalf("worldfs_ticks once the parts planned from were collected: %v; want ErrCatalogChanged", err)
	}
	restore(t, b)
	if n, err := count(); err != nil || n == 0 {
		t.Fatalf("worldfs_ticks once the parts are back: %d ticks, %v", n, err)
	}
}

// Views of a fork pinned by a token its parent published before the fork
// point, a token that does not name its tick, read of the parent the
// parts its token filters may hold (index.LineageToken), not every tick:
// with the parent's other summarized parts moved away, views of fork f
// by the token of s's tick 4500 are f's views at that tick. A token of
// s past the fork point is no tick of f.
func TestForkViewsByAnOldInheritedTokenReadItsCandidateParts(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	at := int64(4500)
	want := viewAnswers(t, fullBuild(t, b, "f", wsql.Options{AtTick: &at, Dir: t.TempDir()}))
	token := fmt.Sprintf("s-%08d", at)
	if _, named := index.TokenTick(token); named {
		t.Fatalf("token %s names a tick", token)
	}
	// The part that holds tick 4500 (and those the log after s's
	// checkpoint touches) stay; the other summarized parts go.
	rec := &stateGets{Bucket: b, names: map[string]bool{}}
	if _, _, err := index.LoadFor(ctx, rec, "s", index.Want{Run: index.DefaultRun, From: at, To: at}); err != nil {
		t.Fatal(err)
	}
	var away []string
	for _, name := range summaries(t, b, "s") {
		if shard, _ := index.ShardOfSummary(name); !rec.names[shard] {
			away = append(away, shard)
		}
	}
	if len(away) == 0 {
		t.Fatal("no summarized part of s to move away")
	}
	for _, name := range away {
		if err := os.Rename(filepath.Join(b.Root(), name), filepath.Join(b.Root(), name+".away")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := wsql.Build(ctx, b, "f", wsql.Options{Token: token, Dir: t.TempDir()})
	for _, name := range away {
		if err := os.Rename(filepath.Join(b.Root(), name+".away"), filepath.Join(b.Root(), name)); err != nil {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatalf("views of f by the token of s's tick %d without %d of s's parts: %v", at, len(away), err)
	}
	if got := viewAnswers(t, s); got != want {
		t.Fatalf("views of f by the token of s's tick %d differ from those at the tick:\n%s", at, firstDiff(want, got))
	}
	if _, err := wsql.Build(ctx, b, "f", wsql.Options{Token: "s-00008500", Dir: t.TempDir()}); !errors.Is(err, wsql.ErrNotFound) {
		t.Fatalf("views of f by the token of s's tick 8500, past the fork point: %v; want ErrNotFound", err)
	}
}

// stateGets records the names of the checkpoint parts read through it
// (index reads parts in parallel).
type stateGets struct {
	bucket.Bucket
	mu    sync.Mutex
	names map[string]bool
}

func (s *stateGets) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if strings.Contains(name, "/state/") {
		s.mu.Lock()
		s.names[name] = true
		s.mu.Unlock()
	}
	return s.Bucket.Get(ctx, name)
}
