package sql_test

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// A printed views script (worldfs views) kept after the files it names
// were collected says so when it is run, and how to print it again,
// instead of failing at its first read with DuckDB's "no files found":
// both when its fragment list is gone (the views directory collected) and
// when a file the list names is (gc after a compaction). While everything
// is there it runs, a world with no file yet included.
func TestPrintedViewsSayWhenTheirFilesAreGone(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	enginetest.World(t, b, "w", 5).Close()
	pos, _ := engine.NewComponent("pos", engine.Field{Name: "x", Type: engine.Float64})
	agent, _ := engine.NewTable("agent", pos)
	e, err := engine.CreateWorld(ctxT(t), b, "empty", []*engine.Table{agent}, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	printed := func(world string) (script, list string) {
		t.Helper()
		s, err := wsql.Build(ctxT(t), b, world, wsql.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		text, err := s.SQL()
		if err != nil {
			t.Fatal(err)
		}
		return text, s.FragmentList
	}
	run := func(script string) error {
		t.Helper()
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = db.Exec(script)
		return err
	}
	for _, world := range []string{"w", "empty"} {
		if script, _ := printed(world); run(script) != nil {
			t.Fatalf("the printed views of %s, everything there: %v", world, run(script))
		}
	}

	script, list := printed("w")
	// A file the list names, gone.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	err = db.QueryRow("SELECT path FROM read_parquet(?) WHERE path LIKE '%.parquet' ORDER BY ord LIMIT 1", list).Scan(&victim)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	err = run(script)
	if err == nil || !strings.Contains(err.Error(), "1 of the ") || !strings.Contains(err.Error(), "files this script reads are gone") ||
		!strings.Contains(err.Error(), "worldfs views --world w > views.sql") {
		t.Errorf("the printed views with a file gone: %v; want them to say so and how to print them again", err)
	}
	if err := os.WriteFile(victim, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	// The list itself, gone.
	if err := os.Remove(list); err != nil {
		t.Fatal(err)
	}
	err = run(script)
	if err == nil || !strings.Contains(err.Error(), "this script's file list "+list+" is gone") || !strings.Contains(err.Error(), "worldfs views --world w > views.sql") {
		t.Errorf("the printed views with their list gone: %v; want them to say so and how to print them again", err)
	}
}
