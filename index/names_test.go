package index

import "testing"

func TestParseFragmentPath(t *testing.T) {
	for name, want := range map[string]FragmentName{
		TickFragmentPath("w", "main", "t1", "abc"):       {Run: "main", Table: "t1", Token: "abc"},
		FragmentPath("w", "main", "t1", "abc", 3):        {Run: "main", Table: "t1", Token: "abc"},
		CompactedPath("w", "r2", "t1", "ff"):             {Run: "r2", Table: "t1", Token: "compacted-ff"},
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
