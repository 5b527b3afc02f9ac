package engine_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// A world's run parameters are set at its creation (Options.Meta); a
// fork's are its parent's with its own over them. Metadata over a bound
// is refused before anything is written: the name stays free.
func TestRunParametersAtCreateAndFork(t *testing.T) {
	ctx := enginetest.Context(t)
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := enginetest.Quiet
	opts.Meta = map[string]string{"seed": "17", "gravity": "9.81"}
	w, err := engine.CreateWorld(ctx, b, "base", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, w, 5)
	w.Close()
	opts.Meta = map[string]string{"seed": "18", "sweep": "a"}
	f, err := engine.ForkWorld(ctx, b, "base", "base-18", index.DefaultRun, 3, particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for world, want := range map[string]map[string]string{
		"base":    {"seed": "17", "gravity": "9.81"},
		"base-18": {"seed": "18", "gravity": "9.81", "sweep": "a"},
	} {
		s, _, err := index.Load(ctx, b, world)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(s.World.Meta, want) {
			t.Errorf("%s's metadata: %v, want %v", world, s.World.Meta, want)
		}
	}
	opts.Meta = map[string]string{"seed": strings.Repeat("x", index.MaxMetaValueLen+1)}
	for name, call := range map[string]func() error{
		"too-big": func() error { _, err := engine.CreateWorld(ctx, b, "too-big", particles.Tables(), opts); return err },
		"too-big-fork": func() error {
			_, err := engine.ForkWorld(ctx, b, "base", "too-big-fork", index.DefaultRun, 3, particles.Tables(), opts)
			return err
		},
	} {
		if err := call(); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "over the 1024") {
			t.Errorf("%s: %v; want ErrInvalid naming the bound", name, err)
		}
		if _, err := index.ReadMarker(ctx, b, name); err == nil {
			t.Errorf("%s: the refused world's marker was written", name)
		}
	}
}
