package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// opIngest ingests one fact exactly once; the answer is its receipt. The
// fact's table must be one the world holds, unless the command says
// "create_table": true (then the fact's components declare it).
func opIngest(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	var c struct {
		Op          string `json:"op"`
		CreateTable bool   `json:"create_table"`
		engine.FactDocument
	}
	if err := engine.DecodeStrict(cmd, &c); err != nil {
		return nil, badf("ingest: %v", err)
	}
	svc, err := m.ingestion(ctx, world)
	if err != nil {
		return nil, err
	}
	resolve := c.Fact
	if c.CreateTable {
		resolve = c.FactCreatingTable
	}
	f, err := resolve(ctx, m.b, world)
	if err != nil {
		return nil, err // engine.ErrInvalid for a bad document (EINVAL); storage errors stay EIO
	}
	return m.gate(svc).IngestFact(ctx, m.principal(), f)
}

// opEvaluate records an evaluation receipt whose outcomes the command
// carries (the grader ran outside worldfs); the answer is the receipt.
func opEvaluate(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	var c struct {
		Op string `json:"op"`
		engine.EvaluationDocument
	}
	if err := engine.DecodeStrict(cmd, &c); err != nil {
		return nil, badf("evaluate: %v", err)
	}
	if len(c.Outcomes) == 0 {
		return nil, badf("evaluate: the command carries the grader's outcomes, and has none")
	}
	if err := engine.CheckOutcomes(c.Outcomes); err != nil {
		return nil, badf("evaluate %s: %v", c.ID, err)
	}
	svc, err := m.ingestion(ctx, world)
	if err != nil {
		return nil, err
	}
	s, err := m.state(ctx, world, true)
	if err != nil {
		return nil, err
	}
	ev, err := c.Evaluation(s)
	if err != nil {
		return nil, err
	}
	return m.gate(svc).Evaluate(ctx, m.principal(), ev, func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		return c.Outcomes, nil
	})
}

// writer is a world's writer held by this mount. engine.World is not safe
// for concurrent use: mu serializes commands.
type writer struct {
	mu sync.Mutex
	w  *engine.World
	// next holds the frames the next tick installs (by archetype), set by
	// commit_tick under mu.
	next map[string]*engine.Frame
}

// hold makes w the world's writer in this mount, closing a previous one.
func (m *Mount) hold(w *engine.World) error {
	wr := &writer{w: w}
	if err := w.AddProcessor(func(tc *engine.TickContext) error {
		for name, f := range wr.next {
			*tc.Frame(name) = *f.Clone()
		}
		return nil
	}); err != nil {
		w.Close()
		return err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		w.Close()
		return index.ErrClosed
	}
	old := m.mu.writers[w.ID()]
	m.mu.writers[w.ID()] = wr
	m.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		old.w.Close()
		old.mu.Unlock()
	}
	return nil
}

// tableSpec is a table as create takes it: an archetype, or with Fact a
// fact table (engine.NewFactTable) that facts are ingested into by name.
type tableSpec struct {
	Name       string             `json:"name"`
	Components []engine.Component `json:"components"`
	Fact       bool               `json:"fact,omitempty"`
}

func opCreate(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op         string                     `json:"op"`
		World      string                     `json:"world"`
		Tables     []tableSpec                `json:"tables"`
		WriterMode string                     `json:"writer_mode"`
		Meta       map[string]json.RawMessage `json:"meta"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if err := index.ValidateWorldID(c.World); err != nil {
		return nil, badf("world: %v", err)
	}
	meta, err := metaOf("create "+c.World, c.Meta)
	if err != nil {
		return nil, err
	}
	if c.WriterMode != "" && c.WriterMode != index.ModeResumable && c.WriterMode != index.ModeCleanupOnly {
		return nil, badf("writer_mode %q: %s or %s", c.WriterMode, index.ModeResumable, index.ModeCleanupOnly)
	}
	if len(c.Tables) == 0 {
		return nil, badf("create %s: declare at least one table", c.World)
	}
	if err := m.absent(ctx, c.World); err != nil {
		return nil, err
	}
	var tables, facts []*engine.Table
	seen := map[string]bool{}
	for _, ts := range c.Tables {
		var comps []engine.Component
		for _, cs := range ts.Components {
			comp, err := engine.NewComponent(cs.Name, cs.Fields...)
			if err != nil {
				return nil, badf("table %s: %v", ts.Name, err)
			}
			comps = append(comps, comp)
		}
		if seen[ts.Name] {
			return nil, badf("create %s: table %s is declared twice", c.World, ts.Name)
		}
		seen[ts.Name] = true
		if ts.Fact {
			if ts.Name == engine.ReceiptTableName {
				return nil, badf("create %s: table %s holds evaluation receipts, which worldfs records itself", c.World, ts.Name)
			}
			t, err := engine.NewFactTable(ts.Name, comps...)
			if err != nil {
				return nil, badf("%v", err)
			}
			facts = append(facts, t)
			continue
		}
		t, err := engine.NewTable(ts.Name, comps...)
		if err != nil {
			return nil, badf("%v", err)
		}
		tables = append(tables, t)
	}
	opts := m.opts.Writer
	opts.WriterMode, opts.Meta = c.WriterMode, meta
	w, err := engine.CreateWorld(ctx, m.b, c.World, tables, opts)
	if err != nil {
		return nil, err
	}
	if err := engine.DeclareFactTables(ctx, m.b, c.World, facts...); err != nil {
		w.Close()
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "writer_epoch": w.Epoch()}, nil
}

// metaOf is a create's or fork's "meta": an object of scalars (a string
// as it is; a number or a boolean as its JSON text), within
// index.ValidateMeta's bounds.
func metaOf(what string, raw map[string]json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	meta := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9' || string(v) == "true" || string(v) == "false"):
			s = string(v)
		default:
			return nil, badf("%s: meta %s: a value is a string, a number or a boolean, not %s", what, k, v)
		}
		meta[k] = s
	}
	if err := index.ValidateMeta(meta); err != nil {
		return nil, badf("%s: %v", what, err)
	}
	return meta, nil
}

// absent refuses a world name that is taken, before anything is written
// (engine's create and fork refuse it too, at the marker; this answers
// without opening a catalog).
func (m *Mount) absent(ctx context.Context, world string) error {
	ok, err := m.worldExists(ctx, world)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("world %s: %w", world, index.ErrWorldExists)
	}
	return nil
}

func opFork(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op     string                     `json:"op"`
		World  string                     `json:"world"`
		Parent string                     `json:"parent"`
		Run    string                     `json:"run"`
		Tick   *int64                     `json:"tick"`
		Meta   map[string]json.RawMessage `json:"meta"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if c.Run == "" {
		c.Run = index.DefaultRun
	}
	meta, err := metaOf("fork "+c.World, c.Meta)
	if err != nil {
		return nil, err
	}
	if err := index.ValidateWorldID(c.World); err != nil {
		return nil, badf("world: %v", err)
	}
	if err := index.ValidateRunName(c.Run); err != nil {
		return nil, badf("fork %s: %v", c.World, err)
	}
	if c.Tick == nil {
		return nil, badf("fork %s: give the tick of %s to fork from", c.World, c.Parent)
	}
	if err := m.absent(ctx, c.World); err != nil {
		return nil, err
	}
	if ok, err := m.worldExists(ctx, c.Parent); err != nil {
		return nil, err
	} else if !ok {
		return nil, badf("fork %s: parent world %q does not exist", c.World, c.Parent)
	}
	if _, ok, err := m.tick(ctx, c.Parent, c.Run, *c.Tick); err != nil {
		return nil, err
	} else if !ok {
		return nil, badf("fork %s: tick %d of %s run %s is not visible", c.World, *c.Tick, c.Parent, c.Run)
	}
	tables, err := m.declaredTables(ctx, c.Parent)
	if err != nil {
		return nil, err
	}
	opts := m.opts.Writer
	opts.Meta = meta
	w, err := engine.ForkWorld(ctx, m.b, c.Parent, c.World, c.Run, *c.Tick, tables, opts)
	if err != nil {
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "parent": c.Parent, "fork_run": c.Run, "fork_tick": *c.Tick, "writer_epoch": w.Epoch()}, nil
}

func opResume(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op    string `json:"op"`
		World string `json:"world"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if ok, err := m.worldExists(ctx, c.World); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("resume %q: %w", c.World, index.ErrNoWorld)
	}
	tables, err := m.declaredTables(ctx, c.World)
	if err != nil {
		return nil, err
	}
	w, err := engine.ResumeWorld(ctx, m.b, c.World, tables, m.opts.Writer)
	if err != nil {
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "writer_epoch": w.Epoch(), "tick": w.Tick()}, nil
}

// declaredTables rebuilds a world's tables from the descriptions it keeps
// in the bucket (legacy tables are never written again, so they are left
// out). Each rebuilt table must hash to its recorded id.
func (m *Mount) declaredTables(ctx context.Context, world string) ([]*engine.Table, error) {
	prefix := strings.TrimSuffix(index.TableInfoPath(world, "x"), "x.json")
	var out []*engine.Table
	for a, err := range m.b.List(ctx, prefix, "") {
		if err != nil {
			return nil, err
		}
		id := strings.TrimSuffix(strings.TrimPrefix(a.Name, prefix), ".json")
		info, err := m.tableInfo(ctx, world, id)
		if err != nil {
			return nil, err
		}
		t, err := engine.TableFromInfo(info)
		if err != nil {
			return nil, fmt.Errorf("world %s: %w", world, err)
		}
		if !t.Legacy() && !engine.IsFactTable(t) { // facts are not archetypes
			out = append(out, t)
		}
	}
	return out, nil
}

func opCommitTick(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op     string                     `json:"op"`
		Tick   *int64                     `json:"tick"`
		Frames map[string]json.RawMessage `json:"frames"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	wr := m.mu.writers[world]
	m.mu.Unlock()
	if wr == nil {
		return nil, fmt.Errorf("world %s: %w; write {\"op\":\"resume\",\"world\":%q} to the root ctl first", world, ErrNoWriter, world)
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	next := wr.w.Tick() + 1
	if c.Tick != nil && *c.Tick != next {
		if *c.Tick < next {
			return nil, fmt.Errorf("world %s: tick %d: %w", world, *c.Tick, &index.CatalogConflictError{World: world, Run: index.DefaultRun, Tick: *c.Tick})
		}
		return nil, badf("world %s: tick %d given, the next tick is %d", world, *c.Tick, next)
	}
	if len(c.Frames) == 0 {
		return nil, badf("commit_tick: no frames (give \"frames\": {ARCHETYPE: rows or a file path})")
	}
	frames := map[string]*engine.Frame{}
	for name, raw := range c.Frames {
		i := slices.IndexFunc(wr.w.Tables(), func(t *engine.Table) bool { return t.Name == name })
		if i < 0 {
			var names []string
			for _, t := range wr.w.Tables() {
				names = append(names, t.Name)
			}
			return nil, badf("world %s has no archetype %q (it has %s)", world, name, strings.Join(names, ", "))
		}
		f, err := frameOf(ctx, wr.w.Tables()[i], raw)
		if err != nil {
			return nil, err
		}
		frames[name] = f
	}
	wr.next = frames
	defer func() { wr.next = nil }()
	return wr.w.Step(ctx)
}
