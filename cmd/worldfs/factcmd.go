package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// factFlags are the flags of the commands that write durable history
// through the gate.
type factFlags struct {
	url, world, role *string
	lease, wait      *time.Duration
}

func addFactFlags(fs *flag.FlagSet) *factFlags {
	role := envOr("WORLDFS_ROLE", "operator")
	return &factFlags{
		url:   bucketFlag(fs),
		world: fs.String("world", "", "world to write to (required)"),
		role:  fs.String("role", role, "the caller's role: viewer, operator or admin; writing needs operator (env WORLDFS_ROLE)"),
		lease: fs.Duration("lease", 30*time.Second, "how long a claim stays this caller's before another may take it over"),
		wait:  fs.Duration("wait", time.Minute, "how long to wait for another caller's live claim on the same id"),
	}
}

// open returns the gate to the world's ingestion service, and a close
// function.
func (f *factFlags) open(ctx context.Context) (*engine.Gate, *engine.IngestionService, bucket.Bucket, engine.Principal, func(), error) {
	var p engine.Principal
	if *f.world == "" {
		return nil, nil, nil, p, nil, usagef("--world is required")
	}
	role, err := engine.ParseRole(*f.role)
	if err != nil {
		return nil, nil, nil, p, nil, usageError{msg: err.Error()}
	}
	p = engine.Principal{Name: os.Getenv("USER"), Role: role}
	b, err := openExisting(ctx, *f.url)
	if err != nil {
		return nil, nil, nil, p, nil, err
	}
	if err := requireWorld(ctx, b, *f.world); err != nil {
		b.Close()
		return nil, nil, nil, p, nil, err
	}
	wait := *f.wait
	if wait <= 0 {
		wait = -1
	}
	svc, err := engine.OpenIngestionService(ctx, b, *f.world, engine.IngestOptions{Lease: *f.lease, MaxWait: wait})
	if err != nil {
		b.Close()
		return nil, nil, nil, p, nil, err
	}
	return engine.NewGate(svc), svc, b, p, func() { svc.Close(); b.Close() }, nil
}

// eachDocument runs fn on each JSON document to process (the argument, or
// each non-empty line of in), up to parallel at once, and prints each
// result line to out in input order as soon as it and those before it are
// done: a long stream is never held in memory. It returns how many
// documents there were and how many failed.
func eachDocument(args []string, in io.Reader, parallel int, out io.Writer, fn func(doc []byte) (line string, ok bool)) (n, failed int, err error) {
	if len(args) > 1 {
		return 0, 0, usagef("give one JSON document, or none to read them from stdin")
	}
	order := make(chan chan string, parallel)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for ch := range order {
			fmt.Fprintln(out, <-ch)
		}
	}()
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	run := func(doc []byte) {
		ch := make(chan string, 1)
		sem <- struct{}{}
		order <- ch
		n++
		go func() {
			defer func() { <-sem }()
			line, ok := fn(doc)
			if !ok {
				mu.Lock()
				failed++
				mu.Unlock()
			}
			ch <- line
		}()
	}
	if len(args) == 1 {
		run([]byte(args[0]))
	} else {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), engine.MaxInputDocument)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				run(bytes.Clone(line))
			}
		}
		err = sc.Err()
	}
	close(order)
	<-printed
	return n, failed, err
}

var stdin io.Reader = os.Stdin

// ingestCmd is "worldfs ingest".
func ingestCmd() command {
	var ff *factFlags
	var producer, id, table, run *string
	var parallel *int
	var createTable *bool
	return command{
		name:    "ingest",
		summary: "ingest external facts into a world's fact tables, exactly once each",
		usage:   "[FACT-JSON]",
		example: `worldfs ingest --world demo '{"producer":"sensor-1","external_id":"evt-9","table":"reading","components":{"reading":{"value":21.5}}}'` + "\n" +
			`  worldfs ingest --world w1 --create-table '{"producer":"s","external_id":"e1","table":"reading","components":{"reading":{"value":1}}}'   # a new fact table`,
		flags: func(fs *flag.FlagSet) {
			ff = addFactFlags(fs)
			producer = fs.String("producer", "", "producer of facts that name none")
			id = fs.String("id", "", "external id of a fact that names none")
			table = fs.String("table", "", "fact table of facts that name none")
			run = fs.String("run", index.DefaultRun, "run of facts that name none")
			parallel = fs.Int("parallel", 16, "facts from stdin ingested at once")
			createTable = fs.Bool("create-table", false, "a fact table the world does not hold yet is made from the fact's components (without it, a table the world does not hold is refused, naming those it holds)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			gate, _, b, p, closeAll, err := ff.open(ctx)
			if err != nil {
				return err
			}
			defer closeAll()
			// Facts are ingested in parallel, their claims sharing catalog
			// slots (group commit); receipts print in input order, each
			// with its status.
			var conflicts atomic.Int64
			n, failed, err := eachDocument(args, stdin, max(*parallel, 1), out, func(doc []byte) (string, bool) {
				var d engine.FactDocument
				r, err := func() (engine.FactReceipt, error) {
					if err := engine.DecodeStrict(doc, &d); err != nil {
						return engine.FactReceipt{}, fmt.Errorf("not a fact document: %w", err)
					}
					fillDefault(&d.Producer, *producer)
					fillDefault(&d.ExternalID, *id)
					fillDefault(&d.Table, *table)
					fillDefault(&d.Run, *run)
					resolve := d.Fact
					if *createTable {
						resolve = d.FactCreatingTable
					}
					f, err := resolve(ctx, b, *ff.world)
					if err != nil {
						return engine.FactReceipt{}, err
					}
					return gate.IngestFact(ctx, p, f)
				}()
				status := factStatus(r, err)
				if status == statusConflict {
					conflicts.Add(1)
				}
				return factLine(status, d, r, err), err == nil
			})
			switch {
			case err != nil:
				return err
			case failed > 0 && int64(failed) == conflicts.Load():
				return fmt.Errorf("%d of %d facts refused: %w", failed, n, errFactConflict)
			case failed > 0:
				return fmt.Errorf("%d of %d facts failed (see their lines)", failed, n)
			}
			return nil
		},
	}
}

// factLine is ingest's line for one fact: its receipt, or what failed,
// with its status.
func factLine(status string, d engine.FactDocument, r engine.FactReceipt, err error) string {
	if err != nil {
		line, _ := json.Marshal(struct {
			Status     string `json:"status"`
			Producer   string `json:"producer"`
			ExternalID string `json:"external_id"`
			Error      string `json:"error"`
		}{status, d.Producer, d.ExternalID, err.Error()})
		return string(line)
	}
	line, _ := json.Marshal(struct {
		Status string `json:"status"`
		engine.FactReceipt
	}{status, r})
	return string(line)
}

// evaluateCmd is "worldfs evaluate".
func evaluateCmd() command {
	var ef *factFlags
	var evID, evRun, grader, impl, model, prompt, config, execCmd, at *string
	var seed *int64
	var outcomes multiFlag
	return command{
		name:    "evaluate",
		summary: "record an evaluation receipt: one grader, one pinned contract, one pinned subject",
		usage:   "[EVALUATION-JSON]",
		example: `worldfs evaluate --world demo --id eval-1 --grader reach-ground --implementation v3 --outcome lands=pass:0.9`,
		flags: func(fs *flag.FlagSet) {
			ef = addFactFlags(fs)
			evID = fs.String("id", "", "evaluation id (each trial is its own id)")
			evRun = fs.String("run", "", "run whose snapshot is the subject (default main)")
			at = fs.String("at", "", "the `POINT` the subject is pinned at, its head tick (default: the run's head): "+index.MomentForms+"; "+localZone())
			grader = fs.String("grader", "", "stable grader id")
			impl = fs.String("implementation", "", "grader implementation version")
			model = fs.String("model", "", "grader model version")
			prompt = fs.String("prompt", "", "grader prompt version")
			config = fs.String("config", "", "grader configuration (JSON)")
			seed = fs.Int64("seed", 0, "grader seed")
			outcomes = nil
			fs.Var(&outcomes, "outcome", "an outcome CRITERION=VERDICT[:SCORE] (repeatable); verdicts: pass, fail, invalid, inconclusive")
			execCmd = fs.String("exec", "", "grade by running this shell command after the claim: the subject JSON on its stdin, a JSON array of outcomes on its stdout")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			var d engine.EvaluationDocument
			if len(args) > 1 {
				return usagef("give one JSON evaluation document at most")
			}
			if len(args) == 1 {
				if err := engine.DecodeStrict([]byte(args[0]), &d); err != nil {
					return usagef("not an evaluation document: %v", err)
				}
			}
			fillDefault(&d.ID, *evID)
			fillDefault(&d.Run, *evRun)
			fillDefault(&d.Contract.GraderID, *grader)
			fillDefault(&d.Contract.Implementation, *impl)
			fillDefault(&d.Contract.Model, *model)
			fillDefault(&d.Contract.Prompt, *prompt)
			if *config != "" {
				d.Contract.Config = json.RawMessage(*config)
			}
			if *seed != 0 {
				d.Contract.Seed = *seed
			}
			point, err := parsePointFlag("at", *at)
			if err != nil {
				return err
			}
			if err := addOutcomes(&d, outcomes, *execCmd != ""); err != nil {
				return err
			}
			gate, svc, b, p, closeAll, err := ef.open(ctx)
			if err != nil {
				return err
			}
			defer closeAll()
			ev, err := evaluationAt(ctx, b, svc.World(), d, point)
			if err != nil {
				return err
			}
			grade := func(context.Context, engine.Subject) ([]engine.Outcome, error) { return d.Outcomes, nil }
			if *execCmd != "" {
				grade = execGrader(*execCmd)
			}
			r, err := gate.Evaluate(ctx, p, ev, grade)
			if err != nil {
				return err
			}
			return writeJSON(out, r)
		},
	}
}

// evaluationAt is d's evaluation of world, its subject pinned at point
// (the run's head if nil), against the world's catalog as it stands.
func evaluationAt(ctx context.Context, b bucket.Bucket, world string, d engine.EvaluationDocument, point *index.Moment) (engine.Evaluation, error) {
	if point != nil {
		run := d.Run
		if run == "" {
			run = index.DefaultRun
		}
		t, err := tickOf(ctx, b, world, run, *point)
		if err != nil {
			return engine.Evaluation{}, err
		}
		d.At = &t
	}
	s, _, err := index.Load(ctx, b, world)
	if err != nil {
		return engine.Evaluation{}, err
	}
	return d.Evaluation(s)
}

// addOutcomes adds evaluate's --outcome values to d, which must then hold
// outcomes or have a grader to run (exec), not both or neither.
func addOutcomes(d *engine.EvaluationDocument, outcomes multiFlag, exec bool) error {
	for _, o := range outcomes {
		oc, err := parseOutcome(o)
		if err != nil {
			return usageError{msg: err.Error()}
		}
		d.Outcomes = append(d.Outcomes, oc)
	}
	if (len(d.Outcomes) > 0) == exec {
		return usagef("give the outcomes (--outcome or the document's \"outcomes\") or a grader to run (--exec), not both or neither")
	}
	if len(d.Outcomes) > 0 {
		// Outcomes known now are checked now, before anything is
		// claimed.
		if err := engine.CheckOutcomes(d.Outcomes); err != nil {
			return usagef("%v", err)
		}
	}
	return nil
}

// The status of each fact on ingest's output line.
const (
	statusOriginal     = "original"     // this call made the fact visible
	statusDeduplicated = "deduplicated" // it was already visible, with the same contents; nothing changed
	statusConflict     = "conflict"     // its external id is taken with other contents; permanent
	statusError        = "error"        // not ingested (bad input, storage, a claim still pending); may be retried
)

// errFactConflict: every failed fact was a conflict (exit status 5).
var errFactConflict = errors.New("their external ids were claimed with other contents (status conflict)")

func factStatus(r engine.FactReceipt, err error) string {
	var conflict *index.ClaimConflictError
	switch {
	case errors.As(err, &conflict):
		return statusConflict
	case err != nil:
		return statusError
	case r.Deduplicated:
		return statusDeduplicated
	}
	return statusOriginal
}

func fillDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parseOutcome parses CRITERION=VERDICT[:SCORE].
func parseOutcome(s string) (engine.Outcome, error) {
	crit, rest, ok := strings.Cut(s, "=")
	if !ok {
		return engine.Outcome{}, fmt.Errorf("--outcome %q: want CRITERION=VERDICT[:SCORE]", s)
	}
	o := engine.Outcome{Criterion: crit}
	verdict, score, hasScore := strings.Cut(rest, ":")
	o.Verdict = verdict
	if hasScore {
		x, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return o, fmt.Errorf("--outcome %q: score %q is not a number", s, score)
		}
		o.Score = &x
	}
	return o, nil
}

// execGrader grades by running a shell command: the subject as JSON on its
// stdin, a JSON array of outcomes expected on its stdout.
func execGrader(command string) engine.Grader {
	return func(ctx context.Context, sub engine.Subject) ([]engine.Outcome, error) {
		in, _ := json.Marshal(sub)
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Stdin = bytes.NewReader(in)
		cmd.Stderr = os.Stderr
		data, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("grader command %q: %w", command, err)
		}
		var os []engine.Outcome
		if err := engine.DecodeStrict(data, &os); err != nil {
			return nil, fmt.Errorf("grader command %q: its output is not a JSON array of outcomes: %w", command, err)
		}
		return os, nil
	}
}
