package engine

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"github.com/worldfs/worldfs/maintenance"
)

// maintainer runs a world's background compaction.
type maintainer struct {
	mu struct {
		sync.Mutex
		running bool
		next    int64 // the tick that triggers the next run
		stopped bool
		err     error // the last run's failure
		// collectErr is the last collection's failure, kept until a
		// collection succeeds: runs that only compact do not hide it.
		collectErr error
		result     maintenance.CompactResult
		runs       int // compaction runs so far
		collected  int // objects collection deleted
	}
	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

// maintain starts a background compaction of the world's run when tick is
// a window past the last one's trigger and none is running.
func (w *World) maintain(tick int64) {
	if w.cat == nil || w.opts.NoMaintenance {
		return
	}
	m := &w.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	opts := w.opts.Compaction
	opts.Run = w.opts.Run
	opts.EnsureDefaults()
	if m.mu.stopped || m.mu.running || tick < max(m.mu.next, opts.Recent+opts.SmallestWindow()-1) {
		return
	}
	if m.ctx == nil {
		m.ctx, m.cancel = context.WithCancel(context.Background())
	}
	m.mu.running, m.mu.next = true, tick+opts.SmallestWindow()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		res, err := maintenance.Compact(m.ctx, w.b, w.cat, opts)
		if err == nil {
			// The world's receipts (their own run, facts alone).
			ropts := opts
			ropts.Run = EvaluationRun
			var rres maintenance.CompactResult
			rres, err = maintenance.Compact(m.ctx, w.b, w.cat, ropts)
			res.Add(rres)
		}
		m.mu.Lock()
		m.mu.runs++
		collect := err == nil && w.opts.Collection.Every >= 0 && m.mu.runs%max(1, cmp.Or(w.opts.Collection.Every, 8)) == 0
		m.mu.Unlock()
		var gc maintenance.CollectResult
		var gcErr error
		if collect {
			copts := w.opts.Collection
			copts.Run, copts.DryRun, copts.Report, copts.Progress = w.opts.Run, false, nil, nil
			copts.MaxDeletes = cmp.Or(copts.MaxDeletes, 1000)
			gc, gcErr = maintenance.Collect(m.ctx, w.b, w.cat, copts)
		}
		if m.ctx.Err() != nil {
			err, gcErr = nil, nil // stopped by Close: no failure, the next open goes on
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mu.running, m.mu.err = false, err
		if collect && m.ctx.Err() == nil {
			m.mu.collectErr = gcErr
		}
		m.mu.collected += gc.Deleted
		m.mu.result.Add(res)
	}()
}

// stop cancels a running compaction and waits for it.
func (m *maintainer) stop() {
	m.mu.Lock()
	m.mu.stopped = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
}

// Maintenance reports what the world's background compaction has done so
// far, and its failures: the last compaction's, and the last collection's
// until a collection succeeds (nil if both succeeded or never ran; a
// collection that could not read what an export references deletes
// nothing and says so here). Collected says how many objects its
// collection deleted.
func (w *World) Maintenance() (maintenance.CompactResult, error) {
	w.maint.mu.Lock()
	defer w.maint.mu.Unlock()
	return w.maint.mu.result, errors.Join(w.maint.mu.err, w.maint.mu.collectErr)
}

// Collected reports how many objects the world's background collection
// has deleted so far.
func (w *World) Collected() int {
	w.maint.mu.Lock()
	defer w.maint.mu.Unlock()
	return w.maint.mu.collected
}
