package fs

import (
	"context"
	"fmt"

	"github.com/worldfs/worldfs/index"
)

// Command runs one ctl command line as a write to the ctl file of world
// ("" for the root ctl) runs it, and returns the answer the write would
// read back. It is the one mechanism behind the ctl files and the
// `worldfs world` commands, which run without a mount.
func (m *Mount) Command(ctx context.Context, world string, line []byte) (any, error) {
	return m.command(ctx, world, line)
}

// opStatus sets a world's status (active or archived) and, optionally,
// moves its writer mode to cleanup_only, which is final:
// {"op":"status","world":W,"status":"archived"?,"writer_mode":"cleanup_only"?}.
// An omitted status keeps the current one. The answer is the world's
// status and writer mode after the entry.
func opStatus(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op         string `json:"op"`
		World      string `json:"world"`
		Status     string `json:"status"`
		WriterMode string `json:"writer_mode"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if c.Status != "" && c.Status != index.StatusActive && c.Status != index.StatusArchived {
		return nil, badf("status %q: %s or %s", c.Status, index.StatusActive, index.StatusArchived)
	}
	if c.WriterMode != "" && c.WriterMode != index.ModeCleanupOnly {
		return nil, badf("writer_mode %q: a writer mode can only move to %s", c.WriterMode, index.ModeCleanupOnly)
	}
	if c.Status == "" && c.WriterMode == "" {
		return nil, badf("status %s: give a status, a writer_mode or both", c.World)
	}
	if ok, err := m.worldExists(ctx, c.World); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("status %q: %w", c.World, index.ErrNoWorld)
	}
	cat, err := m.catalog(ctx, c.World)
	if err != nil {
		return nil, err
	}
	s, err := cat.Exact(ctx)
	if err != nil {
		return nil, err
	}
	if c.Status == "" {
		c.Status = s.World.Status
	}
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindWorldStatus, WorldStatus: &index.WorldStatus{Status: c.Status, WriterMode: c.WriterMode}}); err != nil {
		return nil, fmt.Errorf("status %s: %w", c.World, err)
	}
	if s, err = cat.Exact(ctx); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "status": s.World.Status, "writer_mode": s.World.WriterMode}, nil
}
