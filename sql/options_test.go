package sql

import (
	"testing"

	"github.com/worldfs/worldfs/index"
)

// EnsureDefaults then Validate: the default run, and Only needs a tick.
func TestOptionsDefaultsThenValidate(t *testing.T) {
	o := Options{}
	if err := o.EnsureDefaults().Validate(); err != nil || o.Run != index.DefaultRun {
		t.Fatalf("zero options: run %q, %v", o.Run, err)
	}
	tick := int64(3)
	for _, bad := range []Options{{Only: true}, {Run: "Main/x"}} {
		if err := bad.EnsureDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if err := (&Options{Only: true, AtTick: &tick}).EnsureDefaults().Validate(); err != nil {
		t.Errorf("Only at tick 3: %v", err)
	}
}
