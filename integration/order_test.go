package integration

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// outOfOrderTables declares an archetype whose components and fields are
// out of name order: state before pos, energy before age.
const outOfOrderTables = `[{"name":"agent","components":[
	{"name":"state","fields":[{"name":"energy","type":"float"},{"name":"age","type":"int32"},{"name":"alive","type":"boolean"},{"name":"kind","type":"string"}]},
	{"name":"pos","fields":[{"name":"x","type":"double"},{"name":"y","type":"double"}]}]}]`

// declaredAgent is that archetype's columns in the order declared, as
// every reader shows them: entity_id and tick, the components' fields,
// then the commit columns.
var declaredAgent = []string{"entity_id", "tick", "state_energy", "state_age", "state_alive", "state_kind", "pos_x", "pos_y", "commit_token", "writer_epoch"}

// A world created with its tables declared out of name order reads back in
// the declared order through every door: the mount's Parquet and CSV files
// of a tick (in ticks/, tables/ and tokens/), and the SQL views (the
// component view and its macros without the commit columns), from the
// world's creation on.
func TestColumnsInTheDeclaredOrder(t *testing.T) {
	b := localBucket(t)
	mt := testMount(t, b)
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"lab","tables":`+strings.Join(strings.Fields(outOfOrderTables), "")+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	components := slices.Clone(declaredAgent[:len(declaredAgent)-2])
	db := openViews(t, b, "lab")
	// Before the first tick: the views exist, empty, in the declared order.
	if got := rows(t, db, "SELECT column_name FROM (DESCRIBE SELECT * FROM agent)"); !slices.Equal(got, components) {
		t.Errorf("agent before the first tick: columns %v, want %v", got, components)
	}
	if got := rows(t, db, "SELECT count(*) FROM agent"); !slices.Equal(got, []string{"0"}) {
		t.Errorf("agent before the first tick: %v rows, want 0", got)
	}

	a, errno := ctl(t, mt.path("lab", "ctl"), `{"op":"commit_tick","frames":{"agent":[{"entity_id":1,"pos_x":0.5,"pos_y":2,"state_energy":1.5,"state_age":3,"state_alive":true,"state_kind":"grazer"}]}}`)
	if errno != 0 {
		t.Fatalf("commit_tick: %+v", a)
	}
	token := a.Result.(map[string]any)["token"].(string)
	duckdb := duck(t)
	for _, file := range []string{
		mt.path("lab", "runs", "main", "head", "agent"),
		mt.path("lab", "runs", "main", "tables", "agent", "000000000000"),
		mt.path("lab", "tokens", token, "agent"),
	} {
		if got := rows(t, duckdb, "SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet("+lit(file+".parquet")+"))"); !slices.Equal(got, declaredAgent) {
			t.Errorf("%s.parquet: columns %v, want %v", file, got, declaredAgent)
		}
		if strings.Contains(file, "tables") {
			continue // tables/ holds Parquet files alone
		}
		f, err := os.Open(file + ".csv")
		if err != nil {
			t.Fatal(err)
		}
		header, err := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if err != nil || header != strings.Join(declaredAgent, ",")+"\n" {
			t.Errorf("%s.csv: header %q (%v), want %q", file, header, err, strings.Join(declaredAgent, ","))
		}
	}
	db = openViews(t, b, "lab")
	for q, want := range map[string][]string{
		"agent":              components,
		"agent_raw":          declaredAgent,
		"agent_at(0)":        components,
		"agent_as_of(now())": components,
		"agent_diff(0, 0)":   append([]string{"change_type"}, components...),
	} {
		if got := rows(t, db, "SELECT column_name FROM (DESCRIBE SELECT * FROM "+q+")"); !slices.Equal(got, want) {
			t.Errorf("%s: columns %v, want %v", q, got, want)
		}
	}
	if got := rows(t, db, "SELECT CAST(agent AS VARCHAR) FROM agent"); !slices.Equal(got, []string{"{'entity_id': 1, 'tick': 0, 'state_energy': 1.5, 'state_age': 3, 'state_alive': true, 'state_kind': grazer, 'pos_x': 0.5, 'pos_y': 2.0}"}) {
		t.Errorf("agent's row: %v", got)
	}
}
