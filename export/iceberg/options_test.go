package iceberg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
)

// Bad options are refused before anything is read, by an error that names
// the field and its value.
func TestOptionsRefusedNamingTheField(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	tick := int64(3)
	other, err := index.Open(ctx, b, "other", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, c := range []struct {
		opts iceberg.Options
		want string
	}{
		{iceberg.Options{Base: "file:///x/"}, "a world is required"},
		{iceberg.Options{World: "Bad World", Base: "file:///x/"}, `world id "Bad World"`},
		{iceberg.Options{World: "w", Run: "a/b", Base: "file:///x/"}, `run "a/b"`},
		{iceberg.Options{World: "w", AtTick: &tick, Token: "tok", Base: "file:///x/"}, `AtTick 3 and Token "tok"`},
		{iceberg.Options{World: "w", Prefix: "../up", Base: "file:///x/"}, `Prefix "../up"`},
		{iceberg.Options{World: "w"}, "no URI is known for bucket mem"},
		{iceberg.Options{World: "w", Base: "file:///x/", Catalog: other}, "Catalog is world other's, World is w"},
	} {
		if _, err := iceberg.Export(ctx, b, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Export(%+v): %v; want an error saying %q", c.opts, err, c.want)
		}
		if _, err := iceberg.Expire(ctx, b, c.opts, time.Now()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Expire(%+v): %v; want an error saying %q", c.opts, err, c.want)
		}
	}
}

// The base URI comes from the bucket's Addressable capability, through any
// wrapper: a local bucket, wrapped or not, is file://<root>/.
func TestBaseURIThroughWrappers(t *testing.T) {
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := "file://" + lb.Root() + "/"
	for name, got := range map[string]func() (string, error){
		"local":   func() (string, error) { return iceberg.BaseURI(lb) },
		"wrapped": func() (string, error) { return iceberg.BaseURI(faulty.Wrap(lb, faulty.NewScript())) },
	} {
		if uri, err := got(); err != nil || uri != want {
			t.Errorf("%s: BaseURI = %q, %v; want %q", name, uri, err, want)
		}
	}
	opts := iceberg.Options{World: "w"}
	if opts.EnsureDefaults(faulty.Wrap(lb, faulty.NewScript())); opts.Base != want || opts.Run != "main" || opts.Prefix != "export/iceberg/w/main" {
		t.Errorf("EnsureDefaults: %+v; want Base %q, Run main, the default prefix", opts, want)
	}
}
