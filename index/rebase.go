package index

import "context"

// Rebase after a lost slot (docs/ARCHITECTURE.md, "The catalog"): the loser
// reads the winning slots and moves its batches onto the new tip. A member
// whose outcome cannot have changed, because nothing it checks was written
// by the winners (or by a member before it that changed), is carried: its
// entries are applied as they are, with their JSON reused for the new
// slot. The others are rebuilt: checked again, so they may now be refused
// (or, refused before, accepted). The state after a rebased batch is the
// state a full rebuild gives; only the work differs.

// touchSet is what the slots between a batch's old base and its new one
// changed, as the keys entries' outcomes depend on.
type touchSet struct {
	all  bool // something no key describes changed (a world create, a rewrite)
	keys map[touchKey]struct{}
}

type touchKey struct {
	kind byte // 'f' fence epoch, 's' world status, 'w' writer mode, 't' tick, 'c' claim, 'm' command
	a, b string
	n    int64
}

func newTouchSet() *touchSet { return &touchSet{keys: map[touchKey]struct{}{}} }

// writes calls fn with each key e's application may change, and reports
// false if e may change more than keys describe.
func (e *Entry) writes(fn func(touchKey)) bool {
	switch e.Kind {
	case KindFenceAcquire:
		fn(touchKey{kind: 'f'})
	case KindTickPublish:
		fn(touchKey{kind: 't', a: e.TickPublish.Run, n: e.TickPublish.Tick})
		for _, id := range e.TickPublish.Settle {
			fn(touchKey{kind: 'm', a: id})
		}
	case KindWorldStatus:
		fn(touchKey{kind: 's'})
		fn(touchKey{kind: 'w'})
	case KindClaimAcquire, KindClaimTakeover, KindClaimComplete, KindClaimRelease:
		fn(touchKey{kind: 'c', a: e.Claim.Key.Run, b: e.Claim.Key.Producer + "\x00" + e.Claim.Key.ExternalID})
	case KindCommandEnqueue:
		fn(touchKey{kind: 'm', a: e.Command.ID})
	default: // world.create, fragments.rewrite: outcomes over ranges
		return false
	}
	return true
}

// reads calls fn with each key e's outcome (accepted or refused, and
// how) depends on, and reports false if it depends on more than keys
// describe. What an accepted entry records from the state (a fact's id
// and tick, a fence's epoch) is not an outcome: applying the entry again
// on the new base records it afresh.
func (e *Entry) reads(fn func(touchKey)) bool {
	switch e.Kind {
	case KindFenceAcquire:
		if e.FenceAcquire.Resume {
			fn(touchKey{kind: 'w'})
		}
	case KindTickPublish:
		fn(touchKey{kind: 'f'})
		fn(touchKey{kind: 's'})
		return e.writes(fn)
	case KindWorldStatus:
	case KindClaimAcquire, KindClaimTakeover, KindClaimComplete, KindClaimRelease, KindCommandEnqueue:
		return e.writes(fn)
	default:
		return false
	}
	return true
}

// add records what r's entries may change.
func (t *touchSet) add(entries []Entry) {
	for i := range entries {
		if !entries[i].writes(func(k touchKey) { t.keys[k] = struct{}{} }) {
			t.all = true
		}
	}
}

// touches reports whether an outcome of r's entries may have changed.
func (t *touchSet) touches(entries []Entry) bool {
	if t.all {
		return true
	}
	hit := false
	for i := range entries {
		if !entries[i].reads(func(k touchKey) {
			if _, ok := t.keys[k]; ok {
				hit = true
			}
		}) {
			return true
		}
	}
	return hit
}

// readWinners reads the slots after from up to the log's tip, applying
// them (follow), and returns the tip and what they changed.
func (c *Catalog) readWinners(ctx context.Context, from *State) (*State, *touchSet, error) {
	t := newTouchSet()
	s, err := follow(ctx, c.b, from, nil, func(n *State, slot *Slot) *State {
		t.add(slot.Entries)
		c.setTip(n, slot.Store, false)
		return n
	})
	if err != nil {
		return nil, nil, err
	}
	c.setTip(s, "", true)
	return s, t, nil
}

// rebase returns b moved onto base, carrying the members t does not touch
// and rebuilding the others; t gains what the rebuilt and dropped members
// may change. It returns nil if b must be built afresh from its requests
// instead: a carried member did not apply (a bug in reads or writes,
// caught here rather than in a slot), or the slot outgrew SlotBytes.
func (c *Catalog) rebase(b *batch, base *State, t *touchSet) *batch {
	nb := &batch{base: base, reqs: b.reqs, results: make([][]Result, len(b.reqs)), errs: make([]error, len(b.reqs))}
	// n is this rebase's own copy of base (Check returns fresh copies too),
	// so carried members apply to it in place.
	n, seq := base.clone(), base.Seq
	for i, r := range b.reqs {
		if err := r.ctx.Err(); err != nil {
			nb.errs[i] = err
			if b.errs[i] == nil {
				t.add(r.entries) // gone from the slot
			}
			continue
		}
		if b.errs[i] == nil && !t.touches(r.entries) {
			results := make([]Result, len(r.entries))
			for j := range r.entries {
				seq++
				res, err := n.apply(&r.entries[j], seq)
				if err != nil {
					c.stats.rebaseMisses.Add(1)
					return nil
				}
				results[j] = res
			}
			nb.results[i] = results
			c.stats.carried.Add(1)
			continue
		}
		c.stats.rebuilt.Add(1)
		t.add(r.entries) // its outcome may differ now
		m, mseq, results, err := checkAll(n, seq, r.entries)
		if err != nil {
			nb.errs[i] = err
			continue
		}
		n, seq, nb.results[i] = m, mseq, results
	}
	if err := c.seal(nb, n); err != nil || len(nb.data) > c.opts.SlotBytes && len(nb.reqs) > 1 {
		return nil
	}
	return nb
}

// rebaseLost moves the pipeline's head batch, whose slot lost the race,
// onto the log's new tip, and puts the requests of the batches behind it
// back at the front of the queue: the head is created again at once, and
// they are built on it while it is out. ok is false if the head could not
// be rebased, and nothing was changed.
func (c *Catalog) rebaseLost(pipeline []*batch) (_ []*batch, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.SlotTimeout)
	defer cancel()
	tip, t, err := c.readWinners(ctx, pipeline[0].base)
	if err != nil {
		return nil, false
	}
	head := c.rebase(pipeline[0], tip, t)
	if head == nil {
		return nil, false
	}
	var reqs []*request
	for _, b := range pipeline[1:] {
		reqs = append(reqs, b.reqs...)
	}
	c.requeue(reqs)
	return []*batch{head}, true
}
