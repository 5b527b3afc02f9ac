package index

import (
	"strings"
	"testing"
)

func TestParseFragmentPath(t *testing.T) {
	for name, want := range map[string]FragmentName{
		TickFragmentPath("w", "main", "t1", "abc"):       {Run: "main", Table: "t1", Token: "abc"},
		FragmentPath("w", "main", "t1", "abc", 3):        {Run: "main", Table: "t1", Token: "abc"},
		CompactedPath("w", "r2", "t1", "ff", ""):         {Run: "r2", Table: "t1", Token: "compacted-ff"},
		"data/w/main/t1/v0.2/4.parquet":                  {Run: "main", Table: "t1", Token: "v0.2"},
		"data/w/_lineage/0.parquet":                      {},
		"data/w/_tables/t1.json":                         {},
		"data/w/_x/t1/abc.parquet":                       {},
		"data/w/main/t1/abc.json":                        {},
		"data/w/main/t1/abc/0/1.parquet":                 {},
		"data/w/main/t1/.parquet":                        {},
		"data/w/main/t1/abc/.parquet":                    {},
		"data/w/Main/t1/abc.parquet":                     {},
		"data/v/main/t1/abc.parquet":                     {},
		"worlds/w/log/0000000000000001":                  {},
		"data/ww/main/t1/abc.parquet":                    {},
		TickFragmentPath("w", "main", "t1", "abc") + "/": {},
	} {
		got, ok := ParseFragmentPath("w", name)
		if ok != (want != FragmentName{}) || got != want {
			t.Errorf("ParseFragmentPath(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
}

// The bucket layout, pinned literally: the one test that spells the
// names. Every other test builds them with the functions of names.go, so
// a change of layout fails here, and only here, as a conscious act (a
// bucket written before must still read: docs/ARCHITECTURE.md, "The
// bucket layout").
func TestBucketLayoutIsPinned(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{DefaultRun, "main"},
		{LegacyToken, "v0.2"},
		{DirectoryPrefix, "directory/"},
		{MarkerName("w"), "worlds/w/marker.json"},
		{SlotName("w", 0x1f), "worlds/w/log/000000000000001f"},
		{CheckpointName("w", 0x400), "worlds/w/checkpoints/0000000000000400"},
		{ShardName("w", "ab12"), "worlds/w/state/ab12"},
		{ShardSummaryName("w", "ab12"), "worlds/w/state/ab12.sum"},
		{ShardTokenFilterName("w", "ab12"), "worlds/w/state/ab12.tok"},
		{CheckpointSummariesName("w", "cd34"), "worlds/w/state/cd34.sums"},
		{TickFragmentPath("w", "main", "t1", "tok"), "data/w/main/t1/tok.parquet"},
		{FragmentPath("w", "main", "t1", "tok", 2), "data/w/main/t1/tok/2.parquet"},
		{CompactedPath("w", "main", "t1", "d1", ""), "data/w/main/t1/compacted-d1/0.parquet"},
		{CompactedPath("w", "main", "t1", "d1", "0123456789abcdef"), "data/w/main/t1/compacted-d1-0123456789abcdef/0.parquet"},
		{TickIndexPath(CompactedPath("w", "main", "t1", "d1", "")), "data/w/main/t1/compacted-d1/0.ticks3"},
		{TickIndexPaths(CompactedPath("w", "main", "t1", "d1", ""))[1], "data/w/main/t1/compacted-d1/0.ticks2"},
		{TickIndexPaths(CompactedPath("w", "main", "t1", "d1", ""))[2], "data/w/main/t1/compacted-d1/0.ticks"},
		{LegacyPrefix("w", "main", "t1"), "data/w/main/t1/v0.2/"},
		{TableInfoPath("w", "t1"), "data/w/_tables/t1.json"},
		{LineagePath("w"), "data/w/_lineage/0.parquet"},
		{AssetPath("ab"), "assets/sha256/ab"},
		{IcebergPrefix("w", "main"), "export/iceberg/w/main"},
		{ExportRegistryPrefix("w"), "export/registry/w/"},
		{ExportRegistryName("w", "ab"), "export/registry/w/ab.json"},
		{IcebergTable(IcebergPrefix("w", "main"), "particle"), "export/iceberg/w/main/particle"},
		{IcebergMetadataName("L", 3), "L/metadata/v3.metadata.json"},
		{IcebergRefsName("L", 3, "ab"), "L/metadata/v3-ab.refs"},
		{IcebergManifestName("L", 0x2a), "L/metadata/000000000000002a-m0.avro"},
		{IcebergManifestListName("L", 0x2a), "L/metadata/snap-000000000000002a.avro"},
		{IcebergKeptName("L", "ab"), "L/data/keep-ab.parquet"},
		{IcebergCheckedName("L", "ab"), "L/data/checked-ab.parquet"},
		{IcebergStampsName("L", "ab"), "L/checks/ab.json"},
	} {
		if c.got != c.want {
			t.Errorf("bucket name %q, the layout says %q", c.got, c.want)
		}
	}
	// Each parser reads back what its builder wrote.
	if seq, err := ParseSlotName("w", SlotName("w", 0x1f)); err != nil || seq != 0x1f {
		t.Errorf("ParseSlotName(SlotName(0x1f)) = %d, %v", seq, err)
	}
	if seq, err := ParseCheckpointName("w", CheckpointName("w", 0x400)); err != nil || seq != 0x400 {
		t.Errorf("ParseCheckpointName(CheckpointName(0x400)) = %d, %v", seq, err)
	}
	if _, err := ParseCheckpointName("w", "worlds/w/checkpoints/x"); err == nil {
		t.Error("ParseCheckpointName took a name that is not a sequence")
	}
	if id, ok := ParseTableInfoPath("w", TableInfoPath("w", "t1")); !ok || id != "t1" {
		t.Errorf("ParseTableInfoPath(TableInfoPath(t1)) = %q, %v", id, ok)
	}
	if n, ok := ParseFragmentPath("w", CompactedPath("w", "main", "t1", "d1", "")); !ok || !IsCompactedToken(n.Token) {
		t.Errorf("ParseFragmentPath(CompactedPath) = %+v, %v: not a compacted file", n, ok)
	}
	if v, ok := ParseIcebergMetadataName("L", IcebergMetadataName("L", 12)); !ok || v != 12 || !strings.HasPrefix(IcebergMetadataName("L", 12), IcebergMetadataPrefix("L")) {
		t.Errorf("ParseIcebergMetadataName(IcebergMetadataName(12)) = %d, %v", v, ok)
	}
	for _, bad := range []string{"L/metadata/v0.metadata.json", "L/metadata/vx.metadata.json", "L/metadata/snap-1.avro", IcebergRefsName("L", 3, "ab")} {
		if _, ok := ParseIcebergMetadataName("L", bad); ok {
			t.Errorf("ParseIcebergMetadataName took %q", bad)
		}
	}
	for path, want := range map[string]string{
		CompactedPath("w", "main", "t1", "d1", "0123456789abcdef"):                "0123456789abcdef",
		TickIndexPath(CompactedPath("w", "main", "t1", "d1", "0123456789abcdef")): "0123456789abcdef",
		CompactedPath("w", "main", "t1", "d1", ""):                                "",
		"data/w/main/t1/compacted-d1-0123456789ABCDEF/0.parquet":                  "",
		"data/w/main/t1/compacted-d1-0123/0.parquet":                              "",
		TickFragmentPath("w", "main", "t1", "tok-0123456789abcdef"):               "",
	} {
		if got := CompactedIntentOf(path); got != want {
			t.Errorf("CompactedIntentOf(%s) = %q, want %q", path, got, want)
		}
	}
	if IsCompactedToken("tok") {
		t.Error("IsCompactedToken takes a commit token for a compacted file")
	}
	for _, name := range TickIndexPaths(CompactedPath("w", "main", "t1", "d1", "")) {
		if p, ok := TickIndexOf("w", name); !ok || p != CompactedPath("w", "main", "t1", "d1", "") {
			t.Errorf("TickIndexOf(%s) = %q, %v", name, p, ok)
		}
	}
}

// A new world may not take a name a mount's root holds a file of.
func TestReservedWorldIDs(t *testing.T) {
	b := memBucket()
	for _, id := range ReservedWorldIDs {
		if _, _, err := CreateWorld(ctxT(t), b, id, WorldCreate{}, "creator", Options{}); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("CreateWorld(%q): %v, want refused as reserved", id, err)
		}
	}
}
