package fs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// catalog returns the read-only catalog of world, opening it on first use
// and keeping it (index.Catalogs: the Options.MaxCatalogs used last).
func (m *Mount) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	c, err := m.cats.Get(finish(ctx), world)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if _, ok := m.mu.colds[world]; ok {
		delete(m.mu.colds, world) // the catalog answers from now on; its cold state would only hold memory
	}
	m.mu.Unlock()
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

// worlds returns the world directory, at most Freshness old: a listing of
// names, no object read per world.
func (m *Mount) worlds(ctx context.Context) ([]index.WorldEntry, error) {
	ctx = finish(ctx)
	m.mu.Lock()
	ws, at := m.mu.worlds, m.mu.worldsAt
	m.mu.Unlock()
	if time.Since(at) < m.opts.Freshness {
		return ws, nil
	}
	// The listing is as old as its start (a world created while it runs
	// may be missed), which is what the freshness bound counts from.
	start := time.Now()
	ws, err := index.ListWorldEntries(ctx, m.b)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ws, func(a, b index.WorldEntry) int { return strings.Compare(a.ID, b.ID) })
	m.mu.Lock()
	if start.After(m.mu.worldsAt) {
		m.mu.worlds, m.mu.worldsAt = ws, start
	}
	ws = m.mu.worlds
	m.mu.Unlock()
	return ws, nil
}

// world returns world's directory entry if it was created: from the
// mount's last listing of the directory, whatever its age (worlds are never
// removed), so that a lookup of a listed world reads nothing; or, for a
// world newer than that listing, from its marker and catalog.
func (m *Mount) world(ctx context.Context, world string) (index.WorldEntry, bool, error) {
	if index.ValidateWorldID(world) != nil {
		return index.WorldEntry{}, false, nil
	}
	m.mu.Lock()
	ws, listed := m.mu.worlds, !m.mu.worldsAt.IsZero()
	m.mu.Unlock()
	if !listed {
		var err error
		if ws, err = m.worlds(ctx); err != nil {
			return index.WorldEntry{}, false, err
		}
	}
	if i, found := slices.BinarySearchFunc(ws, world, func(e index.WorldEntry, id string) int { return strings.Compare(e.ID, id) }); found {
		return ws[i], true, nil
	}
	if _, err := index.ReadMarker(ctx, m.b, world); errors.Is(err, bucket.ErrNotExist) {
		return index.WorldEntry{}, false, nil
	} else if err != nil {
		return index.WorldEntry{}, false, err
	}
	s, err := m.state(ctx, world, true)
	if err != nil || !s.World.Created {
		return index.WorldEntry{}, false, err
	}
	return index.WorldEntry{ID: world, Created: time.UnixMilli(s.World.CreatedUnixMs)}, true, nil
}

// worldExists reports whether world was created, as a ctl command needs
// to know it now: from its marker and its catalog at the tip if need be.
func (m *Mount) worldExists(ctx context.Context, world string) (bool, error) {
	if index.ValidateWorldID(world) != nil {
		return false, nil
	}
	if _, err := index.ReadMarker(ctx, m.b, world); errors.Is(err, bucket.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
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
func (m *Mount) tableInfo(ctx context.Context, world, id string) (frame.TableInfo, error) {
	ctx = finish(ctx)
	key := world + "/" + id
	m.mu.Lock()
	ti, ok := m.mu.infos[key]
	m.mu.Unlock()
	if ok {
		return ti, nil
	}
	ti, err := frame.ReadTableInfo(ctx, m.b, world, id)
	if err != nil {
		return ti, fmt.Errorf("world %s: table %s has no description: %w", world, id, err)
	}
	m.mu.Lock()
	m.mu.infos[key] = ti
	m.mu.Unlock()
	return ti, nil
}
