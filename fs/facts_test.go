package fs

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/worldfs/worldfs/engine/enginetest"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	wsql "github.com/worldfs/worldfs/sql"
)

func rFact(id string, v float64) engine.Fact {
	c, _ := engine.NewComponent("reading", engine.Field{Name: "value", Type: engine.Float64})
	t, _ := engine.NewFactTable("reading", c)
	return engine.Fact{Producer: "sensor-1", ExternalID: id, Table: t, Values: engine.Values{"reading_value": v}}
}

func rSQLFacts(t *testing.T, b *local.Bucket, world string) int {
	t.Helper()
	ctx := context.Background()
	s, err := wsql.Build(ctx, b, world, wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM worldfs_facts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func rParquetRows(t *testing.T, data []byte) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.parquet")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM read_parquet('" + p + "')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A fork's facts/ lists and holds what its SQL views show: its ancestors' facts up
// to the fork point, rematerialized when they change.
func TestForkFactsInTheMount(t *testing.T) {
	ctx := context.Background()
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "p", 4)
	if _, err := w.Ingest(ctx, rFact("a", 1)); err != nil { // lands at tick 4
		t.Fatal(err)
	}
	f, err := engine.ForkWorld(ctx, b, "p", "c", "main", 4, particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := rSQLFacts(t, b, "c"); n != 1 {
		t.Fatalf("SQL of the fork shows %d facts, want 1 (the parent's, tick 4)", n)
	}
	c, _ := cache.Open(t.TempDir(), cache.Options{})
	// Every read of the catalog is fresh, so the mount sees each fact as
	// soon as its ingest returns.
	m, err := New(b, Options{Cache: c, BucketID: "test", Writer: enginetest.Quiet, Freshness: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	runs, err := m.factRuns(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(runs, "main") {
		t.Errorf("c/facts/ lists runs %v; SQL of c shows 1 visible fact in run main", runs)
	}

	// With a fact of its own the run shows, but the file is keyed by the
	// fork's claims only: a fact the parent completes later at the fork tick
	// (which the fork's views show) never reaches the cached file.
	if _, err := f.Ingest(ctx, rFact("own", 2)); err != nil {
		t.Fatal(err)
	}
	data, err := factContent(ctx, m, "c", "main", "reading", "parquet")
	if err != nil {
		t.Fatal(err)
	}
	before := rParquetRows(t, data)
	if _, err := w.Ingest(ctx, rFact("late", 3)); err != nil { // parent head still 4
		t.Fatal(err)
	}
	sqlN := rSQLFacts(t, b, "c")
	data, err = factContent(ctx, m, "c", "main", "reading", "parquet")
	if err != nil {
		t.Fatal(err)
	}
	if after := rParquetRows(t, data); after != sqlN {
		t.Errorf("c/facts/main/reading.parquet has %d rows (%d before the parent's late fact); c's SQL views show %d", after, before, sqlN)
	}
}

// A fact ingested into a run that has no ticks yet (run "sensors") is in
// the run's facts/ as it is in SQL.
func TestFactsOfARunWithoutTicks(t *testing.T) {
	ctx := context.Background()
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "p", 2)
	fct := rFact("a", 1)
	fct.Run = "sensors"
	r, err := w.Ingest(ctx, fct)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wsql.Build(ctx, b, "p", wsql.Options{Run: "sensors", Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("views of run sensors: %v", err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow("SELECT count(*) FROM worldfs_facts").Scan(&n)
	db.Close()
	c, _ := cache.Open(t.TempDir(), cache.Options{})
	m, err := New(b, Options{Cache: c, BucketID: "test", Writer: enginetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	runs, err := m.factRuns(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("receipt tick %d; SQL run sensors shows %d facts; facts/ lists %v", r.Tick, n, runs)
	if n == 1 && !slices.Contains(runs, "sensors") {
		t.Errorf("facts/ lists %v; the fact in run sensors is visible in SQL", runs)
	}
}

// factContent looks up the current version of a facts file and opens it
// as the kernel would, and returns its bytes.
func factContent(ctx context.Context, m *Mount, world, run, table, format string) ([]byte, error) {
	f, err := m.factFile(ctx, world, run, table, format)
	if err != nil {
		return nil, err
	}
	fh, _, errno := f.Open(ctx, 0)
	if errno != 0 {
		return nil, errno
	}
	h := fh.(factHandle)
	defer h.r.f.Close()
	return os.ReadFile(h.r.f.Name())
}
