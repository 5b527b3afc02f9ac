package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// derivedWorld is a world whose mount derives files from rows: tick 76's
// particle fragment rewritten into two (a split tick, as optimize may
// write it), the ticks of the compacted window holding tick 10 as a
// compacted file written before tick indexes (their indexes removed),
// facts of table "reading" ingested several at once (a batch shares one
// fragment) at two ticks, one more of another schema of that table, and a
// receipt.
func derivedWorld(t *testing.T) *local.Bucket {
	t.Helper()
	ctx := ctxT(t)
	b := localBucket(t)
	w := particleWorld(t, b, "w", 30)
	ingest := func(from, n int) {
		var g errgroup.Group
		for i := from; i < from+n; i++ {
			g.Go(func() error {
				_, err := w.Ingest(ctx, enginetest.SensorReading("sensor-"+strconv.Itoa(i%2), "e"+strconv.Itoa(i), float64(i)+0.25))
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	ingest(0, 6)
	enginetest.Run(t, w, 79)
	ingest(6, 4)
	// A fact of another schema of table "reading" (a value alone): the
	// file is the union of both, NULL where a schema lacks a column.
	if _, err := w.Ingest(ctx, enginetest.Reading("r-1", 7.5)); err != nil {
		t.Fatal(err)
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := engine.PinSubject(s, "main", 79, engine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "ev-1", Subject: sub, Contract: enginetest.Contract("1")}, enginetest.Passing); err != nil {
		t.Fatal(err)
	}
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 8}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	for _, tf := range enginetest.Tables(t, tickOf(t, b, 10)) {
		for _, f := range tf.Fragments {
			if f.Span == nil {
				t.Fatalf("tick 10 is not compacted: %+v", f)
			}
			p, err := b.Path(index.TickIndexPath(f.Path))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	splitFragment(t, b, "w", 76, "particle")
	return b
}

// A split tick's files, the files of a tick whose compacted file predates
// tick indexes, and the facts/ files are sized exactly at lookup with no
// DuckDB: ls -l of their directories (and of tables/particle/) derives
// them from their fragments' rows in Go (the mount's stats count no
// materialization), each reports at lookup the bytes a full read returns,
// and their rows (in their order), column names and types are what
// worldfs sql's views show: <table>_at(t) for a tick, <table>_raw for a
// fact table (entity ids descending) and worldfs_receipts for the receipts.
func TestDerivedFilesAreSizedAtLookup(t *testing.T) {
	b := derivedWorld(t)
	mt := testMount(t, b)
	ticks := mt.path("w", "runs", "main", "ticks")
	dirs := []string{filepath.Join(ticks, "10"), filepath.Join(ticks, "76"), mt.path("w", "runs", "main", "tables", "particle"),
		mt.path("w", "facts"), mt.path("w", "facts", "main")}
	sizes := map[string]int64{}
	for _, dir := range dirs {
		for _, name := range ls(t, dir) {
			p := filepath.Join(dir, name)
			info, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().IsRegular() {
				sizes[p] = info.Size()
			}
		}
	}
	if st := mountStats(t, mt); st.DuckDBRuns != 0 || st.Gathered < 8 {
		t.Errorf("ls -l of %d files ran DuckDB %d times and derived %d files in Go; want none and each split tick's, old compacted tick's and facts file", len(sizes), st.DuckDBRuns, st.Gathered)
	}
	for _, p := range []string{filepath.Join(ticks, "10", "particle.csv"), filepath.Join(ticks, "76", "particle.parquet"),
		mt.path("w", "facts", "receipts.parquet"), mt.path("w", "facts", "main", "reading.csv")} {
		if _, ok := sizes[p]; !ok {
			t.Fatalf("%s was not listed", p)
		}
	}
	for p, size := range sizes {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != size || size == 0 {
			t.Errorf("%s: st_size %d at lookup, a read returns %d bytes", p, size, len(data))
		}
	}
	if st := mountStats(t, mt); st.DuckDBRuns != 0 {
		t.Errorf("reading the files ran DuckDB %d times", st.DuckDBRuns)
	}

	views := openViews(t, b, "w")
	db := duck(t)
	same := func(what string, got, want []string) {
		t.Helper()
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: the mount's file has %d rows, the views %d:\n got %v\nwant %v", what, len(got), len(want), got, want)
		}
	}
	describe := func(src string) []string {
		return rows(t, db, "SELECT column_name || ' ' || column_type FROM (DESCRIBE SELECT * FROM "+src+") ORDER BY column_name")
	}
	describeView := func(q string) []string {
		return rows(t, views, "SELECT column_name || ' ' || column_type FROM (DESCRIBE "+q+") ORDER BY column_name")
	}
	tables := map[string]string{
		"particle": "entity_id, tick, position_x, position_y, velocity_x, velocity_y",
		"emitter":  "entity_id, tick, emitter_label, emitter_rate, position_x, position_y",
		"debris":   "entity_id, tick, position_x, position_y, ttl_remaining",
	}
	for _, tick := range []int64{10, 76} {
		for table, cols := range tables {
			want := rows(t, views, fmt.Sprintf("SELECT %s FROM %s_at(%d) ORDER BY entity_id", cols, table, tick))
			if len(want) == 0 {
				continue // the table has no rows at the tick
			}
			dir := filepath.Join(ticks, strconv.FormatInt(tick, 10))
			for _, src := range []string{"read_parquet(" + lit(filepath.Join(dir, table+".parquet")) + ")", "read_csv(" + lit(filepath.Join(dir, table+".csv")) + ")"} {
				same(fmt.Sprintf("tick %d %s", tick, src), rows(t, db, fmt.Sprintf("SELECT %s FROM %s", cols, src)), want)
			}
			same(fmt.Sprintf("tick %d %s.parquet columns", tick, table), describe("read_parquet("+lit(filepath.Join(dir, table+".parquet"))+")"),
				describeView(fmt.Sprintf("SELECT entity_id, tick, commit_token, writer_epoch, * EXCLUDE (entity_id, tick, commit_token, writer_epoch) FROM %s_raw WHERE tick = %d", table, tick)))
		}
	}
	// The facts: every column of the raw view, in its order (entity ids
	// descending).
	reading := mt.path("w", "facts", "main", "reading")
	cols := "entity_id, tick, commit_token, writer_epoch, fact_commit_id, fact_digest, fact_external_id, fact_producer, reading_sensor, reading_value"
	want := rows(t, views, "SELECT "+cols+" FROM reading_raw ORDER BY entity_id DESC")
	if len(want) != 11 || !slices.ContainsFunc(want, func(r string) bool { return strings.HasSuffix(r, "<nil> 7.5") }) {
		t.Fatalf("the views show %d facts (want 11, one without a sensor): %v", len(want), want)
	}
	for _, src := range []string{"read_parquet(" + lit(reading+".parquet") + ")", "read_csv(" + lit(reading+".csv") + ")"} {
		same(src, rows(t, db, "SELECT "+cols+" FROM "+src), want)
	}
	same("reading.parquet columns", describe("read_parquet("+lit(reading+".parquet")+")"), describeView("SELECT * FROM reading_raw"))
	receipts := mt.path("w", "facts", "receipts")
	rcols := "receipt_id, tick, evaluation_id, grader_id, contract::VARCHAR, contract_digest, subject::VARCHAR, subject_digest, outcomes::VARCHAR, commit_token"
	want = rows(t, views, "SELECT "+rcols+" FROM worldfs_receipts ORDER BY receipt_id DESC")
	for _, src := range []string{"read_parquet(" + lit(receipts+".parquet") + ")", "read_csv(" + lit(receipts+".csv") + ")"} {
		same(src, rows(t, db, "SELECT "+rcols+" FROM "+src), want)
	}
	same("receipts.parquet columns", describe("read_parquet("+lit(receipts+".parquet")+")"), describeView("SELECT * FROM worldfs_receipts"))
	if h := strings.Join(rows(t, db, "SELECT count(*) FROM read_parquet("+lit(receipts+".parquet")+") WHERE json_extract_string(outcomes, '$[0].verdict') = 'pass'"), ""); h != "1" {
		t.Errorf("receipts.parquet: %s passing receipts read as JSON, want 1", h)
	}
}
