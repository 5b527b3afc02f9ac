package maintenance_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// names lists every object of b.
func names(t *testing.T, b bucket.Bucket) []string {
	t.Helper()
	as, err := bucket.Collect(b.List(ctxT(t), "", ""))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

// Optimize is worldfs optimize for a Go program: first the exports'
// reference lists (through the function it is given: a failure there
// compacts and writes nothing, for collection keeps the world whole until
// they are written), then compaction up to the head (NoRecent), the
// sidecars and the tick indexes compaction left out. A dry run counts
// what is missing and writes nothing.
func TestOptimizeAsTheCommandDoes(t *testing.T) {
	ctx := ctxT(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cat := simWorld(t, b, "w", 140).Catalog()
	var asked []bool // the dry-run flag of each call of the writer of reference lists
	refs := func(fail error) func(context.Context, bucket.Bucket, string, bool) (maintenance.RefLists, error) {
		return func(_ context.Context, _ bucket.Bucket, world string, dry bool) (maintenance.RefLists, error) {
			if world != "w" {
				t.Errorf("reference lists of world %q, not w", world)
			}
			asked = append(asked, dry)
			r := maintenance.RefLists{Tables: 2, Missing: 1}
			if !dry && fail == nil {
				r.Written = 1
			}
			return r, fail
		}
	}
	before := names(t, b)
	unreadable := errors.New("registry unreadable")
	res, err := maintenance.Optimize(ctx, b, cat, maintenance.OptimizeOptions{Compact: maintenance.CompactOptions{Recent: maintenance.NoRecent}, ExportRefs: refs(unreadable)})
	if !errors.Is(err, unreadable) || res.Done || res.Compact.Windows != 0 || !slices.Equal(names(t, b), before) {
		t.Fatalf("the reference lists unreadable: %+v, %v; want their error, nothing compacted or written", res, err)
	}
	res, err = maintenance.Optimize(ctx, b, cat, maintenance.OptimizeOptions{DryRun: true, ExportRefs: refs(nil)})
	if err != nil || !res.Done || !res.DryRun || res.RefLists.Missing != 1 || res.RefLists.Written != 0 || !slices.Equal(names(t, b), before) {
		t.Fatalf("dry run: %+v, %v; want the missing list counted, nothing written", res, err)
	}
	res, err = maintenance.Optimize(ctx, b, cat, maintenance.OptimizeOptions{Compact: maintenance.CompactOptions{Recent: maintenance.NoRecent}, ExportRefs: refs(nil)})
	if err != nil || !res.Done || res.Compact.Windows == 0 || res.RefLists.Written != 1 || res.Run != index.DefaultRun {
		t.Fatalf("optimize: %+v, %v; want windows compacted and the missing list written", res, err)
	}
	if !slices.Equal(asked, []bool{false, true, false}) {
		t.Fatalf("the writer of reference lists was asked %v; want once a run, dry only in the dry run", asked)
	}
	// Up to the head: the head's window of 64 ticks (128..191) is not
	// whole, every tick before it is compacted.
	s, err := cat.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick(index.DefaultRun, 127)
	if !ok {
		t.Fatal("no tick 127")
	}
	tables, err := tk.Tables()
	if err != nil || len(tables) == 0 || tables[0].Fragments[0].Span == nil {
		t.Fatalf("tick 127 after optimize up to the head names %+v (%v); want a compacted file", tables, err)
	}
}
