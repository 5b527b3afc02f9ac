package index

import (
	"fmt"
	"strconv"
	"strings"
)

// Stamp is what a row carries of its commit: the tick it belongs to, the
// commit token of the attempt that wrote it, and the writer's epoch.
type Stamp struct {
	Tick  int64
	Token string
	Epoch int64
}

// Published is a set of published (tick, token) pairs: those a manifest
// or a completed claim published.
type Published interface {
	Publishes(tick int64, token string) bool
}

// RowExpr is a boolean expression over a row's Stamp, written once as data
// so that Go (Eval) and DuckDB (SQL) decide by the same text.
type RowExpr interface {
	// Eval decides the expression for the row stamped s, with published
	// the pairs a catalog state published.
	Eval(s Stamp, published Published) bool
	// SQL renders the expression as an SQL boolean over the columns c
	// names.
	SQL(c SQLColumns) string
}

// SQLColumns names what RowExpr.SQL renders against: the row's commit
// columns, and a query of the published (tick, token) pairs.
type SQLColumns struct {
	Tick, Token, Epoch string
	// Published is a query of two columns, tick then token: the pairs
	// published.
	Published string
}

// The terms of the row-visibility rule (docs/ARCHITECTURE.md,
// "Visibility"), each written once.
var (
	// RowLegacy holds for history with no commit identity: a row of
	// epoch 0 with no token (pre-commit-column history, a fork's lineage).
	RowLegacy RowExpr = and{tokenIs(""), epochIs(0)}
	// RowPublished holds for a row whose (tick, token) a manifest or a
	// completed claim published. Against one published tick alone it is
	// the rule that picks that tick's rows out of its fragments.
	RowPublished RowExpr = published{}
	// RowRule is the row-visibility rule: a row is visible if it is
	// legacy history or its (tick, token) was published. Rows of crashed
	// attempts and stale writers carry a token nothing published and are
	// never visible, whatever file holds them (invariant 1).
	RowRule RowExpr = or{RowLegacy, RowPublished}
)

type or []RowExpr

func (e or) Eval(s Stamp, p Published) bool {
	for _, x := range e {
		if x.Eval(s, p) {
			return true
		}
	}
	return false
}

func (e or) SQL(c SQLColumns) string { return join(e, " OR ", c) }

type and []RowExpr

func (e and) Eval(s Stamp, p Published) bool {
	for _, x := range e {
		if !x.Eval(s, p) {
			return false
		}
	}
	return true
}

func (e and) SQL(c SQLColumns) string { return join(e, " AND ", c) }

func join(xs []RowExpr, op string, c SQLColumns) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.SQL(c)
	}
	return "(" + strings.Join(parts, op) + ")"
}

type tokenIs string

func (e tokenIs) Eval(s Stamp, _ Published) bool { return s.Token == string(e) }
func (e tokenIs) SQL(c SQLColumns) string {
	return c.Token + " = '" + strings.ReplaceAll(string(e), "'", "''") + "'"
}

type epochIs int64

func (e epochIs) Eval(s Stamp, _ Published) bool { return s.Epoch == int64(e) }
func (e epochIs) SQL(c SQLColumns) string {
	return c.Epoch + " = " + strconv.FormatInt(int64(e), 10)
}

type published struct{}

func (published) Eval(s Stamp, p Published) bool { return p.Publishes(s.Tick, s.Token) }
func (published) SQL(c SQLColumns) string {
	return fmt.Sprintf("(%s, %s) IN (%s)", c.Tick, c.Token, c.Published)
}

// Publishes reports whether t published (tick, token): t as the
// Published set of one tick alone (RowPublished with it picks the tick's
// rows out of its fragments).
func (t *Tick) Publishes(tick int64, token string) bool {
	return tick == t.Tick && token == t.CommitToken
}
