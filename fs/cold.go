package fs

import (
	"context"
	"math"
	"time"

	"github.com/worldfs/worldfs/index"
)

// A world whose catalog the mount has not opened is read cold: its runs,
// a run's head, a lookup of one tick and a listing of ticks/ load only
// the checkpoint parts they read (index.LoadFor), never the whole history,
// each at the tip when it is asked (so exact). What needs the whole state
// (tokens/, facts/, tables/, a writer's ctl) opens the world's catalog as
// before, and from then on every read of the world uses that catalog. A
// fork is read through its ancestors' catalogs: it is never read cold.

// cold returns world's catalog state at the tip, loaded for want, or nil
// if world is to be read through its open catalog (the mount holds it, or
// world is a fork).
func (m *Mount) cold(ctx context.Context, world string, want index.Want) (*index.Partial, error) {
	m.mu.Lock()
	_, open := m.mu.cats[world]
	m.mu.Unlock()
	if open {
		return nil, nil
	}
	defer m.stats.op("cold load", time.Now())
	p, info, err := index.LoadFor(finish(ctx), m.b, world, want)
	if err != nil {
		return nil, err
	}
	if info.CheckpointSeq == 0 || p.World().Parent != "" {
		return nil, nil // no checkpoint: the catalog loads the log once
	}
	return p, nil
}

// coldRuns returns the runs of world with published ticks, read cold (nil,
// false: read them through the catalog).
func (m *Mount) coldRuns(ctx context.Context, world string) ([]string, bool, error) {
	p, err := m.cold(ctx, world, index.Want{From: 1, To: 0})
	if err != nil || p == nil {
		return nil, false, err
	}
	out := []string{}
	for _, r := range p.Runs() {
		out = append(out, r.Name)
	}
	return out, true, nil
}

// coldHead returns the newest published tick of (world, run), read cold
// (cold false: read it through the catalog).
func (m *Mount) coldHead(ctx context.Context, world, run string) (t tickRef, ok, cold bool, err error) {
	p, err := m.cold(ctx, world, index.Want{Run: run, From: 1, To: 0, Head: true})
	if err != nil || p == nil {
		return tickRef{}, false, false, err
	}
	tk, ok, err := p.Last(run, math.MaxInt64)
	if err != nil || !ok {
		return tickRef{}, false, true, err
	}
	return tickRef{World: world, Run: run, Tick: tk}, true, true, nil
}

// coldTick returns tick n of (world, run), read cold (cold false: read it
// through the catalog).
func (m *Mount) coldTick(ctx context.Context, world, run string, n int64) (t tickRef, ok, cold bool, err error) {
	p, err := m.cold(ctx, world, index.Want{Run: run, From: n, To: n})
	if err != nil || p == nil {
		return tickRef{}, false, false, err
	}
	tk, ok, err := p.Tick(run, n)
	if err != nil || !ok {
		return tickRef{}, false, true, err
	}
	return tickRef{World: world, Run: run, Tick: tk}, true, true, nil
}

// coldTime is when world last changed (worldTime), read cold: each run's
// head loaded part by part into one partial state (ok false: read it
// through the catalog).
func (m *Mount) coldTime(ctx context.Context, world string) (ms int64, ok bool, err error) {
	p, err := m.cold(ctx, world, index.Want{From: 1, To: 0})
	if err != nil || p == nil {
		return 0, false, err
	}
	ms = p.World().CreatedUnixMs
	for _, r := range p.Runs() {
		if err := p.Load(finish(ctx), index.Want{Run: r.Name, From: 1, To: 0, Head: true}); err != nil {
			return 0, false, err
		}
		t, found, err := p.Tick(r.Name, r.Head)
		if err != nil {
			return 0, false, err
		}
		if found {
			ms = max(ms, t.PublishedUnixMs)
		}
	}
	return ms, true, nil
}
