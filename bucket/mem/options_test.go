package mem

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Negative latencies, intervals, throughputs and timeouts are refused by
// Validate, naming the field and its value, and New panics with that
// error.
func TestOptionsRefusedNamingTheField(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Timeout: -time.Second}, "Timeout -1s is negative"},
		{Options{Profile: Profile{Read: Dist{P50: -time.Millisecond}}}, "Profile.Read {P50 -1ms"},
		{Options{Profile: Profile{MutationInterval: -time.Second}}, "Profile.MutationInterval -1s"},
		{Options{Profile: Profile{UploadBytesPerSec: -5}}, "Profile.UploadBytesPerSec -5"},
	} {
		if err := c.opts.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v; want an error saying %q", c.opts, err, c.want)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("New(%+v) panicked with %v; want %q", c.opts, r, c.want)
				}
			}()
			New(c.opts)
		}()
	}
	for name, p := range Profiles {
		if err := (&Options{Profile: p}).Validate(); err != nil {
			t.Errorf("profile %s: %v", name, err)
		}
	}
}
