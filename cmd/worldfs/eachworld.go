package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// worldsFlags are how a maintenance command (optimize, gc, check) names
// the worlds it works on: --world W, --worlds GLOB or --lineage W, one of
// them; the worlds then go one after another (eachWorld).
type worldsFlags struct {
	world, worlds, lineage *string
	verb                   string // what the command does to a world: "compact"
}

func (w *worldsFlags) define(fs *flag.FlagSet, verb string) {
	w.verb = verb
	w.world = fs.String("world", "", "world to "+verb+" (or --worlds, --lineage)")
	w.worlds = fs.String("worlds", "", verb+" every world whose id matches this `GLOB` ('sweep-*'), one after another")
	w.lineage = fs.String("lineage", "", verb+" `WORLD` and every fork below it (its forks, theirs, …), one after another")
}

// validate fails unless exactly one of the flags is given.
func (w *worldsFlags) validate() error {
	picked := 0
	for _, p := range []*string{w.world, w.worlds, w.lineage} {
		if *p != "" {
			picked++
		}
	}
	if picked != 1 {
		return usagef("give the worlds to %s: --world W, --worlds GLOB or --lineage W (one of them)", w.verb)
	}
	return nil
}

// resolve returns the worlds the flags name in b: --world's alone (not
// looked up: the command says whether it exists), or those --worlds or
// --lineage find (none found is a notFoundError).
func (w *worldsFlags) resolve(ctx context.Context, b bucket.Bucket) ([]string, error) {
	var worlds []string
	var err error
	switch {
	case *w.worlds != "":
		worlds, err = index.MatchWorlds(ctx, b, *w.worlds)
	case *w.lineage != "":
		worlds, err = index.LineageWorlds(ctx, b, *w.lineage)
	default:
		worlds = []string{*w.world}
	}
	if err != nil {
		return nil, pickError(err)
	}
	return worlds, nil
}

// eachWorld runs fn on each of worlds in turn; label names the world in
// the progress of several (empty for one). One world's error is the
// command's. Of several, a world that fails is named on stderr (and,
// with asJSON, in a JSON line of its own: world, run if not empty, error)
// and the others go on; the command then fails (exit 1), saying what
// became of the others (done: "compacted"), and an interrupt stops it
// between worlds.
func eachWorld(ctx context.Context, cmd string, worlds []string, run string, asJSON bool, out io.Writer, done string, fn func(world, label string) error) error {
	if len(worlds) == 1 {
		return fn(worlds[0], "")
	}
	var failed []string
	for i, w := range worlds {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d of the %d worlds (%s and those after it left as they were): %w", i, len(worlds), w, err)
		}
		err := fn(w, fmt.Sprintf("world %d of %d, %s: ", i+1, len(worlds), w))
		if err == nil {
			continue
		}
		failed = append(failed, w)
		fmt.Fprintf(os.Stderr, "worldfs %s: world %s: %v\n", cmd, w, err)
		if asJSON {
			line := map[string]any{"world": w, "error": err.Error()}
			if run != "" {
				line["run"] = run
			}
			if jerr := json.NewEncoder(out).Encode(line); jerr != nil {
				return jerr
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of the %d worlds failed, each named above with why (%s); the others were %s", len(failed), len(worlds), strings.Join(failed, ", "), done)
	}
	return nil
}
