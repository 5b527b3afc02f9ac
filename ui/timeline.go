package ui

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/worldfs/worldfs/index"
)

// Timeline is a run's ticks over wall-clock time and the commit events
// on the same axis, all from the catalog.
type Timeline struct {
	World string `json:"world"`
	Run   string `json:"run"`
	// Ticks are the visible ticks (a fork's inherited ones first), each
	// [tick, published_unix_ms] (0: not recorded).
	Ticks [][2]int64 `json:"ticks"`
	// Events are the world's own commits other than tick publications
	// (fences, status changes, claims, compactions, commands), oldest
	// first, from the newest MaxLogEntries entries of its log.
	Events []Event `json:"events"`
	// LogFrom is the first sequence the events were read from (older
	// entries were collected or lie past MaxLogEntries).
	LogFrom uint64   `json:"log_from"`
	Views   []string `json:"views"`
}

// Event is one commit of the catalog log, as worldfs log shows it.
type Event struct {
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"`
	// UnixMs is when it was committed: the entry's own time where it
	// records one (world.create, claims), else the time of the newest
	// entry before it that does (Approx).
	UnixMs int64  `json:"unix_ms"`
	Approx bool   `json:"approx,omitempty"`
	Run    string `json:"run,omitempty"`
	Tick   *int64 `json:"tick,omitempty"`
	Claim  string `json:"claim,omitempty"`
	Token  string `json:"token,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// eventLog is a world's events read so far; each request reads only the
// entries committed since.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	next   uint64 // the next sequence to read (0: none read yet)
	from   uint64
	lastMs int64
}

func (s *Server) timeline(ctx context.Context, world, run string) (*Timeline, error) {
	v, err := s.view(ctx, world, run)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{World: world, Run: run, Ticks: [][2]int64{}}
	v.Ticks(math.MinInt64, math.MaxInt64, func(t index.TickRef) bool {
		tl.Ticks = append(tl.Ticks, [2]int64{t.Tick.Tick, t.PublishedUnixMs})
		return true
	})
	own := v.Segments[len(v.Segments)-1].State
	tl.Events, tl.LogFrom, err = s.events(ctx, world, own.Seq)
	if err != nil {
		return nil, err
	}
	vs, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	tl.Views = vs.script.Views
	return tl, nil
}

// events returns world's events up to sequence tip.
func (s *Server) events(ctx context.Context, world string, tip uint64) ([]Event, uint64, error) {
	s.mu.Lock()
	l := s.mu.events[world]
	if l == nil {
		l = &eventLog{}
		if s.mu.catalogs[world] != nil { // kept as long as its catalog
			s.mu.events[world] = l
		}
	}
	s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if tip == 0 {
		return []Event{}, 0, nil
	}
	if l.next == 0 || l.next+s.opts.MaxLogEntries <= tip {
		oldest, err := s.oldestSeq(ctx, world)
		if err != nil {
			return nil, 0, err
		}
		l.events, l.lastMs = nil, 0
		l.next = oldest
		if tip >= s.opts.MaxLogEntries {
			l.next = max(oldest, tip-s.opts.MaxLogEntries+1)
		}
		l.from = l.next
	}
	if l.next <= tip {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		for c, err := range index.Changes(ctx, s.opts.Bucket, world, l.next, time.Second) {
			if err != nil {
				if errors.Is(err, index.ErrResync) {
					l.next = 0 // collected meanwhile: start again from the oldest
				}
				return nil, 0, err
			}
			if e, ok := l.event(c); ok {
				l.events = append(l.events, e)
			}
			l.next = c.Seq + 1
			if c.Seq >= tip {
				break
			}
		}
	}
	out := make([]Event, len(l.events))
	copy(out, l.events)
	return out, l.from, nil
}

// oldestSeq is the first sequence world's log still holds.
func (s *Server) oldestSeq(ctx context.Context, world string) (uint64, error) {
	for a, err := range s.opts.Bucket.List(ctx, index.LogPrefix(world), "") {
		if err != nil {
			return 0, err
		}
		return index.ParseSlotName(world, a.Name)
	}
	return 1, nil
}

// event turns a change into an event; tick publications are the ticks
// themselves, not events.
func (l *eventLog) event(c index.Change) (Event, bool) {
	e := c.Entry
	ev := Event{Seq: c.Seq, Kind: string(e.Kind)}
	ms := int64(0)
	switch {
	case e.TickPublish != nil:
		if p := e.TickPublish; p.PublishedUnixMs != 0 {
			l.lastMs = p.PublishedUnixMs
		}
		return Event{}, false
	case e.WorldCreate != nil:
		ms = e.WorldCreate.CreatedUnixMs
	case e.FenceAcquire != nil:
		ev.Detail = "holder " + e.FenceAcquire.Holder
		if e.FenceAcquire.Resume {
			ev.Detail += " (resume)"
		}
	case e.WorldStatus != nil:
		ev.Detail = e.WorldStatus.Status
		if e.WorldStatus.WriterMode != "" {
			ev.Detail += ", " + e.WorldStatus.WriterMode
		}
	case e.Claim != nil:
		ev.Run, ev.Claim, ev.Token, ms = e.Claim.Key.Run, e.Claim.Key.String(), e.Claim.CommitToken, e.Claim.NowMs
	case e.Rewrite != nil:
		ev.Run, ev.Detail = e.Rewrite.Run, e.Rewrite.Table
		if e.Rewrite.Tick != 0 {
			ev.Tick = &e.Rewrite.Tick
		}
		if sp := e.Rewrite.Span; sp != nil {
			from, to := sp.From, sp.To
			ev.Tick = &to
			ev.Detail = e.Rewrite.Table + " ticks " + itoa(from) + "–" + itoa(to)
		}
	case e.Command != nil:
		ev.Run, ev.Tick = e.Command.Run, &e.Command.Due
	}
	if ms != 0 {
		ev.UnixMs, l.lastMs = ms, ms
	} else {
		ev.UnixMs, ev.Approx = l.lastMs, true
	}
	return ev, true
}
