package index

import (
	"context"
	"fmt"
	"path"
	"slices"

	"github.com/worldfs/worldfs/bucket"
)

// The worlds of a sweep (docs/ARCHITECTURE.md, "A read through the
// views"): those whose ids match a glob, or a world and every fork below
// it. Both read the world directory only.

// MatchWorlds returns the ids of b's worlds that match glob (path.Match:
// * ? [...]), in id order. A glob that matches no world is an error
// wrapping ErrNotFound; a malformed one is path.ErrBadPattern.
func MatchWorlds(ctx context.Context, b bucket.Bucket, glob string) ([]string, error) {
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("worlds %q: %w (a glob: * any characters, ? one, [a-z] one of a class)", glob, err)
	}
	entries, err := ListWorldEntries(ctx, b)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if ok, _ := path.Match(glob, e.ID); ok {
			out = append(out, e.ID)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no world matches %q (of the bucket's %d worlds; worldfs worlds lists them): %w", glob, len(entries), ErrNotFound)
	}
	return out, nil
}

// LineageWorlds returns world and every fork below it (its forks, their
// forks, …), world first, then the others in id order. A world that does
// not exist is an error wrapping ErrNotFound.
func LineageWorlds(ctx context.Context, b bucket.Bucket, world string) ([]string, error) {
	markers, err := ListWorlds(ctx, b)
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	found := false
	for _, m := range markers {
		found = found || m.ID == world
		if m.Parent != "" {
			children[m.Parent] = append(children[m.Parent], m.ID)
		}
	}
	if !found {
		return nil, fmt.Errorf("world %s does not exist (worldfs worlds lists them): %w", world, ErrNotFound)
	}
	var below []string
	seen := map[string]bool{world: true}
	for queue := []string{world}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			if !seen[c] {
				seen[c] = true
				below = append(below, c)
				queue = append(queue, c)
			}
		}
	}
	slices.Sort(below)
	return append([]string{world}, below...), nil
}
