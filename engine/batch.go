package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// factReq is one Ingest call waiting in the group-commit queue.
type factReq struct {
	ctx    context.Context
	key    index.ClaimKey
	digest string
	table  *Table
	row    Values
	done   chan factDone // buffered 1
	// waitUntil ends the call's wait for another holder's lease
	// (MaxWait), from when it first waited.
	waitUntil time.Time
}

type factDone struct {
	out settled
	err error
}

func (r *factReq) answer(out settled, err error) { r.done <- factDone{out, err} }

// lead is the request a batch claims a key for; requests for the same key
// arriving while it is in flight follow it.
type lead struct {
	req       *factReq
	followers []*factReq // guarded by IngestionService.mu
}

// enqueue settles a fact through the group-commit queue. A caller whose
// ctx ends first gets an error matching bucket.ErrAmbiguous: its batch
// goes on, and the fact may become visible.
func (s *IngestionService) enqueue(ctx context.Context, r *factReq) (settled, error) {
	r.ctx, r.done = ctx, make(chan factDone, 1)
	c, claimed := s.cat.Tip().Claim(r.key)
	if out, ok, err := s.known(c, claimed, r); ok {
		return out, err
	}
	if s.opts.MaxBatch == 1 {
		r.answer(s.settle(ctx, r.key, r.digest, r.table, func(context.Context, *index.Claim) (Values, error) { return r.row, nil }))
	} else {
		s.mu.Lock()
		s.mu.queue = append(s.mu.queue, r)
		s.wakeLocked()
		s.mu.Unlock()
	}
	select {
	case d := <-r.done:
		return d.out, d.err
	case <-ctx.Done():
		return settled{}, fmt.Errorf("world %s: fact %s: %w: %w", s.world, r.key, bucket.ErrAmbiguous, ctx.Err())
	}
}

// wakeLocked starts the pump unless it runs. s.mu is held.
func (s *IngestionService) wakeLocked() {
	if !s.mu.pumping {
		s.mu.pumping = true
		go s.pump()
	}
}

// requeue puts reqs back in the queue: they settle in a later round.
func (s *IngestionService) requeue(reqs ...*factReq) {
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, reqs...)
	s.wakeLocked()
	s.mu.Unlock()
}

// pump runs rounds while there is work (the fact lifecycle of docs/ARCHITECTURE.md, by the round). A
// round is one catalog commit: the completions of every batch whose rows
// were placed since the last round, and the claims of the facts queued
// meanwhile, new batches of them. The next round starts as soon as this
// one's slot is confirmed, so a fact waits at most one slot to be
// claimed, and a batch's rows are written while the next round's slot is
// created: claim, append and complete overlap across batches, and the
// claims of batch n+1 share a slot with the completions of batch n.
func (s *IngestionService) pump() {
	var last time.Duration
	for {
		s.late(last)
		done, reqs := s.next()
		if done == nil && reqs == nil {
			return
		}
		start := time.Now()
		s.round(done, reqs)
		last = time.Since(start)
	}
}

// late waits, at most d (the last round's time), for the batches claimed
// before the last round that are still appending their rows. They had a
// round's time, so they are about done: completing them in the coming
// round rather than the one after saves their facts a whole slot.
func (s *IngestionService) late(d time.Duration) {
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		late := 0
		for r, n := range s.mu.placing {
			if r < s.mu.rounds {
				late += n
			}
		}
		if late == 0 {
			s.mu.Unlock()
			return
		}
		placed := make(chan struct{})
		s.mu.placed = placed
		s.mu.Unlock()
		select {
		case <-placed:
		case <-timer.C:
			return
		}
	}
}

// appended notes that b's rows are placed (or failed to be).
func (s *IngestionService) appended(b *factBatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.placing[b.round]--; s.mu.placing[b.round] == 0 {
		delete(s.mu.placing, b.round)
	}
	if s.mu.placed != nil {
		close(s.mu.placed)
		s.mu.placed = nil
	}
}

// next takes a round's work off the queues: the batches ready to
// complete, then up to MaxBatch×Batches queued facts, within a slot's
// entries. With nothing to do it stops the pump.
func (s *IngestionService) next() ([]*factBatch, []*factReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	room := index.MaxSlotEntries
	var done []*factBatch
	for len(s.mu.ready) > 0 && (done == nil || len(s.mu.ready[0].rows) <= room) {
		done = append(done, s.mu.ready[0])
		room -= len(s.mu.ready[0].rows)
		s.mu.ready = s.mu.ready[1:]
	}
	n := max(0, min(len(s.mu.queue), s.opts.MaxBatch*s.opts.Batches, room))
	var reqs []*factReq
	if n > 0 {
		reqs = s.mu.queue[:n:n]
		s.mu.queue = s.mu.queue[n:]
	}
	if done == nil && reqs == nil {
		s.mu.pumping = false
	}
	return done, reqs
}

// round commits done's completions and the claims of reqs' new batches
// in one slot, then answers the completed facts and starts the new
// batches' appends.
func (s *IngestionService) round(done []*factBatch, reqs []*factReq) {
	s.mu.Lock()
	s.mu.rounds++
	n := s.mu.rounds
	s.mu.Unlock()
	batches := s.sort(reqs)
	var entries []index.Entry
	for _, b := range done {
		for _, p := range b.rows {
			entries = append(entries, s.completion(p))
		}
	}
	now := s.opts.Now()
	for _, b := range batches {
		b.round = n
		b.held = make([]*index.Claim, len(b.leads))
		for i := range b.leads {
			entries = append(entries, b.claim(i, now))
		}
	}
	if len(entries) == 0 {
		return
	}
	results, err := s.cat.CommitAll(context.Background(), entries...)
	switch {
	case err == nil:
		for _, b := range done {
			for j := range b.rows {
				b.completed(j, results[j], nil)
			}
			results = results[len(b.rows):]
			b.finish()
		}
		for _, b := range batches {
			for i := range b.leads {
				b.claimed(i, results[i], nil)
			}
			results = results[len(b.leads):]
			b.start()
		}
	case errors.Is(err, bucket.ErrAmbiguous):
		// The slot's outcome is unknown: every fact in it gets the error.
		// Claims left pending are taken over by a retry once their
		// leases end; a completion that did happen answers a retry as a
		// duplicate.
		for _, b := range done {
			for j := range b.rows {
				b.completed(j, index.Result{}, err)
			}
			b.finish()
		}
		for _, b := range batches {
			for i := range b.leads {
				b.claimed(i, index.Result{}, err)
			}
		}
	default:
		// One entry did not apply (the tip this round was sorted on was
		// behind another process's slots), so none did: each goes on
		// its own.
		for _, b := range done {
			go b.each(len(b.rows), func(j int) index.Entry { return s.completion(b.rows[j]) }, b.completed, b.finish)
		}
		for _, b := range batches {
			go b.each(len(b.leads), func(i int) index.Entry { return b.claim(i, s.opts.Now()) }, b.claimed, b.start)
		}
	}
}

// each commits n entries one by one, concurrently, hands each outcome to
// handle, then calls then.
func (b *factBatch) each(n int, entry func(int) index.Entry, handle func(int, index.Result, error), then func()) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.s.cat.Commit(b.ctx, entry(i))
			handle(i, r, err)
		}()
	}
	wg.Wait()
	then()
}

// sort decides, on the catalog's tip, what each request of a round needs:
// a key in flight here follows its lead; a key already complete is
// answered with its receipt (no slot needed), and one claimed with
// another digest with ClaimConflictError; a key another holder holds
// under a live lease waits for it. The rest are claimed, in batches of
// one run and table, at most MaxBatch each: acquired fresh, or taken
// over together by the batch they were stranded in (pending, its lease
// ended, or this holder's from an attempt that failed).
func (s *IngestionService) sort(reqs []*factReq) []*factBatch {
	tip := s.cat.Tip()
	nowMs := s.opts.Now().UnixMilli()
	type groupKey struct{ run, table, stranded string }
	groups := map[groupKey]*factBatch{}
	var out []*factBatch
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.answer(settled{}, err) // nothing was claimed for it
			continue
		}
		s.mu.Lock()
		l := s.mu.inflight[r.key]
		if l != nil {
			l.followers = append(l.followers, r)
		} else {
			l = &lead{req: r}
			s.mu.inflight[r.key] = l
		}
		s.mu.Unlock()
		if l.req != r {
			continue
		}
		c, ok := tip.Claim(r.key)
		if out, known, err := s.known(c, ok, r); known {
			s.settle1(l, out, err)
			continue
		}
		gk := groupKey{run: r.key.Run, table: r.table.ID}
		switch {
		case ok && c.State == index.ClaimPending && (nowMs >= c.LeaseUntilMs || c.Holder == s.opts.Holder):
			gk.stranded = index.BatchOf(c.CommitToken)
		case ok && c.State == index.ClaimPending:
			go s.wait(l)
			continue
		}
		b := groups[gk]
		if b == nil || len(b.leads) == s.opts.MaxBatch {
			b = &factBatch{s: s, ctx: context.WithoutCancel(r.ctx), table: r.table, token: gk.stranded, takeover: gk.stranded != ""}
			if !b.takeover {
				b.token = newToken()
			}
			groups[gk] = b
			out = append(out, b)
		}
		b.leads = append(b.leads, l)
	}
	return out
}

// known answers r from its key's claim c on the tip (ok: there is one)
// alone if that settles it for good: complete with r's digest (the
// original receipt), or claimed with another digest (ClaimConflictError).
// The tip holds only confirmed slots, so no slot is needed.
func (s *IngestionService) known(c *index.Claim, ok bool, r *factReq) (settled, bool, error) {
	switch {
	case !ok:
		return settled{}, false, nil
	case c.Digest != r.digest:
		return settled{}, true, &index.ClaimConflictError{World: s.world, Key: r.key, Claimed: c.Digest, Attempted: r.digest}
	case c.State == index.ClaimComplete:
		out, err := s.complete(r.ctx, c, r.table, true)
		return out, true, err
	}
	return settled{}, false, nil
}

// wait awaits another holder's claim on l's key (up to MaxWait in all):
// complete, l and its followers are answered with its receipt; released,
// or its lease ended, they go back in the queue to claim it or take it
// over.
func (s *IngestionService) wait(l *lead) {
	r := l.req
	if r.waitUntil.IsZero() {
		r.waitUntil = s.opts.Now().Add(max(s.opts.MaxWait, 0))
	}
	ctx := context.WithoutCancel(r.ctx)
	c, err := s.watch(ctx, r.key, r.digest, r.waitUntil)
	switch {
	case err == nil:
		out, err := s.complete(ctx, c, r.table, true)
		s.settle1(l, out, err)
	case errors.Is(err, errReleased), errors.Is(err, errLeaseEnded):
		s.mu.Lock()
		delete(s.mu.inflight, r.key)
		fs := l.followers
		s.mu.Unlock()
		s.requeue(append([]*factReq{r}, fs...)...)
	default:
		s.settle1(l, settled{}, err)
	}
}

// settle1 answers l and its followers: a follower with the lead's digest
// shares a successful answer (as a duplicate); any other goes back in the
// queue to settle on its own.
func (s *IngestionService) settle1(l *lead, out settled, err error) {
	s.mu.Lock()
	if s.mu.inflight[l.req.key] == l {
		delete(s.mu.inflight, l.req.key)
	}
	fs := l.followers
	l.followers = nil
	s.mu.Unlock()
	l.req.answer(out, err)
	var again []*factReq
	for _, f := range fs {
		if err == nil && f.digest == l.req.digest {
			dup := out
			dup.dedup, dup.recovered = true, ""
			f.answer(dup, nil)
		} else {
			again = append(again, f)
		}
	}
	if len(again) > 0 {
		s.requeue(again...)
	}
}

// factBatch is one batch of a round: the leads of one run and table whose
// claims it holds, their rows in one fragment, completed together.
type factBatch struct {
	s     *IngestionService
	ctx   context.Context
	table *Table
	// token is the batch: fresh claims are acquired under <token>.<i>
	// (the token alone for a batch of one); claims taken over keep
	// theirs, all of the batch token (takeover).
	token    string
	takeover bool
	leads    []*lead
	held     []*index.Claim // by lead: the claims held
	rows     []*pendingRow  // of the claims held
	idx      []int          // rows[j] is leads[idx[j]]'s
	stop     func()         // stops the leases' renewal
	round    int            // the round that claimed it
	first    sync.Once      // FailpointBatchPartial
}

// claim is lead i's claim entry: an acquire under its token in the
// batch, or a takeover.
func (b *factBatch) claim(i int, now time.Time) index.Entry {
	r := b.leads[i].req
	op := b.s.lease(r.key, r.digest, now)
	if b.takeover {
		return index.Entry{Kind: index.KindClaimTakeover, Claim: op}
	}
	op.CommitToken = b.token
	if len(b.leads) > 1 {
		op.CommitToken = b.token + "." + strconv.Itoa(i)
	}
	return index.Entry{Kind: index.KindClaimAcquire, Claim: op}
}

// claimed takes lead i's claim outcome: a key already complete is
// answered with its receipt, a key another holder holds (or released
// meanwhile) waits for it, and a claim held goes into b.held.
func (b *factBatch) claimed(i int, r index.Result, err error) {
	s, l := b.s, b.leads[i]
	var pending *index.ClaimPendingError
	switch {
	case err == nil && r.Existing:
		out, err := s.complete(b.ctx, r.Claim, b.table, true)
		s.settle1(l, out, err)
	case err == nil:
		b.held[i] = r.Claim
	case errors.As(err, &pending), b.takeover && errors.Is(err, index.ErrRefused):
		go s.wait(l)
	default:
		s.settle1(l, settled{}, err)
	}
}

// start appends the rows of the claims b holds, in one part of the
// batch's chain (place), keeping their leases meanwhile; once placed, the
// batch waits for the next round to complete.
func (b *factBatch) start() {
	s := b.s
	var held []*index.Claim
	for i, c := range b.held {
		if c == nil {
			continue
		}
		failpoint.Hit(FailpointFactClaimed)
		b.rows = append(b.rows, &pendingRow{claim: c, values: factValues(b.leads[i].req.row, c)})
		b.idx = append(b.idx, i)
		held = append(held, c)
	}
	if len(held) == 0 {
		return
	}
	failpoint.Hit(FailpointBatchClaimed)
	b.stop = s.renew(b.ctx, held)
	s.mu.Lock()
	s.mu.placing[b.round]++
	s.mu.Unlock()
	go func() {
		defer s.appended(b)
		err := s.place(b.ctx, b.table, b.token, b.rows, b.takeover, func(missing []*pendingRow) ([]byte, error) {
			if err := s.describe(b.ctx, b.table); err != nil {
				return nil, err
			}
			return s.encode(b.table, missing)
		})
		if err != nil {
			b.fail(err)
			return
		}
		for range b.rows {
			failpoint.Hit(FailpointFactAppended)
		}
		failpoint.Hit(FailpointBatchAppended)
		s.mu.Lock()
		s.mu.ready = append(s.mu.ready, b)
		s.wakeLocked()
		s.mu.Unlock()
	}()
}

// fail answers every held claim's lead with err, the batch's failure to
// place its rows. A build error releases the claims (after stopping their
// renewal); any other leaves them pending: a retry takes them over and
// finds their rows or appends them (place).
func (b *factBatch) fail(err error) {
	var be *buildError
	release := errors.As(err, &be)
	b.stop()
	var wg sync.WaitGroup
	for j, p := range b.rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := b.leads[b.idx[j]]
			if release {
				b.s.settle1(l, settled{}, b.s.release(b.ctx, p.claim, be.err))
			} else {
				b.s.settle1(l, settled{}, err)
			}
		}()
	}
	wg.Wait()
}

// completed takes row j's completion outcome and answers its lead.
func (b *factBatch) completed(j int, r index.Result, err error) {
	s, p := b.s, b.rows[j]
	l := b.leads[b.idx[j]]
	if err != nil {
		s.settle1(l, settled{}, fmt.Errorf("world %s: completing fact %s: %w", s.world, p.claim.Key, err))
		return
	}
	failpoint.Hit(FailpointFactCompleted)
	b.first.Do(func() { failpoint.Hit(FailpointBatchPartial) })
	out := settled{claim: r.Claim, path: p.frag.Path, row: p.row}
	switch {
	case b.takeover && p.found:
		out.recovered = "orphan"
	case b.takeover:
		out.recovered = "append"
	}
	s.settle1(l, out, nil)
}

// finish ends a batch whose completions were answered: its leases need no
// renewal.
func (b *factBatch) finish() { go b.stop() }
