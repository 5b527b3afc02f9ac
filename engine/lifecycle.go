package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// ErrLineageMissing: a fork's catalog names a parent, but the lineage rows
// its creation appends are not in the bucket. Detectable corruption: a
// fenced resume refuses the world.
var ErrLineageMissing = errors.New("fork lineage rows are missing")

// CreateWorld creates a coordinated world (its catalog, with this writer
// holding the fence) with the given archetype tables.
func CreateWorld(ctx context.Context, b bucket.Bucket, id string, tables []*Table, opts Options) (*World, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, invalid(err)
	}
	// Everything the arguments can get wrong is refused before the marker
	// makes the name taken.
	if _, err := newWorld(id, b, nil, 0, tables, opts); err != nil {
		return nil, invalid(err)
	}
	cat, epoch, err := index.CreateWorld(ctx, b, id, index.WorldCreate{WriterMode: opts.WriterMode, Meta: opts.Meta}, opts.Holder, opts.Catalog)
	if err != nil {
		return nil, err
	}
	w, err := newWorld(id, b, cat, epoch, tables, opts)
	if err == nil {
		err = registerTables(ctx, b, id, tables)
	}
	if err != nil {
		cat.Close()
		return nil, err
	}
	return w, nil
}

// Uncoordinated returns a world with no catalog: rows are stamped with the
// implicit epoch-0 identity (""/0), no manifests are written and nothing is
// filtered (the pre-commit-identity semantics).
func Uncoordinated(ctx context.Context, id string, b bucket.Bucket, tables []*Table, opts Options) (*World, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, invalid(err)
	}
	if err := index.ValidateWorldID(id); err != nil {
		return nil, err
	}
	w, err := newWorld(id, b, nil, 0, tables, opts)
	if err != nil {
		return nil, err
	}
	return w, registerTables(ctx, b, id, tables)
}

// Close releases the world's catalog.
// Ticks still in flight are abandoned (Flush first to keep them); a slot
// already being created is decided first.
func (w *World) Close() error {
	if w.pub != nil {
		w.pub.cancel()
		<-w.pub.done
		for _, p := range w.flight {
			<-p.appended
		}
	}
	w.maint.stop()
	if w.cat != nil {
		return w.cat.Close()
	}
	return nil
}

// ResumeWorld rebuilds a live world from its visible rows and manifests and
// acquires the fence, staling the previous writer. A cleanup_only world is
// refused, and so is a fork whose lineage rows are missing.
func ResumeWorld(ctx context.Context, b bucket.Bucket, id string, tables []*Table, opts Options) (*World, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, invalid(err)
	}
	cat, err := index.Open(ctx, b, id, opts.Catalog)
	if err != nil {
		return nil, err
	}
	w, err := resume(ctx, b, cat, id, tables, opts)
	if err != nil {
		cat.Close()
		return nil, err
	}
	return w, nil
}

func resume(ctx context.Context, b bucket.Bucket, cat *index.Catalog, id string, tables []*Table, opts Options) (*World, error) {
	s, err := cat.Exact(ctx)
	if err != nil {
		return nil, err
	}
	if !s.World.Created {
		return nil, fmt.Errorf("resume %s: %w", id, index.ErrNoWorld)
	}
	if s.World.Parent != "" {
		if _, err := b.Stat(ctx, index.LineagePath(id)); err != nil {
			return nil, fmt.Errorf("resume %s: a fork of %s: %w (%v)", id, s.World.Parent, ErrLineageMissing, err)
		}
	}
	// The tables are checked before the fence moves: a refused resume
	// stales no writer.
	tables, err = adoptTables(ctx, b, id, tables)
	if err != nil {
		return nil, err
	}
	if _, err := newWorld(id, b, nil, 0, tables, opts); err != nil {
		return nil, invalid(err)
	}
	if err := checkEntityNames(ctx, b, id, tables); err != nil {
		return nil, err
	}
	r, err := cat.Commit(ctx, index.Entry{Kind: index.KindFenceAcquire, FenceAcquire: &index.FenceAcquire{Holder: opts.Holder, Resume: true}})
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", id, err)
	}
	w, err := newWorld(id, b, cat, r.Epoch, tables, opts)
	if err != nil {
		return nil, err
	}
	if err := registerTables(ctx, b, id, tables); err != nil {
		return nil, err
	}
	if s, err = cat.Exact(ctx); err != nil {
		return nil, err
	}
	if err := w.loadVisible(ctx, s, opts.Run); err != nil {
		return nil, fmt.Errorf("resume %s: %w", id, err)
	}
	if w.tick < 0 && len(opts.Legacy) > 0 {
		frames, tick, next, err := legacyState(ctx, b, id, opts.Run, tables, opts.Legacy)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", id, err)
		}
		for name, f := range frames {
			w.frames[name] = f
		}
		w.tick, w.nextEntity = tick, next
	}
	return w, nil
}

// loadVisible sets the world's state to the visible rows of run's head
// tick (or, for a fork with no tick of its own yet, its fork point).
func (w *World) loadVisible(ctx context.Context, s *index.State, run string) error {
	v, err := index.OpenView(ctx, index.LoadFrom(w.b), s.World.ID, run)
	if err != nil {
		return err
	}
	head, ok := v.Head()
	if !ok {
		return nil // nothing visible yet: an empty world at tick -1
	}
	frames, err := readTick(ctx, w.b, w.tables, head.Tick)
	if err != nil {
		return err
	}
	w.frames, w.tick, w.nextEntity = frames, head.Tick.Tick, head.NextEntity
	return nil
}

// readTick reads the visible rows of one published tick: exactly the rows
// of its manifest's fragments stamped with its (tick, token), the rule's
// published term against that tick alone (index.RowPublished).
func readTick(ctx context.Context, b bucket.Bucket, tables []*Table, t *index.Tick) (map[string]*Frame, error) {
	byID := map[string]*Table{}
	frames := map[string]*Frame{}
	for _, tb := range tables {
		byID[tb.ID] = tb
		frames[tb.Name] = NewFrame(tb)
	}
	tickTables, err := t.Tables()
	if err != nil {
		return nil, err
	}
	for _, tf := range tickTables {
		tb, ok := byID[tf.Table]
		if !ok {
			return nil, fmt.Errorf("tick %d publishes table %s, which this world does not declare (a changed schema is a new table)", t.Tick, tf.Table)
		}
		for _, fr := range tf.Fragments {
			data, _, err := b.Get(ctx, fr.Path)
			if err != nil {
				return nil, fmt.Errorf("tick %d: %w", t.Tick, err)
			}
			if Digest(data) != fr.Digest {
				return nil, bucket.MarkCorruption(fmt.Errorf("tick %d: fragment %s does not match its manifest digest", t.Tick, fr.Path))
			}
			f, err := DecodeFragment(tb, data, func(r StampedRow) bool {
				return index.RowPublished.Eval(index.Stamp{Tick: r.Tick, Token: r.CommitToken, Epoch: r.WriterEpoch}, t)
			})
			if err != nil {
				return nil, err
			}
			for _, e := range f.Entities {
				if err := frames[tb.Name].Insert(e, f.Row(e)); err != nil {
					return nil, err
				}
			}
		}
	}
	return frames, nil
}

// adoptTables returns tables with each table that world describes under
// another format (its columns the same, in another order: a table of a
// worldfs before declared order, frame.FormatByName) replaced by the
// world's own, rebuilt from its description: a world's archetype stays one
// table, read and written as it always was, whatever order its program
// declares the columns in now. A table the world describes by its own id,
// or not at all, is kept as declared.
func adoptTables(ctx context.Context, b bucket.Bucket, world string, tables []*Table) ([]*Table, error) {
	infos, err := tableInfos(ctx, b, world)
	if err != nil {
		return nil, err
	}
	return adopt(world, infos, tables)
}

// adopt is adoptTables with the world's descriptions read.
func adopt(world string, infos []TableInfo, tables []*Table) ([]*Table, error) {
	out := slices.Clone(tables)
	for i, t := range out {
		if slices.ContainsFunc(infos, func(ti TableInfo) bool { return ti.ID == t.ID }) {
			continue
		}
		for _, ti := range infos {
			if ti.Name != t.Name || !frame.SameColumnSet(ti.Columns, t.Columns) {
				continue
			}
			kept, err := frame.TableFromInfo(ti)
			if err != nil {
				return nil, fmt.Errorf("world %s: %w", world, err)
			}
			out[i] = kept
			break
		}
	}
	return out, nil
}

// registerTables records each table's description in the bucket, once.
// A table already described (perhaps under another readable name, which
// is not identity) is left as it is.
func registerTables(ctx context.Context, b bucket.Bucket, world string, tables []*Table) error {
	for _, t := range tables {
		data, err := json.Marshal(t.Info())
		if err != nil {
			return err
		}
		if _, err := bucket.CreateOnce(ctx, b, index.TableInfoPath(world, t.ID), data); err != nil && !errors.Is(err, bucket.ErrExist) {
			return fmt.Errorf("world %s: describing table %s: %w", world, t.Name, err)
		}
	}
	return nil
}

// LineageTable holds a fork's ancestor chain: world metadata with negative
// entity ids, stamped epoch 0, never token-filtered. Its columns are in
// name order (frame.FormatByName): a fork retried after a crash must find
// its lineage file the same bytes, whatever worldfs wrote it.
func LineageTable() *Table {
	c, _ := NewComponent("lineage", Field{Name: "world", Type: String}, Field{Name: "parent", Type: String}, Field{Name: "fork_run", Type: String}, Field{Name: "fork_tick", Type: Int64})
	t, _ := frame.NewTable("lineage", c)
	return t
}

// ForkWorld creates child as a fork of parent at (forkRun, forkTick): the
// child's catalog names its parent and fork point and the child acquires
// its fence; its whole ancestor chain is persisted as one append; and the
// returned world starts from the parent's visible state at the fork point.
func ForkWorld(ctx context.Context, b bucket.Bucket, parent, child, forkRun string, forkTick int64, tables []*Table, opts Options) (*World, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, invalid(err)
	}
	// The fork point may be a tick the parent inherited: resolve it
	// through the parent's lineage.
	v, err := index.OpenView(ctx, index.LoadFrom(b), parent, forkRun)
	if err != nil {
		return nil, fmt.Errorf("fork %s of %s: %w", child, parent, err)
	}
	t, ok := v.Tick(forkTick)
	if !ok {
		return nil, fmt.Errorf("fork %s of %s: tick %d of run %s is not visible", child, parent, forkTick, forkRun)
	}
	// The fork's run parameters: its parent's, with its own over them.
	meta := maps.Clone(v.Segments[len(v.Segments)-1].State.World.Meta)
	if len(opts.Meta) > 0 && meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, opts.Meta)
	if err := index.ValidateMeta(meta); err != nil {
		return nil, invalid(fmt.Errorf("fork %s of %s: its parent's metadata with its own: %w", child, parent, err))
	}
	// The fork's archetypes are its parent's tables, in the format the
	// parent keeps them.
	if tables, err = adoptTables(ctx, b, parent, tables); err != nil {
		return nil, fmt.Errorf("fork %s of %s: %w", child, parent, err)
	}
	frames, err := readTick(ctx, b, tables, t.Tick)
	if err != nil {
		return nil, fmt.Errorf("fork %s of %s: %w", child, parent, err)
	}
	// The ancestor chain, nearest first.
	lin := NewFrame(LineageTable())
	id, w, run, tick := int64(-1), child, forkRun, forkTick
	for p := parent; p != ""; id-- {
		if err := lin.Insert(id, Values{"lineage_world": w, "lineage_parent": p, "lineage_fork_run": run, "lineage_fork_tick": tick}); err != nil {
			return nil, err
		}
		as, _, err := index.Load(ctx, b, p)
		if err != nil {
			return nil, err
		}
		w, p, run, tick = p, as.World.Parent, as.World.ForkRun, as.World.ForkTick
	}
	data, err := EncodeStamped(lin, func(int) Stamp { return Stamp{} }) // epoch 0, no token, tick 0
	if err != nil {
		return nil, err
	}
	if _, err := newWorld(child, b, nil, 0, tables, opts); err != nil {
		return nil, invalid(err)
	}
	// The lineage is written once the child's marker (which records the
	// same parent and fork point) holds the name, and before the first
	// slot: a fork refused because the name is taken writes nothing, a
	// catalog that names a parent never exists without its lineage rows,
	// and since the bytes follow from the arguments, a fork retried after
	// a crash finds its own lineage and goes on.
	persist := func(ctx context.Context) error {
		if _, err := bucket.CreateOnce(ctx, b, index.LineagePath(child), data); err != nil {
			return fmt.Errorf("fork %s: persisting lineage: %w", child, err)
		}
		return nil
	}
	cat, epoch, err := index.CreateWorldThen(ctx, b, child, index.WorldCreate{Parent: parent, ForkRun: forkRun, ForkTick: forkTick, Meta: meta}, opts.Holder, opts.Catalog, persist)
	if err != nil {
		return nil, err
	}
	wd, err := newWorld(child, b, cat, epoch, tables, opts)
	if err == nil {
		err = registerTables(ctx, b, child, tables)
	}
	if err != nil {
		cat.Close()
		return nil, err
	}
	wd.frames, wd.tick, wd.nextEntity = frames, forkTick, t.NextEntity
	return wd, nil
}
