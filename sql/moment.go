package sql

import (
	"fmt"
	"strings"

	"github.com/worldfs/worldfs/index"
)

// Resolve resolves m among the visible ticks of world in the session s
// (Moment.In): what worldfs diff's W@POINT names.
func (s *Script) Resolve(world string, m index.Moment) (int64, bool, error) {
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
		return 0, false, fmt.Errorf("world %s is not in the session (%s): %w", world, strings.Join(s.Worlds(), ", "), ErrNotFound)
	}
	if part.ticks == nil {
		return 0, false, fmt.Errorf("world %s: the views list no ticks", world)
	}
	rows, err := part.ticks.rows()
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
