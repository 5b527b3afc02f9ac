package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/internal/realpart"
)

// quickLine is one command line of README.md's Quick start.
type quickLine struct {
	at   int    // its line number in README.md
	sub  string // the ### heading it is under
	text string
}

// quickStart reads README.md's "## Quick start" section.
func quickStart(t *testing.T) (lines []quickLine, files map[string]string, code []codeBlock, section string) {
	t.Helper()
	return readmeSection(t, "## Quick start")
}

// codeBlock is a fenced block of README.md in a language other than sh.
type codeBlock struct {
	lang, text string
}

// readmeSection reads the section of README.md under heading (to the next
// "## "): the command lines of its ```sh blocks, in order, the files its
// ```json NAME blocks give, its other fenced blocks, and the section's
// text.
func readmeSection(t *testing.T, heading string) (lines []quickLine, files map[string]string, code []codeBlock, section string) {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(string(data), "\n")
	start := slices.Index(all, heading)
	if start < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	end := len(all)
	for i := start + 1; i < len(all); i++ {
		if strings.HasPrefix(all[i], "## ") {
			end = i
			break
		}
	}
	files = map[string]string{}
	sub, fence, file := "", "", ""
	for i := start + 1; i < end; i++ {
		l := all[i]
		switch {
		case fence == "" && strings.HasPrefix(l, "```"):
			info := strings.Fields(strings.TrimPrefix(l, "```"))
			switch {
			case len(info) == 0:
				fence = "other"
			case info[0] == "sh":
				fence = "sh"
			case len(info) == 2 && info[0] == "json":
				fence, file = "file", info[1]
			default:
				fence = "code"
				code = append(code, codeBlock{lang: info[0]})
			}
		case fence != "" && strings.HasPrefix(l, "```"):
			fence = ""
		case fence == "" && strings.HasPrefix(l, "### "):
			sub = strings.TrimPrefix(l, "### ")
		case fence == "file":
			files[file] += l + "\n"
		case fence == "code":
			code[len(code)-1].text += l + "\n"
		case fence == "sh" && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			for strings.HasSuffix(l, `\`) && i+1 < end {
				i++
				l = strings.TrimSuffix(l, `\`) + "\n" + all[i]
			}
			lines = append(lines, quickLine{at: i + 1, sub: sub, text: l})
		}
	}
	if fence != "" {
		t.Fatalf("README.md's %q ends inside a fenced block", heading)
	}
	return lines, files, code, strings.Join(all[start:end], "\n")
}

var (
	quoted     = regexp.MustCompile(`'[^']*'|"[^"]*"`)
	comment    = regexp.MustCompile(`(^|\s)#.*$`)
	assignment = regexp.MustCompile(`^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=`)
	redirected = regexp.MustCompile(`\d?>`)
	worldName  = regexp.MustCompile(`particles-[0-9]+`)
)

// bare is a command line without its quoted strings and its comment: what
// decides whether it runs in the background and whether it prints.
func bare(line string) string {
	return strings.TrimSpace(comment.ReplaceAllString(quoted.ReplaceAllString(line, "''"), ""))
}

// quiet reports whether a command line prints nothing by design: an
// assignment, mkdir, cd, worldfs umount, or a command whose output is
// redirected.
func quiet(line string) bool {
	b := bare(line)
	first, _, _ := strings.Cut(b, " ")
	return assignment.MatchString(b) || first == "mkdir" || first == "cd" || strings.HasPrefix(b, "worldfs umount ") ||
		redirected.MatchString(b)
}

// background reports whether a command line ends with a lone &.
func background(line string) bool {
	b := bare(line)
	return strings.HasSuffix(b, "&") && !strings.HasSuffix(b, "&&")
}

// mounted reports whether dir is a mountpoint now.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// job is a command line the Quick start runs in the background (a mount):
// its output is followed until it ends.
type job struct {
	line   quickLine
	pgid   int
	stderr string        // the file its stderr goes to
	first  chan struct{} // closed at its first line of output
	done   chan struct{} // closed when its output ends (it exited)
	out    bytes.Buffer  // written before done is closed
}

// The README's Quick start runs as written on the demo's bucket: every
// command line of its sh blocks, in order, each in bash (-o pipefail) in
// the directory where `worldfs demo --bucket ./worldfs-data` (make demo)
// ran, with the assignments above it, and `worldfs` on PATH (this test
// binary, which runs main when called by that name). It must exit 0, and
// print something unless it is an assignment, mkdir, cd, worldfs umount or
// redirected; what quickClaims says some lines print, they print. Three
// things are substituted: the world name the README shows by the
// demo's (which must have the same shape), /mnt/worlds by a temporary
// directory, and gs://my-bucket by an in-process fake GCS server
// (STORAGE_EMULATOR_HOST). A line ending in & runs in the background, and
// the next line waits for its first line of output (a mount's "mounted
// at"); when the section ends, nothing is left mounted and every
// background command has exited. The ```json NAME blocks are written to
// NAME first (the tables.json example); every column type is named.
func TestQuickStart(t *testing.T) {
	needMount(t)
	bash := tool(t, "bash")
	lines, files, _, section := quickStart(t)
	if len(lines) < 10 {
		t.Fatalf("README.md's Quick start has %d command lines; the parse went wrong", len(lines))
	}
	for _, ty := range engine.Types {
		if !strings.Contains(section, "`"+string(ty)+"`") {
			t.Errorf("the Quick start does not name the column type `%s`", ty)
		}
	}
	if files["tables.json"] == "" {
		t.Error("the Quick start gives no tables.json (a ```json tables.json block)")
	}

	gcstest.Start(t, "my-bucket")
	env, work, world := readmeDemo(t)
	mnt := filepath.Join(realTempDir(t), "mnt", "worlds")
	shown := worldName.FindAllString(section, -1)
	if len(shown) == 0 {
		t.Fatal("the Quick start names no world of the demo's shape (particles-<unix ns>)")
	}
	for _, s := range shown {
		if s != shown[0] {
			t.Fatalf("the Quick start names two demo worlds, %s and %s", shown[0], s)
		}
	}
	if len(shown[0]) != len(world) {
		t.Fatalf("the Quick start's world %s is not of the shape of the demo's %s", shown[0], world)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var jobs []*job
	t.Cleanup(func() {
		if mounted(t, mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		for _, j := range jobs {
			syscall.Kill(-j.pgid, syscall.SIGKILL)
			<-j.done
		}
	})
	var assigns []string
	claimed := map[int]bool{}
	for _, l := range lines {
		if strings.Contains(strings.ReplaceAll(l.text, "/mnt/worlds", ""), "/mnt/") {
			t.Fatalf("README.md:%d (%s): %s\nmounts elsewhere than /mnt/worlds, the mountpoint this test maps to a temporary directory", l.at, l.sub, l.text)
		}
		text := strings.ReplaceAll(l.text, shown[0], world)
		text = strings.ReplaceAll(text, "/mnt/worlds", mnt)
		script := strings.Join(append(slices.Clone(assigns), text), "\n")
		if assignment.MatchString(bare(text)) {
			assigns = append(assigns, text)
		}
		if background(text) {
			cmd := exec.Command(bash, "-o", "pipefail", "-c", script)
			cmd.Dir, cmd.Env = work, env
			jobs = append(jobs, startJob(t, cmd, l))
			continue
		}
		// A line that never ends (a mount without &) fails the test
		// instead of hanging it: its process group is killed.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bash, "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = work, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 128+int(syscall.SIGPIPE) {
			// Under pipefail, the writer of a pipe whose reader stopped
			// early (ls | head -3) dies of SIGPIPE, as in any shell: not
			// a failure. Any other status of any command in it is.
			err = nil
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("still running after 2m (a command that stays in the foreground, like a mount without &?): %w", err)
		}
		cancel()
		if err != nil {
			t.Fatalf("README.md:%d (%s): %s\n%v\n%s%s", l.at, l.sub, l.text, err, stdout.Bytes(), stderr.Bytes())
		}
		t.Logf("README.md:%d: %s\n%s%s", l.at, l.text, stdout.Bytes(), stderr.Bytes())
		if !quiet(text) && strings.TrimSpace(stdout.String()) == "" {
			t.Fatalf("README.md:%d (%s): %s\nprinted nothing\n%s", l.at, l.sub, l.text, stderr.Bytes())
		}
		for i, c := range quickClaims {
			if !strings.Contains(l.text, c.line) {
				continue
			}
			claimed[i] = true
			if !c.out.Match(stdout.Bytes()) {
				t.Errorf("README.md:%d (%s): %s\nprinted %q; want %s", l.at, l.sub, l.text, stdout.Bytes(), c.out)
			}
		}
	}
	for i, c := range quickClaims {
		if !claimed[i] {
			t.Errorf("the Quick start has no line with %q any more: show what it showed, or change quickClaims", c.line)
		}
	}
	if mounted(t, mnt) {
		t.Fatalf("the Quick start leaves %s mounted", mnt)
	}
	for _, j := range jobs {
		<-j.done
		if !strings.Contains(j.out.String(), "unmounted") {
			stderr, _ := os.ReadFile(j.stderr)
			t.Errorf("README.md:%d (%s): %s\nended without unmounting: %s%s", j.line.at, j.line.sub, j.line.text, j.out.Bytes(), stderr)
		}
	}
}

// needMount skips a test that mounts where there is no root and /dev/fuse,
// except under CI=true, where it fails.
func needMount(t *testing.T) {
	t.Helper()
	realpart.FUSE(t, true) // the README's commands mount: root and /dev/fuse
}

// realTempDir is t.TempDir() through its symlinks, as /proc/self/mountinfo
// names a mountpoint under it.
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// readmeDemo makes what the README's commands start from: the environment
// they run in (worldfs on PATH, a link to this test binary; HOME under the
// test's temporary directory; no WORLDFS_ variable), and the directory
// where `worldfs demo --bucket ./worldfs-data` ran (make demo, as the
// Makefile says), with the name of the world it made.
func readmeDemo(t *testing.T) (env []string, work, world string) {
	t.Helper()
	keepHome(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	work = t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "worldfs")); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WORLDFS_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// make demo's command, read from the Makefile: what the README's
	// commands run after.
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	bucket := regexp.MustCompile(`(?m)^BUCKET\s*\?=\s*(\S+)$`).FindSubmatch(mk)
	if bucket == nil || !regexp.MustCompile(`(?m)^demo:\n\t\$\(GO\) run \./cmd/worldfs demo --bucket \$\(BUCKET\)$`).Match(mk) {
		t.Fatal("the Makefile's demo target is not $(GO) run ./cmd/worldfs demo --bucket $(BUCKET) with BUCKET ?= DIR: what the README's commands start from changed")
	}
	if string(bucket[1]) != "./worldfs-data" {
		t.Fatalf("make demo's bucket is %s; the README's commands read ./worldfs-data", bucket[1])
	}
	demo := exec.Command(filepath.Join(bin, "worldfs"), "demo", "--bucket", string(bucket[1]))
	demo.Dir, demo.Env = work, env
	out, err := demo.Output()
	m := regexp.MustCompile(`world (\S+) created`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("worldfs demo: %v\n%s", err, out)
	}
	return env, work, string(m[1])
}

// quickClaims: what some Quick start lines say they print (the demo's
// fork differs from its parent at tick 170: its emitters and particles
// updated; the world at a time is one tick's rows, the history up to it a
// hundred ticks'; a refused ctl write's reason in ctl.errors; 12-digit
// tick names, head a link to one, a tick's files); each line must be
// there.
var quickClaims = []struct {
	line string
	out  *regexp.Regexp
}{
	{`--at-time "$T"`, regexp.MustCompile(`(?m)\A\S.*\n1\s+1[0-9]{2}\s+[1-9][0-9]*\s*\n\z`)},
	{`--until "$T"`, regexp.MustCompile(`(?m)\A\S.*\n[0-9]{2,3}\s+1[0-9]{2}\s+[0-9]{4,}\s*\n\z`)},
	{"|| cat /mnt/worlds/lab/ctl.errors", regexp.MustCompile(`^[0-9TZ:.-]+ pid [0-9]+ commit_tick EINVAL: .*column pos_y \(double\) is missing`)},
	{"worldfs diff $W@170 $W-fork@170", regexp.MustCompile(`(?m)^emitter +0 +0 +[1-9][0-9]* +[0-9]+ *\n(?s:.*)^particle +[0-9]+ +[0-9]+ +[1-9][0-9]* +[0-9]+ *$`)},
	{"/runs/main/ticks | tail -3", regexp.MustCompile(`^([0-9]{12}\n){3}$`)},
	{"readlink /mnt/worlds/$W/runs/main/head", regexp.MustCompile(`^ticks/[0-9]{12}\n$`)},
	{"ls /mnt/worlds/$W/runs/main/ticks/42/", regexp.MustCompile(`(?s)manifest\.json.*particle\.csv\nparticle\.parquet\n`)},
}

// startJob starts cmd, a command line ending in &, in a process group of
// its own, and returns once the command it started printed its first line
// (the test fails if it exits first, or prints nothing for 2 minutes).
func startJob(t *testing.T, cmd *exec.Cmd, l quickLine) *job {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	j := &job{line: l, first: make(chan struct{}), done: make(chan struct{})}
	j.stderr = filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(j.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	cmd.Stdout, cmd.Stderr = w, ef
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	j.pgid = cmd.Process.Pid
	go func() {
		defer close(j.done)
		defer r.Close()
		br := bufio.NewReader(r)
		line, err := br.ReadString('\n')
		j.out.WriteString(line)
		if err == nil {
			close(j.first)
			io.Copy(&j.out, br)
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("README.md:%d (%s): %s\n%v", l.at, l.sub, l.text, err)
	}
	select {
	case <-j.first:
	case <-j.done:
		stderr, _ := os.ReadFile(j.stderr)
		t.Fatalf("README.md:%d (%s): %s\nexited before printing a line: %s", l.at, l.sub, l.text, stderr)
	case <-time.After(2 * time.Minute): // a failure found, not an order of events
		syscall.Kill(-j.pgid, syscall.SIGKILL)
		<-j.done
		stderr, _ := os.ReadFile(j.stderr)
		t.Fatalf("README.md:%d (%s): %s\nprinted no line in 2m (a background command is followed once it prints, as a mount does once mounted): %s", l.at, l.sub, l.text, stderr)
	}
	return j
}

// The Quick start's Go code compiles against the packages it names: each
// ```go block becomes the body of a function with a ctx, its packages
// imported (found by name in this module) and every name it declares used,
// and go build type-checks it through an overlay, as a package beside the
// module's own that exists only for the build.
func TestQuickStartGoCompiles(t *testing.T) {
	_, _, blocks, _ := quickStart(t)
	var code []string
	for _, b := range blocks {
		if b.lang == "go" {
			code = append(code, b.text)
		}
	}
	if len(code) == 0 {
		t.Fatal("the Quick start has no ```go block")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = tool(t, "go")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]string{} // package name -> import path, for this module's packages
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		if gos, _ := filepath.Glob(filepath.Join(p, "*.go")); len(gos) > 0 {
			rel, _ := filepath.Rel(root, p)
			name := filepath.Base(p)
			if _, twice := pkgs[name]; twice {
				pkgs[name] = "" // two packages of one name: imported by neither
			} else {
				pkgs[name] = "github.com/worldfs/worldfs/" + filepath.ToSlash(rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "internal", "readmequickstart") // never on disk: the overlay holds it
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists; the test builds a package there that only its overlay holds", dir)
	}
	overlay := map[string]string{}
	for i, body := range code {
		src := wrapGo(t, i, body, pkgs)
		file := filepath.Join(t.TempDir(), "block.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(dir, fmt.Sprintf("block%d.go", i))] = file
	}
	js, _ := json.Marshal(map[string]any{"Replace": overlay})
	ov := filepath.Join(t.TempDir(), "overlay.json")
	if err := os.WriteFile(ov, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "-overlay", ov, "./internal/readmequickstart")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		var srcs []string
		for _, f := range overlay {
			b, _ := os.ReadFile(f)
			srcs = append(srcs, string(b))
		}
		t.Fatalf("the Quick start's Go code does not compile: %v\n%s\nas built:\n%s", err, out, strings.Join(srcs, "\n"))
	}
}

// wrapGo makes the ith ```go block of the Quick start a compilable file:
// its statements in a function of a ctx, the module's packages it names
// imported, and each name it declares used.
func wrapGo(t *testing.T, i int, body string, pkgs map[string]string) string {
	t.Helper()
	fn := fmt.Sprintf("func block%d(ctx context.Context) {\n%s}\n", i, body)
	f, err := parser.ParseFile(token.NewFileSet(), "", "package readmequickstart\n"+fn, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("the Quick start's Go block %d does not parse as statements: %v", i+1, err)
	}
	declared := map[string]bool{"ctx": true}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok && a.Tok == token.DEFINE {
			for _, l := range a.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !declared[id.Name] {
					declared[id.Name] = true
					names = append(names, id.Name)
				}
			}
		}
		return true
	})
	imports := []string{`"context"`}
	seen := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && !declared[id.Name] && !seen[id.Name] {
				seen[id.Name] = true
				if path := pkgs[id.Name]; path != "" {
					imports = append(imports, strconv.Quote(path))
				}
			}
		}
		return true
	})
	slices.Sort(imports)
	var uses strings.Builder
	for _, n := range names {
		fmt.Fprintf(&uses, "\t_ = %s\n", n)
	}
	fn = fmt.Sprintf("func block%d(ctx context.Context) {\n%s%s}\n", i, body, uses.String())
	return "package readmequickstart\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n" + fn
}
