package sql_test

import (
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// Views of a fork pinned by the token of a tick it inherits (its
// parent's, before the fork point) are its views at that tick, as the
// mount's tokens/ and an export by that token find it.
func TestForkViewsByAnInheritedToken(t *testing.T) {
	ctx := ctxT(t)
	lb, _ := local.Open(t.TempDir())
	enginetest.World(t, lb, "w", 30).Close()
	enginetest.Fork(t, lb, "w", "f", 20, 40).Close()
	v, err := index.OpenView(ctx, index.LoadFrom(lb), "f", index.DefaultRun)
	if err != nil {
		t.Fatal(err)
	}
	inherited, ok := v.Tick(10)
	if !ok || inherited.World != "w" {
		t.Fatalf("f's view has no tick 10 of w: %+v", inherited)
	}
	at := int64(10)
	byToken, atTick := views(t, lb, "f", wsql.Options{Token: inherited.CommitToken}), views(t, lb, "f", wsql.Options{AtTick: &at})
	for _, q := range []string{"SELECT max(tick) FROM particle", "SELECT count(*) FROM particle", "SELECT count(*) FROM worldfs_ticks"} {
		got, want := count(t, byToken, q), count(t, atTick, q)
		if got != want || q == "SELECT max(tick) FROM particle" && got != 10 {
			t.Fatalf("%s: %d by the token of tick 10, %d at tick 10", q, got, want)
		}
	}
}
