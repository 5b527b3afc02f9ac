package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// objects lists every object name in b.
func objects(t *testing.T, b bucket.Bucket) []string {
	t.Helper()
	var out []string
	for a, err := range b.List(ctxT(t), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Name)
	}
	return out
}

func sameObjects(t *testing.T, what string, before, after []string) {
	t.Helper()
	if !slices.Equal(before, after) {
		var added []string
		for _, n := range after {
			if !slices.Contains(before, n) {
				added = append(added, n)
			}
		}
		t.Fatalf("%s wrote to the bucket: %d objects became %d; new: %v", what, len(before), len(after), added)
	}
}

// A create whose tables do not fit (an archetype declared twice) is
// refused as bad input before the marker: the name is not burnt.
func TestCreateRefusalWritesNothing(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	before := objects(t, b)
	tables := particles.Tables()
	_, err := engine.CreateWorld(ctxT(t), b, "w", append(tables, tables[0]), quiet)
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("an archetype declared twice: %v", err)
	}
	sameObjects(t, "a refused create", before, objects(t, b))
	w, err := engine.CreateWorld(ctxT(t), b, "w", tables, quiet)
	if err != nil {
		t.Fatalf("the valid create after the refusal: %v", err)
	}
	w.Close()
}

// A fork into a world that exists is refused without writing its lineage
// (or anything else) into that world.
func TestForkIntoExistingWorldWritesNothing(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "p", 3)
	simWorld(t, b, "taken", 1)
	// and a fork that exists, forked at another point
	f, err := engine.ForkWorld(ctxT(t), b, "p", "forked", "main", 1, particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := objects(t, b)
	for _, child := range []string{"taken", "forked"} {
		_, err := engine.ForkWorld(ctxT(t), b, "p", child, "main", 2, particles.Tables(), quiet)
		if !errors.Is(err, index.ErrWorldExists) {
			t.Fatalf("fork into %s: %v", child, err)
		}
		sameObjects(t, "a fork into "+child, before, objects(t, b))
	}
	if _, err := b.Stat(ctxT(t), index.LineagePath("taken")); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("lineage written into a world that is no fork: %v", err)
	}
}

// A refused resume (tables that cannot be a world) stales no writer.
func TestResumeRefusalKeepsTheFence(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 2)
	tables := particles.Tables()
	if _, err := engine.ResumeWorld(ctxT(t), b, "w", append(tables, tables[0]), quiet); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("resume with an archetype twice: %v", err)
	}
	if err := drive(ctxT(t), w, 3); err != nil {
		t.Fatalf("the writer after a refused resume: %v", err)
	}
}

// A grader that fails or concludes nothing valid gets no receipt, and its
// claim is released at once: another caller evaluating the same id is not
// kept waiting for the lease (here: refused at once if it were pending).
func TestRefusedEvaluationReleasesItsClaim(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 2)
	s, _ := w.Catalog().Exact(ctx)
	sub, err := engine.PinSubject(s, "main", -1, engine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	ev := engine.Evaluation{ID: "e", Subject: sub, Contract: contract("v1")}
	key := index.ClaimKey{Run: engine.EvaluationRun, Producer: engine.EvaluationProducer, ExternalID: "e"}
	open := func() *engine.IngestionService {
		svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: time.Hour, MaxWait: -1, Catalog: quiet.Catalog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return svc
	}
	maybe := func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		return []engine.Outcome{{Criterion: "c", Verdict: "maybe"}}, nil
	}
	broken := func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		return nil, errors.New("grader crashed")
	}
	for _, c := range []struct {
		name    string
		grade   engine.Grader
		invalid bool
	}{{"maybe", maybe, true}, {"broken", broken, false}, {"maybe again", maybe, true}} {
		_, err := open().Evaluate(ctx, ev, c.grade)
		if err == nil || errors.Is(err, engine.ErrInvalid) != c.invalid {
			t.Fatalf("%s: %v", c.name, err)
		}
		st, _ := w.Catalog().Exact(ctx)
		if cl, ok := st.Claim(key); ok && cl.State != index.ClaimReleased {
			t.Fatalf("%s: the claim is left %s under %s until %d", c.name, cl.State, cl.Holder, cl.LeaseUntilMs)
		}
	}
	r, err := open().Evaluate(ctx, ev, passing)
	if err != nil || !r.Graded || r.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("the valid evaluation of the same id: %+v %v", r, err)
	}
}

// Convert keeps every integer exact across int64 and refuses what does not
// fit, naming why.
func TestConvertExact(t *testing.T) {
	huge, _ := new(big.Int).SetString("9223372036854775808", 10)
	for _, c := range []struct {
		typ  engine.Type
		in   any
		want any
		err  string
	}{
		{engine.Int64, json.Number("9007199254740993"), int64(9007199254740993), ""},
		{engine.Int64, json.Number("9223372036854775807"), int64(math.MaxInt64), ""},
		{engine.Int64, json.Number("-9223372036854775808"), int64(math.MinInt64), ""},
		{engine.Int64, json.Number("9223372036854775808"), nil, "out of the int64 range"},
		{engine.Int64, json.Number("-9223372036854775809"), nil, "out of the int64 range"},
		{engine.Int64, json.Number("2.0"), int64(2), ""},
		{engine.Int64, json.Number("25e-1"), nil, "not an integer"},
		{engine.Int64, json.Number("1e3"), int64(1000), ""},
		{engine.Int64, json.Number("1e400"), nil, "not an integer within the range"},
		{engine.Int64, json.Number("1.5"), nil, "not an integer"},
		{engine.Int64, 2.5, nil, "not an integer"},
		{engine.Int64, uint64(math.MaxUint64), nil, "out of the int64 range"},
		{engine.Int64, huge, nil, "out of the int64 range"},
		{engine.Int64, int8(-3), int64(-3), ""},
		{engine.Int64, "7", nil, `"7" is not an integer`},
		{engine.Int64, true, nil, "not an integer"},
		{engine.Int32, json.Number("2147483647"), int32(math.MaxInt32), ""},
		{engine.Int32, json.Number("2147483648"), nil, "out of the int32 range"},
		{engine.Int32, int64(-2147483649), nil, "out of the int32 range"},
		{engine.Float64, json.Number("0.1"), 0.1, ""},
		{engine.Float64, json.Number("9007199254740993"), 9007199254740992.0, ""}, // a double column holds doubles
		{engine.Float64, json.Number("1e400"), nil, "out of the double range"},
		{engine.Float32, json.Number("0.1"), float32(0.1), ""},
		{engine.Float32, json.Number("1e39"), nil, "out of the float range"},
		{engine.Float32, 1e39, nil, "out of the float range"},
		{engine.Float64, int64(3), 3.0, ""},
		{engine.Float64, "3", nil, "is not a double"},
		{engine.Bool, false, false, ""},
		{engine.Bool, json.Number("0"), nil, "is not a boolean"},
		{engine.String, "", "", ""},
		{engine.String, json.Number("1"), nil, "is not a string"},
		{engine.String, nil, nil, "null is not a string"},
	} {
		got, err := engine.Convert(c.typ, c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("Convert(%s, %#v) = %#v, %v; want %#v", c.typ, c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Convert(%s, %#v) = %#v, %v; want an error saying %q", c.typ, c.in, got, err, c.err)
		}
	}
}

// An input row needs entity_id and every column, non-null; the errors name
// the column.
func TestInputRow(t *testing.T) {
	c, _ := engine.NewComponent("c", engine.Field{Name: "n", Type: engine.Int64}, engine.Field{Name: "s", Type: engine.String})
	tb, _ := engine.NewTable("a", c)
	e, v, err := engine.InputRow(tb, map[string]any{"entity_id": json.Number("9007199254740993"), "c_n": json.Number("-9223372036854775808"), "c_s": "x", "tick": json.Number("4")})
	if err != nil || e != 9007199254740993 || v["c_n"] != int64(math.MinInt64) || v["c_s"] != "x" {
		t.Fatalf("InputRow = %d %v %v", e, v, err)
	}
	for _, c := range []struct {
		row  map[string]any
		want string
	}{
		{map[string]any{"c_n": json.Number("1"), "c_s": "x"}, "column entity_id is required"},
		{map[string]any{"entity_id": nil, "c_n": json.Number("1"), "c_s": "x"}, "column entity_id is required"},
		{map[string]any{"entity_id": json.Number("-1"), "c_n": json.Number("1"), "c_s": "x"}, "entity_id: -1 is negative"},
		{map[string]any{"entity_id": json.Number("9223372036854775808"), "c_n": json.Number("1"), "c_s": "x"}, "entity_id: 9223372036854775808 is out of the int64 range"},
		{map[string]any{"entity_id": json.Number("1"), "c_s": "x"}, "column c_n (int64) is missing"},
		{map[string]any{"entity_id": json.Number("1"), "c_n": nil, "c_s": "x"}, "column c_n (int64) is null"},
		{map[string]any{"entity_id": json.Number("1"), "c_n": json.Number("1"), "c_s": nil}, "column c_s (string) is null"},
		{map[string]any{"entity_id": json.Number("1"), "c_n": json.Number("1"), "c_s": "x", "c_z": 1}, "no component column c_z"},
		{map[string]any{"entity_id": json.Number("1"), "c_n": json.Number("9223372036854775808"), "c_s": "x"}, "column c_n: 9223372036854775808 is out of the int64 range"},
	} {
		if _, _, err := engine.InputRow(tb, c.row); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("InputRow(%v) = %v, want an error saying %q", c.row, err, c.want)
		}
	}
}

// A fact document keeps integers exact in an int64 field and refuses null.
func TestFactDocumentExact(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 1)
	var d engine.FactDocument
	doc := `{"producer":"p","external_id":"e","table":"count","components":{"count":{"n":9007199254740993,"m":-9223372036854775808}},"types":{"count.n":"int64","count.m":"int64"}}`
	if err := engine.DecodeStrict([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	f, err := d.FactCreatingTable(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.Ingest(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.Get(ctx, r.Path)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := engine.DecodeFragment(f.Table, data, nil)
	if err != nil || fr.Int64("count_n")[0] != 9007199254740993 || fr.Int64("count_m")[0] != math.MinInt64 {
		t.Fatalf("stored %v %v", fr.Row(r.FactID), err)
	}
	for _, bad := range []string{
		`{"producer":"p","external_id":"e2","table":"count","components":{"count":{"n":null,"m":1}}}`,
		`{"producer":"p","external_id":"e2","table":"count","components":{"count":{"n":9223372036854775808,"m":1}}}`,
		`{"producer":"p","external_id":"e2","table":"count","components":{"count":{"n":1,"n":2,"m":1}}}`,
	} {
		before := objects(t, b)
		var d engine.FactDocument
		err := engine.DecodeStrict([]byte(bad), &d)
		if err == nil {
			var f engine.Fact
			if f, err = d.Fact(ctx, b, "w"); err == nil {
				_, err = w.Ingest(ctx, f)
			}
		}
		if err == nil {
			t.Fatalf("%s: accepted", bad)
		}
		sameObjects(t, bad, before, objects(t, b))
	}
}

// A fact document names a fact table the world holds: a name it does not
// hold (a typo) is refused, naming the tables it holds, and writes
// nothing; a table is declared by DeclareFactTables or made explicitly by
// a document (FactCreatingTable), and the world keeps it.
func TestFactTablesAreDeclared(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 1)
	doc := func(table string) engine.FactDocument {
		var d engine.FactDocument
		if err := engine.DecodeStrict([]byte(`{"producer":"p","external_id":"e-`+table+`","table":"`+table+`","components":{"`+table+`":{"value":1.5}}}`), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	refused := func(table, held string) {
		t.Helper()
		before := objects(t, b)
		_, err := doc(table).Fact(ctx, b, "w")
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `no fact table "`+table+`" (`+held+`)`) || !strings.Contains(err.Error(), "--create-table") {
			t.Errorf("a fact into %s: %v; want it refused, naming %q and how to create one", table, err, held)
		}
		sameObjects(t, "a refused fact into "+table, before, objects(t, b))
	}
	refused("reading", "it holds none")
	c, _ := engine.NewComponent("reading", engine.Field{Name: "value", Type: engine.Float64})
	reading, _ := engine.NewFactTable("reading", c)
	if err := engine.DeclareFactTables(ctx, b, "w", reading); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*engine.Table{w.Tables()[0], engine.ReceiptTable()} {
		if err := engine.DeclareFactTables(ctx, b, "w", bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("declaring %s a fact table: %v, want ErrInvalid", bad.Name, err)
		}
	}
	emitterFacts, _ := engine.NewFactTable(w.Tables()[0].Name, c)
	if err := engine.DeclareFactTables(ctx, b, "w", emitterFacts); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "entity table") {
		t.Errorf("a fact table named as an entity table: %v", err)
	}
	f, err := doc("reading").Fact(ctx, b, "w")
	if err != nil || f.Table.ID != reading.ID {
		t.Fatalf("a fact into the declared table: %v (table %v, want %s)", err, f.Table, reading.ID)
	}
	if _, err := w.Ingest(ctx, f); err != nil {
		t.Fatal(err)
	}
	refused("readng", "its fact tables: reading")
	// Made by a document that says so; then held like any other.
	f, err = doc("sensor").FactCreatingTable(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Ingest(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, err := doc("sensor").Fact(ctx, b, "w"); err != nil {
		t.Errorf("a fact into the table the world now holds: %v", err)
	}
	refused("sensors", "its fact tables: reading, sensor")
}

// A caller waiting on another holder's pending claim goes on as soon as
// that holder releases it: it claims the id afresh and grades, instead of
// taking the vanished claim for corruption or waiting for the lease.
func TestWaiterClaimsAfterRelease(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 2)
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
	ev := engine.Evaluation{ID: "e", Subject: sub, Contract: contract("v1")}
	claimed, waiting := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var calls atomic.Int32
	// B's clock tells when B is inside its wait: its third reading is the
	// first one in the wait loop (after the acquire's lease and the
	// wait's deadline).
	nowB := func() time.Time {
		if calls.Add(1) >= 3 {
			once.Do(func() { close(waiting) })
		}
		return time.Now()
	}
	a, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: time.Hour, Catalog: quiet.Catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bsvc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: time.Hour, MaxWait: time.Hour, Now: nowB, Catalog: quiet.Catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer bsvc.Close()
	aErr := make(chan error, 1)
	go func() {
		_, err := a.Evaluate(ctx, ev, func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			close(claimed)
			<-waiting
			return []engine.Outcome{{Verdict: "maybe"}}, nil
		})
		aErr <- err
	}()
	<-claimed
	r, err := bsvc.Evaluate(ctx, ev, passing)
	if err != nil || !r.Graded || r.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("the waiter after the release: %+v %v", r, err)
	}
	if err := <-aErr; !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("the holder that concluded maybe: %v", err)
	}
}
