package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// Facts and receipts go in through the world's ctl (exactly once: a resend
// answers the original receipt) and come out under <world>/facts/, equal to
// what worldfs sql shows; bad commands and conflicts map to errnos and
// commit nothing.
func TestCtlFacts(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "p", 3).Close()
	mt := testMount(t, b)
	fact := `{"op":"ingest","create_table":true,"producer":"sensor-1","external_id":"evt-9","table":"reading","components":{"reading":{"value":21.5,"unit":"C"}}}`
	a, errno := ctl(t, mt.path("p", "ctl"), fact)
	if errno != 0 {
		t.Fatalf("ingest: %+v", a)
	}
	var first engine.FactReceipt
	data, _ := json.Marshal(a.Result)
	if err := json.Unmarshal(data, &first); err != nil || first.Deduplicated || first.Tick != 3 {
		t.Fatalf("receipt %s", data)
	}
	a, errno = ctl(t, mt.path("p", "ctl"), fact)
	if data, _ := json.Marshal(a.Result); errno != 0 || !strings.Contains(string(data), `"deduplicated":true`) || !strings.Contains(string(data), first.CommitToken) {
		t.Fatalf("resend: %+v", a)
	}
	ev := `{"op":"evaluate","id":"eval-1","at":2,"contract":{"grader_id":"g","implementation_version":"1"},"outcomes":[{"criterion":"c","verdict":"pass","score":0.5}]}`
	if a, errno := ctl(t, mt.path("p", "ctl"), ev); errno != 0 || !strings.Contains(a.Error+mustJSON(a.Result), `"evaluation_id":"eval-1"`) {
		t.Fatalf("evaluate: %v %+v", errno, a)
	}

	// Errors: nothing committed.
	busy := `{"producer":"sensor-1","external_id":"busy","table":"reading","components":{"reading":{"value":1,"unit":"C"}}}`
	pending := func() {
		// A live claim on another id, held by a holder that is not this
		// mount.
		var d engine.FactDocument
		if err := engine.DecodeStrict([]byte(busy), &d); err != nil {
			t.Fatal(err)
		}
		f, err := d.Fact(ctxT(t), b, "p")
		if err != nil {
			t.Fatal(err)
		}
		digest, err := f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		c, err := index.Open(ctxT(t), b, "p", index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Commit(ctxT(t), index.Entry{Kind: index.KindClaimAcquire, Claim: &index.ClaimOp{
			Key: index.ClaimKey{Run: "main", Producer: "sensor-1", ExternalID: "busy"}, Digest: digest,
			CommitToken: "tok", Holder: "elsewhere", NowMs: 1, LeaseUntilMs: 1 << 50}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, cmd string
		want      syscall.Errno
		setup     func()
	}{
		{name: "conflict", cmd: strings.Replace(fact, "21.5", "22", 1), want: syscall.EEXIST},
		{name: "no producer", cmd: `{"op":"ingest","external_id":"x","table":"reading","components":{"reading":{"value":1,"unit":"C"}}}`, want: syscall.EINVAL},
		{name: "unknown field", cmd: `{"op":"ingest","producer":"p","external_id":"x","table":"reading","components":{"reading":{"value":1}},"colour":1}`, want: syscall.EINVAL},
		{name: "wrong type", cmd: `{"op":"ingest","producer":"p","external_id":"x","table":"reading","components":{"reading":{"value":"hot","unit":"C"}}}`, want: syscall.EINVAL},
		{name: "a table the world does not hold", cmd: `{"op":"ingest","producer":"p","external_id":"x","table":"readng","components":{"readng":{"value":1,"unit":"C"}}}`, want: syscall.EINVAL},
		{name: "reserved run", cmd: `{"op":"ingest","run":"_evaluations","producer":"p","external_id":"x","table":"reading","components":{"reading":{"value":1,"unit":"C"}}}`, want: syscall.EINVAL},
		{name: "evaluation without outcomes", cmd: `{"op":"evaluate","id":"e2","contract":{"grader_id":"g","implementation_version":"1"}}`, want: syscall.EINVAL},
		{name: "evaluation without contract", cmd: `{"op":"evaluate","id":"e2","outcomes":[{"verdict":"pass"}]}`, want: syscall.EINVAL},
		{name: "evaluation of another subject", cmd: strings.Replace(ev, `"at":2`, `"at":1`, 1), want: syscall.EEXIST},
		{name: "claim pending", cmd: `{"op":"ingest",` + busy[1:], want: syscall.EAGAIN, setup: pending},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			before := seq(t, b, "p")
			a, errno := ctl(t, mt.path("p", "ctl"), c.cmd)
			if errno != c.want || a.Error == "" {
				t.Errorf("errno %v, want %v; answer %+v", errno, c.want, a)
			}
			if strings.Contains(c.cmd, "readng") && !strings.Contains(a.Error, `no fact table "readng" (its fact tables: reading)`) {
				t.Errorf("a fact into a table the world does not hold: %q; want the tables it holds named", a.Error)
			}
			if got := seq(t, b, "p"); got != before {
				t.Errorf("the catalog moved from %d to %d", before, got)
			}
		})
	}

	// The facts files equal the SQL views.
	sdb := openViews(t, b, "p")
	if got := sorted(ls(t, mt.path("p", "facts"))); strings.Join(got, ",") != "main,receipts.csv,receipts.parquet" {
		t.Fatalf("facts/: %v", got)
	}
	if got := sorted(ls(t, mt.path("p", "facts", "main"))); strings.Join(got, ",") != "reading.csv,reading.parquet" {
		t.Fatalf("facts/main/: %v", got)
	}
	db := duck(t)
	want := rows(t, sdb, "SELECT [entity_id::VARCHAR, tick::VARCHAR, reading_value::VARCHAR, fact_external_id] FROM reading ORDER BY entity_id")
	got := rows(t, db, "SELECT [entity_id::VARCHAR, tick::VARCHAR, reading_value::VARCHAR, fact_external_id] FROM read_parquet("+lit(mt.path("p", "facts", "main", "reading.parquet"))+") ORDER BY entity_id")
	if len(want) != 1 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("facts file %v, views %v", got, want)
	}
	got = rows(t, db, "SELECT [evaluation_id, json_extract_string(outcomes, '$[0].verdict')] FROM read_parquet("+lit(mt.path("p", "facts", "receipts.parquet"))+")")
	if strings.Join(got, "|") != "[eval-1 pass]" {
		t.Fatalf("receipts file %v", got)
	}
	csv, err := os.ReadFile(mt.path("p", "facts", "main", "reading.csv"))
	if err != nil || !strings.Contains(string(csv), "evt-9") {
		t.Fatalf("reading.csv: %v %s", err, csv)
	}
	// A new fact shows at once (the ctl refreshes the snapshots).
	if a, errno := ctl(t, mt.path("p", "ctl"), strings.Replace(fact, "evt-9", "evt-10", 1)); errno != 0 {
		t.Fatalf("second fact: %+v", a)
	}
	if got := rows(t, db, "SELECT count(*)::VARCHAR FROM read_parquet("+lit(mt.path("p", "facts", "main", "reading.parquet"))+")"); strings.Join(got, "") != "2" {
		t.Fatalf("after a second fact: %v rows", got)
	}
}

// Facts are not archetypes: a writer the mount resumes after facts were
// ingested publishes ticks of the simulation's tables only.
func TestCtlResumeAfterFacts(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "p", 2).Close()
	mt := testMount(t, b)
	if a, errno := ctl(t, mt.path("p", "ctl"), `{"op":"ingest","create_table":true,"producer":"s","external_id":"e","table":"reading","components":{"reading":{"value":1}}}`); errno != 0 {
		t.Fatalf("ingest: %+v", a)
	}
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"resume","world":"p"}`); errno != 0 {
		t.Fatalf("resume: %+v", a)
	}
	if a, errno := ctl(t, mt.path("p", "ctl"), `{"op":"commit_tick","frames":{"particle":[]}}`); errno != 0 {
		t.Fatalf("commit: %+v", a)
	}
	s, _, err := index.Load(ctxT(t), b, "p")
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Tick("main", 3)
	if !ok || len(enginetest.Tables(t, tk)) != 3 {
		t.Fatalf("tick 3 publishes %d tables, want the 3 archetypes: %+v", len(enginetest.Tables(t, tk)), tk)
	}
}

func sorted(xs []string) []string {
	slices.Sort(xs)
	return xs
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// A fact table whose schemas give one column several types (value: double,
// string and int64; count: int32, int64 and float; flag: boolean and
// int32) is sized exactly at lookup like any facts/ file: ls -l derives
// its files in Go, each reports before its first open the bytes a read
// returns, and their rows and column types are what worldfs sql's
// <table>_raw shows (DuckDB's union of the schemas, each column of the
// widest type and each value cast to it: VARCHAR, FLOAT and INTEGER here).
func TestFactsOfTwoColumnTypesAreSizedAtLookup(t *testing.T) {
	ctx := ctxT(t)
	b := localBucket(t)
	w := particleWorld(t, b, "w", 2)
	schema := func(fields ...engine.Field) *engine.Table {
		c, err := engine.NewComponent("reading", fields...)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := engine.NewFactTable("reading", c)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	s1 := schema(engine.Field{Name: "value", Type: engine.Float64}, engine.Field{Name: "count", Type: engine.Int32}, engine.Field{Name: "flag", Type: engine.Bool})
	s2 := schema(engine.Field{Name: "value", Type: engine.String}, engine.Field{Name: "count", Type: engine.Int64}, engine.Field{Name: "flag", Type: engine.Int32})
	s3 := schema(engine.Field{Name: "value", Type: engine.Int64}, engine.Field{Name: "count", Type: engine.Float32})
	for _, f := range []engine.Fact{
		{ExternalID: "a", Table: s1, Values: engine.Values{"reading_value": 1.5, "reading_count": int32(7), "reading_flag": true}},
		{ExternalID: "b", Table: s1, Values: engine.Values{"reading_value": 1e16, "reading_count": int32(-1), "reading_flag": false}},
		{ExternalID: "c", Table: s2, Values: engine.Values{"reading_value": "high, \"very\"", "reading_count": int64(1) << 40, "reading_flag": int32(3)}},
		{ExternalID: "d", Table: s3, Values: engine.Values{"reading_value": int64(9007199254740993), "reading_count": float32(0.1)}},
	} {
		f.Producer = "sensor-1"
		if _, err := w.Ingest(ctx, f); err != nil {
			t.Fatal(err)
		}
	}

	mt := testMount(t, b)
	dir := mt.path("w", "facts", "main")
	sizes := map[string]int64{}
	for _, name := range ls(t, dir) {
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = info.Size()
	}
	if st := mountStats(t, mt); st.Opens != 0 || st.Gathered != 1 || st.Rendered != 1 {
		t.Errorf("ls -l of facts/main (%v): %d opens, %d files derived in Go, %d CSV renderings; want 0, 1 and 1", sizes, st.Opens, st.Gathered, st.Rendered)
	}
	for _, name := range []string{"reading.parquet", "reading.csv"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if size, ok := sizes[name]; !ok || size == 0 || size != int64(len(data)) {
			t.Errorf("%s: st_size %d at lookup (listed: %v), a read returns %d bytes", name, size, ok, len(data))
		}
	}

	views := openViews(t, b, "w")
	db := duck(t)
	types := rows(t, views, "SELECT column_name || ' ' || column_type FROM (DESCRIBE SELECT * FROM reading_raw)")
	for _, c := range []string{"reading_value VARCHAR", "reading_count FLOAT", "reading_flag INTEGER"} {
		if !slices.Contains(types, c) {
			t.Fatalf("the views type reading_raw %v; want %s among them", types, c)
		}
	}
	// The file's columns are the views', in the views' order.
	file := mt.path("w", "facts", "main", "reading")
	if got := rows(t, db, "SELECT column_name || ' ' || column_type FROM (DESCRIBE SELECT * FROM read_parquet("+lit(file+".parquet")+"))"); !slices.Equal(got, types) {
		t.Errorf("reading.parquet's columns %v; the views' %v", got, types)
	}
	// The CSV read with the views' types, in the views' order.
	var lits []string
	for _, ct := range types {
		name, typ, _ := strings.Cut(ct, " ")
		lits = append(lits, "'"+name+"': '"+typ+"'")
	}
	csvTypes := strings.Join(lits, ", ")
	cols := "entity_id, tick, commit_token, writer_epoch, fact_external_id, reading_value, reading_count::VARCHAR, reading_flag"
	want := rows(t, views, "SELECT "+cols+" FROM reading_raw ORDER BY entity_id DESC")
	if len(want) != 4 || !slices.ContainsFunc(want, func(r string) bool { return strings.Contains(r, "9007199254740993") }) {
		t.Fatalf("the views show %d facts (want 4, one an int64 as text): %v", len(want), want)
	}
	for _, src := range []string{"read_parquet(" + lit(file+".parquet") + ")",
		"read_csv(" + lit(file+".csv") + ", header = true, quote = '\"', escape = '\"', allow_quoted_nulls = false, columns = {" + csvTypes + "})"} {
		if got := rows(t, db, "SELECT "+cols+" FROM "+src); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", src, got, want)
		}
	}
}
