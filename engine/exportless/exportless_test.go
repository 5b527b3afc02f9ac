// Package exportless_test is a program on the engine that does not link
// the Iceberg exporter (package export/iceberg): the README's "Program in
// Go", with background maintenance. What collection keeps for an export
// is data in the bucket (maintenance/exportrefs.go), so such a program
// keeps it too; the test checks its own binary for the exporter's code.
package exportless_test

import (
	"context"
	"debug/elf"
	"debug/gosym"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/race"
	"github.com/worldfs/worldfs/internal/realpart"
	"github.com/worldfs/worldfs/maintenance"
)

// A world exported by `worldfs export iceberg` (another process), then
// continued by this program with background collection at a retention
// of a second until collection ran past the compactions that replaced
// every exported file: the export reads back (with iceberg-go) with the
// rows it had, its files kept by the export's reference lists alone (the
// catalog names none of them). With a damaged registry record, the
// background collection deletes nothing and World.Maintenance says why;
// once the record is whole again, collection deletes what it held back.
func TestBackgroundCollectionKeepsAnExportItDoesNotLink(t *testing.T) {
	linksNoExporter(t)
	bin := worldfsBinary(t)
	ctx := enginetest.Context(t)
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	exported := int64(300)
	if race.Enabled {
		exported = 100 // what the detector checks is the collection beside the writer, not the history's length
	}
	enginetest.World(t, b, "w", exported).Close()
	cmd := exec.Command(bin, "export", "iceberg", "--bucket", dir, "--world", "w", "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("worldfs export iceberg: %v\n%s", err, stderrOf(err))
	}
	var res struct {
		Tables []struct {
			Table, Metadata string
			Rows            int64
		}
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Tables) == 0 {
		t.Fatalf("worldfs export iceberg printed %q: %v", out, err)
	}
	fsys := icebergio.LocalFS{}
	before := map[string][]string{}
	var files []string // the exported data files
	for _, tr := range res.Tables {
		before[tr.Table] = scanRows(t, fsys, tr.Metadata)
		if int64(len(before[tr.Table])) != tr.Rows {
			t.Fatalf("table %s: the export holds %d rows, iceberg-go reads %d", tr.Table, tr.Rows, len(before[tr.Table]))
		}
		files = append(files, dataFiles(t, fsys, tr.Metadata, "file://"+dir+"/")...)
	}
	unchanged := func(when string) {
		t.Helper()
		for _, tr := range res.Tables {
			if got := scanRows(t, fsys, tr.Metadata); !slices.Equal(got, before[tr.Table]) {
				t.Fatalf("%s: table %s reads %d rows, the export held %d", when, tr.Table, len(got), len(before[tr.Table]))
			}
		}
	}

	opts := enginetest.Quiet
	opts.NoMaintenance = false
	opts.Compaction = maintenance.CompactOptions{Recent: 8, Windows: []int64{64}}
	opts.Collection = maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true, Every: 1}
	w, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tick := exported
	step := func() {
		t.Helper()
		if tick += 8; tick > 100_000 {
			t.Fatal("the world reached tick 100,000 before what the test waits for happened")
		}
		if err := enginetest.Drive(ctx, w, tick); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func() {
		t.Helper()
		if _, err := w.Maintenance(); err != nil {
			t.Fatalf("background maintenance at tick %d: %v", tick, err)
		}
	}
	// Until compaction replaced every exported file (the catalog names
	// none of them), then a second past that, then two collection passes
	// that deleted something: the second began after the first ended,
	// past the retention of the rewrites that replaced the exported files.
	for len(named(t, w, files)) > 0 {
		step()
		healthy()
	}
	replaced := time.Now()
	for time.Since(replaced) <= time.Second {
		step()
	}
	for range 2 {
		for c := w.Collected(); w.Collected() == c; {
			step()
			healthy()
		}
	}
	for _, f := range files {
		if _, err := b.Stat(ctx, f); err != nil {
			t.Fatalf("background collection deleted %s, which the export names: %v", f, err)
		}
	}
	unchanged(fmt.Sprintf("continued to tick %d with background collection", tick))

	// A damaged registry record: collection deletes nothing, and says why.
	regs, err := bucket.Collect(b.List(ctx, index.ExportRegistryPrefix("w"), ""))
	if err != nil || len(regs) == 0 {
		t.Fatalf("the export registry: %v, %v", regs, err)
	}
	reg := regs[0].Name
	good, _, err := b.Get(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	buckettest.Replace(t, b, reg, []byte("{"))
	damaged, _ := w.Maintenance()
	var failure error
	for failure == nil {
		step()
		var r maintenance.CompactResult
		if r, failure = w.Maintenance(); failure == nil && r.Windows >= damaged.Windows+8 {
			t.Fatalf("background maintenance compacted %d windows since the registry record was damaged and reports no failure", r.Windows-damaged.Windows)
		}
	}
	if !errors.Is(failure, index.ErrCorrupt) || !strings.Contains(failure.Error(), reg) || !strings.Contains(failure.Error(), "collection deletes none of the world's data") {
		t.Fatalf("background maintenance with a damaged registry record: %v; want a failure naming %s", failure, reg)
	}
	deleted := w.Collected()
	res0, _ := w.Maintenance()
	for runs := res0.Windows; ; {
		step()
		r, err := w.Maintenance()
		if err == nil {
			t.Fatalf("background maintenance at tick %d, the registry record still damaged: no failure", tick)
		}
		if r.Windows >= runs+3 {
			break
		}
	}
	if n := w.Collected(); n != deleted {
		t.Fatalf("background collection deleted %d objects with a damaged registry record", n-deleted)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	buckettest.Replace(t, b, reg, good)
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	gc, err := maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{Retention: time.Second, UnsafeRetention: true})
	if err != nil || gc.ByKind[maintenance.KindReplaced] == 0 {
		t.Fatalf("collection with the registry whole again: %+v, %v; want the replaced files it held back deleted", gc, err)
	}
	unchanged("after collection")
	t.Logf("continued to tick %d; background collection deleted %d objects, then %d once the registry was whole", tick, deleted, gc.Deleted)
}

// linksNoExporter fails the test if its binary holds a function of
// package export/iceberg (or of any package under export/), or none of
// maintenance.Collect: the functions of its pclntab (which a test binary
// keeps, stripped of its symbol table).
func linksNoExporter(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		t.Fatalf("%s has no .gopclntab or .text section", exe)
	}
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatal(err)
	}
	maint := false
	for _, fn := range tab.Funcs {
		if strings.HasPrefix(fn.Name, "github.com/worldfs/worldfs/export/") {
			t.Fatalf("this test binary links %s: it must be a program that does not link the exporter", fn.Name)
		}
		maint = maint || fn.Name == "github.com/worldfs/worldfs/maintenance.Collect"
	}
	if !maint {
		t.Fatal("no function maintenance.Collect in this test binary: the check sees nothing")
	}
}

// worldfsBinary builds the worldfs command into the test's temporary
// directory.
func worldfsBinary(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			realpart.Missing(t, "go", "the test builds the worldfs command: "+err.Error())
		}
	}
	mod, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "worldfs")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/worldfs")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building worldfs: %v\n%s", err, out)
	}
	return bin
}

func stderrOf(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

// named returns those of files that the world's catalog names.
func named(t *testing.T, w *engine.World, files []string) []string {
	t.Helper()
	s, err := w.Catalog().Exact(enginetest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	if err := s.Fragments("", func(r index.FragmentRef) bool {
		all[r.Path] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(slices.Clone(files), func(f string) bool { return !all[f] })
}

// open opens the exported table whose metadata is at URI metadata.
func open(t *testing.T, fsys icebergio.IO, metadata string) *table.Table {
	t.Helper()
	tbl, err := table.NewFromLocation(enginetest.Context(t), table.Identifier{"worldfs", "t"}, metadata,
		func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
	if err != nil {
		t.Fatalf("iceberg-go cannot open %s: %v", metadata, err)
	}
	return tbl
}

// dataFiles returns the bucket objects (URIs under base) the current
// snapshot of the table at metadata reads.
func dataFiles(t *testing.T, fsys icebergio.IO, metadata, base string) []string {
	t.Helper()
	tasks, err := open(t, fsys, metadata).Scan().PlanFiles(enginetest.Context(t))
	if err != nil {
		t.Fatalf("iceberg-go cannot plan %s: %v", metadata, err)
	}
	var out []string
	for _, task := range tasks {
		name, ok := strings.CutPrefix(task.File.FilePath(), base)
		if !ok {
			t.Fatalf("%s names %s, not in the bucket %s", metadata, task.File.FilePath(), base)
		}
		out = append(out, name)
	}
	return out
}

// scanRows reads the current snapshot of the table at metadata with
// iceberg-go's own scan, one line per row, sorted.
func scanRows(t *testing.T, fsys icebergio.IO, metadata string) []string {
	t.Helper()
	ctx := enginetest.Context(t)
	at, err := open(t, fsys, metadata).Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("iceberg-go cannot scan %s: %v", metadata, err)
	}
	defer at.Release()
	var out []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			var sb strings.Builder
			for c, col := range rec.Columns() {
				fmt.Fprintf(&sb, "%s=%v ", rec.ColumnName(c), value(col, r))
			}
			out = append(out, sb.String())
		}
	}
	slices.Sort(out)
	return out
}

func value(col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	return col.GetOneForMarshal(i)
}
