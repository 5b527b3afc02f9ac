package sql_test

import (
	"errors"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// A tag is a point of its own: the views pinned at tag:NAME are the views
// pinned at the tick it names, in a world and in a fork that tags a tick
// it inherits; worldfs_tags lists the world's tags; a kept script of one
// tag is never reused for another (they name different ticks of one
// unchanged catalog); and a tag the world lacks, or one past the views'
// pin, is not found.
func TestTagsPinTheViews(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 30)
	enginetest.Fork(t, b, "w", "f", 12, 20)
	tag := func(world string, tick int64, name string) {
		t.Helper()
		c, err := index.Open(ctx, b, world, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Tag(ctx, index.LoadFrom(b), index.DefaultRun, index.Moment{Text: "n", Tick: &tick}, name, "message of "+name); err != nil {
			t.Fatal(err)
		}
	}
	tag("w", 7, "early")
	tag("w", 25, "late")
	tag("f", 5, "inherited") // the parent's tick, as the fork sees it
	tag("f", 18, "own")
	reuse, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	views := t.TempDir()
	rows := func(world string, m index.Moment) (int64, int64) {
		t.Helper()
		s, err := wsql.Build(ctx, b, world, wsql.Options{At: &m, Only: true, Dir: views, Reuse: reuse})
		if err != nil {
			t.Fatalf("%s at %s: %v", world, m.Text, err)
		}
		db, err := wsql.Open(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		return count(t, db, "SELECT count(*) FROM particle"), count(t, db, "SELECT coalesce(min(tick), -1) * 1000 + coalesce(max(tick), -1) FROM particle")
	}
	for _, c := range []struct {
		world, tag string
		tick       int64
	}{{"w", "early", 7}, {"w", "late", 25}, {"f", "inherited", 5}, {"f", "own", 18}, {"w", "early", 7}} {
		m, err := index.ParseMoment("tag:"+c.tag, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n, span := rows(c.world, m)
		wantN, wantSpan := rows(c.world, index.Moment{Text: "tick", Tick: &c.tick})
		if n != wantN || span != wantSpan || span != c.tick*1000+c.tick || n == 0 {
			t.Errorf("%s at tag:%s: %d rows of ticks %d; at tick %d: %d rows of ticks %d", c.world, c.tag, n, span, c.tick, wantN, wantSpan)
		}
	}
	s, db := builtViews(t, b, "f", wsql.Options{Dir: views})
	if n := count(t, db, "SELECT count(*) FROM worldfs_tags WHERE world = 'f' AND (name, tick) IN (('inherited', 5), ('own', 18)) AND message = 'message of ' || name AND created_at IS NOT NULL"); n != 2 {
		t.Errorf("worldfs_tags of f: %d of its 2 tags", n)
	}
	if tk, ok, err := s.Resolve("f", index.Moment{Text: "own", Tag: "own"}); err != nil || !ok || tk != 18 {
		t.Errorf("Resolve(f, own) = %d, %v, %v; want 18", tk, ok, err)
	}
	// Another world's tag is not this one's.
	own := index.Moment{Text: "tag:own", Tag: "own"}
	if _, err := wsql.Build(ctx, b, "w", wsql.Options{At: &own, Dir: views}); !errors.Is(err, wsql.ErrNotFound) {
		t.Errorf("w at tag:own (f's): %v, want not found", err)
	}
}
