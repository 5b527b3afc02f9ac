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
	// One claim per key: a later request for a key the batch holds
	// follows the first.
	lead := map[index.ClaimKey]int{}
	var leaders []*factReq
	followers := map[int][]*factReq{}
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.answer(settled{}, err) // nothing was claimed for it
			continue
		}
		if i, ok := lead[r.key]; ok {
			followers[i] = append(followers[i], r)
			continue
		}
		lead[r.key] = len(leaders)
		leaders = append(leaders, r)
	}
	if len(leaders) == 0 {
		return
	}
	answer := func(i int, out settled, err error) {
		leaders[i].answer(out, err)
		for _, f := range followers[i] {
			if err == nil && f.digest == leaders[i].digest {
				dup := out
				dup.dedup, dup.recovered = true, ""
				f.answer(dup, nil)
			} else {
				go s.alone(ctx, f)
			}
		}
	}

	batch := newToken()
	claims := make([]*index.Claim, len(leaders))
	var wg sync.WaitGroup
	for i, r := range leaders {
		token := batch
		if len(leaders) > 1 {
			token = batch + "." + strconv.Itoa(i)
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
				answer(i, out, err)
			case errors.As(err, &pending):
				// Another holder's: await it or take it over, alone,
				// without holding up the batch.
				go func() {
					done := make(chan factDone, 1)
					s.alone(ctx, &factReq{key: r.key, digest: r.digest, table: r.table, row: r.row, done: done})
					d := <-done
					answer(i, d.out, d.err)
				}()
			case err != nil:
				answer(i, settled{}, err)
			default:
				claims[i] = res.Claim
			}
		}()
	}
	wg.Wait()

	var rows []*pendingRow
	var idx []int // rows[j] is leaders[idx[j]]'s
	var held []*index.Claim
	for i, c := range claims {
		if c == nil {
			continue
		}
		failpoint.Hit(FailpointFactClaimed)
		rows = append(rows, &pendingRow{claim: c, values: factValues(leaders[i].row, c)})
		idx = append(idx, i)
		held = append(held, c)
	}
	if len(rows) == 0 {
		return
	}
	failpoint.Hit(FailpointBatchClaimed)
	stop := s.renew(ctx, held)
	defer stop()
	t := leaders[idx[0]].table
	err := s.place(ctx, t, batch, rows, false, func(missing []*pendingRow) ([]byte, error) {
		if err := s.describe(ctx, t); err != nil {
			return nil, err
		}
		return s.encode(t, missing)
	})
	if err != nil {
		var be *buildError
		release := errors.As(err, &be)
		if release {
			stop()
		}
		for j, p := range rows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if release {
					answer(idx[j], settled{}, s.release(ctx, p.claim, be.err))
				} else {
					// The claims stay pending: a retry takes them over
					// once their leases end, and finds their rows or
					// appends them (place).
					answer(idx[j], settled{}, err)
				}
			}()
		}
		wg.Wait()
		return
	}
	for range rows {
		failpoint.Hit(FailpointFactAppended)
	}
	failpoint.Hit(FailpointBatchAppended)
	var first sync.Once
	for j, p := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.cat.Commit(ctx, s.completion(p))
			if err != nil {
				answer(idx[j], settled{}, fmt.Errorf("world %s: completing fact %s: %w", s.world, p.claim.Key, err))
				return
			}
			failpoint.Hit(FailpointFactCompleted)
			first.Do(func() { failpoint.Hit(FailpointBatchPartial) })
			answer(idx[j], settled{claim: r.Claim, path: p.frag.Path, row: p.row}, nil)
		}()
	}
	wg.Wait()
}
