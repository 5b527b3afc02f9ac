package engine

import (
	"context"
	"errors"
	"fmt"
)

// Role is what a principal may do; roles are ordered, each including the
// ones below it.
type Role int

// Roles, lowest first.
const (
	RoleViewer Role = iota + 1
	RoleOperator
	RoleAdmin
)

var roleNames = map[Role]string{RoleViewer: "viewer", RoleOperator: "operator", RoleAdmin: "admin"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole parses "viewer", "operator" or "admin".
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role %q: want viewer, operator or admin", s)
}

// Principal is who calls through a Gate.
type Principal struct {
	Name string
	Role Role
}

// ErrForbidden: the principal's role does not allow the operation.
var ErrForbidden = errors.New("forbidden")

// Gate is the guarded entry to durable history: writing facts and
// evaluation receipts needs the operator role or higher.
type Gate struct {
	svc *IngestionService
}

// NewGate guards svc.
func NewGate(svc *IngestionService) *Gate { return &Gate{svc: svc} }

func (g *Gate) allow(p Principal, op string) error {
	if p.Role < RoleOperator {
		return fmt.Errorf("world %s: %s by %q (%s): %w: needs the operator role or higher", g.svc.world, op, p.Name, p.Role, ErrForbidden)
	}
	return nil
}

// IngestFact ingests f on behalf of p (IngestionService.Ingest).
func (g *Gate) IngestFact(ctx context.Context, p Principal, f Fact) (FactReceipt, error) {
	if err := g.allow(p, "ingest_fact"); err != nil {
		return FactReceipt{}, err
	}
	return g.svc.Ingest(ctx, f)
}

// Evaluate records an evaluation on behalf of p (IngestionService.Evaluate).
func (g *Gate) Evaluate(ctx context.Context, p Principal, ev Evaluation, grade Grader) (EvaluationReceipt, error) {
	if err := g.allow(p, "evaluate"); err != nil {
		return EvaluationReceipt{}, err
	}
	return g.svc.Evaluate(ctx, ev, grade)
}
