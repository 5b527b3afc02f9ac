package cache

import (
	"strings"
	"testing"
	"time"
)

// A negative size or grace is refused at Open, naming the field and its
// value; zero takes the default.
func TestOptionsRefusedNamingTheField(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{MaxBytes: -1}, "MaxBytes -1 is negative"},
		{Options{Grace: -time.Second}, "Grace -1s is negative"},
	} {
		if d, err := Open(t.TempDir(), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v, %v; want an error saying %q", c.opts, d, err, c.want)
		}
	}
	d, err := Open(t.TempDir(), Options{})
	if err != nil || d.opts.MaxBytes != DefaultMaxBytes || d.opts.Grace != DefaultGrace {
		t.Fatalf("Open with zero options: %v, %+v; want the defaults", err, d)
	}
}
