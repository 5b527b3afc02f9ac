// Package particles is worldfs's reference simulation: emitters spawn
// particles that fall under gravity; a particle that hits the ground turns
// into debris, which fades and is despawned. Three archetypes, two
// processors, spawns and despawns every tick, all deterministic in the tick
// and entity ids, so a run interrupted anywhere and resumed must end in
// exactly the state of an uninterrupted one.
package particles

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// Tables returns the simulation's archetype tables.
func Tables() []*engine.Table {
	pos, _ := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64})
	vel, _ := engine.NewComponent("velocity", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64})
	emit, _ := engine.NewComponent("emitter", engine.Field{Name: "rate", Type: engine.Int64}, engine.Field{Name: "label", Type: engine.String})
	ttl, _ := engine.NewComponent("ttl", engine.Field{Name: "remaining", Type: engine.Int64})
	particle, _ := engine.NewTable("particle", pos, vel)
	emitter, _ := engine.NewTable("emitter", pos, emit)
	debris, _ := engine.NewTable("debris", pos, ttl)
	return []*engine.Table{particle, emitter, debris}
}

const (
	dt      = 0.05
	gravity = -9.8
	// DebrisLife is how many ticks debris lasts.
	DebrisLife = 8
)

// Install adds the simulation's processors and its command materializer
// to w.
func Install(w *engine.World) error {
	w.OnCommand(NudgeKind, nudge)
	if err := w.AddProcessor(move); err != nil {
		return err
	}
	return w.AddProcessor(fade)
}

// NudgeKind is the simulation's durable command: move every emitter by
// {"dx": …, "dy": …}.
const NudgeKind = "nudge"

// Nudge returns a nudge command due at tick.
func Nudge(id string, due int64, dx, dy float64) index.Command {
	body, _ := json.Marshal(map[string]float64{"dx": dx, "dy": dy})
	return index.Command{ID: id, Due: due, Kind: NudgeKind, Body: string(body)}
}

func nudge(tc *engine.TickContext, c index.Command) error {
	var d struct{ DX, DY float64 }
	if err := json.Unmarshal([]byte(c.Body), &d); err != nil {
		return fmt.Errorf("nudge body %q: %w", c.Body, err)
	}
	f := tc.Frame("emitter")
	x, y := f.Float64("position_x"), f.Float64("position_y")
	for i := range x {
		x[i] += d.DX
		y[i] += d.DY
	}
	return nil
}

// move integrates particles under gravity.
func move(tc *engine.TickContext) error {
	f := tc.Frame("particle")
	x, y, vx, vy := f.Float64("position_x"), f.Float64("position_y"), f.Float64("velocity_x"), f.Float64("velocity_y")
	for i := range f.Entities {
		vy[i] += gravity * dt
		x[i] += vx[i] * dt
		y[i] += vy[i] * dt
	}
	return nil
}

// fade counts debris down.
func fade(tc *engine.TickContext) error {
	rem := tc.Frame("debris").Int64("ttl_remaining")
	for i := range rem {
		rem[i]--
	}
	return nil
}

// jitter is a deterministic pseudo-random number in [-1, 1) from n.
func jitter(n int64) float64 {
	u := uint64(n)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	u ^= u >> 29
	u *= 0xbf58476d1ce4e5b9
	u ^= u >> 32
	return float64(u%2000000)/1000000 - 1
}

// Setup queues the initial emitters of a new world.
func Setup(w *engine.World, emitters int) error {
	for i := range emitters {
		if _, err := w.Spawn("emitter", engine.Values{
			"position_x": float64(i) * 10, "position_y": 50.0,
			"emitter_rate": int64(1 + i%3), "emitter_label": fmt.Sprintf("emitter-%d", i),
		}); err != nil {
			return err
		}
	}
	return nil
}

// Schedule queues the next tick's spawns and despawns from the last
// visible state: each emitter spawns its rate of particles; particles
// below the ground become debris; spent debris goes.
func Schedule(w *engine.World) error {
	em := w.Frame("emitter")
	ex, ey, rate := em.Float64("position_x"), em.Float64("position_y"), em.Int64("emitter_rate")
	next := w.Tick() + 1
	for i, e := range em.Entities {
		for k := range rate[i] {
			seed := next*1_000_003 + e*101 + k
			if _, err := w.Spawn("particle", engine.Values{
				"position_x": ex[i], "position_y": ey[i],
				"velocity_x": 3 * jitter(seed), "velocity_y": 4 + 2*jitter(seed+7),
			}); err != nil {
				return err
			}
		}
	}
	p := w.Frame("particle")
	px, py := p.Float64("position_x"), p.Float64("position_y")
	for i, e := range p.Entities {
		if py[i] < 0 {
			if err := w.Despawn(e); err != nil {
				return err
			}
			if _, err := w.Spawn("debris", engine.Values{"position_x": px[i], "position_y": 0.0, "ttl_remaining": int64(DebrisLife)}); err != nil {
				return err
			}
		}
	}
	d := w.Frame("debris")
	for i, e := range d.Entities {
		if d.Int64("ttl_remaining")[i] <= 0 {
			if err := w.Despawn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Run steps w until its last visible tick is last, scheduling each tick
// first from the state the tick is computed from, with up to the world's
// Options.Depth ticks in flight. progress, if set, is called after every
// committed tick.
func Run(ctx context.Context, w *engine.World, last int64, progress func(engine.CommittedTickReceipt)) error {
	report := func(rs []engine.CommittedTickReceipt) {
		for _, r := range rs {
			if progress != nil {
				progress(r)
			}
		}
	}
	for w.Tick() < last {
		if err := Schedule(w); err != nil {
			return err
		}
		rs, err := w.Submit(ctx)
		report(rs)
		if err != nil {
			return err
		}
	}
	rs, err := w.Flush(ctx)
	report(rs)
	return err
}

// Fingerprint summarizes a world's visible state, for comparing runs.
func Fingerprint(w *engine.World) string {
	var s string
	for _, t := range w.Tables() {
		f := w.Frame(t.Name)
		sum := 0.0
		for _, c := range t.Columns {
			if c.Type == engine.Float64 && c.Component != "" {
				for _, v := range f.Float64(c.Name) {
					sum += v
				}
			}
		}
		var ids int64
		for _, e := range f.Entities {
			ids = ids*31 + e
		}
		s += fmt.Sprintf("%s:%d:%x:%.9g;", t.Name, f.Len(), ids, math.Round(sum*1e6)/1e6)
	}
	return fmt.Sprintf("tick %d next %d %s", w.Tick(), w.NextEntity(), s)
}
