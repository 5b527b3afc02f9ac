// Package enginetest is the test kit of worlds: a context for a test's
// calls, writer options without background work, particle worlds
// (created, resumed or forked) run to a tick, wide worlds of many rows a
// tick, and the fingerprint of an uninterrupted run to compare a crashed
// and resumed one against. Every
// package that tests through engine worlds (engine, fs, sql, export,
// integration) uses it instead of its own copy.
package enginetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/ctxtest"
)

// Context returns a context for one test's calls: cancelled when the
// test ends, and shortly before the test binary's deadline (go test
// -timeout), with no wall-clock bound of its own (ctxtest.Context).
func Context(t testing.TB) context.Context { return ctxtest.Context(t) }

// Quiet are writer options without background work (no catalog
// compactor, no maintenance, one tick in flight at a time: each published
// in a slot of its own before the next is computed), so that a test sees
// only what it does. Tests of the pipeline set Depth.
var Quiet = engine.Options{Catalog: index.Options{NoCompactor: true}, NoMaintenance: true, Depth: 1}

// Emitters is how many particle emitters Drive seeds a world with.
const Emitters = 3

var installed struct {
	sync.Mutex
	worlds map[*engine.World]bool
}

// Drive brings w to tick last with the particle simulation: its
// processors on first use, the initial emitters if nothing is visible
// yet, then the ticks. cmds are durable commands enqueued first (an
// identical enqueue is a no-op, so every driver of a world may pass the
// same ones; a world without a catalog takes none).
func Drive(ctx context.Context, w *engine.World, last int64, cmds ...index.Command) error {
	installed.Lock()
	if installed.worlds == nil {
		installed.worlds = map[*engine.World]bool{}
	}
	first := !installed.worlds[w]
	installed.worlds[w] = true
	installed.Unlock()
	if first {
		if err := particles.Install(w); err != nil {
			return err
		}
	}
	if w.Tick() < 0 {
		if err := particles.Setup(w, Emitters); err != nil {
			return err
		}
	}
	if w.Catalog() != nil {
		for _, c := range cmds {
			if err := w.Enqueue(ctx, c); err != nil {
				return err
			}
		}
	}
	return particles.Run(ctx, w, last, nil)
}

// Run drives w to tick last (Drive, without commands) and fails the test
// if that fails.
func Run(t testing.TB, w *engine.World, last int64) {
	t.Helper()
	if err := Drive(Context(t), w, last); err != nil {
		t.Fatal(err)
	}
}

// World creates world id in b with the particle tables and opts (Quiet
// unless given), closes it when the test ends, and drives it to tick last
// (last < 0: nothing is published).
func World(t testing.TB, b bucket.Bucket, id string, last int64, opts ...engine.Options) *engine.World {
	t.Helper()
	o := Quiet
	if len(opts) > 0 {
		o = opts[0]
	}
	w, err := engine.CreateWorld(Context(t), b, id, particles.Tables(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if last >= 0 {
		Run(t, w, last)
	}
	return w
}

// Wide creates world id in b with the particle tables, entities particles
// that move every tick (values that barely compress, so that a compacted
// file of its ticks holds many pages per column), closes it when the test
// ends, and drives it to tick last.
func Wide(t testing.TB, b bucket.Bucket, id string, entities int, last int64) *engine.World {
	t.Helper()
	ctx := Context(t)
	w, err := engine.CreateWorld(ctx, b, id, particles.Tables(), Quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for i := range entities {
		v := engine.Values{"position_x": float64(i), "position_y": 100.0, "velocity_x": math.Sin(float64(i)), "velocity_y": math.Cos(float64(i))}
		if _, err := w.Spawn("particle", v); err != nil {
			t.Fatal(err)
		}
	}
	err = w.AddProcessor(func(tc *engine.TickContext) error {
		f := tc.Frame("particle")
		x, y, vx, vy := f.Float64("position_x"), f.Float64("position_y"), f.Float64("velocity_x"), f.Float64("velocity_y")
		for i := range x {
			x[i] += vx[i] / 7
			y[i] += vy[i] / 3
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for w.Tick() < last {
		if _, err := w.Submit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// Legacy copies the legacy fixture at fixture (testdata/legacy: a v0.2
// world whose tables predate commit identity) into a local bucket in a
// temporary directory, continues world from it with the particle tables
// (Quiet), closes it when the test ends, and drives it to tick last.
func Legacy(t testing.TB, fixture, world string, last int64) (*local.Bucket, *engine.World) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.ContinueLegacyWorld(Context(t), b, world, particles.Tables(), LegacyTables(t), Quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	Run(t, w, last)
	return b, w
}

// LegacyTables are the particle tables as the legacy fixture stored them
// (v0.2: no commit columns, old-format ids).
func LegacyTables(t testing.TB) []*engine.Table {
	t.Helper()
	var out []*engine.Table
	for _, nt := range particles.Tables() {
		lt, err := engine.NewLegacyTable(nt.Name, nt.Components...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lt)
	}
	return out
}

// Resume resumes world id in b (staling its previous writer) with the
// particle tables and Quiet options, closes it when the test ends, and
// drives it to tick last.
func Resume(t testing.TB, b bucket.Bucket, id string, last int64) *engine.World {
	t.Helper()
	w, err := engine.ResumeWorld(Context(t), b, id, particles.Tables(), Quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	Run(t, w, last)
	return w
}

// Fork forks (parent, run main) at tick into child with the particle
// tables and Quiet options, closes it when the test ends, and drives it to
// tick last.
func Fork(t testing.TB, b bucket.Bucket, parent, child string, tick, last int64) *engine.World {
	t.Helper()
	w, err := engine.ForkWorld(Context(t), b, parent, child, index.DefaultRun, tick, particles.Tables(), Quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	Run(t, w, last)
	return w
}

// Reference runs a particle world without interruption to tick last, in a
// bucket of its own, with the durable commands cmds, and returns its
// fingerprint (particles.Fingerprint).
func Reference(t testing.TB, last int64, cmds ...index.Command) string {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.CreateWorld(Context(t), b, "ref", particles.Tables(), Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := Drive(Context(t), w, last, cmds...); err != nil {
		t.Fatal(err)
	}
	return particles.Fingerprint(w)
}

// Reading is fact id of the test fact table "reading" (one float64
// field, reading_value = v) from producer sensor-1.
func Reading(id string, v float64) engine.Fact {
	c, _ := engine.NewComponent("reading", engine.Field{Name: "value", Type: engine.Float64})
	t, _ := engine.NewFactTable("reading", c)
	return engine.Fact{Producer: "sensor-1", ExternalID: id, Table: t, Values: engine.Values{"reading_value": v}}
}

// Orphan leaves fact f of world (run main, catalog cat) as a crashed
// ingester would after appending: a pending claim and its row on disk
// under the claim's token, never completed.
func Orphan(t testing.TB, b bucket.Bucket, world string, cat *index.Catalog, f engine.Fact) {
	t.Helper()
	ctx := Context(t)
	r, err := cat.Commit(ctx, index.Entry{Kind: index.KindClaimAcquire, Claim: &index.ClaimOp{
		Key: index.ClaimKey{Run: index.DefaultRun, Producer: f.Producer, ExternalID: f.ExternalID}, Digest: "sha256:x",
		CommitToken: "orphan-token", Holder: "dead", NowMs: 1, LeaseUntilMs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	fr := engine.NewFrame(f.Table)
	f.Values[engine.ColFactProducer], f.Values[engine.ColFactExternalID] = f.Producer, f.ExternalID
	if err := fr.Append(r.Claim.FactID, f.Values); err != nil {
		t.Fatal(err)
	}
	data, err := engine.EncodeFragment(fr, engine.Stamp{Tick: r.Claim.Tick, CommitToken: "orphan-token", WriterEpoch: r.Claim.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, index.FragmentPath(world, index.DefaultRun, f.Table.ID, "orphan-token", 0), data); err != nil {
		t.Fatal(err)
	}
}

// Tables returns tk's fragment lists (index.Tick.Tables), failing the test
// if they do not decode.
func Tables(t testing.TB, tk *index.Tick) []index.TableFragments {
	t.Helper()
	tables, err := tk.Tables()
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// StoredTable is table id of world as its description in b gives it (what
// a reader has, not the writer's table value).
func StoredTable(t testing.TB, b bucket.Bucket, world, id string) *engine.Table {
	t.Helper()
	info, err := engine.ReadTableInfo(Context(t), b, world, id)
	if err != nil {
		t.Fatal(err)
	}
	table, err := engine.TableFromInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// CompactedFile reads the compacted file f of table id of world: the
// table as stored, the file's tick index and its bytes.
func CompactedFile(t testing.TB, b bucket.Bucket, world, id string, f index.Fragment) (*engine.Table, *frame.TickIndex, []byte) {
	t.Helper()
	x, err := frame.ReadTickIndex(Context(t), b, f)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.Get(Context(t), f.Path)
	if err != nil {
		t.Fatal(err)
	}
	return StoredTable(t, b, world, id), x, data
}

// TickIndexV2 is x in the second format of tick indexes (CSV sizes, no
// column summaries), as a build before summaries wrote it: the current
// encoding without its summaries, under the second format's magic.
func TickIndexV2(x *frame.TickIndex) []byte {
	v2 := *x
	v2.Summaries = nil
	enc := v2.Encode()
	body := enc[len("worldfs-ticks/3\n") : len(enc)-sha256.Size-1] // the magic, the count of summaries (0) and the checksum cut
	out := append([]byte("worldfs-ticks/2\n"), body...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// SensorTable is the fact table "reading" with a sensor and a value, the
// one the fact and maintenance tests ingest into (Reading's has a value
// alone).
func SensorTable() *engine.Table {
	c, _ := engine.NewComponent("reading", engine.Field{Name: "sensor", Type: engine.String}, engine.Field{Name: "value", Type: engine.Float64})
	t, _ := engine.NewFactTable("reading", c)
	return t
}

// SensorReading is a fact of SensorTable from producer (its sensor) with
// external id id.
func SensorReading(producer, id string, value float64) engine.Fact {
	return engine.Fact{Producer: producer, ExternalID: id, Table: SensorTable(),
		Values: engine.Values{"reading_sensor": producer, "reading_value": value}}
}

// Contract is the grader contract the tests evaluate with, at version.
func Contract(version string) engine.GraderContract {
	return engine.GraderContract{GraderID: "reach-ground", Implementation: version, Model: "m-1",
		Config: json.RawMessage(`{"b": 1, "a": [1, 2]}`), Thresholds: map[string]float64{"min": 0.5}, Seed: 7}
}

// Passing is a grader that passes every subject (criterion "lands", 0.9).
func Passing(context.Context, engine.Subject) ([]engine.Outcome, error) {
	score := 0.9
	return []engine.Outcome{{Criterion: "lands", Verdict: engine.Pass, Score: &score}}, nil
}
