package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/worldfs/worldfs/bucket"
)

// LegacyPrefix is where a legacy (v0.2) table's fragments live. They carry
// no commit identity and no manifest names them, so they are found by
// listing this prefix: the one listing of data worldfs does, over history
// that is never written again.
func LegacyPrefix(world, run, tableID string) string {
	return fmt.Sprintf("data/%s/%s/%s/v0.2/", world, run, tableID)
}

// ReadLegacy reads a legacy table's rows at its last tick (the newest
// state the legacy history holds) and returns them with that tick (-1 if
// the table has no rows).
func ReadLegacy(ctx context.Context, b bucket.Bucket, world, run string, t *Table) (*Frame, int64, error) {
	if !t.Legacy() {
		return nil, 0, fmt.Errorf("table %s (%s) is not a legacy table", t.Name, t.ID)
	}
	type fragment struct {
		data []byte
		max  int64
	}
	var frags []fragment
	last := int64(math.MinInt64)
	for a, err := range b.List(ctx, LegacyPrefix(world, run, t.ID), "") {
		if err != nil {
			return nil, 0, err
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return nil, 0, err
		}
		fr := fragment{data: data, max: math.MinInt64}
		if _, err := DecodeFragment(t, data, func(r StampedRow) bool { fr.max = max(fr.max, r.Tick); return false }); err != nil {
			return nil, 0, fmt.Errorf("legacy %s: %w", a.Name, err)
		}
		last = max(last, fr.max)
		frags = append(frags, fr)
	}
	out := NewFrame(t)
	if last == math.MinInt64 {
		return out, -1, nil
	}
	for _, fr := range frags {
		if fr.max < last {
			continue
		}
		f, err := DecodeFragment(t, fr.data, func(r StampedRow) bool { return r.Tick == last })
		if err != nil {
			return nil, 0, err
		}
		for _, e := range f.Entities {
			if err := out.Insert(e, f.Row(e)); err != nil {
				return nil, 0, err
			}
		}
	}
	return out, last, nil
}

// ContinueLegacyWorld brings a legacy (uncoordinated, v0.2) world under a
// catalog: it creates the world's catalog with this writer holding the
// fence, and starts from the legacy history's last tick, read through the
// legacy-name fallback: each new-generation table takes the rows of the
// legacy table of the same name. New ticks go to the new tables; the
// legacy tables stay as they are, visible as epoch-0 history.
func ContinueLegacyWorld(ctx context.Context, b bucket.Bucket, id string, tables, legacy []*Table, opts Options) (*World, error) {
	byName := map[string]*Table{}
	for _, lt := range legacy {
		byName[lt.Name] = lt
	}
	frames := map[string]*Frame{}
	tick := int64(-1)
	var next int64
	for _, t := range tables {
		lt, ok := byName[t.Name]
		if !ok {
			continue
		}
		opts.defaults()
		lf, last, err := ReadLegacy(ctx, b, id, opts.Run, lt)
		if err != nil {
			return nil, err
		}
		f := NewFrame(t)
		for _, e := range lf.Entities {
			if err := f.Insert(e, lf.Row(e)); err != nil {
				return nil, fmt.Errorf("legacy %s → %s: %w", lt.ID, t.ID, err)
			}
			next = max(next, e+1)
		}
		frames[t.Name] = f
		tick = max(tick, last)
	}
	w, err := CreateWorld(ctx, b, id, tables, opts)
	if err != nil {
		return nil, err
	}
	for name, f := range frames {
		w.frames[name] = f
	}
	w.tick, w.nextEntity = tick, next
	return w, nil
}
