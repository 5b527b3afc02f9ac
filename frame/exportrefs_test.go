package frame_test

import (
	"crypto/sha256"
	"errors"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A reference list reads back as written, names sorted and unique; a
// flipped bit anywhere, a truncation or bytes appended are
// index.ErrCorrupt, never a shorter list.
func TestExportRefsDecodeOrRefuse(t *testing.T) {
	r := &frame.ExportRefs{Table: "export/iceberg/w/main/particle", Version: 7, Metadata: sha256.Sum256([]byte("v7")),
		Objects: []string{"data/w/main/t1/b.parquet", "data/w/main/t1/a.parquet", "data/w/main/t2/compacted-x/0.parquet", "data/w/main/t1/a.parquet"}}
	data := r.Encode()
	got, err := frame.DecodeExportRefs(data)
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
			if _, err := frame.DecodeExportRefs(bad); !errors.Is(err, index.ErrCorrupt) {
				t.Fatalf("bit %d of byte %d flipped: %v; want index.ErrCorrupt", bit, i, err)
			}
		}
	}
	for _, bad := range [][]byte{data[:len(data)-1], data[:len(data)/2], nil, append(slices.Clone(data), 0)} {
		if _, err := frame.DecodeExportRefs(bad); !errors.Is(err, index.ErrCorrupt) {
			t.Fatalf("%d of %d bytes: %v; want index.ErrCorrupt", len(bad), len(data), err)
		}
	}
}
