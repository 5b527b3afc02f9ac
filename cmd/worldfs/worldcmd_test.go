package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/realpart"
)

const tablesSpec = `[{"name":"particle","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]}]`

func specTables(t *testing.T) []*engine.Table {
	t.Helper()
	c, err := engine.NewComponent("pos", engine.Field{Name: "x", Type: engine.Float64})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := engine.NewTable("particle", c)
	if err != nil {
		t.Fatal(err)
	}
	return []*engine.Table{tb}
}

// publish resumes world with a writer of its own and publishes n ticks.
func publish(t *testing.T, dir, world string, n int) {
	t.Helper()
	ctx := context.Background()
	b, err := local.Open(dir)
	if err != nil {
		t.Error(err)
		return
	}
	w, err := engine.ResumeWorld(ctx, b, world, specTables(t), engine.Options{Holder: "test", Catalog: index.Options{NoCompactor: true}})
	if err != nil {
		t.Error(err)
		return
	}
	defer w.Close()
	for i := range n {
		if _, err := w.Spawn("particle", engine.Values{"pos_x": float64(i)}); err != nil {
			t.Error(err)
			return
		}
		if _, err := w.Step(ctx); err != nil {
			t.Error(err)
			return
		}
	}
}

// tree is every path under root with its size and modification time.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := info.Size()
		if d.IsDir() {
			size = 0
		}
		out = append(out, fmt.Sprintf("%s %v %d %d", p, info.Mode(), size, info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every command that only reads, run on a missing bucket or a missing
// world, exits 4 with a message naming what is missing and leaves the file
// system as it was: no bucket, no directory, no cache.
func TestReadOnlyCommandsOnWhatIsMissingChangeNothing(t *testing.T) {
	root := t.TempDir()
	home := keepHome(t)
	t.Chdir(root) // the default bucket, ./worldfs-data, is relative
	mnt := filepath.Join(root, "mnt")
	os.Mkdir(mnt, 0o755)
	existing := filepath.Join(root, "bucket")
	if code, out, stderr := cli(t, "world", "create", "--bucket", existing, "w1", "--tables", tablesSpec); code != 0 {
		t.Fatalf("world create: %d %s %s", code, out, stderr)
	}
	os.RemoveAll(filepath.Join(home, ".cache")) // made by create; nothing below may make it again
	readers := func(bucket, world string) [][]string {
		return [][]string{
			{"sql", "--bucket", bucket, "--world", world, "SELECT 1"},
			{"views", "--bucket", bucket, "--world", world},
			{"check", "--bucket", bucket, "--world", world},
			{"gc", "--dry-run", "--bucket", bucket, "--world", world},
			{"optimize", "--bucket", bucket, "--world", world},
			{"bench", "coldstart", "--bucket", bucket, "--world", world},
			{"log", "--bucket", bucket, "--world", world},
			{"watch", "--bucket", bucket, "--world", world},
			{"world", "status", "--bucket", bucket, world},
			{"world", "resume", "--bucket", bucket, world},
			{"world", "mode", "--bucket", bucket, world, "cleanup_only"},
			{"ingest", "--bucket", bucket, "--world", world, `{"producer":"p","external_id":"x","table":"t","components":{}}`},
		}
	}
	var cases [][]string
	for _, bucket := range []string{filepath.Join(root, "nonexist"), "./worldfs-data"} {
		cases = append(cases, readers(bucket, "w1")...)
		cases = append(cases,
			[]string{"worlds", "--bucket", bucket},
			[]string{"bucket", "stat", "--bucket", bucket, "x"},
			[]string{"bucket", "ls", "--bucket", bucket},
			[]string{"bucket", "cat", "--bucket", bucket, "x"},
			[]string{"bucket", "rm", "--bucket", bucket, "--generation", "1", "x"},
			[]string{"mount", "--bucket", bucket, mnt},
		)
	}
	cases = append(cases, readers(existing, "nope")...)
	cases = append(cases, []string{"bucket", "stat", "--bucket", existing, "no/such/object"})
	cases = append(cases, []string{"mount", existing, filepath.Join(root, "no-mountpoint")})
	before := tree(t, root)
	for _, args := range cases {
		code, _, stderr := cli(t, args...)
		if code != exitNotFound || !strings.Contains(stderr, "does not exist") {
			t.Errorf("%q: exit %d, stderr %q; want %d and what does not exist", args, code, stderr, exitNotFound)
		}
		if after := tree(t, root); !slices.Equal(before, after) {
			t.Fatalf("%q changed the file system:\nbefore %q\nafter  %q", args, before, after)
		}
	}
}

// The world commands round-trip: create, fork, resume, status --set and
// mode, each answer (--json) is the library's view of the world, and
// worlds lists the same.
func TestWorldCommandsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	world := func(args ...string) worldInfo {
		t.Helper()
		code, out, stderr := cli(t, append(args, "--bucket", dir, "--json")...)
		var w worldInfo
		if code != 0 || json.Unmarshal([]byte(out), &w) != nil {
			t.Fatalf("%q: exit %d\n%s\n%s", args, code, out, stderr)
		}
		lib, err := loadWorldInfo(context.Background(), mustOpen(t, dir), w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(w, lib) {
			t.Fatalf("%q answered %+v; the library reads %+v", args, w, lib)
		}
		return w
	}
	w := world("world", "create", "w1", "--tables", tablesSpec)
	if w.Epoch != 1 || w.Status != index.StatusActive || w.WriterMode != index.ModeResumable || len(w.Runs) != 0 {
		t.Fatalf("created %+v", w)
	}
	publish(t, dir, "w1", 3) // epoch 2
	if code, _, stderr := cli(t, "world", "create", "w1", "--bucket", dir, "--tables", tablesSpec); code != exitConflict || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second create: exit %d %s", code, stderr)
	}
	f := world("world", "fork", "w2", "--parent", "w1", "--tick", "1")
	if f.Parent != "w1" || f.ForkRun != "main" || *f.ForkTick != 1 || f.Epoch != 1 {
		t.Fatalf("forked %+v", f)
	}
	if r := world("world", "resume", "w1"); r.Epoch != 3 || len(r.Runs) != 1 || r.Runs[0].Head != 2 || r.Runs[0].Published != 3 {
		t.Fatalf("resumed %+v", r)
	}
	if s := world("world", "status", "w1", "--set", "archived"); s.Status != index.StatusArchived {
		t.Fatalf("archived %+v", s)
	}
	if s := world("world", "status", "w1", "--set", "active"); s.Status != index.StatusActive {
		t.Fatalf("reactivated %+v", s)
	}
	if m := world("world", "mode", "w1", "cleanup_only"); m.WriterMode != index.ModeCleanupOnly || m.Status != index.StatusActive {
		t.Fatalf("mode %+v", m)
	}
	if code, _, stderr := cli(t, "world", "resume", "w1", "--bucket", dir); code == 0 || !strings.Contains(stderr, index.ModeCleanupOnly) {
		t.Fatalf("resume of a cleanup_only world: exit %d %s", code, stderr)
	}
	code, out, _ := cli(t, "worlds", "--bucket", dir, "--json")
	var ws []worldInfo
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil || len(ws) != 2 {
		t.Fatalf("worlds: %d %s", code, out)
	}
	for _, w := range ws {
		if lib, _ := loadWorldInfo(context.Background(), mustOpen(t, dir), w.ID); !sameJSON(w, lib) {
			t.Errorf("worlds lists %+v; the library reads %+v", w, lib)
		}
	}
	if code, out, _ := cli(t, "worlds", "--bucket", dir); code != 0 || !regexp.MustCompile(`\nw2 +w1 main@1 +- +1 +active +resumable +-\n`).MatchString(out) {
		t.Errorf("worlds table: %d\n%s", code, out)
	}
}

func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}

func mustOpen(t *testing.T, dir string) *local.Bucket {
	t.Helper()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// feedSeqs is every change of world, as the library's feed reads it.
func feedSeqs(t *testing.T, dir, world string) []logRecord {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_, tip, err := logBounds(ctx, mustOpen(t, dir), world)
	if err != nil {
		t.Fatal(err)
	}
	var out []logRecord
	for c, err := range index.Changes(ctx, mustOpen(t, dir), world, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, newLogRecord(c, true))
		if c.Seq == tip {
			break
		}
	}
	return out
}

// watch prints every commit of a concurrent writer once, in order; killed
// and restarted with --from, it goes on with no gap and no repeat. A
// cursor whose slots were collected exits 6.
func TestWatchFollowsAndResumes(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "world", "create", "w", "--bucket", dir, "--tables", tablesSpec); code != 0 {
		t.Fatal(stderr)
	}
	const ticks = 40
	written := make(chan struct{})
	go func() { defer close(written); publish(t, dir, "w", ticks) }()

	// watch runs until it has printed a line with seq >= until, then is
	// interrupted; it returns the lines and the exit status.
	watch := func(from, until uint64) ([]logRecord, int) {
		ctx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		pr, pw := io.Pipe()
		done := make(chan int)
		go func() {
			code := run(ctx, []string{"watch", "--bucket", dir, "--world", "w", "--from", fmt.Sprint(from), "--poll", "1ms"}, pw, io.Discard)
			pw.Close()
			done <- code
		}()
		var got []logRecord
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r logRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("watch printed %q: %v", sc.Text(), err)
			}
			got = append(got, r)
			if r.Seq >= until {
				interrupt()
				break
			}
		}
		go io.Copy(io.Discard, pr) // what it prints while stopping
		return got, <-done
	}
	first, code := watch(1, 12) // killed while the writer is publishing
	if code != exitInterrupted {
		t.Fatalf("interrupted watch exited %d, want %d", code, exitInterrupted)
	}
	<-written
	lib := feedSeqs(t, dir, "w")
	rest, _ := watch(first[len(first)-1].Seq+1, lib[len(lib)-1].Seq)
	got := append(first, rest...)
	if len(got) != len(lib) {
		t.Fatalf("watch printed %d commits across the restart, the log holds %d", len(got), len(lib))
	}
	ticksSeen := 0
	for i := range lib {
		if !sameJSON(got[i], lib[i]) {
			t.Fatalf("commit %d: watch printed %+v, the feed holds %+v", i, got[i], lib[i])
		}
		if got[i].Kind == string(index.KindTickPublish) {
			if *got[i].Tick != int64(ticksSeen) {
				t.Fatalf("tick %d printed where tick %d comes next", *got[i].Tick, ticksSeen)
			}
			ticksSeen++
		}
	}
	if ticksSeen != ticks {
		t.Fatalf("watch printed %d tick publishes, want %d", ticksSeen, ticks)
	}

	// log --json is the same history, and --limit N the newest N.
	code, out, _ := cli(t, "log", "--bucket", dir, "--world", "w", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(lib) {
		t.Fatalf("log: exit %d, %d lines, want %d", code, len(lines), len(lib))
	}
	for i, l := range lines {
		var r logRecord
		if json.Unmarshal([]byte(l), &r) != nil || !sameJSON(r, lib[i]) {
			t.Fatalf("log line %d: %s, the feed holds %+v", i, l, lib[i])
		}
	}
	code, out, _ = cli(t, "log", "--bucket", dir, "--world", "w", "--limit", "3")
	if rows := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(rows) != 4 || !strings.HasPrefix(rows[3], fmt.Sprint(lib[len(lib)-1].Seq)+" ") {
		t.Fatalf("log --limit 3: exit %d\n%s", code, out)
	}

	// The first slot collected: a cursor at 1 is past the retention.
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(index.SlotName("w", 1)))); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cli(t, "watch", "--bucket", dir, "--world", "w", "--from", "1"); code != exitResync || !strings.Contains(stderr, "past slot retention") {
		t.Fatalf("watch past the retention: exit %d %s", code, stderr)
	}
}

func TestVersionJSON(t *testing.T) {
	code, out, _ := cli(t, "version", "--json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Go != runtime.Version() || !strings.HasPrefix(v.DuckDB, "v1.") {
		t.Fatalf("version: %d %s", code, out)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"10GiB": 10 << 30, "512MiB": 512 << 20, "2GB": 2e9, "4096": 4096, "1.5KiB": 1536} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-1GiB", "10XB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) took it", in)
		}
	}
	if code, _, stderr := cli(t, "views", "--cache-size", "lots", "--world", "w"); code != exitUsage || !strings.Contains(stderr, `"lots" is not a size`) {
		t.Errorf("--cache-size lots: exit %d %s", code, stderr)
	}
}

// The mount command takes --bucket, refuses a regular file, a missing
// directory and a live worldfs mount as its mountpoint; what the world
// commands did, the mount shows, and a status set through the mount's ctl
// is what world status reads.
func TestMountAgreesWithWorldCommands(t *testing.T) {
	realpart.FUSE(t, true)
	dir, mnt := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"world", "create", "w1", "--tables", tablesSpec},
		{"world", "fork", "w2", "--parent", "w1", "--tick", "0"},
	} {
		if args[1] == "fork" {
			publish(t, dir, "w1", 1)
		}
		if code, _, stderr := cli(t, append(args, "--bucket", dir)...); code != 0 {
			t.Fatalf("%q: %s", args, stderr)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if code, _, stderr := cli(t, "mount", "--bucket", dir, file); code != exitFailed || !strings.Contains(stderr, "is a regular file, not a directory") {
		t.Fatalf("mount on a file: exit %d %s", code, stderr)
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
	// A second mount onto the live one is refused; were it not, it would
	// serve until stopped: stop it and fail.
	second, stop, secondDone := startMount(t, dir, mnt)
	stop()
	if code := <-secondDone; code != exitFailed || second != "" {
		t.Fatalf("second mount onto a live one: exit %d, printed %q", code, second)
	}
	if code, _, stderr := cli(t, "mount", dir, mnt); code != exitFailed || !strings.Contains(stderr, "a worldfs mount is already live there") {
		t.Fatalf("second mount onto a live one: exit %d %s", code, stderr)
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "w1") || !slices.Contains(names, "w2") {
		t.Fatalf("the mount lists %v", names)
	}
	fd, err := os.OpenFile(filepath.Join(mnt, "ctl"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if _, err := fd.Write([]byte(`{"op":"status","world":"w1","writer_mode":"cleanup_only"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := fd.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"ok":true`) {
		t.Fatalf("ctl status: %q %v", buf[:n], err)
	}
	code, out, _ := cli(t, "world", "status", "w1", "--bucket", dir, "--json")
	var w worldInfo
	if code != 0 || json.Unmarshal([]byte(out), &w) != nil || w.WriterMode != index.ModeCleanupOnly {
		t.Fatalf("world status after the mount's ctl: %d %s", code, out)
	}
	// world.json says what world status says.
	data, err := os.ReadFile(filepath.Join(mnt, "w1", "world.json"))
	var raw map[string]json.RawMessage
	if err != nil || json.Unmarshal(data, &raw) != nil {
		t.Fatalf("world.json: %v %s", err, data)
	}
	delete(raw, "runs") // world.json keys runs by name, with inherited heads
	var doc worldInfo
	if b, _ := json.Marshal(raw); json.Unmarshal(b, &doc) != nil {
		t.Fatalf("world.json: %s", data)
	}
	doc.Runs = w.Runs
	if !sameJSON(doc, w) {
		t.Fatalf("world.json reads %s; world status %s", data, out)
	}
}

// startMount runs worldfs mount in the background and returns the first
// line it printed ("" if it printed none before exiting), a function that
// interrupts it, and its exit status.
func startMount(t *testing.T, bucket, mnt string) (string, func(), chan int) {
	t.Helper()
	ctx, interrupt := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"mount", "--bucket", bucket, mnt}, pw, io.Discard)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	first := ""
	if sc.Scan() {
		first = sc.Text()
	}
	go io.Copy(io.Discard, pr)
	return first, interrupt, done
}

// Table and csv print STRUCT, LIST and MAP columns as DuckDB's VARCHAR
// form does, JSON as its text; json prints them all as JSON.
func TestSQLPrintsNestedColumnsAsDuckDBDoes(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "world", "create", "w", "--bucket", dir, "--tables", tablesSpec); code != 0 {
		t.Fatal(stderr)
	}
	publish(t, dir, "w", 1)
	q := `SELECT {'grader_id': 'g', 'seed': 1} AS s, [1, 2] AS l, MAP {'k': 2} AS m, '{"a":[1]}'::JSON AS j`
	for _, format := range []string{"table", "csv"} {
		code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "w", "--format", format, q)
		if format == "csv" {
			rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(rows) != 2 {
				t.Fatalf("csv: %q %v", out, err)
			}
			out = strings.Join(rows[1], " ")
		}
		if code != 0 || !strings.Contains(out, `{'grader_id': g, 'seed': 1}`) || !strings.Contains(out, `[1, 2]`) || !strings.Contains(out, `{k=2}`) || !strings.Contains(out, `{"a":[1]}`) {
			t.Errorf("--format %s: exit %d\n%s\n%s", format, code, out, stderr)
		}
	}
	code, out, stderr := cli(t, "sql", "--bucket", dir, "--world", "w", "--format", "json", q)
	var recs []map[string]any
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 1 {
		t.Fatalf("--format json: exit %d %v\n%s\n%s", code, err, out, stderr)
	}
	got, _ := json.Marshal(recs[0])
	if want := `{"j":{"a":[1]},"l":[1,2],"m":{"k":2},"s":{"grader_id":"g","seed":1}}`; string(got) != want {
		t.Errorf("--format json: %s, want %s", got, want)
	}
}

// world create with a column type of another schema's names the valid
// types and the one meant, and makes no bucket.
func TestWorldCreateNamesTheColumnTypes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	spec := strings.Replace(tablesSpec, `"double"`, `"float64"`, 1)
	code, _, stderr := cli(t, "world", "create", "w", "--bucket", dir, "--tables", spec)
	if code == 0 || !strings.Contains(stderr, `unknown column type "float64" (did you mean "double"?): a column is one of double, float, int64, int32, boolean, string`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused create made %s (%v)", dir, err)
	}
}

// worldfs log's table shows what it knows of every entry: a fence's time
// (its slot's, as it records none), the epoch it took (counted along the
// log, or from the catalog state when the log is read from the middle)
// and its holder; a status's value; a tick's number.
func TestLogShowsWhatEachEntryHolds(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := cli(t, "world", "create", "w", "--bucket", dir, "--tables", tablesSpec); code != 0 {
		t.Fatal(stderr)
	}
	publish(t, dir, "w", 3) // each publish resumes: a fence, then its ticks
	publish(t, dir, "w", 2)
	if code, _, stderr := cli(t, "world", "status", "w", "--bucket", dir, "--set", "archived"); code != 0 {
		t.Fatal(stderr)
	}
	code, out, _ := cli(t, "log", "--bucket", dir, "--world", "w")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "SEQ  TIME") {
		t.Fatalf("log: exit %d\n%s", code, out)
	}
	var fences, fenceSeqs []string // their epochs and sequences
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if f[1] == "-" {
			t.Errorf("a row without its time: %s", l)
		}
		switch f[2] {
		case "fence.acquire":
			if !strings.Contains(l, " holder ") {
				t.Errorf("a fence without its holder: %s", l)
			}
			fences, fenceSeqs = append(fences, f[len(f)-1]), append(fenceSeqs, f[0])
		case "world.status":
			if !strings.Contains(l, " status archived ") {
				t.Errorf("a status without its value: %s", l)
			}
		case "tick.publish":
			if f[len(f)-1] != fences[len(fences)-1] {
				t.Errorf("a tick published at epoch %s after the fence of epoch %s: %s", f[len(f)-1], fences[len(fences)-1], l)
			}
		}
	}
	if !slices.Equal(fences, []string{"1", "2", "3"}) {
		t.Fatalf("the fences' epochs: %v, want 1, 2, 3\n%s", fences, out)
	}
	// Read from a fence on, its epoch comes from the catalog: the epoch
	// now, less the fences since.
	for i, seq := range fenceSeqs[1:] {
		code, out, _ = cli(t, "log", "--bucket", dir, "--world", "w", "--since", seq, "--limit", "1")
		if rows := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(rows) != 2 || !strings.HasSuffix(rows[1], " "+fences[i+1]) || !strings.Contains(rows[1], "fence.acquire") {
			t.Fatalf("log --since %s --limit 1: exit %d\n%s\nwant epoch %s", seq, code, out, fences[i+1])
		}
	}
}

// world create's --tables, wrong, says where (the file, a line and a
// column) and what was expected there, in one line, and creates nothing:
// a trailing comma, a file named without its @, an object where the
// array goes, a key misspelt, a number for a name, JSON cut short.
func TestTablesJSONErrorsSayWhereAndWhat(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	comma := write("tables.json", "[\n  {\"name\": \"agent\", \"components\": [\n    {\"name\": \"pos\", \"fields\": [{\"name\": \"x\", \"type\": \"double\"},]}\n  ]}\n]\n")
	object := write("object.json", `{"tables": [{"name": "agent", "components": []}]}`)
	misspelt := write("misspelt.json", "[{\"name\": \"a\",\n  \"components\": [{\"name\": \"p\", \"feilds\": []}]}]")
	number := write("number.json", `[{"name": 5}]`)
	short := write("short.json", `[{"name": "a"`)
	for _, c := range []struct{ tables, says string }{
		{"@" + comma, "--tables @" + comma + ", line 3, column 63: a comma before a closing bracket (JSON allows none after the last element)"},
		{comma, "--tables " + comma + ": that is a file's name; to read the tables from it, write --tables @" + comma},
		{"agents", `--tables takes the tables as a JSON array ([{"name": "agent", "components": [{"name": "pos", "fields": [{"name": "x", "type": "double"}]}]}]), or @FILE to read them from a file; "agents" is neither`},
		{"@" + object, "--tables @" + object + `, line 1, column 1: the tables are a JSON array ([{"name": "agent", "components": [{"name": "pos", "fields": [{"name": "x", "type": "double"}]}]}]); this is an object; its "tables" is the array to give`},
		{"@" + misspelt, "--tables @" + misspelt + `, line 2, column 32: a component has no key "feilds"; did you mean "fields"? A component has "fields", "name"`},
		{"@" + number, "--tables @" + number + `, line 1, column 11: the "name" of a table is a string, not the number 5`},
		{"@" + short, "--tables @" + short + ", line 1, column 14: the JSON ends before it is complete (a bracket or a brace left open?)"},
		{"@" + filepath.Join(work, "none.json"), "--tables @" + filepath.Join(work, "none.json") + ": open "},
	} {
		code, _, stderr := cli(t, "world", "create", "lab", "--bucket", dir, "--tables", c.tables)
		if code != exitUsage || !strings.Contains(stderr, c.says) || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "(see 'worldfs world create --help')") {
			t.Errorf("--tables %s: exit %d, %q; want 2 and one line saying %q", c.tables, code, stderr, c.says)
		}
	}
	if _, err := os.Stat(dir + "/worlds"); !os.IsNotExist(err) {
		t.Fatalf("a refused create wrote the bucket: %v", err)
	}
}

// log shows what an intent is for, who holds it and until when, and who
// closed it.
func TestLogShowsIntents(t *testing.T) {
	open := index.Entry{Kind: index.KindIntentOpen, Intent: &index.IntentOp{ID: "00000000000000aa", Holder: "h1",
		What: "compaction of run main", NowMs: 1000, LeaseUntilMs: 3_600_000}}
	r := newLogRecord(index.Change{Seq: 7, Entry: open}, false)
	if d := logDetail(r, open); d != "intent 00000000000000aa: compaction of run main, held by h1 until 1970-01-01T01:00:00Z" || r.Time == "" {
		t.Fatalf("intent.open: time %q, detail %q", r.Time, d)
	}
	closed := index.Entry{Kind: index.KindIntentClose, Intent: &index.IntentOp{ID: "00000000000000aa", Holder: "collector/x", NowMs: 5000}}
	if d := logDetail(newLogRecord(index.Change{Seq: 8, Entry: closed}, false), closed); d != "intent 00000000000000aa, closed by collector/x" {
		t.Fatalf("intent.close: detail %q", d)
	}
}
