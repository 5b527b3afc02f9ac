package maintenance_test

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A reference list reads back as written, names sorted and unique; a
// flipped bit anywhere, a truncation or bytes appended are
// index.ErrCorrupt, never a shorter list.
func TestExportRefsDecodeOrRefuse(t *testing.T) {
	r := &maintenance.ExportRefs{Table: "export/iceberg/w/main/particle", Version: 7, Metadata: sha256.Sum256([]byte("v7")),
		Objects: []string{"data/w/main/t1/b.parquet", "data/w/main/t1/a.parquet", "data/w/main/t2/compacted-x/0.parquet", "data/w/main/t1/a.parquet"}}
	data := r.Encode()
	got, err := maintenance.DecodeExportRefs(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"data/w/main/t1/a.parquet", "data/w/main/t1/b.parquet", "data/w/main/t2/compacted-x/0.parquet"}
	if !slices.Equal(got.Objects, want) || !got.Of(r.Table, 7, r.Metadata) || got.Of(r.Table, 8, r.Metadata) {
		t.Fatalf("decoded %+v", got)
	}
	for i := range data {
		for bit := range 8 {
			bad := slices.Clone(data)
			bad[i] ^= 1 << bit
			if _, err := maintenance.DecodeExportRefs(bad); !errors.Is(err, index.ErrCorrupt) {
				t.Fatalf("bit %d of byte %d flipped: %v; want index.ErrCorrupt", bit, i, err)
			}
		}
	}
	for _, bad := range [][]byte{data[:len(data)-1], data[:len(data)/2], nil, append(slices.Clone(data), 0)} {
		if _, err := maintenance.DecodeExportRefs(bad); !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("%d of %d bytes: %v; want index.ErrCorrupt", len(bad), len(data), err)
		}
	}
}

// A registration reads back with its world; one that does not decode,
// names no table, or lies under the name of another table is
// index.ErrCorrupt, and so is what collection keeps: it names the record
// and says what to do.
func TestExportRegistryDecodesOrRefuses(t *testing.T) {
	ctx := ctxT(t)
	b := mem.New(mem.Options{})
	reg := maintenance.ExportRegistration{Table: "export/iceberg/w/main/particle", Base: "file:///b/"}
	if _, err := b.Create(ctx, maintenance.ExportRegistrationName("w", reg.Table), reg.Encode()); err != nil {
		t.Fatal(err)
	}
	regs, err := maintenance.ReadExportRegistrations(ctx, b, "w")
	if err != nil || len(regs) != 1 || regs[0].Table != reg.Table || regs[0].World != "w" {
		t.Fatalf("registrations: %+v, %v", regs, err)
	}
	// Registered, never committed: nothing to keep.
	if refs, err := maintenance.ExportReferences(ctx, b, "w"); err != nil || len(refs) != 0 {
		t.Fatalf("references of an export never committed: %v, %v", refs, err)
	}
	other := maintenance.ExportRegistration{Table: "export/iceberg/w/main/emitter", Base: "file:///b/"}
	for _, bad := range [][]byte{[]byte("{"), []byte(`{"base":"file:///b/"}`), other.Encode()} {
		b := mem.New(mem.Options{})
		name := maintenance.ExportRegistrationName("w", reg.Table)
		if _, err := b.Create(ctx, name, bad); err != nil {
			t.Fatal(err)
		}
		if _, err := maintenance.ReadExportRegistrations(ctx, b, "w"); !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("registration %q: %v; want index.ErrCorrupt", bad, err)
		}
		_, err := maintenance.ExportReferences(ctx, b, "w")
		if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "collection deletes none") {
			t.Fatalf("what collection keeps, registration %q: %v; want index.ErrCorrupt naming %s", bad, err, name)
		}
	}
}
