package frame

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// agentComponents are an archetype declared with its components and their
// fields out of name order: state before pos, energy before age.
func agentComponents(t *testing.T) []Component {
	t.Helper()
	st, err := NewComponent("state", Field{Name: "energy", Type: Float32}, Field{Name: "age", Type: Int32},
		Field{Name: "alive", Type: Bool}, Field{Name: "kind", Type: String})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := NewComponent("pos", Field{Name: "x", Type: Float64}, Field{Name: "y", Type: Float64})
	if err != nil {
		t.Fatal(err)
	}
	return []Component{st, pos}
}

// fileColumns are the column names of a Parquet file, in the file's order,
// and its CSV rendering's header.
func fileColumns(t *testing.T, data []byte) (parquetCols []string, csvHeader string) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range f.Schema().Columns() {
		parquetCols = append(parquetCols, strings.Join(path, "."))
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	header, _ := bufio.NewReader(&csv).ReadString('\n')
	return parquetCols, strings.TrimSuffix(header, "\n")
}

// A table declared anew keeps the declared order: entity_id and tick,
// each component's fields in the order given, components in the order
// given, then the commit columns; in its columns, its fragment's Parquet
// schema and its CSV, and through its description.
func TestDeclaredTablesKeepTheDeclaredOrder(t *testing.T) {
	tb, err := NewDeclaredTable("agent", agentComponents(t)...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"entity_id", "tick", "state_energy", "state_age", "state_alive", "state_kind", "pos_x", "pos_y", "commit_token", "writer_epoch"}
	var got []string
	for _, c := range tb.Columns {
		got = append(got, c.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	f := NewFrame(tb)
	if err := f.Append(7, Values{"state_energy": float32(1.5), "state_age": int32(3), "state_alive": true, "state_kind": "grazer", "pos_x": 0.5, "pos_y": 2.0}); err != nil {
		t.Fatal(err)
	}
	data, err := EncodeFragment(f, Stamp{Tick: 4, CommitToken: "tok", WriterEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	pcols, header := fileColumns(t, data)
	if !slices.Equal(pcols, want) || header != strings.Join(want, ",") {
		t.Errorf("the fragment's columns %v, its CSV header %q; want %v", pcols, header, want)
	}
	back, err := DecodeFragment(tb, data, nil)
	if err != nil || back.Len() != 1 || back.Float32("state_energy")[0] != 1.5 || back.String("state_kind")[0] != "grazer" || back.Float64("pos_y")[0] != 2 {
		t.Errorf("decoded %v, %v", back, err)
	}
	// The description records the format, and rebuilds the same table.
	js, _ := json.Marshal(tb.Info())
	var info TableInfo
	if err := json.Unmarshal(js, &info); err != nil || info.Format != FormatDeclared {
		t.Fatalf("description %s: %v", js, err)
	}
	again, err := TableFromInfo(info)
	if err != nil || again.ID != tb.ID || !slices.Equal(again.Columns, tb.Columns) {
		t.Fatalf("rebuilt from its description: %v, %v; want %s %v", again, err, tb.ID, tb.Columns)
	}
	// The same columns by name are another table: schema is identity.
	byName, err := NewTable("agent", agentComponents(t)...)
	if err != nil || byName.ID == tb.ID || !SameColumnSet(byName.Columns, tb.Columns) {
		t.Errorf("by name: %v %v; want another id with the same columns", byName, err)
	}
	// A fact table too, FactMeta after the components.
	ft, err := NewDeclaredFactTable("reading", agentComponents(t)[1])
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, c := range ft.Columns {
		got = append(got, c.Name)
	}
	if want := []string{"entity_id", "tick", "pos_x", "pos_y", "fact_producer", "fact_external_id", "fact_digest", "fact_commit_id", "commit_token", "writer_epoch"}; !slices.Equal(got, want) {
		t.Errorf("fact table columns %v, want %v", got, want)
	}
}

// oldAgent is the description a worldfs before declared order stored for
// the agent archetype (agentComponents), byte for byte.
const oldAgent = `{"id":"t38181e1f5de72f84","name":"agent","columns":[{"name":"commit_token","type":"string"},{"name":"entity_id","type":"int64"},{"name":"pos_x","type":"double","component":"pos","field":"x"},{"name":"pos_y","type":"double","component":"pos","field":"y"},{"name":"state_age","type":"int32","component":"state","field":"age"},{"name":"state_alive","type":"boolean","component":"state","field":"alive"},{"name":"state_energy","type":"float","component":"state","field":"energy"},{"name":"state_kind","type":"string","component":"state","field":"kind"},{"name":"tick","type":"int64"},{"name":"writer_epoch","type":"int64"}]}`

// Tables described before declared order read as they always did: their
// description rebuilds the same id, the columns by name, and files whose
// columns are by name; NewTable still makes that very table, and
// describes it in the same bytes.
func TestTablesByNameKeepTheirIDsAndOrder(t *testing.T) {
	var info TableInfo
	if err := json.Unmarshal([]byte(oldAgent), &info); err != nil {
		t.Fatal(err)
	}
	tb, err := TableFromInfo(info)
	if err != nil {
		t.Fatalf("an old description: %v", err)
	}
	if tb.Format != FormatByName || tb.ID != "t38181e1f5de72f84" {
		t.Errorf("rebuilt as format %d id %s", tb.Format, tb.ID)
	}
	again, err := NewTable("agent", agentComponents(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(again.Info()); string(js) != oldAgent {
		t.Errorf("NewTable describes the agent as\n%s\nwant the old bytes\n%s", js, oldAgent)
	}
	f := NewFrame(tb)
	if err := f.Append(7, Values{"state_energy": float32(1.5), "state_age": int32(3), "state_alive": true, "state_kind": "grazer", "pos_x": 0.5, "pos_y": 2.0}); err != nil {
		t.Fatal(err)
	}
	data, err := EncodeFragment(f, Stamp{Tick: 4, CommitToken: "tok", WriterEpoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"commit_token", "entity_id", "pos_x", "pos_y", "state_age", "state_alive", "state_energy", "state_kind", "tick", "writer_epoch"}
	if pcols, header := fileColumns(t, data); !slices.Equal(pcols, want) || header != strings.Join(want, ",") {
		t.Errorf("an old table's fragment: columns %v, CSV header %q; want %v", pcols, header, want)
	}
	// A description of a format this worldfs does not know is refused.
	info.Format = 3
	if _, err := TableFromInfo(info); err == nil {
		t.Error("a description of format 3 was read")
	}
}
