package fs

import (
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
)

// New refuses options that cannot make a mount, saying which: no cache, a
// remote bucket without a BucketID, a ctl group that does not exist.
func TestOptionsRefusedNamingTheField(t *testing.T) {
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := mem.New(mem.Options{})
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no cache", Options{}, "a cache is required"},
		{"no BucketID", Options{Cache: c}, "needs a BucketID"},
		{"unknown ctl group", Options{Cache: c, BucketID: "id", CtlGroup: "no-such-group"}, `ctl group "no-such-group": no such group`},
	} {
		if m, err := New(b, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			if m != nil {
				m.Close()
			}
			t.Errorf("New with %s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	m, err := New(b, Options{Cache: c, BucketID: "id"})
	if err != nil {
		t.Fatalf("New with a cache and a BucketID: %v", err)
	}
	defer m.Close()
	if o := m.opts; o.Freshness != DefaultFreshness || o.MaxCatalogs != DefaultMaxCatalogs || o.Writer.Holder != o.Holder || o.ctlGID != -1 {
		t.Fatalf("defaults not filled in: %+v", o)
	}
}
