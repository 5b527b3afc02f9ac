package engine_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// The fixture in ../testdata/legacy is a small v0.2 world: tables without
// commit columns under old-format ids. It is committed; fixture_test.go
// (go test -tags fixtures -run TestWriteLegacyFixture ./engine/) rewrites it.
const fixtureDir = "../testdata/legacy"

// copyFixture lays the legacy fixture out as a bucket of its own.
func copyFixture(t *testing.T) string { return copyDir(t, fixtureDir) }

// copyDir copies the fixture in dir to a bucket directory of its own.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLegacyHistory(t *testing.T) {
	dir := copyFixture(t)
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lts := enginetest.LegacyTables(t)
	var particle *engine.Table
	for _, lt := range lts {
		if lt.Name == "particle" {
			particle = lt
		}
	}
	// Legacy ids differ from the new generation's: schema is identity.
	if nt := particles.Tables()[0]; nt.ID == particle.ID || !particle.Legacy() || nt.Legacy() {
		t.Fatalf("legacy id %s, new id %s", particle.ID, nt.ID)
	}
	f, last, err := engine.ReadLegacy(ctxT(t), b, "legacyworld", "main", particle)
	if err != nil || last != 4 || f.Len() != 9 {
		t.Fatalf("legacy particle history: last tick %d, %d rows, %v", last, f.Len(), err)
	}
	// Rows read as epoch-0: no token, epoch 0, always visible.
	files, _ := bucket.Collect(b.List(ctxT(t), index.LegacyPrefix("legacyworld", "main", particle.ID), ""))
	data, _, _ := b.Get(ctxT(t), files[0].Name)
	before := bytes.Clone(data)
	engine.DecodeFragment(particle, data, func(r engine.StampedRow) bool {
		if r.CommitToken != "" || r.WriterEpoch != 0 {
			t.Fatalf("a legacy row stamped %q/%d", r.CommitToken, r.WriterEpoch)
		}
		return true
	})
	// Bring the world under a catalog and go on; legacy data stays as is.
	w, err := engine.ContinueLegacyWorld(ctxT(t), b, "legacyworld", particles.Tables(), lts, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Tick() != 4 || w.Frame("particle").Len() != 9 || w.Frame("emitter").Len() != 3 || w.NextEntity() != 109 {
		t.Fatalf("continued at tick %d with %d particles, %d emitters, next id %d", w.Tick(), w.Frame("particle").Len(), w.Frame("emitter").Len(), w.NextEntity())
	}
	if err := drive(ctxT(t), w, 8); err != nil {
		t.Fatal(err)
	}
	after, _, _ := b.Get(ctxT(t), files[0].Name)
	if !bytes.Equal(before, after) {
		t.Fatal("a legacy fragment was rewritten")
	}
	s, _, _ := index.Load(ctxT(t), b, "legacyworld")
	if run, _ := s.Run("main"); run.Head != 8 || run.Published != 4 {
		t.Fatalf("run %+v, want ticks 5..8 published", run)
	}
	if a := s.Allowlist("main"); !a.Admits(2, "", 0) || a.Admits(2, "someone", 1) {
		t.Fatal("legacy epoch-0 rows must be admitted; unpublished tokens not")
	}
}
