package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
)

// A View is what a reader of one (world, run) sees: the run's lineage, each
// segment pinned to one catalog state. It is the one planner of visibility
// (docs/ARCHITECTURE.md, "Visibility"): the SQL views, the mount's ticks/, tokens/, tables/,
// facts/ and head, and the engine's resume and fork all read through it, so
// the rules live here once and the invariant tests test what runs.
//
// A View is immutable; every method costs what it returns (a lookup is
// O(log n) per segment), never the length of the history.
type View struct {
	World, Run string
	// Segments, oldest ancestor first; the last is the world's own run.
	Segments []Segment
}

// OpenView resolves the lineage of (world, run) through load.
func OpenView(ctx context.Context, load Loader, world, run string) (*View, error) {
	segs, err := Lineage(ctx, load, world, run)
	if err != nil {
		return nil, err
	}
	return &View{World: world, Run: run, Segments: segs}, nil
}

// OwnView is the view of one run of s alone, without ancestors: what a
// world holds itself, such as its evaluation receipts.
func OwnView(s *State, run string) *View {
	a := s.Allowlist(run)
	a.Mode = Filtered // such a run's rows are visible by claim only
	return &View{World: s.World.ID, Run: run, Segments: []Segment{{Allowlist: a, State: s}}}
}

// A Plan is what a reader of one (world, run) plans its files from: the
// run's lineage, each segment pinned to one catalog state, whole or
// loaded in part (LoadSummarized, LoadFor). It asks only the questions a
// state loaded in part can answer or refuse: the files of a range of
// ticks and the span of visible ticks (ErrNotLoaded where a state does
// not hold, nor summarize, the ticks they read), and the facts (a state
// loaded in part holds every claim). A question about single ticks is
// the View's (Plan.View: the same states, whole).
type Plan struct {
	World, Run string
	// v is the view of the plan's states: only the planning questions
	// (Files, Visible, Facts), which read what a state does not hold
	// through errors, are ever asked of it.
	v View
}

// A PartLoader returns the current state of a world, whole or loaded in
// part (for example LoadSummarized's).
type PartLoader func(ctx context.Context, world string) (*Partial, error)

// OpenPlan resolves the lineage of (world, run) through load.
func OpenPlan(ctx context.Context, load PartLoader, world, run string) (*Plan, error) {
	segs, err := Lineage(ctx, func(ctx context.Context, w string) (*State, error) {
		p, err := load(ctx, w)
		if p == nil {
			return nil, err
		}
		return p.s, err
	}, world, run)
	if err != nil {
		return nil, err
	}
	return &Plan{World: world, Run: run, v: View{World: world, Run: run, Segments: segs}}, nil
}

// OwnPlan is the plan of one run of p alone, as OwnView.
func OwnPlan(p *Partial, run string) *Plan {
	v := OwnView(p.s, run)
	return &Plan{World: v.World, Run: run, v: *v}
}

// Plan returns the plan of v's states (whole: every question answers).
func (v *View) Plan() *Plan { return &Plan{World: v.World, Run: v.Run, v: *v} }

// Own returns the plan of run of the world's own state alone (its last
// segment's), as OwnPlan: what the world holds itself, such as its
// evaluation receipts.
func (p *Plan) Own(run string) *Plan {
	s := p.v.Segments[len(p.v.Segments)-1].State
	v := OwnView(s, run)
	return &Plan{World: v.World, Run: run, v: *v}
}

// A PlanSegment is what a Plan tells of one segment of its lineage: the
// run of one world, read up to a tick, with its visibility, and the
// position of the catalog state it is planned from.
type PlanSegment struct {
	World, Run string
	Mode       Visibility
	// UpTo is the last tick of the segment (see Allowlist.UpTo).
	UpTo int64
	// Seq and Hash: the state's last sequence and the hash of the slot
	// holding it.
	Seq  uint64
	Hash string
}

// Segments returns the plan's lineage, oldest ancestor first; the last is
// the world's own run.
func (p *Plan) Segments() []PlanSegment {
	out := make([]PlanSegment, len(p.v.Segments))
	for i, seg := range p.v.Segments {
		out[i] = PlanSegment{World: seg.World, Run: seg.Run, Mode: seg.Mode, UpTo: seg.UpTo, Seq: seg.State.Seq, Hash: seg.State.Hash}
	}
	return out
}

// Files is View.Files over the plan's states: ErrNotLoaded where a state
// neither holds nor summarizes the ticks from..to it reads.
func (p *Plan) Files(from, to int64, fn func(File) bool) error { return p.v.Files(from, to, fn) }

// Visible is View.Visible over the plan's states: ErrNotLoaded where a
// state neither holds nor summarizes the ticks it reads.
func (p *Plan) Visible(upTo int64) (*Span, error) { return p.v.Visible(upTo) }

// Facts is View.Facts: the claims, which every state holds whole.
func (p *Plan) Facts(to int64, fn func(FactRef) bool) { p.v.Facts(to, fn) }

// TickRef is a visible tick: its manifest and the segment (world, run)
// whose catalog published it (an ancestor's, for an inherited tick).
type TickRef struct {
	World, Run string
	*Tick
}

// Ticks calls fn with each visible tick numbered from..to (inclusive), in
// tick order, until fn returns false. Only published ticks are visible: an
// unfiltered (uncoordinated) segment has none to list.
//
// A View's states are whole, so its tick questions (Ticks, Tick, Head,
// Token) answer; states loaded in part (LoadFor, LoadSummarized) are
// planned from by a Plan, which asks only what returns ErrNotLoaded.
func (v *View) Ticks(from, to int64, fn func(TickRef) bool) {
	v.walk(from, to, func(seg Segment, start, limit, last int64) (int64, bool) {
		more := true
		seg.State.ticksIn("View.Ticks", seg.Run, start, limit, func(t *Tick) bool {
			last = t.Tick
			more = fn(TickRef{seg.World, seg.Run, t})
			return more
		})
		return last, more
	})
}

// walk is the lineage walk of Ticks and Files: it calls visit with each
// segment that lists its ticks (Filtered), oldest first, and the ticks
// of it the view shows of from..to: from the one after the last tick an
// older segment showed (a fork's own ticks follow its fork point) to to
// or the segment's UpTo. visit returns the last tick it showed (last, as
// given, if none) and whether to go on.
func (v *View) walk(from, to int64, visit func(seg Segment, start, limit, last int64) (int64, bool)) {
	last := from - 1
	if from == math.MinInt64 {
		last = math.MinInt64
	}
	for _, seg := range v.Segments {
		if seg.Mode != Filtered {
			continue
		}
		start := from
		if last != math.MinInt64 {
			start = max(from, last+1)
		}
		var more bool
		if last, more = visit(seg, start, min(to, seg.UpTo), last); !more {
			return
		}
	}
}

// Tick returns visible tick n: the newest segment that published it wins.
func (v *View) Tick(n int64) (TickRef, bool) {
	for i := len(v.Segments) - 1; i >= 0; i-- {
		seg := v.Segments[i]
		if seg.Mode != Filtered || n > seg.UpTo {
			continue
		}
		if t, ok := seg.State.Tick(seg.Run, n); ok {
			return TickRef{seg.World, seg.Run, t}, true
		}
	}
	return TickRef{}, false
}

// Head returns the newest visible tick.
func (v *View) Head() (TickRef, bool) {
	for i := len(v.Segments) - 1; i >= 0; i-- {
		seg := v.Segments[i]
		if seg.Mode != Filtered {
			continue
		}
		if t, ok := seg.State.Last(seg.Run, seg.UpTo); ok {
			return TickRef{seg.World, seg.Run, t}, true
		}
	}
	return TickRef{}, false
}

// Token returns the visible tick that commit token published, by
// State.TickByToken's rule over the lineage: the tick the token names
// (TokenTick), if it is visible and carries the token; else the lowest
// visible tick that carries it (a log may hold a token at several ticks;
// an ancestor's ticks are below the fork's).
func (v *View) Token(token string) (TickRef, bool) {
	if n, ok := TokenTick(token); ok {
		if t, ok := v.Tick(n); ok && t.CommitToken == token {
			return t, true
		}
	}
	for _, seg := range v.Segments {
		if seg.Mode != Filtered {
			continue
		}
		t, ok := seg.State.lowestByToken("View.Token", seg.Run, token)
		if !ok || t.Tick > seg.UpTo {
			continue
		}
		// A tick the fork re-published hides its ancestor's.
		if vis, ok := v.Tick(t.Tick); ok && vis.Tick == t {
			return TickRef{seg.World, seg.Run, t}, true
		}
	}
	return TickRef{}, false
}

// FactRef is a visible fact or receipt: a completed claim and the segment
// (world, run) whose catalog holds it.
type FactRef struct {
	World, Run string
	*Claim
}

// Facts calls fn with each completed claim visible in the view whose fact
// landed at a tick up to `to` (a fork sees its ancestors' facts up to its
// fork point), segment by segment, until fn returns false.
func (v *View) Facts(to int64, fn func(FactRef) bool) { facts(v.Segments, to, fn) }

func facts(segs []Segment, to int64, fn func(FactRef) bool) {
	for _, seg := range segs {
		limit := min(to, seg.UpTo)
		stop := false
		seg.State.Claims(seg.Run, func(c *Claim) bool {
			if c.State != ClaimComplete || c.Tick > limit {
				return true
			}
			if !fn(FactRef{seg.World, seg.Run, c}) {
				stop = true
				return false
			}
			return true
		})
		if stop {
			return
		}
	}
}

// File is one file a reader reads to see visible rows: a fragment a
// manifest or a completed claim names.
type File struct {
	World, Run, Table string
	Fragment
	// The publication that names the file: its tick, commit token and
	// writer epoch. A compacted file (Span set) is named by every tick of
	// its span: it is listed once, with the first tick that names it.
	Tick  int64
	Token string
	Epoch int64
	// Keep, on a compacted file, is the ticks whose rows the reader keeps:
	// those the view asked for and shows of the file's segment (a fork sees
	// its parent's compacted history up to the fork point, a pinned view up
	// to its pin). Every file of the segment is within these bounds.
	Keep *Span
	// Fact: a completed claim's rows, visible by its token.
	Fact bool
	// Check: the catalog does not prove that every row of the file is
	// stamped with its publication's (tick, token), so a reader keeps only
	// rows a manifest or claim published (invariant 1). A fragment stored
	// under its publication's own token was written by the attempt that
	// holds the token, which stamps every row with it: no check.
	Check bool
}

// Files calls fn with each file holding visible rows of ticks from..to,
// segment by segment (oldest first), each segment's ticks in order and
// then its facts, until fn returns false. A compacted file holds rows of
// other ticks too: its reader keeps those of File.Keep. Unfiltered
// segments and legacy history are not in the catalog: their readers list
// them. It decodes only the fragment lists of the ticks it visits, and
// fails (ErrCorrupt) if one does not decode.
func (v *View) Files(from, to int64, fn func(File) bool) error {
	stop := false
	listed := map[string]bool{} // compacted files, named by every tick of their span
	upTo := map[string]int64{}  // by segment world
	for _, seg := range v.Segments {
		upTo[seg.World] = min(to, seg.UpTo)
	}
	emit := func(stamp File, tables []TableFragments) bool {
		for _, tf := range tables {
			for _, fr := range tf.Fragments {
				if fr.Span != nil {
					if listed[fr.Path] {
						continue
					}
					listed[fr.Path] = true
				}
				f := stamp
				f.Table, f.Fragment = tf.Table, fr
				f.Check = fr.Span == nil && !Proven(f.World, f.Run, tf.Table, f.Token, fr)
				if fr.Span != nil {
					f.Keep = &Span{From: from, To: upTo[f.World]}
				}
				if !fn(f) {
					stop = true
					return false
				}
			}
		}
		return true
	}
	// The ticks of a compacted span share one fragment list: a tick naming
	// the very list of compacted files its predecessor named adds no file,
	// so a compacted history costs a step per tick, not a lookup per file;
	// a summarized one a step per span of its summaries.
	var prev *Tick
	prevCompacted := false
	var err error
	v.walk(from, to, func(seg Segment, start, limit, last int64) (int64, bool) {
		werr := seg.steps(start, limit, func(st step) bool {
			last = st.last
			if p := st.span; p != nil {
				prev, prevCompacted = nil, false
				return emit(File{World: seg.World, Run: seg.Run, Tick: p.From, Token: p.Token, Epoch: p.Epoch}, p.Tables)
			}
			t := st.tick
			if prevCompacted && t.SameTables(prev) {
				return true
			}
			var tables []TableFragments
			if tables, err = t.Tables(); err != nil {
				return false
			}
			prev, prevCompacted = t, allCompacted(tables)
			return emit(File{World: seg.World, Run: seg.Run, Tick: t.Tick, Token: t.CommitToken, Epoch: t.WriterEpoch}, tables)
		})
		err = cmp.Or(werr, err)
		return last, err == nil && !stop
	})
	if err != nil || stop {
		return err
	}
	// An unfiltered segment's reader lists its files, facts included.
	var filtered []Segment
	for _, seg := range v.Segments {
		if seg.Mode == Filtered {
			filtered = append(filtered, seg)
		}
	}
	facts(filtered, to, func(c FactRef) bool {
		if c.Claim.Tick < from {
			return true
		}
		return emit(File{World: c.World, Run: c.Run, Tick: c.Claim.Tick, Token: c.CommitToken, Epoch: c.Epoch, Fact: true}, c.Tables)
	})
	return nil
}

// Proven reports whether the catalog proves that every row of fragment f
// of table, named by a publication of (world, run) under token, is
// stamped with that publication's tick and token: the fragment is stored
// under the token, where only the attempt holding it writes (named by
// TickFragmentPath, or by FragmentPath as tick fragments once were).
func Proven(world, run, table, token string, f Fragment) bool {
	return token != "" && (f.Path == TickFragmentPath(world, run, table, token) || f.Path == FragmentPath(world, run, table, token, 0))
}

// allCompacted reports whether every fragment of tables is a compacted
// file (and there is one).
func allCompacted(tables []TableFragments) bool {
	n := 0
	for _, tf := range tables {
		for _, f := range tf.Fragments {
			if f.Span == nil {
				return false
			}
			n++
		}
	}
	return n > 0
}

// step is one step of a segment's walk (Segment.steps): a tick, or a span
// of a tick shard's summary; last is the last tick it covers.
type step struct {
	tick *Tick
	span *summarySpan
	last int64
}

// steps calls fn, in tick order, with the segment's ticks from start to
// limit, until fn returns false: each tick its state holds, and each span
// of the summaries it holds instead of ticks (LoadSummarized), whole. A
// span that the bounds cut where its summary does not tell the ticks
// (its first tick before start; its last visible tick, past limit, if its
// ticks have gaps) is ErrNotLoaded.
func (seg Segment) steps(start, limit int64, fn func(step) bool) error {
	var sums []*tickSummary
	if p := seg.State.part; p != nil {
		if err := p.held(seg.State, seg.Run, start, limit); err != nil {
			return err
		}
	}
	if p := seg.State.part; p != nil && len(p.sums) > 0 {
		for _, n := range p.shards[seg.Run] {
			if sum := p.sums[shardKey{'t', seg.Run, n}]; sum != nil && n >= tickShard(seg.Run, start).N {
				sums = append(sums, sum)
			}
		}
	}
	var err error
	stop := false
	// flush steps through the summaries of shards before shard n.
	flush := func(n int64) bool {
		for ; len(sums) > 0 && sums[0].key.N < n; sums = sums[1:] {
			for i := range sums[0].spans {
				p := &sums[0].spans[i]
				switch {
				case p.To < start:
					continue
				case p.From > limit:
					stop = true
					return false
				case p.From < start:
					err = fmt.Errorf("ticks %d..%d of run %s are summarized, and the view starts at %d: %w", p.From, p.To, seg.Run, start, ErrNotLoaded)
					return false
				case p.To > limit && !p.contiguous():
					err = fmt.Errorf("ticks %d..%d of run %s are summarized, and the view ends at %d: %w", p.From, p.To, seg.Run, limit, ErrNotLoaded)
					return false
				}
				if !fn(step{span: p, last: min(p.To, limit)}) {
					stop = true
					return false
				}
			}
		}
		return true
	}
	seg.State.ticksFrom(seg.Run, start, func(t *Tick) bool {
		if t.Tick > limit || !flush(tickShard(t.Run, t.Tick).N) {
			return false
		}
		if !fn(step{tick: t, last: t.Tick}) {
			stop = true
			return false
		}
		return true
	})
	if err == nil && !stop {
		flush(math.MaxInt64)
	}
	return err
}

// Visible returns the span from the first visible tick of the view to
// the newest at or before upTo (To < From: none), or nil if a segment
// lists no ticks (unfiltered). A few lookups per segment.
func (v *View) Visible(upTo int64) (*Span, error) {
	for _, seg := range v.Segments {
		if seg.Mode != Filtered {
			return nil, nil
		}
	}
	none := &Span{From: 0, To: -1}
	first, found := int64(0), false
	for _, seg := range v.Segments {
		if err := seg.steps(math.MinInt64, min(upTo, seg.UpTo), func(st step) bool {
			first, found = st.last, true
			if st.span != nil {
				first = st.span.From
			}
			return false
		}); err != nil {
			return nil, err
		}
		if found {
			break
		}
	}
	if !found {
		return none, nil
	}
	for i := len(v.Segments) - 1; i >= 0; i-- {
		seg := v.Segments[i]
		last, ok, err := seg.last(min(seg.UpTo, upTo))
		if err != nil {
			return nil, err
		}
		if ok {
			return &Span{From: first, To: last}, nil
		}
	}
	return none, nil
}

// last returns the segment's newest tick at or below upTo: the newest its
// state holds, or the newest its summaries cover if newer.
func (seg Segment) last(upTo int64) (int64, bool, error) {
	t, ok := seg.State.last(seg.Run, upTo)
	last := int64(math.MinInt64)
	if ok {
		last = t.Tick
	}
	var err error
	if p := seg.State.part; p != nil && len(p.sums) > 0 {
		ns := p.shards[seg.Run]
		for i := len(ns) - 1; i >= 0; i-- {
			sum := p.sums[shardKey{'t', seg.Run, ns[i]}]
			if sum == nil || sum.spans[0].From > upTo {
				continue
			}
			for j := len(sum.spans) - 1; j >= 0; j-- {
				sp := &sum.spans[j]
				switch {
				case sp.From > upTo:
					continue
				case sp.To > upTo && !sp.contiguous():
					err = fmt.Errorf("ticks %d..%d of run %s are summarized, and the view ends at %d: %w", sp.From, sp.To, seg.Run, upTo, ErrNotLoaded)
				case min(sp.To, upTo) > last:
					last, ok = min(sp.To, upTo), true
				}
				break
			}
			break
		}
	}
	if p := seg.State.part; p != nil && err == nil {
		from := int64(math.MinInt64)
		if ok {
			from = last
		}
		err = p.held(seg.State, seg.Run, from, upTo)
	}
	return last, ok, err
}
