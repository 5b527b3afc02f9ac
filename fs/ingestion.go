package fs

import (
	"context"
	"fmt"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// ingestion returns the world's fact ingestion service, which commits
// through the mount's catalog of the world.
func (m *Mount) ingestion(ctx context.Context, world string) (*engine.IngestionService, error) {
	m.mu.Lock()
	svc, ok := m.mu.ingest[world]
	m.mu.Unlock()
	if ok {
		return svc, nil
	}
	if _, err := m.state(ctx, world, true); err != nil {
		return nil, err
	}
	c, err := m.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	if !c.Tip().World.Created {
		return nil, fmt.Errorf("world %s: %w", world, index.ErrNoWorld)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if svc, ok := m.mu.ingest[world]; ok {
		return svc, nil
	}
	svc = engine.NewIngestionService(m.b, c, m.opts.Ingest)
	m.mu.ingest[world] = svc
	return svc, nil
}

func (m *Mount) gate(svc *engine.IngestionService) *engine.Gate { return engine.NewGate(svc) }

func (m *Mount) principal() engine.Principal {
	return engine.Principal{Name: m.opts.Holder, Role: m.opts.Role}
}
