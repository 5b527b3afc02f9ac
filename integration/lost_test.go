package integration

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/maintenance"
)

// A compacted file deleted by hand is EIO for the ticks whose rows it
// holds, and for nothing else: their files are still listed and sized
// (from the tick index), but a read of one (ticks/, tables/, its CSV) is
// EIO; the other ticks of the table, the other tables of the same ticks
// and the listings read as before. Mutation: fs.Errno mapping an absent
// file (os.ErrNotExist) to ENOENT fails the EIO checks.
func TestMountAnswersEIOOnlyForTheTicksOfAMissingFile(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 150)
	want := map[string][]byte{}
	spared := func(mt *mounted) []string {
		return []string{
			mt.path("w", "runs", "main", "ticks", "70", "particle.parquet"),
			mt.path("w", "runs", "main", "ticks", "140", "particle.csv"),
			mt.path("w", "runs", "main", "ticks", "10", "emitter.parquet"),
			mt.path("w", "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", 100)),
		}
	}
	if res, err := maintenance.Compact(ctxT(t), b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	{
		mt := testMount(t, b)
		for i, p := range spared(mt) {
			data, err := os.ReadFile(p)
			if err != nil || len(data) == 0 {
				t.Fatalf("%s: %d bytes, %v", p, len(data), err)
			}
			want[fmt.Sprint(i)] = data
		}
	}
	lost := fragmentOf(t, b, 10)
	if lost.Span == nil || lost.Span.Contains(70) || lost.Span.Contains(100) {
		t.Fatalf("tick 10's particle file %s (span %v) is not a compacted file apart from ticks 70 and 100", lost.Path, lost.Span)
	}
	p, _ := b.Path(lost.Path)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}

	mt := testMount(t, b)
	for _, n := range []int64{10, lost.Span.To} {
		tick := mt.path("w", "runs", "main", "ticks", fmt.Sprint(n))
		if info, err := os.Stat(tick + "/particle.parquet"); err != nil || info.Size() == 0 {
			t.Fatalf("tick %d's particle.parquet, its rows lost: stat %v; want its size, from the tick index", n, err)
		}
		for _, f := range []string{tick + "/particle.parquet", tick + "/particle.csv", mt.path("w", "runs", "main", "tables", "particle", fmt.Sprintf("%012d.parquet", n))} {
			if data, err := os.ReadFile(f); !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s, its rows lost: %d bytes, %v; want EIO", f, len(data), err)
			}
		}
	}
	for i, f := range spared(mt) {
		if data, err := os.ReadFile(f); err != nil || string(data) != string(want[fmt.Sprint(i)]) {
			t.Fatalf("%s: %d bytes, %v; want the %d bytes it read before", f, len(data), err, len(want[fmt.Sprint(i)]))
		}
	}
	if names := ls(t, mt.path("w", "runs", "main", "tables", "particle")); len(names) != 151 || !slices.Contains(names, "000000000010.parquet") {
		t.Fatalf("tables/particle lists %d files; want the 151 ticks, the lost ones too", len(names))
	}
}
