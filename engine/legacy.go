package engine

import (
	"context"
	"fmt"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// legacyHistory is what a legacy table holds: its fragments, the last tick
// any row has, and the largest entity id in any row.
type legacyHistory struct {
	frags     [][]byte
	last      int64
	maxEntity int64
}

func readLegacyHistory(ctx context.Context, b bucket.Bucket, world, run string, t *Table) (*legacyHistory, error) {
	if !t.Legacy() {
		return nil, fmt.Errorf("table %s (%s) is not a legacy table", t.Name, t.ID)
	}
	h := &legacyHistory{last: -1, maxEntity: -1}
	for a, err := range b.List(ctx, index.LegacyPrefix(world, run, t.ID), "") {
		if err != nil {
			return nil, err
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		if _, err := DecodeFragment(t, data, func(r StampedRow) bool {
			h.last, h.maxEntity = max(h.last, r.Tick), max(h.maxEntity, r.Entity)
			return false
		}); err != nil {
			return nil, fmt.Errorf("legacy %s: %w", a.Name, err)
		}
		h.frags = append(h.frags, data)
	}
	return h, nil
}

// at returns the table's rows at tick (none if it has no rows there).
func (h *legacyHistory) at(t *Table, tick int64) (*Frame, error) {
	out := NewFrame(t)
	for _, data := range h.frags {
		f, err := DecodeFragment(t, data, func(r StampedRow) bool { return r.Tick == tick })
		if err != nil {
			return nil, err
		}
		for _, e := range f.Entities {
			if err := out.Insert(e, f.Row(e)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ReadLegacy reads a legacy table's rows at its last tick and returns them
// with that tick (-1 if the table has no rows).
func ReadLegacy(ctx context.Context, b bucket.Bucket, world, run string, t *Table) (*Frame, int64, error) {
	h, err := readLegacyHistory(ctx, b, world, run, t)
	if err != nil {
		return nil, 0, err
	}
	f, err := h.at(t, h.last)
	return f, h.last, err
}

// legacyState is the world state the legacy history ends in: every new
// table takes the rows of the legacy table of its name at the last tick of
// any legacy table (a table with no rows there is empty: its entities were
// despawned), and entity ids continue past every id the history used.
func legacyState(ctx context.Context, b bucket.Bucket, world, run string, tables, legacy []*Table) (map[string]*Frame, int64, int64, error) {
	byName := map[string]*Table{}
	for _, lt := range legacy {
		byName[lt.Name] = lt
	}
	hist := map[string]*legacyHistory{}
	last, next := int64(-1), int64(0)
	for _, lt := range legacy {
		h, err := readLegacyHistory(ctx, b, world, run, lt)
		if err != nil {
			return nil, 0, 0, err
		}
		hist[lt.Name] = h
		last, next = max(last, h.last), max(next, h.maxEntity+1)
	}
	frames := map[string]*Frame{}
	for _, t := range tables {
		lt, ok := byName[t.Name]
		if !ok {
			continue
		}
		lf, err := hist[t.Name].at(lt, last)
		if err != nil {
			return nil, 0, 0, err
		}
		f := NewFrame(t)
		for _, e := range lf.Entities {
			if err := f.Insert(e, lf.Row(e)); err != nil {
				return nil, 0, 0, fmt.Errorf("legacy %s → %s: %w", lt.ID, t.ID, err)
			}
		}
		frames[t.Name] = f
	}
	return frames, last, next, nil
}

// ContinueLegacyWorld brings a legacy (uncoordinated, v0.2) world under a
// catalog: it creates the world's catalog with this writer holding the
// fence, and starts from where the legacy history ends, read through the
// legacy-name fallback (each new-generation table takes the rows of the
// legacy table of the same name). New ticks go to the new tables; the
// legacy tables stay as they are, visible as epoch-0 history. Until the
// world publishes a tick of its own, ResumeWorld falls back the same way
// when given the legacy tables (Options.Legacy).
func ContinueLegacyWorld(ctx context.Context, b bucket.Bucket, id string, tables, legacy []*Table, opts Options) (*World, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, invalid(err)
	}
	frames, tick, next, err := legacyState(ctx, b, id, opts.Run, tables, legacy)
	if err != nil {
		return nil, err
	}
	w, err := CreateWorld(ctx, b, id, tables, opts)
	if err != nil {
		return nil, err
	}
	// Readers name the legacy history's columns from these descriptions.
	if err := registerTables(ctx, b, id, legacy); err != nil {
		w.Close()
		return nil, err
	}
	for name, f := range frames {
		w.frames[name] = f
	}
	w.tick, w.nextEntity = tick, next
	return w, nil
}
