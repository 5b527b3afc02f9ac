package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
}

type factDone struct {
	out settled
	err error
}

func (r *factReq) answer(out settled, err error) { r.done <- factDone{out, err} }

// alone settles r by itself: its key is another holder's, or its batch
// could not settle it.
func (s *IngestionService) alone(ctx context.Context, r *factReq) {
	r.answer(s.settle(ctx, r.key, r.digest, r.table, func(context.Context, *index.Claim) (Values, error) { return r.row, nil }))
}

// enqueue settles a fact through the group-commit queue: facts arriving
// while Batches batches are in flight wait and form the next batch, up to
// MaxBatch of them. A caller whose ctx ends first gets an error matching
// bucket.ErrAmbiguous: its batch goes on, and the fact may become visible.
func (s *IngestionService) enqueue(ctx context.Context, r *factReq) (settled, error) {
	if s.opts.MaxBatch == 1 {
		r.done = make(chan factDone, 1)
		s.alone(ctx, r)
		d := <-r.done
		return d.out, d.err
	}
	r.ctx, r.done = ctx, make(chan factDone, 1)
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, r)
	if s.mu.running < s.opts.Batches {
		s.mu.running++
		go s.drain()
	}
	s.mu.Unlock()
	select {
	case d := <-r.done:
		return d.out, d.err
	case <-ctx.Done():
		return settled{}, fmt.Errorf("world %s: fact %s: %w: %w", s.world, r.key, bucket.ErrAmbiguous, ctx.Err())
	}
}

// drain runs batches off the queue until it is empty.
func (s *IngestionService) drain() {
	for {
		s.mu.Lock()
		q := s.mu.queue
		if len(q) == 0 {
			s.mu.running--
			s.mu.Unlock()
			return
		}
		n := min(len(q), s.opts.MaxBatch)
		s.mu.queue = q[n:]
		s.mu.Unlock()
		s.batch(q[:n:n])
	}
}

// batch settles reqs: each (run, table) group shares one fragment.
func (s *IngestionService) batch(reqs []*factReq) {
	type groupKey struct{ run, table string }
	groups := map[groupKey][]*factReq{}
	var order []groupKey
	for _, r := range reqs {
		k := groupKey{r.key.Run, r.table.ID}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.group(groups[k])
		}()
	}
	wg.Wait()
}

// group settles facts of one run and table as one batch (seed 003 §3, by
// the batch): every claim is acquired at once (the catalog's group commit
// puts them in shared slots), each under its own token <batch>.<i>; the
// rows of the claims acquired fresh go into one fragment, part 0 of the
// batch's chain (see place), each row stamped with its own claim's tick,
// token and epoch; then every claim is completed at once, naming that
// fragment. Visibility stays per claim: a reader keeps a row of the
// fragment only under a completed claim's token. Keys already complete
// answer with their receipt; keys another holder holds, and resends of a
// key earlier in the batch with another digest, settle alone.
func (s *IngestionService) group(reqs []*factReq) {
	ctx := context.WithoutCancel(reqs[0].ctx)
	b := s.newFactBatch(ctx, reqs)
	if len(b.leaders) == 0 {
		return
	}
	b.token = newToken()
	b.acquire()
	held := b.fresh()
	if len(b.rows) == 0 {
		return
	}
	failpoint.Hit(FailpointBatchClaimed)
	stop := s.renew(ctx, held)
	defer stop()
	t := b.leaders[b.idx[0]].table
	err := s.place(ctx, t, b.token, b.rows, false, func(missing []*pendingRow) ([]byte, error) {
		if err := s.describe(ctx, t); err != nil {
			return nil, err
		}
		return s.encode(t, missing)
	})
	if err != nil {
		b.fail(err, stop)
		return
	}
	for range b.rows {
		failpoint.Hit(FailpointFactAppended)
	}
	failpoint.Hit(FailpointBatchAppended)
	b.complete()
}

// factBatch is one batch of group: its leaders (one request per key),
// the requests that follow each, and the claims and rows it settles.
type factBatch struct {
	s         *IngestionService
	ctx       context.Context
	token     string // the batch's token; its claims' are <token>.<i>
	leaders   []*factReq
	followers map[int][]*factReq // by leader
	claims    []*index.Claim     // by leader: the claims acquired fresh
	rows      []*pendingRow      // of the claims acquired fresh
	idx       []int              // rows[j] is leaders[idx[j]]'s
}

// newFactBatch groups reqs by key: one claim per key, a later request for
// a key the batch holds follows the first. A request already cancelled
// is answered at once (nothing was claimed for it).
func (s *IngestionService) newFactBatch(ctx context.Context, reqs []*factReq) *factBatch {
	b := &factBatch{s: s, ctx: ctx, followers: map[int][]*factReq{}}
	lead := map[index.ClaimKey]int{}
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.answer(settled{}, err) // nothing was claimed for it
			continue
		}
		if i, ok := lead[r.key]; ok {
			b.followers[i] = append(b.followers[i], r)
			continue
		}
		lead[r.key] = len(b.leaders)
		b.leaders = append(b.leaders, r)
	}
	return b
}

// answer answers leader i and its followers: a follower with the
// leader's digest shares a successful answer (as a duplicate); any other
// settles alone.
func (b *factBatch) answer(i int, out settled, err error) {
	b.leaders[i].answer(out, err)
	for _, f := range b.followers[i] {
		if err == nil && f.digest == b.leaders[i].digest {
			dup := out
			dup.dedup, dup.recovered = true, ""
			f.answer(dup, nil)
		} else {
			go b.s.alone(b.ctx, f)
		}
	}
}

// acquire acquires every leader's claim at once. A key already complete
// is answered with its receipt, a key another holder holds settles
// alone, and the claims acquired fresh go into b.claims.
func (b *factBatch) acquire() {
	s, ctx := b.s, b.ctx
	b.claims = make([]*index.Claim, len(b.leaders))
	var wg sync.WaitGroup
	for i, r := range b.leaders {
		token := b.token
		if len(b.leaders) > 1 {
			token = b.token + "." + strconv.Itoa(i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			acquire := s.lease(r.key, r.digest, s.opts.Now())
			acquire.CommitToken = token
			res, err := s.cat.Commit(ctx, index.Entry{Kind: index.KindClaimAcquire, Claim: acquire})
			var pending *index.ClaimPendingError
			switch {
			case err == nil && res.Existing:
				out, err := s.complete(ctx, res.Claim, r.table, true)
				b.answer(i, out, err)
			case errors.As(err, &pending):
				// Another holder's: await it or take it over, alone,
				// without holding up the batch.
				go func() {
					done := make(chan factDone, 1)
					s.alone(ctx, &factReq{key: r.key, digest: r.digest, table: r.table, row: r.row, done: done})
					d := <-done
					b.answer(i, d.out, d.err)
				}()
			case err != nil:
				b.answer(i, settled{}, err)
			default:
				b.claims[i] = res.Claim
			}
		}()
	}
	wg.Wait()
}

// fresh sets the rows of the claims acquired fresh, and returns those
// claims.
func (b *factBatch) fresh() []*index.Claim {
	var held []*index.Claim
	for i, c := range b.claims {
		if c == nil {
			continue
		}
		failpoint.Hit(FailpointFactClaimed)
		b.rows = append(b.rows, &pendingRow{claim: c, values: factValues(b.leaders[i].row, c)})
		b.idx = append(b.idx, i)
		held = append(held, c)
	}
	return held
}

// fail answers every fresh claim's leader with err, the batch's failure
// to place its rows. A build error releases the claims (after stopping
// their renewal); any other leaves them pending.
func (b *factBatch) fail(err error, stop func()) {
	var be *buildError
	release := errors.As(err, &be)
	if release {
		stop()
	}
	var wg sync.WaitGroup
	for j, p := range b.rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if release {
				b.answer(b.idx[j], settled{}, b.s.release(b.ctx, p.claim, be.err))
			} else {
				// The claims stay pending: a retry takes them over
				// once their leases end, and finds their rows or
				// appends them (place).
				b.answer(b.idx[j], settled{}, err)
			}
		}()
	}
	wg.Wait()
}

// complete completes every fresh claim at once, naming the fragment its
// row was placed in, and answers its leader.
func (b *factBatch) complete() {
	s, ctx := b.s, b.ctx
	var first sync.Once
	var wg sync.WaitGroup
	for j, p := range b.rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.cat.Commit(ctx, s.completion(p))
			if err != nil {
				b.answer(b.idx[j], settled{}, fmt.Errorf("world %s: completing fact %s: %w", s.world, p.claim.Key, err))
				return
			}
			failpoint.Hit(FailpointFactCompleted)
			first.Do(func() { failpoint.Hit(FailpointBatchPartial) })
			b.answer(b.idx[j], settled{claim: r.Claim, path: p.frag.Path, row: p.row}, nil)
		}()
	}
	wg.Wait()
}
