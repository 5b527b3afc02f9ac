package local

import (
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// A negative timeout is refused at OpenWith, naming the field and its
// value; zero takes the default.
func TestOptionsRefusedNamingTheField(t *testing.T) {
	if b, err := OpenWith(t.TempDir(), Options{Timeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "Timeout -1s is negative") {
		t.Fatalf("OpenWith(Timeout -1s) = %v, %v; want an error naming the timeout", b, err)
	}
	b, err := OpenWith(t.TempDir(), Options{})
	if err != nil || b.timeout != bucket.DefaultTimeout {
		t.Fatalf("OpenWith with zero options: %v, %v; want the default timeout", b, err)
	}
}
