package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// The kit's fact fixtures under the names this package's tests use.
var (
	readingTable = enginetest.SensorTable
	reading      = enginetest.SensorReading
	contract     = enginetest.Contract
	passing      = enginetest.Passing
)

// visibleFacts returns, per claim key, the fact rows of table that the
// catalog's allowlist admits, found by reading every fragment stored under
// the table (not only those the catalog names): stray rows of crashed or
// duplicate attempts must stay invisible.
func visibleFacts(t *testing.T, b bucket.Bucket, world, run string, table *engine.Table) map[string][]engine.Values {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	allow := s.Allowlist(run)
	out := map[string][]engine.Values{}
	for a, err := range b.List(ctxT(t), index.RunDataPrefix(world, run)+table.ID+"/", "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := b.Get(ctxT(t), a.Name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := engine.DecodeFragment(table, data, func(r engine.StampedRow) bool {
			return allow.Admits(r.Tick, r.CommitToken, r.WriterEpoch)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range f.Entities {
			row := f.Row(id)
			key := row[engine.ColFactProducer].(string) + "/" + row[engine.ColFactExternalID].(string)
			out[key] = append(out[key], row)
		}
	}
	return out
}

func TestIngestExactlyOnce(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	w := simWorld(t, b, "w", 5)
	head := w.Tick()

	r1, err := w.Ingest(ctx, reading("sensor-1", "evt-9", 21.5))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Deduplicated || r1.Tick != head || r1.FactID != index.FactIDBase-1 || r1.Recovered != "" {
		t.Fatalf("first receipt %+v (head %d)", r1, head)
	}
	if w.Tick() != head {
		t.Fatalf("ingesting moved the world to tick %d", w.Tick())
	}
	// The same fact again: the original receipt.
	r2, err := w.Ingest(ctx, reading("sensor-1", "evt-9", 21.5))
	if err != nil || !r2.Deduplicated || r2.CommitToken != r1.CommitToken || r2.FactID != r1.FactID || r2.Path != r1.Path {
		t.Fatalf("duplicate: %+v %v, want the original %+v", r2, err, r1)
	}
	// Another digest under the same id: a conflict.
	var conflict *index.ClaimConflictError
	if _, err := w.Ingest(ctx, reading("sensor-1", "evt-9", 22)); !errors.As(err, &conflict) {
		t.Fatalf("another digest: %v, want ClaimConflictError", err)
	}
	// A second fact gets the next id of the band; the world keeps stepping
	// and its ticks hold no fact.
	r3, err := w.Ingest(ctx, reading("sensor-2", "evt-1", 7))
	if err != nil || r3.FactID != index.FactIDBase-2 {
		t.Fatalf("second fact %+v %v", r3, err)
	}
	if err := drive(ctx, w, head+3); err != nil {
		t.Fatal(err)
	}
	r4, err := w.Ingest(ctx, reading("sensor-2", "evt-2", 8))
	if err != nil || r4.Tick != head+3 {
		t.Fatalf("a fact after three more ticks: %+v %v, want tick %d", r4, err, head+3)
	}
	w.Close()

	// Facts are not entities: a resumed world has none, and its frames
	// are those of an uninterrupted run without facts.
	w2, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	for _, tb := range w2.Tables() {
		if f := w2.Frame(tb.Name); f.Len() > 0 && f.Entities[0] < 0 {
			t.Fatalf("resume brought fact %d into %s", f.Entities[0], tb.Name)
		}
	}
	if err := drive(ctx, w2, head+6); err != nil {
		t.Fatal(err)
	}
	if got, want := particles.Fingerprint(w2), reference(t, head+6); got != want {
		t.Fatalf("facts changed the simulation:\n%s\n%s", got, want)
	}

	// Exactly one visible row per fact, holding its values and FactMeta.
	rows := visibleFacts(t, b, "w", "main", readingTable())
	if len(rows) != 3 || len(rows["sensor-1/evt-9"]) != 1 {
		t.Fatalf("visible facts %v", rows)
	}
	if r := rows["sensor-1/evt-9"][0]; r["reading_value"] != 21.5 || r[engine.ColFactDigest] != r1.Digest || r[engine.ColFactCommit] != r1.CommitToken {
		t.Fatalf("row %v, receipt %+v", r, r1)
	}

	// The conflict and the dedup survive a restart and a checkpoint.
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if info := mustLoadInfo(t, b, "w"); info.CheckpointSeq == 0 {
		t.Fatalf("no checkpoint in use: %+v", info)
	}
	if _, err := svc.Ingest(ctx, reading("sensor-1", "evt-9", 22)); !errors.As(err, &conflict) {
		t.Fatalf("after restart and checkpoint: %v, want ClaimConflictError", err)
	}
	if r, err := svc.Ingest(ctx, reading("sensor-1", "evt-9", 21.5)); err != nil || !r.Deduplicated || r.CommitToken != r1.CommitToken {
		t.Fatalf("after restart: %+v %v", r, err)
	}
}

func mustLoadInfo(t *testing.T, b bucket.Bucket, world string) index.LoadInfo {
	t.Helper()
	_, info, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestIngestBadInput(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 1)
	sim := particles.Tables()[0]
	// A fact table named as an entity table would join it in the views.
	entityNamed, err := engine.NewFactTable(sim.Name, mustComponent(t, "reading", engine.Field{Name: "value", Type: engine.Float64}))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]engine.Fact{
		"no producer":       reading("", "e", 1),
		"no external id":    reading("p", "", 1),
		"reserved producer": reading(engine.ReservedProducer+"x", "e", 1),
		"not a fact table":  {Producer: "p", ExternalID: "e", Table: sim},
		"unknown column":    {Producer: "p", ExternalID: "e", Table: readingTable(), Values: engine.Values{"nope": 1}},
		"wrong type":        {Producer: "p", ExternalID: "e", Table: readingTable(), Values: engine.Values{"reading_value": "warm"}},
		"FactMeta given":    {Producer: "p", ExternalID: "e", Table: readingTable(), Values: engine.Values{engine.ColFactDigest: "sha256:0"}},
		"entity table name": {Producer: "p", ExternalID: "e", Table: entityNamed, Values: engine.Values{"reading_value": 1.5}},
	} {
		if _, err := w.Ingest(ctx, f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := w.Catalog().Exact(ctx)
	if err != nil || s.World.Claims != 0 {
		t.Fatalf("bad facts claimed %d ids (%v)", s.World.Claims, err)
	}
	if _, err := engine.OpenIngestionService(ctx, b, "nope", engine.IngestOptions{}); !errors.Is(err, index.ErrNoWorld) {
		t.Fatalf("ingesting into a missing world: %v", err)
	}
	if _, err := engine.NewFactTable("x", mustComponent(t, "fact", engine.Field{Name: "a", Type: engine.Int64})); err == nil {
		t.Fatal("a component named fact was accepted")
	}
}

func mustComponent(t *testing.T, name string, fields ...engine.Field) engine.Component {
	c, err := engine.NewComponent(name, fields...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Concurrent identical callers converge on the winner's receipt; one row
// is ever written.
func TestIngestConcurrentConverge(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 1).Close()
	var wg sync.WaitGroup
	receipts := make([]engine.FactReceipt, 12)
	errs := make([]error, len(receipts))
	for i := range receipts {
		// Separate services: separate holders, catalogs racing for slots.
		svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Catalog: index.Options{NoCompactor: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[i], errs[i] = svc.Ingest(ctx, reading("s", "e", 1))
		}()
	}
	wg.Wait()
	fresh := 0
	for i, r := range receipts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.CommitToken != receipts[0].CommitToken || r.FactID != receipts[0].FactID {
			t.Fatalf("receipts diverge: %+v vs %+v", r, receipts[0])
		}
		if !r.Deduplicated {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d callers report appending the fact", fresh)
	}
	names, _ := bucket.Collect(b.List(ctx, index.RunDataPrefix("w", index.DefaultRun)+readingTable().ID+"/", ""))
	if len(names) != 1 {
		t.Fatalf("%d fragments for one fact: %v", len(names), names)
	}
}

// factChild is a subprocess that ingests into world p[1] of the bucket at
// p[0]; crash tests kill it at a failpoint. Mode p[2] "one" ingests one
// fact (or an evaluation: "eval"); "load:SEED:OUT" runs the 64-producer
// workload and records receipts.
func factChild(p []string) int {
	ctx := context.Background()
	b, err := local.Open(p[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	svc, err := engine.OpenIngestionService(ctx, b, p[1], engine.IngestOptions{Lease: time.Second, Catalog: quiet.Catalog})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer svc.Close()
	switch mode := p[2]; {
	case mode == "one":
		_, err = svc.Ingest(ctx, reading("sensor-1", "evt-9", 21.5))
	case mode == "eval":
		err = childEvaluate(ctx, svc, b)
	case strings.HasPrefix(mode, "load:"):
		var seed uint64
		var out string
		f := strings.SplitN(mode, ":", 3)
		seed, _ = strconv.ParseUint(f[1], 10, 64)
		out = f[2]
		err = runLoad(ctx, svc, seed, out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

func childEvaluate(ctx context.Context, svc *engine.IngestionService, b bucket.Bucket) error {
	s, _, err := index.Load(ctx, b, svc.World())
	if err != nil {
		return err
	}
	sub, err := engine.PinSubject(s, "main", -1, engine.Selector{})
	if err != nil {
		return err
	}
	_, err = svc.Evaluate(ctx, engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}, passing)
	return err
}

func TestFactCrashRecovery(t *testing.T) {
	for _, fp := range engine.FactFailpoints {
		t.Run(fp, func(t *testing.T) {
			ctx := ctxT(t)
			dir := t.TempDir()
			b, _ := local.Open(dir)
			simWorld(t, b, "w", 2).Close()
			crash(t, dir, "one", fp)

			s, _, err := index.Load(ctx, b, "w")
			if err != nil {
				t.Fatal(err)
			}
			key := index.ClaimKey{Run: "main", Producer: "sensor-1", ExternalID: "evt-9"}
			before, ok := s.Claim(key)
			if !ok {
				t.Fatal("the crashed holder left no claim")
			}
			path := index.FragmentPath("w", "main", readingTable().ID, before.CommitToken, 0)
			appended, statErr := b.Stat(ctx, path)

			// The retry: another holder, after the dead one's lease.
			svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Catalog: quiet.Catalog})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			r, err := svc.Ingest(ctx, reading("sensor-1", "evt-9", 21.5))
			if err != nil {
				t.Fatal(err)
			}
			if r.CommitToken != before.CommitToken {
				t.Fatalf("the retry completed under token %s, not the claim's %s", r.CommitToken, before.CommitToken)
			}
			switch fp {
			case engine.FailpointFactClaimed: // before the append: the taker appends
				if statErr == nil || r.Recovered != "append" {
					t.Fatalf("crash before append: rows existed (%v) or recovery %q", statErr, r.Recovered)
				}
			case engine.FailpointFactAppended: // after: the taker completes without appending
				after, err := b.Stat(ctx, path)
				if statErr != nil || err != nil || r.Recovered != "orphan" || after.Generation != appended.Generation {
					t.Fatalf("crash after append: recovery %q, rows rewritten %v→%v (%v %v)", r.Recovered, appended, after, statErr, err)
				}
			case engine.FailpointFactCompleted: // after completion: the original receipt
				if before.State != index.ClaimComplete || !r.Deduplicated {
					t.Fatalf("crash after completion: claim %+v receipt %+v", before, r)
				}
			}
			if rows := visibleFacts(t, b, "w", "main", readingTable()); len(rows) != 1 || len(rows["sensor-1/evt-9"]) != 1 {
				t.Fatalf("visible facts after recovery: %v", rows)
			}
		})
	}
}

// crash runs a fact child in mode and requires it to die at failpoint fp.
func crash(t *testing.T, dir, mode, fp string) {
	t.Helper()
	crashtest.KilledAt(t, fp, "fact", dir, "w", mode)
}

// The load test's workload: 64 producers, each with facts they send three
// times in a shuffled order. One fact in eight has a second version that a
// producer also sends: exactly one version may ever win.
const (
	loadProducers = 64
	loadFacts     = 4
)

type loadResult struct {
	Key      string `json:"key"`
	Value    float64
	Token    string `json:"token"`
	Conflict bool   `json:"conflict"`
}

func loadSends(seed uint64) [][]engine.Fact {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([][]engine.Fact, loadProducers)
	for p := range loadProducers {
		producer := fmt.Sprint("p", p)
		for k := range loadFacts {
			id := fmt.Sprint("e", k)
			for range 3 {
				out[p] = append(out[p], reading(producer, id, float64(k)))
			}
			if (p*loadFacts+k)%8 == 0 {
				out[p] = append(out[p], reading(producer, id, float64(k)+0.5))
			}
		}
		r.Shuffle(len(out[p]), func(i, j int) { out[p][i], out[p][j] = out[p][j], out[p][i] })
	}
	return out
}

// runLoad sends the workload from 64 concurrent producers and appends
// each outcome to the file out as a JSON line.
func runLoad(ctx context.Context, svc *engine.IngestionService, seed uint64, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, loadProducers)
	for p, sends := range loadSends(seed) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, fact := range sends {
				r, err := svc.Ingest(ctx, fact)
				res := loadResult{Key: fact.Producer + "/" + fact.ExternalID, Value: fact.Values["reading_value"].(float64), Token: r.CommitToken}
				var conflict *index.ClaimConflictError
				if errors.As(err, &conflict) {
					res.Conflict, err = true, nil
				}
				if err != nil {
					errs[p] = err
					return
				}
				line, _ := json.Marshal(res)
				mu.Lock()
				f.Write(append(line, '\n'))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// 64 concurrent producers send every fact from a process that is killed
// mid-run, leaving claims stranded pending, with and without rows; then a
// second process and this one send everything again side by side, racing
// to take the stranded claims over. Exactly one fact per key is visible,
// every receipt of a key names the same token, and every conflicting
// version was refused. (The victim runs alone: beside a live process that
// claims every key first, it might append too few rows to reach its
// failpoint.)
func TestIngestProducersWithCrash(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, _ := local.Open(dir)
	simWorld(t, b, "w", 2).Close()
	out := dir + "/results.jsonl"
	start := func(seed uint64, fp string) *exec.Cmd {
		cmd := crashtest.Command("fact", dir, "w", fmt.Sprintf("load:%d:%s", seed, out))
		if fp != "" {
			cmd.Env = append(cmd.Env, crashtest.Failpoint(fp))
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	// The victim dies after its 40th append, mid-lifecycle: some of its
	// claims are stranded pending, with and without rows.
	victim := start(1, engine.FailpointFactAppended+"@40")
	verr := victim.Wait()
	if ws, _ := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
		t.Fatalf("the victim was not killed: %v", verr)
	}
	survivor := start(2, "")
	svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: time.Second, Catalog: quiet.Catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if err := runLoad(ctx, svc, 3, out); err != nil {
		t.Fatal(err)
	}
	if err := survivor.Wait(); err != nil {
		t.Fatalf("the surviving process: %v", err)
	}

	checkLoad(t, b, out)
}

// checkLoad checks the outcomes runLoad recorded in out against the
// bucket: every receipt of a key names one token, conflicts only ever
// refuse the version that lost, and exactly one fact per key is visible,
// the acknowledged one.
func checkLoad(t *testing.T, b bucket.Bucket, out string) {
	t.Helper()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tokens, winner := map[string]string{}, map[string]float64{}
	conflicts, lines := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r loadResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		lines++
		if r.Conflict {
			conflicts++
			continue
		}
		if tok, ok := tokens[r.Key]; ok && tok != r.Token {
			t.Fatalf("key %s has receipts under %s and %s", r.Key, tok, r.Token)
		}
		if v, ok := winner[r.Key]; ok && v != r.Value {
			t.Fatalf("key %s accepted both %v and %v", r.Key, v, r.Value)
		}
		tokens[r.Key], winner[r.Key] = r.Token, r.Value
	}
	if len(tokens) != loadProducers*loadFacts || conflicts == 0 {
		t.Fatalf("%d keys acknowledged (want %d), %d conflicts, %d outcomes", len(tokens), loadProducers*loadFacts, conflicts, lines)
	}
	rows := visibleFacts(t, b, "w", "main", readingTable())
	if len(rows) != loadProducers*loadFacts {
		t.Fatalf("%d keys visible, want %d", len(rows), loadProducers*loadFacts)
	}
	for key, rs := range rows {
		if len(rs) != 1 || rs[0]["reading_value"] != winner[key] || rs[0][engine.ColFactCommit] != tokens[key] {
			t.Fatalf("key %s: visible rows %v, acknowledged %v under %s", key, rs, winner[key], tokens[key])
		}
	}
	t.Logf("%d outcomes, %d conflicts refused, %d facts visible", lines, conflicts, len(rows))
}

// A batch of facts killed at every failpoint of its lifecycle: 64
// producers send every fact three times, with changed resends, through a
// batching service that dies there; a second service then sends the whole
// workload again, taking the dead batch's claims over once their leases
// end. Exactly one fact per key is visible, every receipt of a key names
// the same token, and the facts did share fragments.
func TestBatchedIngestKilledAtEveryFailpoint(t *testing.T) {
	points := append(slices.Clone(engine.BatchFailpoints),
		engine.FailpointFactClaimed+"@30", engine.FailpointFactAppended+"@30", engine.FailpointFactCompleted+"@30")
	for _, fp := range points {
		t.Run(fp, func(t *testing.T) {
			ctx := ctxT(t)
			dir := t.TempDir()
			b, _ := local.Open(dir)
			simWorld(t, b, "w", 2).Close()
			out := dir + "/results.jsonl"
			crash(t, dir, fmt.Sprintf("load:1:%s", out), fp)
			svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: time.Second, Catalog: quiet.Catalog})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			if err := runLoad(ctx, svc, 2, out); err != nil {
				t.Fatal(err)
			}
			checkLoad(t, b, out)
			s, _, err := index.Load(ctx, b, "w")
			if err != nil {
				t.Fatal(err)
			}
			files, claims := map[string]bool{}, 0
			s.Claims("main", func(c *index.Claim) bool {
				claims++
				if c.State == index.ClaimComplete {
					files[c.Tables[0].Fragments[0].Path] = true
				}
				return true
			})
			if len(files) >= claims {
				t.Fatalf("%d claims in %d fragments: the facts were not batched", claims, len(files))
			}
		})
	}
}

func TestEvaluationReceipts(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 4)
	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := engine.PinSubject(s, "main", 3, engine.Selector{Tables: []string{"particle"}, ToTick: ptr(int64(3))})
	if err != nil || sub.HeadTick != 3 {
		t.Fatalf("subject %+v %v", sub, err)
	}
	grades := 0
	grade := func(ctx context.Context, got engine.Subject) ([]engine.Outcome, error) {
		grades++
		// The claim precedes the grader: it is pending when grading runs.
		st, _ := w.Catalog().Exact(ctx)
		c, ok := st.Claim(index.ClaimKey{Run: engine.EvaluationRun, Producer: engine.EvaluationProducer, ExternalID: "eval-1"})
		if !ok || c.State != index.ClaimPending {
			return nil, fmt.Errorf("grading without a pending claim: %+v", c)
		}
		return passing(ctx, got)
	}
	ev := engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}
	r, err := w.Evaluate(ctx, ev, grade)
	if err != nil || !r.Graded || r.Deduplicated || grades != 1 || len(r.Outcomes) != 1 || r.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("receipt %+v err %v grades %d", r, err, grades)
	}
	// A completed evaluation returns the persisted receipt, ungraded.
	r2, err := w.Evaluate(ctx, ev, grade)
	if err != nil || r2.Graded || !r2.Deduplicated || grades != 1 || r2.CommitToken != r.CommitToken || *r2.Outcomes[0].Score != 0.9 {
		t.Fatalf("repeat %+v err %v grades %d", r2, err, grades)
	}
	// The same id with another contract or subject is a conflict.
	var conflict *index.ClaimConflictError
	other := ev
	other.Contract = contract("v2")
	if _, err := w.Evaluate(ctx, other, grade); !errors.As(err, &conflict) {
		t.Fatalf("another contract: %v", err)
	}
	other = ev
	other.Subject, _ = engine.PinSubject(s, "main", 2, engine.Selector{})
	if _, err := w.Evaluate(ctx, other, grade); !errors.As(err, &conflict) {
		t.Fatalf("another subject: %v", err)
	}
	// The canonical forms bind: key order of the config and selector order
	// do not make another contract.
	same := ev
	same.Contract.Config = json.RawMessage(`{"a":[1,2],"b":1}`)
	if r3, err := w.Evaluate(ctx, same, grade); err != nil || !r3.Deduplicated {
		t.Fatalf("the same contract written differently: %+v %v", r3, err)
	}
	if grades != 1 {
		t.Fatalf("the grader ran %d times", grades)
	}

	// Fail closed: no contract, no outcomes, a non-finite score, an
	// unknown verdict. None leaves a visible receipt.
	bare := engine.Evaluation{ID: "eval-2", Subject: sub, Contract: engine.GraderContract{GraderID: "g"}}
	if _, err := w.Evaluate(ctx, bare, grade); !errors.Is(err, engine.ErrNoContract) {
		t.Fatalf("bare grader: %v", err)
	}
	nan := func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		inf := math.Inf(1)
		return []engine.Outcome{{Verdict: engine.Fail, Score: &inf}}, nil
	}
	bad := map[string]engine.Grader{
		"no outcomes": func(context.Context, engine.Subject) ([]engine.Outcome, error) { return nil, nil },
		"inf score":   nan,
		"bogus verdict": func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Verdict: "ok"}}, nil
		},
	}
	for name, g := range bad {
		if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "bad-" + name, Subject: sub, Contract: contract("v1")}, g); err == nil {
			t.Fatalf("%s: recorded", name)
		}
	}
	if got := visibleFacts(t, b, "w", engine.EvaluationRun, engine.ReceiptTable()); len(got) != 1 {
		t.Fatalf("visible receipts %v, want eval-1 alone", got)
	}
}

// An evaluation whose holder died after appending its receipt completes
// without grading again.
func TestEvaluationTakeoverDoesNotRegrade(t *testing.T) {
	for _, fp := range []string{engine.FailpointFactClaimed, engine.FailpointFactAppended} {
		t.Run(fp, func(t *testing.T) {
			ctx := ctxT(t)
			dir := t.TempDir()
			b, _ := local.Open(dir)
			simWorld(t, b, "w", 2).Close()
			crash(t, dir, "eval", fp)
			svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Catalog: quiet.Catalog})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			s, _, _ := index.Load(ctx, b, "w")
			sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
			r, err := svc.Evaluate(ctx, engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}, passing)
			if err != nil {
				t.Fatal(err)
			}
			if want := fp == engine.FailpointFactClaimed; r.Graded != want {
				t.Fatalf("after a crash at %s the grader ran: %v (receipt %+v)", fp, r.Graded, r)
			}
			if len(r.Outcomes) != 1 || r.Outcomes[0].Verdict != engine.Pass {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
}

// handClock is a clock a test moves by hand: Now reads it, and every
// renewal ticker it starts fires only when the test advances it.
type handClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []chan time.Time
}

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *handClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time) // unbuffered: advance returns once a tick is taken
	c.tickers = append(c.tickers, ch)
	return ch, func() {}
}

// advance moves the clock by d and ticks every ticker started so far,
// returning once each has taken its tick (so each renewal before it has
// completed).
func (c *handClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now, tickers := c.now, slices.Clone(c.tickers)
	c.mu.Unlock()
	for _, ch := range tickers {
		ch <- now
	}
}

// A holder that is alive keeps its lease however long its grader runs: the
// others wait (or, not waiting, get ClaimPendingError) and the grader runs
// once. Lease time is driven by hand: the grader holds until three leases
// have passed on the services' clock, renewed every third of a lease.
func TestEvaluationLiveHolderKeepsItsLease(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 2).Close()
	s, _, _ := index.Load(ctx, b, "w")
	sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
	ev := engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}
	const lease = 30 * time.Second
	clock := &handClock{now: time.Now()}
	open := func(maxWait time.Duration) *engine.IngestionService {
		svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: lease, MaxWait: maxWait,
			Now: clock.Now, NewTicker: clock.NewTicker, Catalog: quiet.Catalog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return svc
	}
	var runs atomic.Int32
	grading := make(chan struct{}, 3)
	release := make(chan struct{})
	slow := func(ctx context.Context, s engine.Subject) ([]engine.Outcome, error) {
		runs.Add(1)
		grading <- struct{}{}
		<-release
		return passing(ctx, s)
	}
	var wg sync.WaitGroup
	receipts := make([]engine.EvaluationReceipt, 3)
	for i := range receipts {
		svc := open(time.Hour)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if receipts[i], err = svc.Evaluate(ctx, ev, slow); err != nil {
				t.Error(err)
			}
		}()
	}
	<-grading // one holder has the claim and its renewal ticker
	for range 9 {
		clock.advance(lease / 3)
	}
	impatient := open(-1)
	var pending *index.ClaimPendingError
	if _, err := impatient.Evaluate(ctx, ev, func(ctx context.Context, s engine.Subject) ([]engine.Outcome, error) {
		runs.Add(1)
		return passing(ctx, s)
	}); !errors.As(err, &pending) {
		t.Errorf("three leases into a live holder's grading: %v, want ClaimPendingError", err)
	}
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("the grader ran %d times for one evaluation, with no holder dead", n)
	}
	for _, r := range receipts[1:] {
		if r.CommitToken != receipts[0].CommitToken {
			t.Fatalf("receipts diverge: %+v / %+v", r, receipts[0])
		}
	}
}

// A holder whose lease ended while it graded (its clock ran behind):
// another holder takes over, grades and completes; the late holder's
// append finds the winner's receipt and both callers get it.
func TestEvaluationLateHolder(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 2).Close()
	open := func(now func() time.Time) *engine.IngestionService {
		svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Lease: 200 * time.Millisecond, MaxWait: -1, Now: now, Catalog: quiet.Catalog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return svc
	}
	slow := open(func() time.Time { return time.Now().Add(-time.Minute) })
	fast := open(nil)
	s, _, _ := index.Load(ctx, b, "w")
	sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
	ev := engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}
	grading := make(chan struct{})
	release := make(chan struct{})
	done := make(chan engine.EvaluationReceipt)
	go func() {
		r, err := slow.Evaluate(ctx, ev, func(context.Context, engine.Subject) ([]engine.Outcome, error) {
			close(grading)
			<-release
			return []engine.Outcome{{Verdict: engine.Fail}}, nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-grading
	won, err := fast.Evaluate(ctx, ev, passing)
	if err != nil || won.Recovered != "append" || won.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("takeover: %+v %v", won, err)
	}
	close(release)
	late := <-done
	if late.CommitToken != won.CommitToken || late.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("the late holder's receipt %+v differs from the winner's %+v", late, won)
	}
}

// Regressions from review: receipts only come from Evaluate; a subject must
// name a published snapshot; an evaluation id is one receipt across runs;
// a repeat returns the persisted subject; a subject pins the facts; run
// names are path segments.
func TestEvaluationIdentityRules(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 2)
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
	real, err := w.Evaluate(ctx, engine.Evaluation{ID: "eval-1", Subject: sub, Contract: contract("v1")}, passing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Ingest(ctx, engine.Fact{Producer: "mallory", ExternalID: "x", Table: engine.ReceiptTable(),
		Values: engine.Values{"receipt_evaluation_id": "eval-1", "receipt_subject_digest": real.SubjectDigest, "receipt_outcomes": `[{"verdict":"fail"}]`}}); err == nil {
		t.Fatal("a fact forged an evaluation receipt")
	}
	bogus := sub
	bogus.HeadTick, bogus.HeadToken = 999, "not-a-token"
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "eval-x", Subject: bogus, Contract: contract("v1")}, passing); err == nil {
		t.Fatal("a receipt for a subject that names no published snapshot")
	}
	// The same id for a subject of another run is the same receipt's id.
	if _, err := w.Catalog().Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
		Run: "alt", Tick: 0, CommitToken: "alt0", WriterEpoch: w.Epoch()}}); err != nil {
		t.Fatal(err)
	}
	s, _ = w.Catalog().Exact(ctx)
	other, err := engine.PinSubject(s, "alt", -1, engine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	var conflict *index.ClaimConflictError
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "eval-1", Subject: other, Contract: contract("v1")}, passing); !errors.As(err, &conflict) {
		t.Fatalf("eval-1 for run alt: %v, want ClaimConflictError", err)
	}
	// A repeat written differently (selector order, asset uri) returns the
	// persisted subject.
	d := "sha256:" + strings.Repeat("ab", 32)
	sel := func(uri string, tables ...string) engine.Selector {
		return engine.Selector{Tables: tables, Assets: []engine.AssetRef{{Digest: d, URI: uri, Size: 1}}}
	}
	sub1, _ := engine.PinSubject(s, "main", -1, sel("file:///first", "a", "b"))
	sub2, _ := engine.PinSubject(s, "main", -1, sel("https://elsewhere/second", "b", "a"))
	r1, err := w.Evaluate(ctx, engine.Evaluation{ID: "e", Subject: sub1, Contract: contract("v1")}, passing)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := w.Evaluate(ctx, engine.Evaluation{ID: "e", Subject: sub2, Contract: contract("v1")}, passing)
	if err != nil || !r2.Deduplicated || !reflect.DeepEqual(r1.Subject, r2.Subject) || r2.Subject.Selector.Assets[0].URI != "" || r2.Subject.Selector.Tables[0] != "a" {
		t.Fatalf("repeat: %+v %v, first %+v", r2.Subject, err, r1.Subject)
	}
	// A fact that becomes visible at the head changes the pinned subject.
	if _, err := w.Ingest(ctx, reading("s", "late", 1)); err != nil {
		t.Fatal(err)
	}
	s2, _ := w.Catalog().Exact(ctx)
	after, _ := engine.PinSubject(s2, "main", sub.HeadTick, engine.Selector{})
	if after.FactsDigest == sub.FactsDigest || after.Facts != sub.Facts+1 {
		t.Fatalf("the subject did not pin the new fact: %+v then %+v", sub, after)
	}
	for _, run := range []string{"../../worlds/w", "main/x", "has space\n", "_tables", "Main"} {
		f := reading("p", "e", 1)
		f.Run = run
		if r, err := w.Ingest(ctx, f); err == nil {
			t.Errorf("run %q accepted: fact written at %s", run, r.Path)
		}
	}
}

// Receipts are evidence, never authority: no field of a receipt (at any
// depth) nor any column of the receipts table carries an authority name.
func TestReceiptsCarryNoAuthority(t *testing.T) {
	forbidden := []string{"accept", "approv", "promot", "allowed", "authori", "permit", "next_action", "decision"}
	check := func(where, name string) {
		n := strings.ToLower(name)
		for _, f := range forbidden {
			if strings.Contains(n, f) {
				t.Errorf("%s has an authority field %q", where, name)
			}
		}
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, where string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			check(where+"."+f.Name, f.Name)
			check(where+"."+f.Name, f.Tag.Get("json"))
			walk(f.Type, where+"."+f.Name)
		}
	}
	walk(reflect.TypeOf(engine.EvaluationReceipt{}), "EvaluationReceipt")
	walk(reflect.TypeOf(engine.FactReceipt{}), "FactReceipt")
	for _, c := range engine.ReceiptTable().Columns {
		check("receipts table", c.Name)
	}
	if len(seen) < 6 {
		t.Fatalf("walked %d types; the receipt's nested types were not visited", len(seen))
	}
}

func TestGateNeedsOperator(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 1).Close()
	svc, err := engine.OpenIngestionService(ctx, b, "w", engine.IngestOptions{Catalog: quiet.Catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	g := engine.NewGate(svc)
	if _, err := g.IngestFact(ctx, engine.Principal{Name: "v", Role: engine.RoleViewer}, reading("p", "e", 1)); !errors.Is(err, engine.ErrForbidden) {
		t.Fatalf("a viewer ingested: %v", err)
	}
	if _, err := g.IngestFact(ctx, engine.Principal{Name: "nobody"}, reading("p", "e", 1)); !errors.Is(err, engine.ErrForbidden) {
		t.Fatalf("a principal without a role ingested: %v", err)
	}
	if got := visibleFacts(t, b, "w", "main", readingTable()); len(got) != 0 {
		t.Fatalf("refused calls left facts %v", got)
	}
	for _, role := range []engine.Role{engine.RoleOperator, engine.RoleAdmin} {
		if _, err := g.IngestFact(ctx, engine.Principal{Name: "o", Role: role}, reading("p", "e", 1)); err != nil {
			t.Fatalf("%s: %v", role, err)
		}
	}
}

func TestAssets(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	b, _ := local.Open(t.TempDir())
	path := dir + "/frame.png"
	data := []byte("\x89PNG not really")
	os.WriteFile(path, data, 0o644)
	ref, err := engine.AssetRefForFile(path, "image/png")
	if err != nil || ref.Size != int64(len(data)) || !strings.HasPrefix(ref.URI, "file://") {
		t.Fatalf("ref %+v %v", ref, err)
	}
	stored, err := engine.PutAssetFile(ctx, b, path, "image/png")
	if err != nil || stored.Digest != ref.Digest {
		t.Fatalf("stored %+v %v, want digest %s", stored, err, ref.Digest)
	}
	if again, err := engine.PutAsset(ctx, b, data, "image/png"); err != nil || again != stored {
		t.Fatalf("storing again: %+v %v", again, err)
	}
	got, err := engine.GetAsset(ctx, b, ref)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %q %v", got, err)
	}
	p, _ := engine.AssetPath(ref.Digest)
	if !strings.HasPrefix(p, "assets/sha256/") {
		t.Fatalf("asset path %s", p)
	}
	// Tampered bytes fail the digest check; bad digests are refused.
	file, _ := b.Path(p)
	os.Chmod(file, 0o644)
	if err := os.WriteFile(file, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.GetAsset(ctx, b, ref); !errors.Is(err, engine.ErrAssetMismatch) {
		t.Fatalf("tampered asset: %v", err)
	}
	if _, err := engine.AssetPath("sha256:XYZ"); !errors.Is(err, engine.ErrBadAssetDigest) {
		t.Fatalf("bad digest: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// Bad input is ErrInvalid, so callers (the CLI, the mount's ctl) can tell
// it from storage failures.
func TestBadInputIsErrInvalid(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 1)
	if _, err := w.Ingest(ctx, reading("", "e", 1)); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("no producer: %v", err)
	}
	if _, err := w.Ingest(ctx, engine.Fact{Producer: "p", ExternalID: "e", Table: readingTable(), Values: engine.Values{"reading_value": "x"}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a string for a double: %v", err)
	}
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", -1, engine.Selector{})
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "e", Subject: sub}, passing); !errors.Is(err, engine.ErrInvalid) || !errors.Is(err, engine.ErrNoContract) {
		t.Fatalf("no contract: %v", err)
	}
	empty := func(context.Context, engine.Subject) ([]engine.Outcome, error) { return nil, nil }
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "e", Subject: sub, Contract: contract("v1")}, empty); !errors.Is(err, engine.ErrInvalid) || !errors.Is(err, engine.ErrNoOutcomes) {
		t.Fatalf("no outcomes: %v", err)
	}
}

// An entity table named as one of the world's fact tables is refused too,
// when a resume declares it: the views would join the table's rows and
// the facts under that name, as a fact table named as an entity table
// would (TestIngestBadInput). A fact refused for its values leaves its
// table's name free for an entity table, and the ingester does not go on
// taking the name as free once an entity table has it.
func TestEntityTableNamedAsFactTable(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 1)
	if _, err := w.Ingest(ctx, enginetest.Reading("r-1", 7.5)); err != nil {
		t.Fatal(err)
	}
	entity := func(name string) *engine.Table {
		tb, err := engine.NewTable(name, mustComponent(t, "reading", engine.Field{Name: "value", Type: engine.Float64}))
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	if w2, err := engine.ResumeWorld(ctx, b, "w", append(particles.Tables(), entity("reading")), quiet); err == nil {
		w2.Close()
		t.Fatal("a resume declared entity table reading, the name of a fact table")
	}
	// A fact of a new name refused for its values describes no table.
	probe, err := engine.NewFactTable("probe", mustComponent(t, "reading", engine.Field{Name: "value", Type: engine.Float64}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Ingest(ctx, engine.Fact{Producer: "p", ExternalID: "e", Table: probe, Values: engine.Values{"reading_value": "warm"}}); err == nil {
		t.Fatal("a fact of the wrong type was accepted")
	}
	w2, err := engine.ResumeWorld(ctx, b, "w", append(particles.Tables(), entity("probe")), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if _, err := w.Ingest(ctx, engine.Fact{Producer: "p", ExternalID: "e", Table: probe, Values: engine.Values{"reading_value": 1.5}}); err == nil {
		t.Fatal("a fact of table probe was accepted after a resume declared entity table probe")
	}
}
