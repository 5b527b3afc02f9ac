package sql

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/index"
)

type pairs map[[2]any]bool

func (p pairs) Publishes(tick int64, token string) bool { return p[[2]any{tick, token}] }

// The views decide row visibility by the SQL index.RowRule renders, and
// the engine, the allowlist and the exporter by its Go evaluator: on the
// same rows and the same published pairs, run through DuckDB, the two
// forms of each term of the rule select the same rows.
func TestRowRuleSQLAgreesWithGo(t *testing.T) {
	published := pairs{{int64(1), "a"}: true, {int64(2), "b"}: true, {int64(3), "it's"}: true, {int64(4), ""}: true}
	rows := []index.Stamp{
		{Tick: 0, Token: "", Epoch: 0},     // legacy history
		{Tick: 7, Token: "", Epoch: 0},     // legacy, any tick
		{Tick: 7, Token: "", Epoch: 2},     // no token, yet a writer's epoch
		{Tick: 4, Token: "", Epoch: 1},     // a published pair with no token
		{Tick: 1, Token: "a", Epoch: 1},    // published
		{Tick: 1, Token: "a", Epoch: 0},    // published, epoch 0
		{Tick: 2, Token: "a", Epoch: 1},    // a published token at another tick
		{Tick: 1, Token: "b", Epoch: 1},    // another tick's token
		{Tick: 1, Token: "x", Epoch: 1},    // a crashed attempt's token
		{Tick: 1, Token: "x", Epoch: 0},    // a token nothing published, epoch 0
		{Tick: 3, Token: "it's", Epoch: 5}, // a quote in the token
		{Tick: 3, Token: "it", Epoch: 5},
		{Tick: -1, Token: "a", Epoch: 1},
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("CREATE TEMP TABLE r (id INTEGER, tick BIGINT, commit_token VARCHAR, writer_epoch BIGINT)")
	mustExec("CREATE TEMP TABLE p (v_tick BIGINT, v_token VARCHAR)")
	for i, s := range rows {
		mustExec("INSERT INTO r VALUES (?, ?, ?, ?)", i, s.Tick, s.Token, s.Epoch)
	}
	for k := range published {
		mustExec("INSERT INTO p VALUES (?, ?)", k[0], k[1])
	}
	for _, c := range []struct {
		name string
		expr index.RowExpr
	}{{"RowRule", index.RowRule}, {"RowLegacy", index.RowLegacy}, {"RowPublished", index.RowPublished}} {
		var want []int
		for i, s := range rows {
			if c.expr.Eval(s, published) {
				want = append(want, i)
			}
		}
		cond := c.expr.SQL(rowColumns("SELECT v_tick, v_token FROM p"))
		res, err := db.Query("SELECT id FROM r WHERE " + cond + " ORDER BY id")
		if err != nil {
			t.Fatalf("%s: %s: %v", c.name, cond, err)
		}
		var got []int
		for res.Next() {
			var id int
			if err := res.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		res.Close()
		if !slices.Equal(got, want) {
			t.Errorf("%s: SQL %s selects rows %v, Go selects %v (of %s)", c.name, cond, got, want, fmt.Sprint(rows))
		}
		if len(want) == 0 || len(want) == len(rows) {
			t.Errorf("%s: the cases select %d of %d rows: they cannot tell the forms apart", c.name, len(want), len(rows))
		}
	}
}
