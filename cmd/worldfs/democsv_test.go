package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/internal/realpart"
)

// A world written by `worldfs demo` (writers with the default engine
// options: maintenance on, ticks pipelined) and served by `worldfs
// mount`: every tick's .csv, of the world and of its fork, reports at
// lookup the size a read then returns, and sizing them renders no CSV
// (each size comes from its fragment's footer, where a default writer
// records it, or from a compacted file's tick index).
func TestDemoCSVSizesAtLookup(t *testing.T) {
	realpart.FUSE(t, true)
	dir, mnt := t.TempDir(), t.TempDir()
	if code, out, stderr := cli(t, "demo", "--bucket", dir, "--ticks", "40", "--world", "w"); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, stderr)
	}
	first, unmount, done := startMount(t, dir, mnt)
	if !strings.Contains(first, "mounted at "+mnt) {
		t.Fatalf("mount printed %q", first)
	}
	defer func() {
		unmount()
		if code := <-done; code != 0 {
			t.Errorf("mount exited %d after Ctrl-C", code)
		}
	}()
	sizes := map[string]int64{}
	for _, world := range []string{"w", "w-fork"} {
		ticks := filepath.Join(mnt, world, "runs", "main", "ticks")
		entries, err := os.ReadDir(ticks)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files, err := os.ReadDir(filepath.Join(ticks, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if !strings.HasSuffix(f.Name(), ".csv") {
					continue
				}
				p := filepath.Join(ticks, e.Name(), f.Name())
				info, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				sizes[p] = info.Size()
			}
		}
	}
	if len(sizes) < 2*40 {
		t.Fatalf("%d .csv files in the ticks of w and its fork; the demo runs 90 and 41 ticks", len(sizes))
	}
	var st fs.StatsSnapshot
	data, err := os.ReadFile(filepath.Join(mnt, ".worldfs", "stats"))
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Rendered != 0 || st.CSVSizesRead == 0 {
		t.Errorf("sizing %d .csv files rendered %d and read %d sizes from fragments' footers; want none rendered", len(sizes), st.Rendered, st.CSVSizesRead)
	}
	for p, size := range sizes {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != size || size == 0 {
			t.Errorf("%s: st_size %d at lookup, a read returns %d bytes", p, size, len(data))
		}
	}
}
