package integration

import (
	"strconv"
	"testing"

	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// A token is the same tick to every reader: tokens/<token> of a fork
// whose own tick 20 carries the token of its parent's tick 7 (the tick
// the token names, visible in the fork) is the tick the view's token
// lookup answers (index.View.Token: what worldfs sql --token and worldfs
// export --token pin).
func TestForkTokenIsOneTickToEveryReader(t *testing.T) {
	ctx := ctxT(t)
	b := localBucket(t)
	tok := func(tick int64) string { return index.TickToken(tick, [16]byte{9}) }
	publish := func(world string, c *index.Catalog, epoch, tick int64, token string) {
		t.Helper()
		if _, err := c.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath(world, "main", "t", token, 0), Rows: 1}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	p, pe, err := index.CreateWorld(ctx, b, "p", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for tick := range int64(11) {
		publish("p", p, pe, tick, tok(tick))
	}
	f, fe, err := index.CreateWorld(ctx, b, "f", index.WorldCreate{Parent: "p", ForkRun: "main", ForkTick: 10, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	publish("f", f, fe, 20, tok(7))
	for _, w := range []string{"p", "f"} {
		if _, err := b.Create(ctx, index.TableInfoPath(w, "t"), []byte(`{"id":"t","name":"t","columns":[]}`)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := index.OpenView(ctx, index.LoadFrom(b), "f", "main")
	if err != nil {
		t.Fatal(err)
	}
	r, ok := v.Token(tok(7))
	if !ok {
		t.Fatalf("the view of f finds no token %s", tok(7))
	}
	mt := testMount(t, b)
	if got := xattr(t, mt.path("f", "tokens", tok(7)), wfs.XattrTick); got != strconv.FormatInt(r.Tick.Tick, 10) {
		t.Fatalf("tokens/%s of fork f is tick %s in the mount, tick %d (%s) to the view's token lookup (sql --token, export --token)", tok(7), got, r.Tick.Tick, r.World)
	}
}
