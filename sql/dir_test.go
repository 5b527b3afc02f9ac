package sql_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// Nothing in sql writes into the user's home or cache directory: Build
// without a Dir refuses, naming what is missing, and CopyTick without one
// keeps its fragment list beside its output only while it copies. (The
// old default, <user cache>/worldfs/views, made every test that built
// views with Options{} write into the real home.)
func TestNoDefaultDirectory(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 3)
	w.Close()

	if _, err := wsql.Build(ctxT(t), b, "w", wsql.Options{}); !errors.Is(err, wsql.ErrNoDir) {
		t.Errorf("Build without Dir = %v, want ErrNoDir", err)
	}
	out := t.TempDir()
	dst := filepath.Join(out, "tick.parquet")
	if err := wsql.CopyTick(ctxT(t), b, "w", wsql.Options{}, "particle", 2, wsql.FormatParquet, dst); err != nil {
		t.Fatal(err)
	}
	if rows, err := wsql.ReadRows(ctxT(t), dst); err != nil || len(rows) == 0 {
		t.Fatalf("CopyTick wrote %d rows (%v)", len(rows), err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("CopyTick left %d entries beside its output, want only the output", len(ents))
	}
	var written []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != home {
			written = append(written, p)
		}
		return nil
	})
	if len(written) != 0 {
		t.Errorf("the home directory was written: %v", written)
	}
}
