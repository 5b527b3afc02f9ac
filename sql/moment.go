package sql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/index"
)

// Resolve resolves m among the visible ticks of world in the session s
// (Moment.In): what worldfs diff's W@POINT names.
func (s *Script) Resolve(world string, m index.Moment) (int64, bool, error) {
	part, rows, err := s.ticksOf(world)
	if err != nil {
		return 0, false, err
	}
	if m.Tag != "" {
		t, err := part.resolveTag(m.Tag, rows)
		return t, err == nil, m.NotATag(err)
	}
	return m.In(func(yield func(index.TickAt) bool) {
		for _, r := range rows {
			if !yield(index.TickAt{Tick: r.Tick, PublishedMs: r.PublishedMs, Token: r.CommitToken}) {
				return
			}
		}
	})
}

// ticksOf returns the part of the session s that is world's views and
// the ticks they show, in order.
func (s *Script) ticksOf(world string) (*Script, []tickRow, error) {
	part := s
	if s.parts != nil {
		part = nil
		for _, p := range s.parts {
			if p.World == world {
				part = p
			}
		}
	}
	if part == nil || part.World != world {
		return nil, nil, fmt.Errorf("world %s is not in the session (%s): %w", world, strings.Join(s.Worlds(), ", "), ErrNotFound)
	}
	if part.ticks == nil { // no visible tick
		return part, nil, nil
	}
	rows, err := part.ticks.rows()
	return part, rows, err
}

// visibleTick returns tick t of world if its views show it, or with t
// nil their newest; ErrNotFound if they show no such tick.
func (s *Script) visibleTick(world string, t *int64) (int64, error) {
	_, rows, err := s.ticksOf(world)
	if err != nil {
		return 0, err
	}
	if t == nil {
		if len(rows) == 0 {
			return 0, fmt.Errorf("world %s has no visible tick: %w", world, ErrNotFound)
		}
		return rows[len(rows)-1].Tick, nil
	}
	if _, ok := slices.BinarySearchFunc(rows, *t, func(r tickRow, t int64) int { return cmpInt(r.Tick, t) }); !ok {
		return 0, fmt.Errorf("world %s has no visible tick %d: %w", world, *t, ErrNotFound)
	}
	return *t, nil
}
