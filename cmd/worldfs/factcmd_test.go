package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
)

func TestIngestAndEvaluateCommands(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "demo", "--bucket", dir, "--ticks", "10", "--world", "demo"); code != 0 {
		t.Fatalf("demo: %s", stderr)
	}
	fact := `{"producer":"sensor-1","external_id":"evt-9","table":"reading","components":{"reading":{"value":21.5,"unit":"C"}}}`
	code, out, stderr := cli(t, "ingest", "--bucket", dir, "--world", "demo", fact)
	var first engine.FactReceipt
	if code != 0 || json.Unmarshal([]byte(out), &first) != nil || first.Deduplicated || first.TableName != "reading" || !strings.HasPrefix(out, `{"status":"original",`) {
		t.Fatalf("ingest: %d %q %q", code, out, stderr)
	}
	// Again: the original receipt. Another value: a conflict, exit 5;
	// each line says which.
	var again engine.FactReceipt
	if code, out, _ := cli(t, "ingest", "--bucket", dir, "--world", "demo", fact); code != 0 || json.Unmarshal([]byte(out), &again) != nil || !again.Deduplicated || again.CommitToken != first.CommitToken || !strings.HasPrefix(out, `{"status":"deduplicated",`) {
		t.Fatalf("second ingest: %d %q", code, out)
	}
	if code, out, _ := cli(t, "ingest", "--bucket", dir, "--world", "demo", strings.Replace(fact, "21.5", "22", 1)); code != exitConflict || !strings.Contains(out, "was claimed with digest") || !strings.HasPrefix(out, `{"status":"conflict",`) {
		t.Fatalf("conflicting ingest: %d %q", code, out)
	}
	// Bad documents, a viewer, a missing world: refused with a message.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--world", "demo", `{"producer":"p"`}, "not a fact document"},
		{[]string{"--world", "demo", `{"producer":"p","external_id":"e","table":"reading","components":{"reading":{"value":[1]}}}`}, "is not a double"},
		{[]string{"--world", "demo", "--create-table", `{"producer":"p","external_id":"e","table":"other","components":{"c":{"v":[1]}}}`}, "not a number, string or boolean"},
		{[]string{"--world", "demo", `{"producer":"p","external_id":"e","table":"readng","components":{"reading":{"value":1}}}`}, `no fact table \"readng\" (its fact tables: reading)`},
		{[]string{"--world", "demo", "--role", "viewer", fact}, "needs the operator role"},
		{[]string{"--world", "nope", fact}, "world nope does not exist"},
	} {
		code, out, stderr := cli(t, append([]string{"ingest", "--bucket", dir}, c.args...)...)
		if code == 0 || !strings.Contains(out+stderr, c.want) {
			t.Errorf("%v: exit %d, %q %q; want %q", c.args, code, out, stderr, c.want)
		}
	}

	// A new fact table is made only when asked; then the world holds it.
	other := `{"producer":"p","external_id":"o1","table":"other","components":{"other":{"v":1}}}`
	if code, out, _ := cli(t, "ingest", "--bucket", dir, "--world", "demo", other); code == 0 || !strings.Contains(out, `no fact table \"other\"`) || !strings.Contains(out, "--create-table") {
		t.Errorf("a fact into a table the world does not hold: %d %q; want it refused, saying how to create one", code, out)
	}
	if code, out, stderr := cli(t, "ingest", "--bucket", dir, "--world", "demo", "--create-table", other); code != 0 || !strings.HasPrefix(out, `{"status":"original",`) {
		t.Errorf("ingest --create-table: %d %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, "ingest", "--bucket", dir, "--world", "demo", strings.Replace(other, "o1", "o2", 1)); code != 0 || !strings.HasPrefix(out, `{"status":"original",`) {
		t.Errorf("a fact into the table made: %d %q %s", code, out, stderr)
	}

	// A stream on stdin: receipts in input order, the duplicate deduplicated.
	stdin = strings.NewReader(`{"external_id":"a","components":{"reading":{"value":1,"unit":"C"}}}
{"external_id":"b","components":{"reading":{"value":2,"unit":"C"}}}
{"external_id":"a","components":{"reading":{"value":1,"unit":"C"}}}
`)
	defer func() { stdin = nil }()
	code, out, stderr = cli(t, "ingest", "--bucket", dir, "--world", "demo", "--producer", "sensor-2", "--table", "reading")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("stream: %d %q %q", code, out, stderr)
	}
	var rs [3]engine.FactReceipt
	for i, l := range lines {
		json.Unmarshal([]byte(l), &rs[i])
	}
	if rs[0].ExternalID != "a" || rs[1].ExternalID != "b" || rs[0].CommitToken != rs[2].CommitToken || rs[0].Table != first.Table {
		t.Fatalf("stream receipts %+v", rs)
	}

	// Evaluations: outcomes given, then the same id again, then a grader
	// run by --exec for another id.
	eval := []string{"evaluate", "--bucket", dir, "--world", "demo", "--id", "eval-1", "--grader", "g", "--implementation", "v1", "--at", "3"}
	var er engine.EvaluationReceipt
	if code, out, stderr := cli(t, append(eval, "--outcome", "lands=pass:0.9")...); code != 0 || json.Unmarshal([]byte(out), &er) != nil || er.Subject.HeadTick != 3 || er.Outcomes[0].Verdict != "pass" {
		t.Fatalf("evaluate: %d %q %q", code, out, stderr)
	}
	if code, out, _ := cli(t, append(eval, "--outcome", "lands=fail")...); code != 0 || !strings.Contains(out, `"deduplicated": true`) || !strings.Contains(out, `"verdict": "pass"`) {
		t.Fatalf("evaluate again: %d %q", code, out)
	}
	if code, _, stderr := cli(t, "evaluate", "--bucket", dir, "--world", "demo", "--id", "eval-1", "--grader", "g", "--implementation", "v2", "--at", "3", "--outcome", "x=pass"); code != exitConflict || !strings.Contains(stderr, "was claimed with digest") {
		t.Fatalf("another contract: %d %q", code, stderr)
	}
	code, out, stderr = cli(t, "evaluate", "--bucket", dir, "--world", "demo", "--id", "eval-2", "--grader", "g", "--implementation", "v1",
		"--exec", `grep -q '"head_token":"[0-9a-f]\{32\}"' && echo '[{"criterion":"head","verdict":"inconclusive"}]'`)
	if code != 0 || !strings.Contains(out, `"inconclusive"`) || !strings.Contains(out, `"graded": true`) {
		t.Fatalf("evaluate --exec: %d %q %q", code, out, stderr)
	}
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	list := func() []string {
		var out []string
		for a, err := range b.List(context.Background(), "", "") {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a.Name)
		}
		return out
	}
	for _, bad := range [][]string{
		{"--id", "e3", "--grader", "g", "--outcome", "x=pass"},                           // no implementation version
		{"--id", "e3", "--grader", "g", "--implementation", "v", "--outcome", "x=maybe"}, // unknown verdict
		{"--id", "e3", "--grader", "g", "--implementation", "v"},                         // no outcomes
		{"--id", "e3", "--grader", "g", "--implementation", "v", "--exec", `echo '[{"verdict":"maybe"}]'`},
	} {
		before := list()
		if code, _, _ := cli(t, append([]string{"evaluate", "--bucket", dir, "--world", "demo"}, bad...)...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
		// Refused before the claim, or (a grader run by --exec) the claim
		// released at once: the id is free for a valid evaluation.
		if after := list(); !slices.Equal(before, after) && !slices.Contains(bad, "--exec") {
			t.Errorf("%v wrote to the bucket: %d objects became %d", bad, len(before), len(after))
		}
	}
	if code, out, stderr := cli(t, "evaluate", "--bucket", dir, "--world", "demo", "--wait", "0", "--id", "e3", "--grader", "g", "--implementation", "v", "--outcome", "x=pass"); code != 0 {
		t.Fatalf("the valid evaluation of e3 after the refusals: %d %q %q", code, out, stderr)
	}
}

// The commands that take one tick take it as any point (the one parser):
// export iceberg --until (and --at, its older spelling) exports the
// history up to it; evaluate --at pins the subject there.
func TestTickFlagsTakePoints(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	enginetest.World(t, b, "w", 12).Close()
	for _, c := range []struct {
		flags []string
		tick  string
	}{
		{[]string{"--until", "head~2"}, "at tick 10 "},
		{[]string{"--at", "3"}, "at tick 3 "},
		{[]string{"--until", "now"}, "at tick 12 "},
	} {
		code, out, stderr := cli(t, append([]string{"export", "iceberg", "--bucket", dir, "--world", "w", "--to", "export/" + strings.Join(c.flags, "")}, c.flags...)...)
		if code != 0 || !strings.Contains(out, c.tick) {
			t.Errorf("export %v: exit %d, %q %s; want %s", c.flags, code, out, stderr, c.tick)
		}
	}
	if code, _, stderr := cli(t, "export", "iceberg", "--bucket", dir, "--world", "w", "--until", "2000-01-01"); code != exitNotFound ||
		!strings.Contains(stderr, "2000-01-01: no tick of world w run main was published at or before") {
		t.Errorf("export before the first tick: exit %d %q", code, stderr)
	}
	if code, _, stderr := cli(t, "export", "iceberg", "--bucket", dir, "--world", "w", "--until", "3", "--at", "4"); code != exitUsage || !strings.Contains(stderr, "--at is the older spelling of --until: give one") {
		t.Errorf("--until and --at: exit %d %q", code, stderr)
	}
	code, out, stderr := cli(t, "evaluate", "--bucket", dir, "--world", "w", "--id", "e", "--grader", "g", "--implementation", "v1", "--at", "head~4", "--outcome", "x=pass")
	var r struct {
		Subject struct {
			HeadTick int64 `json:"head_tick"`
		} `json:"subject"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Subject.HeadTick != 8 {
		t.Errorf("evaluate --at head~4: exit %d, %s %s; want the subject at tick 8", code, out, stderr)
	}
}

// A fact table declared with the world ("fact": true in --tables) has its
// views at once, empty, and takes facts by name; a name the world does
// not hold is refused, naming the tables it holds.
func TestFactTablesDeclaredAtCreation(t *testing.T) {
	dir := t.TempDir()
	tables := `[{"name":"agent","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]},
		{"name":"reading","fact":true,"components":[{"name":"reading","fields":[{"name":"value","type":"double"},{"name":"unit","type":"string"}]}]}]`
	if code, out, stderr := cli(t, "world", "create", "lab", "--bucket", dir, "--tables", tables); code != 0 {
		t.Fatalf("world create: %d %s%s", code, out, stderr)
	}
	code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "lab", "--format", "csv", "SELECT * FROM reading_raw")
	if want := "entity_id,tick,reading_value,reading_unit,fact_producer,fact_external_id,fact_digest,fact_commit_id,commit_token,writer_epoch\n"; code != 0 || out != want {
		t.Errorf("the declared fact table before any fact: %d %q %s; want %q", code, out, stderr, want)
	}
	if code, out, stderr := cli(t, "ingest", "--bucket", dir, "--world", "lab", `{"producer":"s","external_id":"e1","table":"reading","components":{"reading":{"value":21.5,"unit":"C"}}}`); code != 0 || !strings.HasPrefix(out, `{"status":"original",`) {
		t.Fatalf("a fact into the declared table: %d %q %s", code, out, stderr)
	}
	if code, out, _ := cli(t, "ingest", "--bucket", dir, "--world", "lab", `{"producer":"s","external_id":"e2","table":"agent","components":{"pos":{"x":1}}}`); code == 0 || !strings.Contains(out, `no fact table \"agent\" (its fact tables: reading)`) {
		t.Errorf("a fact into an entity table: %d %q", code, out)
	}
	if code, out, _ := cli(t, "sql", "--bucket", dir, "--world", "lab", "--format", "csv", "SELECT table_name, external_id FROM worldfs_facts"); code != 0 || out != "table_name,external_id\nreading,e1\n" {
		t.Errorf("worldfs_facts: %d %q", code, out)
	}
	bad := `[{"name":"x","components":[{"name":"c","fields":[{"name":"v","type":"double"}]}]},{"name":"x","fact":true,"components":[{"name":"c","fields":[{"name":"v","type":"double"}]}]}]`
	if code, _, stderr := cli(t, "world", "create", "twice", "--bucket", dir, "--tables", bad); code == 0 || !strings.Contains(stderr, "table x is declared twice") {
		t.Errorf("a fact table named as an entity table: %d %s", code, stderr)
	}
}
