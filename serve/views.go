package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/sql"
)

// The views a session queries, kept per (worlds, run, pin) and built
// again once a catalog they were built from moved on, as the web
// interface keeps them (ui/views.go): a session that pins nothing reads
// the head, each statement the catalogs as they are now, within
// Options.Freshness.

// pin is what the views of a session show: the head (the zero pin), one
// point (worldfs.at: that tick alone, as worldfs sql --at) or the history
// up to one (worldfs.until, as --until).
type pin struct {
	until bool
	m     *index.Moment
}

// key names the pin among the views kept: a time by its instant (a
// relative one was resolved when it was set), a tick, head~N or a token
// by itself.
func (p pin) key() string {
	m := p.m
	if m == nil {
		return ""
	}
	kind := "at"
	if p.until {
		kind = "until"
	}
	switch {
	case m.Tick != nil:
		return fmt.Sprintf("%s tick %d", kind, *m.Tick)
	case m.Back != nil:
		return fmt.Sprintf("%s head~%d", kind, *m.Back)
	case m.Token != "":
		return kind + " token " + m.Token
	case m.Time != nil:
		return kind + " time " + m.Time.UTC().Format(time.RFC3339Nano)
	}
	return kind + " " + m.Text
}

// viewsKey names views kept.
type viewsKey struct {
	worlds string // the session's worlds, joined by commas
	run    string
	pin    string
}

// views is one session's views, built from one view of each world's
// catalog, kept on the server's shelf (sql.Shelf) with the DuckDB
// databases that hold them.
type views = sql.Kept[struct{}]

// catalog returns world's catalog, opened read-only on first use and kept
// (index.Catalogs).
func (s *Server) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	if err := index.ValidateWorldID(world); err != nil {
		return nil, &noWorldError{world: world, err: err}
	}
	c, err := s.catalogs.Get(ctx, world)
	switch {
	case errors.Is(err, index.ErrNoWorld):
		return nil, &noWorldError{world: world}
	case errors.Is(err, index.ErrClosed):
		return nil, errClosed
	}
	return c, err
}

// noWorldError: a session named a world the bucket does not hold.
type noWorldError struct {
	world string
	err   error // why the name is no world's, if it cannot be one
}

func (e *noWorldError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("database %q is not a world's name: %v", e.world, e.err)
	}
	return fmt.Sprintf("database %q does not exist: no world of that name in the bucket", e.world)
}

// errClosed: the server is closing.
var errClosed = errors.New("the server is shutting down")

// state returns world's catalog state, confirmed current within the
// freshness.
func (s *Server) state(ctx context.Context, world string) (*index.State, error) {
	c, err := s.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	return c.Fresh(ctx)
}

// viewsOf returns the views of worlds' run under p as the catalogs are
// now, building them when they changed since the last build.
func (s *Server) viewsOf(ctx context.Context, worlds []string, run string, p pin) (*views, error) {
	if p.m != nil && p.m.Token != "" && len(worlds) > 1 {
		return nil, errors.New("a commit token names a commit of one world; with several worlds pin them with a tick or a time")
	}
	vs := make([]*index.View, len(worlds))
	var seqs []uint64
	for i, w := range worlds {
		v, err := index.OpenView(ctx, s.state, w, run)
		if err != nil {
			return nil, err
		}
		vs[i] = v
		for _, seg := range v.Segments {
			seqs = append(seqs, seg.State.Seq)
		}
	}
	key := viewsKey{strings.Join(worlds, ","), run, p.key()}
	v, err := s.shelf.Get(ctx, key, seqs, func(ctx context.Context) (*sql.Script, struct{}, error) {
		scripts := make([]*sql.Script, len(worlds))
		for i, w := range worlds {
			opts := s.opts.Views
			opts.Run, opts.View, opts.Reuse = run, vs[i], nil
			if p.m != nil {
				m := *p.m
				opts.At, opts.Only = &m, !p.until
			}
			sc, err := sql.Build(ctx, s.opts.Bucket, w, opts)
			if err != nil {
				return nil, struct{}{}, err
			}
			scripts[i] = sc
		}
		script, err := sql.Join(scripts...)
		return script, struct{}{}, err
	})
	if errors.Is(err, sql.ErrShelfClosed) {
		return nil, errClosed
	}
	return v, err
}
