package sql_test

import (
	"os"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// reuseBuild builds the views of world with opts, keeping and reusing
// scripts in the cache in cacheDir (opened anew, as a fresh process does).
func reuseBuild(t *testing.T, b *local.Bucket, world, cacheDir string, opts wsql.Options) (*wsql.Script, error) {
	t.Helper()
	return wsql.Build(ctxT(t), b, world, reuseIn(t, cacheDir, opts))
}

// reuseIn returns opts keeping and reusing scripts in the cache in
// cacheDir (opened anew).
func reuseIn(t *testing.T, cacheDir string, opts wsql.Options) wsql.Options {
	t.Helper()
	c, err := cache.Open(cacheDir, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Reuse = c
	return opts
}

// A reused script still has its files checked as a build's are: a
// fragment replaced in place (written again, the same size with one byte
// flipped) fails a query of the views although the catalog did not
// change.
func TestReusedViewsCheckTheirFiles(t *testing.T) {
	b, frag := verifyWorld(t)
	cacheDir, dir := t.TempDir(), t.TempDir()
	if _, err := reuseBuild(t, b, "w", cacheDir, wsql.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	builds := wsql.Builds()
	if _, err := reuseBuild(t, b, "w", cacheDir, wsql.Options{Dir: dir}); err != nil || wsql.Builds() != builds {
		t.Fatalf("the unchanged world's views were built again (%d builds, %v); want the kept script", wsql.Builds()-builds, err)
	}
	p, _ := b.Path(frag.Path)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	orig[len(orig)/2] ^= 1
	if err := os.WriteFile(p+".new", orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	err = queryViews(t, b, reuseIn(t, cacheDir, wsql.Options{Dir: dir}), wholeTable)
	wantCorrupt(t, err, frag.Path, "sha256")
	if wsql.Builds() != builds {
		t.Fatalf("the views were built again; the kept script's check should have caught the file")
	}
}

// A fork's views are reused only while its parent's catalog is unchanged
// too: a tick the parent commits after the fork builds them again; and a
// kept script whose fragment list was collected is built again, not
// served without it.
func TestReusedViewsFollowEveryCatalogOfTheLineage(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	p := enginetest.World(t, b, "p", 20)
	enginetest.Fork(t, b, "p", "f", 10, 15).Close()
	cacheDir, dir := t.TempDir(), t.TempDir()
	s, err := reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	builds := wsql.Builds()
	if _, err := reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir}); err != nil || wsql.Builds() != builds {
		t.Fatalf("the unchanged fork's views were built again (%d builds, %v)", wsql.Builds()-builds, err)
	}
	enginetest.Run(t, p, 21)
	if _, err := reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir}); err != nil || wsql.Builds() != builds+1 {
		t.Fatalf("after the parent committed a tick: %d builds (%v); want the views built again", wsql.Builds()-builds, err)
	}
	if err := os.Remove(s.FragmentList); err != nil {
		t.Fatal(err)
	}
	s, err = reuseBuild(t, b, "f", cacheDir, wsql.Options{Dir: dir})
	if err != nil || wsql.Builds() != builds+2 {
		t.Fatalf("with its fragment list collected: %d builds (%v); want the views built again", wsql.Builds()-builds, err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db, "SELECT max(tick) FROM particle"); n != 15 {
		t.Fatalf("the fork's views end at tick %d, want 15", n)
	}
}
