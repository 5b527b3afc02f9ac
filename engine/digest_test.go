package engine_test

import (
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/frame"
)

// A fact's digest is stored in its claim and compared with every resend's,
// so it never changes between worldfs versions: these were computed by the
// first digest code, for components of every column type, of fact tables
// whose columns are in name order (every fact table before declared
// order). A program that declares such a table anew (its columns in the
// declared order, another table) and resends a fact to the world that
// holds it gets the same digest, deduplicated: the world's table is used.
func TestFactDigestIsStable(t *testing.T) {
	c, _ := engine.NewComponent("probe",
		engine.Field{Name: "f64", Type: engine.Float64}, engine.Field{Name: "f32", Type: engine.Float32},
		engine.Field{Name: "i64", Type: engine.Int64}, engine.Field{Name: "i32", Type: engine.Int32},
		engine.Field{Name: "ok", Type: engine.Bool}, engine.Field{Name: "name", Type: engine.String})
	table, err := frame.NewFactTable("probe", c)
	if err != nil {
		t.Fatal(err)
	}
	declared, err := engine.NewFactTable("probe", c)
	if err != nil || declared.ID == table.ID {
		t.Fatalf("the declared fact table: %v, id %s (by name %s)", err, declared.ID, table.ID)
	}
	sensor := reading("sensor-1", "evt-1", 21.5)
	var comps []engine.Component
	for _, c := range sensor.Table.Components {
		if c.Name != frame.FactComponent {
			comps = append(comps, c)
		}
	}
	sensorByName, err := frame.NewFactTable(sensor.Table.Name, comps...)
	if err != nil {
		t.Fatal(err)
	}
	old := sensor
	old.Table = sensorByName
	b, _ := local.Open(t.TempDir())
	simWorld(t, b, "w", 1).Close()
	svc, err := engine.OpenIngestionService(ctxT(t), b, "w", engine.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for _, tc := range []struct {
		fact engine.Fact
		want string
	}{
		{old, "sha256:3e7ea7b5fa8ff2cce3f61aa8f01bfa8a21bd852a6c3bb1eb7405b8e9be156763"},
		{engine.Fact{Producer: "p", ExternalID: "all", Table: table, Values: engine.Values{
			"probe_f64": -0.125, "probe_f32": float32(3.5), "probe_i64": int64(-7), "probe_i32": int32(42),
			"probe_ok": true, "probe_name": "a\x00b ü"}}, "sha256:c44a7a9015885defc98f171a5cb5692ef627bd3fa1aa8ee97d1ba900be750d07"},
		{engine.Fact{Producer: "p", ExternalID: "sparse", Table: table, Values: engine.Values{"probe_i64": int64(1)}}, "sha256:7fdec2012c0fe54abd147d9ea30e1bd274cdb1349cab948d006669d4e6c42386"},
	} {
		r, err := svc.Ingest(ctxT(t), tc.fact)
		if err != nil {
			t.Fatal(err)
		}
		if r.Digest != tc.want {
			t.Errorf("fact %s: digest %s, want %s", tc.fact.ExternalID, r.Digest, tc.want)
		}
	}
	for _, f := range []engine.Fact{sensor, {Producer: "p", ExternalID: "sparse", Table: declared, Values: engine.Values{"probe_i64": int64(1)}}} {
		r, err := svc.Ingest(ctxT(t), f)
		if err != nil || !r.Deduplicated {
			t.Errorf("fact %s resent through a table declared anew: %+v, %v; want it deduplicated", f.ExternalID, r, err)
		}
	}
}
