package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// EvaluationProducer and EvaluationRun key evaluation receipts' claims: one
// namespace per world, so an evaluation id names one receipt whatever its
// grader or the run it judged.
const (
	EvaluationProducer = ReservedProducer + "evaluation"
	EvaluationRun      = index.EvaluationRun
)

// ReceiptTableName is the name of the table receipts are stored in
// (frame.ReceiptTableName).
const ReceiptTableName = frame.ReceiptTableName

// ReceiptTable is the fact table evaluation receipts are stored in. Its
// columns are in name order (frame.FormatByName), as every world's
// receipts have always been: one table in every world, whatever worldfs
// wrote it (worldfs_receipts names its columns).
func ReceiptTable() *Table {
	c, _ := NewComponent("receipt", Field{Name: "evaluation_id", Type: String}, Field{Name: "grader_id", Type: String},
		Field{Name: "contract", Type: String}, Field{Name: "contract_digest", Type: String},
		Field{Name: "subject", Type: String}, Field{Name: "subject_digest", Type: String}, Field{Name: "outcomes", Type: String})
	t, _ := frame.NewFactTable(ReceiptTableName, c)
	return t
}

var receiptTable = ReceiptTable()

// GraderContract pins what graded: a stable grader id and every version and
// setting that could change its conclusion. An evaluation without one gets
// no receipt.
type GraderContract struct {
	GraderID string `json:"grader_id"`
	// Implementation is the grader's implementation version (required).
	Implementation string `json:"implementation_version"`
	Prompt         string `json:"prompt_version,omitempty"`
	Model          string `json:"model_version,omitempty"`
	// Config is the grader's configuration, any JSON value; it is stored
	// canonically (sorted keys, no insignificant space).
	Config     json.RawMessage    `json:"config,omitempty"`
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
	Seed       int64              `json:"seed"`
}

// Selector is the canonical description of what a subject covers.
type Selector struct {
	// Tables (by name) the evaluation reads; empty: all.
	Tables []string `json:"tables,omitempty"`
	// FromTick and ToTick bound the ticks read, inclusive (no ToTick: up
	// to the snapshot's head).
	FromTick int64  `json:"from_tick"`
	ToTick   *int64 `json:"to_tick,omitempty"`
	// Entities read; empty: all.
	Entities []int64 `json:"entities,omitempty"`
	// Assets the evaluation read, bound by digest.
	Assets []AssetRef `json:"assets,omitempty"`
}

// Subject is what an evaluation judged, pinned by snapshot reference, never
// by hashing rows: a run's head tick and the token published there (which
// fix the run's history up to it: published ticks never change) and a
// selector.
type Subject struct {
	World     string `json:"world"`
	Run       string `json:"run"`
	HeadTick  int64  `json:"head_tick"`
	HeadToken string `json:"head_token"`
	// Facts and FactsDigest pin the facts visible at or before HeadTick
	// when the subject was pinned: their count and a digest of their
	// claim tokens (facts land at the head tick while it is the head).
	Facts       int      `json:"facts"`
	FactsDigest string   `json:"facts_digest"`
	Selector    Selector `json:"selector"`
}

// PinSubject pins sel to run's snapshot at tick at (-1: the run's head) in
// s.
func PinSubject(s *index.State, run string, at int64, sel Selector) (Subject, error) {
	r, ok := s.Run(run)
	if !ok {
		return Subject{}, fmt.Errorf("world %s: run %s has no published tick to evaluate", s.World.ID, run)
	}
	if at < 0 {
		at = r.Head
	}
	t, ok := s.Tick(run, at)
	if !ok {
		return Subject{}, fmt.Errorf("world %s run %s: tick %d is not published", s.World.ID, run, at)
	}
	var tokens []string
	s.Claims(run, func(c *index.Claim) bool {
		if c.State == index.ClaimComplete && c.Tick <= at {
			tokens = append(tokens, c.CommitToken)
		}
		return true
	})
	slices.Sort(tokens)
	return Subject{World: s.World.ID, Run: run, HeadTick: at, HeadToken: t.CommitToken,
		Facts: len(tokens), FactsDigest: sha([]byte(strings.Join(tokens, "\n"))), Selector: sel}, nil
}

// Verdicts an outcome may have.
const (
	Pass         = "pass"
	Fail         = "fail"
	Invalid      = "invalid"
	Inconclusive = "inconclusive"
)

// Outcome is one typed conclusion of a grader.
type Outcome struct {
	Criterion string   `json:"criterion,omitempty"`
	Verdict   string   `json:"verdict"`
	Score     *float64 `json:"score,omitempty"` // finite when present
}

// Evaluation names one grader run: ID is its identity (each trial of a
// nondeterministic grader is its own id); Subject and Contract are bound to
// the id for good.
type Evaluation struct {
	ID       string
	Subject  Subject
	Contract GraderContract
}

// Grader judges a subject. It runs only after the evaluation's claim is
// held, and at most once more if a holder died before appending.
type Grader func(ctx context.Context, subject Subject) ([]Outcome, error)

// EvaluationReceipt is the durable record that one grader ran under one
// contract against one subject, and what it concluded. It is evidence,
// never authority: it carries no acceptance or permission of any kind.
type EvaluationReceipt struct {
	World          string         `json:"world"`
	EvaluationID   string         `json:"evaluation_id"`
	CommitToken    string         `json:"commit_token"`
	ReceiptID      int64          `json:"receipt_id"`
	Tick           int64          `json:"tick"`
	Subject        Subject        `json:"subject"`
	SubjectDigest  string         `json:"subject_digest"`
	Contract       GraderContract `json:"contract"`
	ContractDigest string         `json:"contract_digest"`
	Outcomes       []Outcome      `json:"outcomes"`
	Digest         string         `json:"digest"`
	Path           string         `json:"path"`
	Deduplicated   bool           `json:"deduplicated"`
	// Graded: this call ran the grader.
	Graded    bool   `json:"graded"`
	Recovered string `json:"recovered,omitempty"`
}

// ErrNoContract: an evaluation without a usable GraderContract gets no
// receipt.
var ErrNoContract = errors.New("an evaluation needs a grader contract with a grader id and an implementation version")

// ErrNoOutcomes: the grader concluded nothing; no receipt is recorded.
var ErrNoOutcomes = errors.New("the grader returned no outcomes")

// Evaluate records the receipt of ev exactly once: it claims ev.ID, runs
// grade only while holding the claim with no receipt appended, and
// completes. A completed evaluation returns its persisted receipt without
// grading; the same id with another subject or contract is a
// ClaimConflictError. A grader that fails or concludes nothing valid gets
// no receipt, and its claim is released at once (not left to its lease).
func (s *IngestionService) Evaluate(ctx context.Context, ev Evaluation, grade Grader) (EvaluationReceipt, error) {
	sub, con, err := s.canonicalEvaluation(ev)
	if err != nil {
		return EvaluationReceipt{}, invalid(err)
	}
	if grade == nil {
		return EvaluationReceipt{}, invalid(fmt.Errorf("world %s: evaluation %s: no grader", s.world, ev.ID))
	}
	if err := s.checkPinned(ctx, ev); err != nil {
		return EvaluationReceipt{}, err
	}
	sd, cd := sha(sub), sha(con)
	digest := sha([]byte("worldfs.evaluation.v1\x00" + sd + "\x00" + cd))
	key := index.ClaimKey{Run: EvaluationRun, Producer: EvaluationProducer, ExternalID: ev.ID}
	graded := false
	out, err := s.settle(ctx, key, digest, receiptTable, func(ctx context.Context, _ *index.Claim) (Values, error) {
		outcomes, err := grade(ctx, ev.Subject)
		if err != nil {
			return nil, fmt.Errorf("world %s: evaluation %s: grader %s: %w", s.world, ev.ID, ev.Contract.GraderID, err)
		}
		graded = true
		if err := CheckOutcomes(outcomes); err != nil {
			return nil, invalid(fmt.Errorf("world %s: evaluation %s: %w", s.world, ev.ID, err))
		}
		o, _ := json.Marshal(outcomes)
		return Values{"receipt_evaluation_id": ev.ID, "receipt_grader_id": ev.Contract.GraderID,
			"receipt_contract": string(con), "receipt_contract_digest": cd,
			"receipt_subject": string(sub), "receipt_subject_digest": sd, "receipt_outcomes": string(o)}, nil
	})
	if err != nil {
		return EvaluationReceipt{}, err
	}
	// The receipt is what is persisted: subject, contract and outcomes as
	// the row holds them.
	c := out.claim
	r := EvaluationReceipt{World: s.world, EvaluationID: ev.ID, CommitToken: c.CommitToken, ReceiptID: c.FactID,
		Tick: c.Tick, SubjectDigest: sd, ContractDigest: cd,
		Digest: c.Digest, Path: out.path, Deduplicated: out.dedup, Graded: graded, Recovered: out.recovered}
	for col, v := range map[string]any{"receipt_subject": &r.Subject, "receipt_contract": &r.Contract, "receipt_outcomes": &r.Outcomes} {
		text, _ := out.row[col].(string)
		if err := json.Unmarshal([]byte(text), v); err != nil {
			return EvaluationReceipt{}, fmt.Errorf("world %s: receipt %s: %s: %v: %w", s.world, out.path, col, err, index.ErrCorrupt)
		}
	}
	return r, nil
}

// checkPinned checks that ev's subject names a published snapshot of this
// world: its head tick published under its head token.
func (s *IngestionService) checkPinned(ctx context.Context, ev Evaluation) error {
	st, err := s.cat.Exact(ctx)
	if err != nil {
		return err
	}
	sub := ev.Subject
	if t, ok := st.Tick(sub.Run, sub.HeadTick); !ok || t.CommitToken != sub.HeadToken {
		return invalid(fmt.Errorf("world %s: evaluation %s: the subject's snapshot (run %s, tick %d, token %s) is not published here; pin it with PinSubject",
			s.world, ev.ID, sub.Run, sub.HeadTick, sub.HeadToken))
	}
	return nil
}

// canonicalEvaluation checks ev and returns the canonical encodings of its
// subject and contract.
func (s *IngestionService) canonicalEvaluation(ev Evaluation) (subject, contract []byte, err error) {
	c := ev.Contract
	switch {
	case ev.ID == "":
		return nil, nil, fmt.Errorf("world %s: an evaluation needs an id", s.world)
	case c.GraderID == "" || c.Implementation == "":
		return nil, nil, fmt.Errorf("world %s: evaluation %s: %w", s.world, ev.ID, ErrNoContract)
	case ev.Subject.World != s.world || ev.Subject.Run == "" || ev.Subject.HeadToken == "" || ev.Subject.FactsDigest == "":
		return nil, nil, fmt.Errorf("world %s: evaluation %s: the subject must be pinned to a snapshot of this world (PinSubject)", s.world, ev.ID)
	}
	for name, v := range c.Thresholds {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("world %s: evaluation %s: threshold %s is not finite", s.world, ev.ID, name)
		}
	}
	if len(c.Config) > 0 {
		if !json.Valid(c.Config) {
			return nil, nil, fmt.Errorf("world %s: evaluation %s: the contract's config is not JSON", s.world, ev.ID)
		}
		c.Config = canonicalConfig(c.Config)
	}
	sel := ev.Subject.Selector
	sel.Tables = slices.Clone(sel.Tables)
	slices.Sort(sel.Tables)
	sel.Entities = slices.Clone(sel.Entities)
	slices.Sort(sel.Entities)
	sel.Assets = slices.Clone(sel.Assets)
	for i, a := range sel.Assets {
		if !validAssetDigest(a.Digest) {
			return nil, nil, fmt.Errorf("world %s: evaluation %s: asset %q: %w", s.world, ev.ID, a.Digest, ErrBadAssetDigest)
		}
		sel.Assets[i].URI = "" // a hint that may rot: identity is the digest
	}
	slices.SortFunc(sel.Assets, func(a, b AssetRef) int { return strings.Compare(a.Digest, b.Digest) })
	sub := ev.Subject
	sub.Selector = sel
	subject, _ = json.Marshal(sub)
	contract, _ = json.Marshal(c)
	return subject, contract, nil
}

// canonicalConfig re-encodes a JSON value with sorted keys and no
// insignificant space, numbers kept as written.
func canonicalConfig(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw
	}
	out, _ := json.Marshal(v)
	return out
}

// CheckOutcomes checks a grader's outcomes: at least one, each with a
// known verdict and a finite score if any. Callers that hold the outcomes
// before grading (the ctl file, the CLI's --outcome) check them before
// anything is claimed.
func CheckOutcomes(os []Outcome) error {
	if len(os) == 0 {
		return ErrNoOutcomes
	}
	for _, o := range os {
		switch o.Verdict {
		case Pass, Fail, Invalid, Inconclusive:
		default:
			return fmt.Errorf("outcome %q: verdict %q is not pass, fail, invalid or inconclusive", o.Criterion, o.Verdict)
		}
		if o.Score != nil && (math.IsNaN(*o.Score) || math.IsInf(*o.Score, 0)) {
			return fmt.Errorf("outcome %q: the score is not finite", o.Criterion)
		}
	}
	return nil
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
