package maintenance_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// listAll returns the names of every object in b.
func listAll(t *testing.T, b bucket.Bucket) []string {
	t.Helper()
	var out []string
	for a, err := range b.List(ctxT(t), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Name)
	}
	return out
}

// Compaction's options are refused at its start, naming the field and its
// value, before it reads the catalog or writes anything.
func TestCompactOptionsRefused(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 2).Close()
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	bad := map[string]struct {
		opts maintenance.CompactOptions
		want string
	}{
		"run":                    {maintenance.CompactOptions{Run: "Main/x"}, `compact options: Run: run "Main/x"`},
		"empty table":            {maintenance.CompactOptions{Tables: []string{"particle", ""}}, "compact options: Tables[1] is empty"},
		"windows not nested":     {maintenance.CompactOptions{Windows: []int64{512, 96}}, "compact options: Windows [512 96]"},
		"windows smallest first": {maintenance.CompactOptions{Windows: []int64{8, 64}}, "compact options: Windows [8 64]"},
		"no tick window":         {maintenance.CompactOptions{Windows: []int64{8, 0}}, "compact options: Windows [8 0]"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			before := listAll(t, b)
			_, err := maintenance.Compact(ctx, b, cat, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compact(%+v): %v, want an error saying %q", c.opts, err, c.want)
			}
			if after := listAll(t, b); !slices.Equal(before, after) {
				t.Fatalf("a refused Compact wrote to the bucket: %v became %v", before, after)
			}
		})
	}
	// The defaults are valid.
	if err := new(maintenance.CompactOptions).EnsureDefaults().Validate(); err != nil {
		t.Fatalf("the default compact options: %v", err)
	}
}

// Collection's options are refused at its start, naming the field and its
// value, before it lists or deletes anything.
func TestCollectOptionsRefused(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 2).Close()
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	bad := map[string]struct {
		opts maintenance.CollectOptions
		want string
	}{
		"run":         {maintenance.CollectOptions{Run: "../main"}, `collect options: Run: run "../main"`},
		"max deletes": {maintenance.CollectOptions{MaxDeletes: -1}, "collect options: MaxDeletes -1"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			var seen []string
			c.opts.Progress = func(p maintenance.CollectProgress) { seen = append(seen, p.Phase) }
			_, err := maintenance.Collect(ctx, b, cat, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Collect(%+v): %v, want an error saying %q", c.opts, err, c.want)
			}
			if len(seen) > 0 {
				t.Fatalf("a refused Collect went through phases %v", seen)
			}
		})
	}
	// The defaults are valid, and so is every run.
	if err := new(maintenance.CollectOptions).EnsureDefaults().Validate(); err != nil {
		t.Fatalf("the default collect options: %v", err)
	}
}
