package ui

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// Timeline is a run's ticks over wall-clock time and the commit events
// on the same axis, all from the catalog. A long run's ticks go as spans
// of consecutive numbers and a sample of their publish times (a 100,000-
// tick run's [tick, time] pairs were 2.2 MB of JSON a visit); a tick's own
// time comes with its rows (TickPage).
type Timeline struct {
	World string `json:"world"`
	Run   string `json:"run"`
	// Ticks is how many ticks are visible; Spans are their numbers
	// (a fork's inherited ones first), as runs of consecutive numbers
	// [first, last], ascending.
	Ticks int        `json:"ticks"`
	Spans [][2]int64 `json:"spans"`
	// Published is [tick, published_unix_ms] (0: not recorded) of every
	// visible tick, or of maxTimePoints of them evenly spread, the first
	// and the newest always: the chart of ticks over wall-clock time.
	Published [][2]int64 `json:"published"`
	// Events are the world's own commits other than tick publications
	// (fences, status changes, claims, compactions, commands), oldest
	// first: the newest of its log, read backward (eventLog); older ones
	// are asked of /api/w/{world}/events?before=LogFrom.
	Events []Event `json:"events"`
	// LogFrom is the first sequence the events were read from (1: the
	// log's start; older entries were collected, or not read yet).
	LogFrom uint64 `json:"log_from"`
	// LogTo is the newest sequence of the world's log the events were
	// read to: entries LogFrom..LogTo were read, and those that are not
	// events publish ticks.
	LogTo uint64   `json:"log_to"`
	Views []string `json:"views"`
	// Lineage is where the run's ticks come from, oldest first: for a
	// fork, each ancestor's run up to its fork point (UpTo), then the
	// world's own run (UpTo null). A segment's UpTo is where the next
	// one forked from it: the timeline marks it.
	Lineage []LineageSegment `json:"lineage"`
	// Tags are the world's tags that name a visible tick of the run, by
	// tick then name: marks on the timeline.
	Tags []TimelineTag `json:"tags"`
}

// LineageSegment is one world's part of a run's ticks (Timeline.Lineage).
type LineageSegment struct {
	World string `json:"world"`
	Run   string `json:"run"`
	UpTo  *int64 `json:"up_to"`
}

// TimelineTag is a tag on the timeline: its name, the tick it names, its
// message and when it was made.
type TimelineTag struct {
	Name    string `json:"name"`
	Tick    int64  `json:"tick"`
	Message string `json:"message,omitempty"`
	UnixMs  int64  `json:"unix_ms"`
}

// maxTimePoints bounds Timeline.Published; maxKeptEvents the events the
// server keeps of a world (the newest).
const (
	maxTimePoints = 2000
	maxKeptEvents = 10_000
)

// TickNumbers returns the numbers of the visible ticks, ascending.
func (tl *Timeline) TickNumbers() []int64 {
	out := make([]int64, 0, tl.Ticks)
	for _, sp := range tl.Spans {
		for t := sp[0]; t <= sp[1]; t++ {
			out = append(out, t)
		}
	}
	return out
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
	// From is the first tick of a compaction's span (Tick its last).
	From   *int64 `json:"from,omitempty"`
	Claim  string `json:"claim,omitempty"`
	Token  string `json:"token,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// eventLog is a world's events read so far: those of every entry from
// sequence from to next-1, oldest first. A request reads the entries
// committed since (forward), or, the first time or once too many were
// committed since, the newest slots backward until it holds
// Options.MaxEvents events or has read Options.MaxLogEntries entries; a
// page asks for older ones (eventsBefore), read backward the same way.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	from   uint64 // the first sequence read (0: none read yet)
	next   uint64 // the next sequence to read
	lastMs int64  // the time of the newest entry read that records one
}

func (s *Server) timeline(ctx context.Context, world, run string) (*Timeline, error) {
	v, err := s.view(ctx, world, run)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{World: world, Run: run, Spans: [][2]int64{}}
	v.Ticks(math.MinInt64, math.MaxInt64, func(t index.TickRef) bool {
		if n := len(tl.Spans); n > 0 && tl.Spans[n-1][1] == t.Tick.Tick-1 {
			tl.Spans[n-1][1]++
		} else {
			tl.Spans = append(tl.Spans, [2]int64{t.Tick.Tick, t.Tick.Tick})
		}
		tl.Ticks++
		return true
	})
	tl.Published = make([][2]int64, 0, min(tl.Ticks, s.timePoints+1))
	every := (tl.Ticks + s.timePoints - 1) / max(s.timePoints, 1)
	i := 0
	v.Ticks(math.MinInt64, math.MaxInt64, func(t index.TickRef) bool {
		if i%max(every, 1) == 0 || i == tl.Ticks-1 {
			tl.Published = append(tl.Published, [2]int64{t.Tick.Tick, t.PublishedUnixMs})
		}
		i++
		return true
	})
	for i, seg := range v.Segments {
		ls := LineageSegment{World: seg.World, Run: seg.Run}
		if i < len(v.Segments)-1 {
			upTo := seg.UpTo
			ls.UpTo = &upTo
		}
		tl.Lineage = append(tl.Lineage, ls)
	}
	own := v.Segments[len(v.Segments)-1].State
	tl.LogTo = own.Seq
	tl.Tags = []TimelineTag{}
	for _, tg := range own.Tags() {
		if t, err := index.TickOfTag(v, tg.Name, math.MaxInt64); err == nil {
			tl.Tags = append(tl.Tags, TimelineTag{Name: tg.Name, Tick: t.Tick.Tick, Message: tg.Message, UnixMs: tg.CreatedUnixMs})
		}
	}
	slices.SortFunc(tl.Tags, func(a, b TimelineTag) int {
		return cmp.Or(cmp.Compare(a.Tick, b.Tick), strings.Compare(a.Name, b.Name))
	})
	tl.Events, tl.LogFrom, err = s.events(ctx, world, own.Seq)
	if err != nil {
		return nil, err
	}
	vs, err := s.viewsOf(ctx, world, run)
	if err != nil {
		return nil, err
	}
	tl.Views = vs.Script.Views
	return tl, nil
}

// eventLogOf returns the events the server keeps of world (kept as long
// as its catalog).
func (s *Server) eventLogOf(world string) *eventLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.mu.events[world]
	if l == nil {
		l = &eventLog{}
		if s.catalogs.Contains(world) {
			s.mu.events[world] = l
		}
	}
	return l
}

// events returns world's events up to sequence tip, and the first
// sequence they were read from.
func (s *Server) events(ctx context.Context, world string, tip uint64) ([]Event, uint64, error) {
	l := s.eventLogOf(world)
	l.mu.Lock()
	defer l.mu.Unlock()
	if tip == 0 {
		return []Event{}, 0, nil
	}
	if l.from == 0 || l.next+s.opts.MaxLogEntries <= tip {
		evs, from, newestMs, err := s.readBack(ctx, world, tip)
		if err != nil {
			return nil, 0, err
		}
		l.events, l.from, l.next, l.lastMs = evs, from, tip+1, newestMs
	}
	if l.next <= tip {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		for c, err := range index.Changes(ctx, s.opts.Bucket, world, l.next, time.Second) {
			if err != nil {
				if errors.Is(err, index.ErrResync) {
					l.from = 0 // collected meanwhile: read backward again
				}
				return nil, 0, err
			}
			if e, ok := eventOf(c.Seq, &c.Entry, &l.lastMs); ok {
				l.events = append(l.events, e)
			}
			l.next = c.Seq + 1
			if c.Seq >= tip {
				break
			}
		}
	}
	l.trim(s.keptEvents)
	return slices.Clone(l.events), l.from, nil
}

// trim keeps the newest n events: a long-lived server following a busy
// world keeps a bounded list, and a page asks again for older ones.
func (l *eventLog) trim(n int) {
	if k := len(l.events) - n; k > 0 {
		l.from = l.events[k-1].Seq + 1 // the entries after the last one dropped
		l.events = slices.Delete(l.events, 0, k)
	}
}

// EventPage is a page of older events (eventsBefore): those of the
// entries from LogFrom up to the sequence asked, oldest first.
type EventPage struct {
	Events  []Event `json:"events"`
	LogFrom uint64  `json:"log_from"`
}

// eventsBefore returns world's events before sequence before, read
// backward as the timeline reads the newest; the server keeps them when
// they continue what it keeps.
func (s *Server) eventsBefore(ctx context.Context, world string, before uint64) (*EventPage, error) {
	if _, err := s.catalog(ctx, world); err != nil {
		return nil, err
	}
	if before <= 1 {
		return &EventPage{Events: []Event{}, LogFrom: before}, nil
	}
	l := s.eventLogOf(world)
	l.mu.Lock()
	defer l.mu.Unlock()
	evs, from, newestMs, err := s.readBack(ctx, world, before-1)
	if err != nil {
		return nil, err
	}
	if l.from == before {
		// Events of l read before a time was known take the newest one
		// of the entries before them.
		for i := range l.events {
			if !l.events[i].Approx || l.events[i].UnixMs != 0 {
				break
			}
			l.events[i].UnixMs = newestMs
		}
		l.events = append(slices.Clone(evs), l.events...)
		l.from = from
		l.trim(s.keptEvents)
	}
	return &EventPage{Events: evs, LogFrom: from}, nil
}

// readBack reads world's slots newest first, from the one ending at
// sequence to (a catalog state's sequence, or one before the first of a
// slot), until it holds MaxEvents events or has read MaxLogEntries
// entries, or the log's oldest slot. It returns the events oldest first,
// the first sequence read, and the time of the newest entry read that
// records one (0: none).
func (s *Server) readBack(ctx context.Context, world string, to uint64) ([]Event, uint64, int64, error) {
	// The names of the slots that begin within the bound, in one
	// listing; at least the slot holding to, which may begin before it.
	floor := uint64(0)
	if to > s.opts.MaxLogEntries {
		floor = to - s.opts.MaxLogEntries
	}
	firsts, err := s.slotsWithin(ctx, world, floor, to)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(firsts) == 0 && floor > 0 {
		wider, err := s.slotsWithin(ctx, world, floor-min(floor, index.MaxSlotEntries), to)
		if err != nil {
			return nil, 0, 0, err
		}
		if n := len(wider); n > 0 {
			firsts = wider[n-1:]
		}
	}
	if len(firsts) == 0 {
		return []Event{}, to + 1, 0, nil
	}
	// Newest first, a batch at a time read at once; each slot's events
	// in order, timed by the entries before them in the slot, or else by
	// the newest timed entry of the slots before it (pending until read).
	var (
		chunks   [][]Event // newest slot first
		pending  []*Event  // events of newer slots still without a time
		newestMs int64
		events   int
		from     = to + 1
	)
	const batch = 16
	for hi := len(firsts); hi > 0 && events < s.opts.MaxEvents; hi -= batch {
		lo := max(0, hi-batch)
		slots := make([]*index.Slot, hi-lo)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for i := lo; i < hi; i++ {
			g.Go(func() error {
				name := index.SlotName(world, firsts[i])
				data, _, err := s.opts.Bucket.Get(gctx, name)
				if errors.Is(err, bucket.ErrNotExist) {
					return nil // collected since the listing: the log starts after it
				}
				if err != nil {
					return err
				}
				slot, _, err := index.DecodeSlot(world, name, data)
				slots[i-lo] = slot
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, 0, 0, err
		}
		stop := false
		for i := len(slots) - 1; i >= 0 && !stop; i-- {
			slot := slots[i]
			if slot == nil {
				stop = true // the log's oldest slots were collected
				break
			}
			var evs []Event
			ms := int64(0)
			for k := range slot.Entries {
				seq := slot.FirstSeq + uint64(k)
				if seq > to {
					break
				}
				if e, ok := eventOf(seq, &slot.Entries[k], &ms); ok {
					evs = append(evs, e)
				}
			}
			if ms != 0 {
				for _, e := range pending {
					e.UnixMs = ms
				}
				pending = pending[:0]
				if newestMs == 0 {
					newestMs = ms
				}
			}
			chunks = append(chunks, evs)
			for k := range evs {
				if evs[k].UnixMs != 0 {
					break
				}
				pending = append(pending, &evs[k])
			}
			events += len(evs)
			from = slot.FirstSeq
		}
		if stop {
			break
		}
	}
	out := make([]Event, 0, events)
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, from, newestMs, nil
}

// slotsWithin lists the first sequences of world's slots that begin after
// floor, up to to.
func (s *Server) slotsWithin(ctx context.Context, world string, floor, to uint64) ([]uint64, error) {
	startAfter := ""
	if floor > 0 {
		startAfter = index.SlotName(world, floor)
	}
	var firsts []uint64
	for a, err := range s.opts.Bucket.List(ctx, index.LogPrefix(world), startAfter) {
		if err != nil {
			return nil, err
		}
		seq, err := index.ParseSlotName(world, a.Name)
		if err != nil {
			continue // not a slot (the log holds only slots)
		}
		if seq > to {
			break
		}
		firsts = append(firsts, seq)
	}
	return firsts, nil
}

// eventOf turns an entry into an event; tick publications are the ticks
// themselves, not events. lastMs is the time of the newest entry before
// it that records one (0: none known), which it updates.
func eventOf(seq uint64, e *index.Entry, lastMs *int64) (Event, bool) {
	ev := Event{Seq: seq, Kind: string(e.Kind)}
	ms := int64(0)
	switch {
	case e.TickPublish != nil:
		if p := e.TickPublish; p.PublishedUnixMs != 0 {
			*lastMs = p.PublishedUnixMs
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
	case e.Intent != nil:
		ev.Detail, ms = e.Intent.What, e.Intent.NowMs
	case e.Rewrite != nil:
		ev.Run, ev.Detail = e.Rewrite.Run, e.Rewrite.Table
		if e.Rewrite.Tick != 0 {
			ev.Tick = &e.Rewrite.Tick
		}
		if sp := e.Rewrite.Span; sp != nil {
			from, to := sp.From, sp.To
			ev.Tick, ev.From = &to, &from
			ev.Detail = strings.TrimSpace(e.Rewrite.Table + " ticks " + itoa(from) + "–" + itoa(to))
		}
	case e.Command != nil:
		ev.Run, ev.Tick = e.Command.Run, &e.Command.Due
	case e.Tag != nil:
		ev.Detail, ms = "tag "+e.Tag.Name, e.Tag.NowMs
		if e.Kind == index.KindTagCreate {
			ev.Run, ev.Tick, ev.Token = e.Tag.Run, &e.Tag.Tick, e.Tag.CommitToken
		} else {
			ev.Detail += " deleted"
		}
	}
	if ms != 0 {
		ev.UnixMs, *lastMs = ms, ms
	} else {
		ev.UnixMs, ev.Approx = *lastMs, true
	}
	return ev, true
}
