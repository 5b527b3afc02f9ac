package engine_test

import (
	"testing"

	"github.com/worldfs/worldfs/engine"
)

// BenchmarkInsert measures Frame.Append of rows as Go values (the path
// resume and fork take for every visible row).
func BenchmarkInsert(b *testing.B) {
	c, _ := engine.NewComponent("p", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64},
		engine.Field{Name: "n", Type: engine.Int64}, engine.Field{Name: "s", Type: engine.String})
	tb, _ := engine.NewTable("a", c)
	v := engine.Values{"p_x": 1.5, "p_y": 2.5, "p_n": int64(7), "p_s": "s"}
	b.ReportAllocs()
	for b.Loop() {
		f := engine.NewFrame(tb)
		for e := range int64(1000) {
			if err := f.Append(e, v); err != nil {
				b.Fatal(err)
			}
		}
	}
}
