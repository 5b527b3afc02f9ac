package sql_test

import (
	"context"
	"math"
	"testing"

	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	wsql "github.com/worldfs/worldfs/sql"
)

// A world in GCS (the fake server, over HTTP) is queried through the disk
// cache, with the same results the catalog and fragments give.
func TestViewsOfAGCSWorldThroughTheCache(t *testing.T) {
	gcstest.Start(t, "worlds")
	b, err := bucketurl.Open(context.Background(), "gs://worlds/prod")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := enginetest.World(t, b, "w", 8)
	w.Close()
	if _, err := wsql.Build(ctxT(t), b, "w", wsql.Options{Dir: t.TempDir()}); err == nil {
		t.Fatal("views of a remote bucket without a cache")
	}
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := wsql.Build(ctxT(t), b, "w", wsql.Options{Cache: c, BucketID: "gs-worlds-prod", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want, _ := expected(t, b, "w", particles.Tables()[0], math.MaxInt64)
	if got := count(t, db, "SELECT count(*) FROM particle"); got != want || want == 0 {
		t.Fatalf("GCS world through the cache: %d rows, want %d", got, want)
	}
	misses := c.Stats().Misses
	if _, err := wsql.Build(ctxT(t), b, "w", wsql.Options{Cache: c, BucketID: "gs-worlds-prod", Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Misses != misses || st.Hits == 0 {
		t.Fatalf("the second build refetched: %+v", st)
	}
}
