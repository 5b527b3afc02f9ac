package sql_test

import (
	"testing"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// Views of a fork pinned by the token of a tick it inherits, a token that
// names its tick, read what views at that tick read (the tick found in the
// part of the ancestor that published it): not the parent's summarized
// shards, which the whole states would decode.
func TestViewsByAnInheritedTokenCostWhatAtCosts(t *testing.T) {
	ctx := ctxT(t)
	b := summarizedWorlds(t)
	g, err := engine.ForkWorld(ctx, b, "s", "g", index.DefaultRun, 9030, summaryTables(t), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	g.Close()
	s, _, err := index.Load(ctx, b, "s")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick(index.DefaultRun, 9020)
	if !ok {
		t.Fatal("s has no tick 9020")
	}
	if n, named := index.TokenTick(tk.CommitToken); !named || n != 9020 {
		t.Fatalf("tick 9020's token %s names no tick 9020", tk.CommitToken)
	}
	at := int64(9020)
	hide(t, b)
	defer restore(t, b)
	byTick, err := wsql.Build(ctx, b, "g", wsql.Options{AtTick: &at, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("views of g at tick 9020 without s's summarized shards: %v", err)
	}
	byToken, err := wsql.Build(ctx, b, "g", wsql.Options{Token: tk.CommitToken, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("views of g by the token of its inherited tick 9020 without s's summarized shards (views at that tick need none): %v", err)
	}
	if byToken.AtTick != byTick.AtTick {
		t.Fatalf("views by the token end at tick %d, at the tick %d", byToken.AtTick, byTick.AtTick)
	}
}
