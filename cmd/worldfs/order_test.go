package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
)

// A world whose tables.json declares its components and fields out of
// name order (state before pos, energy before age) has its views from
// its creation, and `worldfs sql` prints its columns in the declared order
// (entity_id, tick, the components, then the commit columns) in CSV and
// JSON; JSON keeps the order the query selects.
func TestSQLPrintsTheDeclaredOrder(t *testing.T) {
	dir := t.TempDir()
	tables := filepath.Join(t.TempDir(), "tables.json")
	spec := `[{"name":"agent","components":[
		{"name":"state","fields":[{"name":"energy","type":"float"},{"name":"age","type":"int32"},{"name":"kind","type":"string"}]},
		{"name":"pos","fields":[{"name":"x","type":"double"},{"name":"y","type":"double"}]}]}]`
	if err := os.WriteFile(tables, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := cli(t, "world", "create", "lab", "--bucket", dir, "--tables", "@"+tables); code != 0 {
		t.Fatalf("world create: %d\n%s%s", code, out, stderr)
	}
	components := "entity_id,tick,state_energy,state_age,state_kind,pos_x,pos_y"
	// Before the first tick: the table's view, empty.
	if code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "lab", "--format", "csv", "SELECT * FROM agent"); code != 0 || out != components+"\n" {
		t.Errorf("sql of a world before its first tick: %d %q %s; want the header %s", code, out, stderr, components)
	}

	// A tick, written by a program that declares the same archetype.
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var specs []struct {
		Name       string             `json:"name"`
		Components []engine.Component `json:"components"`
	}
	if err := json.Unmarshal([]byte(spec), &specs); err != nil {
		t.Fatal(err)
	}
	agent, err := engine.NewTable("agent", specs[0].Components...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.ResumeWorld(context.Background(), b, "lab", []*engine.Table{agent}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Spawn("agent", engine.Values{"state_energy": float32(1.5), "state_age": int32(3), "state_kind": "grazer", "pos_x": 0.5, "pos_y": 2.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Close()

	code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "lab", "--format", "csv", "SELECT * FROM agent_raw")
	if header, _, _ := strings.Cut(out, "\n"); code != 0 || header != components+",commit_token,writer_epoch" {
		t.Errorf("sql --format csv of agent_raw: %d %q %s; want the header %s,commit_token,writer_epoch", code, out, stderr, components)
	}
	for q, want := range map[string]string{
		"SELECT * FROM agent": strings.ReplaceAll(components, ",", " "),
		"SELECT pos_y, tick, entity_id, state_kind FROM agent": "pos_y tick entity_id state_kind",
	} {
		code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "lab", "--format", "json", q)
		if code != 0 {
			t.Fatalf("sql --format json %s: %d %s", q, code, stderr)
		}
		if got := jsonKeys(t, out); strings.Join(got, " ") != want {
			t.Errorf("sql --format json %s: keys %v, want %s\n%s", q, got, want, out)
		}
	}
}

// jsonKeys returns the keys of the first object of a JSON array, in the
// order the text gives them.
func jsonKeys(t *testing.T, text string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	var keys []string
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			expectKey = depth == 2
			continue
		case json.Delim(']'), json.Delim('}'):
			if depth--; depth == 1 {
				return keys
			}
			continue
		}
		if depth == 2 {
			if expectKey {
				keys = append(keys, tok.(string))
			}
			expectKey = !expectKey
		}
	}
	if len(keys) == 0 {
		t.Fatalf("no JSON object in %q", text)
	}
	return slices.Clip(keys)
}
