package maintenance_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A registration reads back with its world; one that does not decode,
// names no table, or lies under the name of another table is
// index.ErrCorrupt, and so is what collection keeps: it names the record
// and says what to do.
func TestExportRegistryDecodesOrRefuses(t *testing.T) {
	ctx := ctxT(t)
	b := mem.New(mem.Options{})
	reg := frame.ExportRegistration{Table: "export/iceberg/w/main/particle", Base: "file:///b/"}
	if _, err := b.Create(ctx, frame.ExportRegistrationName("w", reg.Table), reg.Encode()); err != nil {
		t.Fatal(err)
	}
	regs, err := frame.ReadExportRegistrations(ctx, b, "w")
	if err != nil || len(regs) != 1 || regs[0].Table != reg.Table || regs[0].World != "w" {
		t.Fatalf("registrations: %+v, %v", regs, err)
	}
	// Registered, never committed: nothing to keep.
	if refs, err := maintenance.ExportReferences(ctx, b, "w"); err != nil || len(refs) != 0 {
		t.Fatalf("references of an export never committed: %v, %v", refs, err)
	}
	other := frame.ExportRegistration{Table: "export/iceberg/w/main/emitter", Base: "file:///b/"}
	for _, bad := range [][]byte{[]byte("{"), []byte(`{"base":"file:///b/"}`), other.Encode()} {
		b := mem.New(mem.Options{})
		name := frame.ExportRegistrationName("w", reg.Table)
		if _, err := b.Create(ctx, name, bad); err != nil {
			t.Fatal(err)
		}
		if _, err := frame.ReadExportRegistrations(ctx, b, "w"); !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("registration %q: %v; want index.ErrCorrupt", bad, err)
		}
		_, err := maintenance.ExportReferences(ctx, b, "w")
		if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "collection deletes none") {
			t.Fatalf("what collection keeps, registration %q: %v; want index.ErrCorrupt naming %s", bad, err, name)
		}
	}
}
