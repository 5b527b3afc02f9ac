package engine_test

import (
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
)

// A fact's digest is stored in its claim and compared with every resend's,
// so it never changes between worldfs versions: these were computed by the
// first digest code, for components of every column type.
func TestFactDigestIsStable(t *testing.T) {
	c, _ := engine.NewComponent("probe",
		engine.Field{Name: "f64", Type: engine.Float64}, engine.Field{Name: "f32", Type: engine.Float32},
		engine.Field{Name: "i64", Type: engine.Int64}, engine.Field{Name: "i32", Type: engine.Int32},
		engine.Field{Name: "ok", Type: engine.Bool}, engine.Field{Name: "name", Type: engine.String})
	table, err := engine.NewFactTable("probe", c)
	if err != nil {
		t.Fatal(err)
	}
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
		{reading("sensor-1", "evt-1", 21.5), "sha256:3e7ea7b5fa8ff2cce3f61aa8f01bfa8a21bd852a6c3bb1eb7405b8e9be156763"},
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
}
