package fs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// catalog returns the read-only catalog of world, opening it on first use.
func (m *Mount) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	ctx = finish(ctx)
	m.mu.Lock()
	c, ok := m.mu.cats[world]
	m.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := index.Open(ctx, m.b, world, index.Options{Freshness: m.opts.Freshness, NoCompactor: true})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		c.Close()
		return nil, index.ErrClosed
	}
	if old, ok := m.mu.cats[world]; ok {
		c.Close()
		return old, nil
	}
	m.mu.cats[world] = c
	return c, nil
}

// state returns world's catalog state: exact includes every slot created
// before the call (path lookups of something not yet seen); otherwise it is
// at most Freshness old (listings).
func (m *Mount) state(ctx context.Context, world string, exact bool) (*index.State, error) {
	ctx = finish(ctx)
	c, err := m.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	if exact {
		return c.Exact(ctx)
	}
	return c.Fresh(ctx)
}

// worlds returns the world directory, at most Freshness old.
func (m *Mount) worlds(ctx context.Context) ([]string, error) {
	ctx = finish(ctx)
	m.mu.Lock()
	ws, at := m.mu.worlds, m.mu.worldsAt
	m.mu.Unlock()
	if time.Since(at) < m.opts.Freshness {
		return ws, nil
	}
	ms, err := index.ListWorlds(ctx, m.b)
	if err != nil {
		return nil, err
	}
	ws = make([]string, 0, len(ms))
	for _, mk := range ms {
		ws = append(ws, mk.ID)
	}
	slices.Sort(ws)
	m.mu.Lock()
	m.mu.worlds, m.mu.worldsAt = ws, time.Now()
	m.mu.Unlock()
	return ws, nil
}

// worldExists reports whether world was created: from the directory, or,
// for a world newer than it, from the world's marker and catalog.
func (m *Mount) worldExists(ctx context.Context, world string) (bool, error) {
	if index.ValidateWorldID(world) != nil {
		return false, nil
	}
	ws, err := m.worlds(ctx)
	if err != nil {
		return false, err
	}
	if _, found := slices.BinarySearch(ws, world); !found {
		if _, err := index.ReadMarker(ctx, m.b, world); errors.Is(err, bucket.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	s, err := m.state(ctx, world, false)
	if err == nil && !s.World.Created {
		s, err = m.state(ctx, world, true)
	}
	if err != nil {
		return false, err
	}
	return s.World.Created, nil
}

// tableInfo returns world's description of table id (immutable, kept).
func (m *Mount) tableInfo(ctx context.Context, world, id string) (engine.TableInfo, error) {
	ctx = finish(ctx)
	key := world + "/" + id
	m.mu.Lock()
	ti, ok := m.mu.infos[key]
	m.mu.Unlock()
	if ok {
		return ti, nil
	}
	ti, err := engine.ReadTableInfo(ctx, m.b, world, id)
	if err != nil {
		return ti, fmt.Errorf("world %s: table %s has no description: %w", world, id, err)
	}
	m.mu.Lock()
	m.mu.infos[key] = ti
	m.mu.Unlock()
	return ti, nil
}
