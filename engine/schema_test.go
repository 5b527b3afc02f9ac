package engine_test

import (
	"strings"
	"testing"

	"github.com/worldfs/worldfs/engine"
)

// An unknown column type is refused with every valid type listed, and the
// type meant when the name is another schema's (float64, bool, varchar).
func TestUnknownColumnTypeListsTheTypes(t *testing.T) {
	for typ, meant := range map[string]string{"float64": "double", "bool": "boolean", "VARCHAR": "string", "Int64": "int64", "decimal": ""} {
		_, err := engine.NewComponent("pos", engine.Field{Name: "x", Type: engine.Type(typ)})
		if err == nil {
			t.Fatalf("%s: accepted", typ)
		}
		msg := err.Error()
		if !strings.Contains(msg, `unknown column type "`+typ+`"`) {
			t.Errorf("%s: %v", typ, err)
		}
		for _, valid := range engine.Types {
			if !strings.Contains(msg, string(valid)) {
				t.Errorf("%s: %v does not name %s", typ, err, valid)
			}
		}
		if hint := `did you mean "` + meant + `"`; meant != "" && !strings.Contains(msg, hint) || meant == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("%s: %v, want a hint of %q", typ, err, meant)
		}
	}
	for _, valid := range engine.Types {
		if _, err := engine.NewComponent("pos", engine.Field{Name: "x", Type: valid}); err != nil {
			t.Errorf("%s: %v", valid, err)
		}
	}
}
