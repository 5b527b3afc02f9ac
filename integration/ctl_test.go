package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

const bodyTables = `[{"name":"body","components":[{"name":"pos","fields":[{"name":"x","type":"double"},{"name":"y","type":"double"}]}]}]`

// seq is the world's catalog sequence: every commit moves it.
func seq(t *testing.T, b bucket.Bucket, world string) uint64 {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	return s.Seq
}

// The ctl files create, fork and resume worlds and commit ticks from
// inline rows, Parquet files and JSONL files; each answer is read back on
// the same open file, and the mount shows the result at once.
func TestCtlCommands(t *testing.T) {
	b := localBucket(t)
	mt := testMount(t, b)
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	a, errno := ctl(t, mt.path("w", "ctl"), `{"op":"commit_tick","tick":0,"frames":{"body":[{"entity_id":0,"pos_x":1.5,"pos_y":2},{"entity_id":3,"pos_x":-1,"pos_y":0}]}}`)
	if errno != 0 {
		t.Fatalf("commit_tick: %+v", a)
	}
	var r engine.CommittedTickReceipt
	data, _ := json.Marshal(a.Result)
	if err := json.Unmarshal(data, &r); err != nil || r.Tick != 0 || r.Token == "" {
		t.Fatalf("receipt %s", data)
	}
	// Visible at once, by its token too.
	csv, err := os.ReadFile(mt.path("w", "tokens", r.Token, "body.csv"))
	if err != nil || !strings.Contains(string(csv), "3,0,-1.0,0.0,"+r.Token+",1\n") {
		t.Fatalf("tick 0 as CSV: %v\n%s", err, csv)
	}
	// Tick 1 from the Parquet file the mount serves for tick 0 (its
	// commit columns are ignored), tick 2 from JSONL.
	if a, errno := ctl(t, mt.path("w", "ctl"), fmt.Sprintf(`{"op":"commit_tick","frames":{"body":%q}}`, mt.path("w", "runs", "main", "ticks", "0", "body.parquet"))); errno != 0 {
		t.Fatalf("commit_tick from parquet: %+v", a)
	}
	jsonl := filepath.Join(t.TempDir(), "rows.jsonl")
	os.WriteFile(jsonl, []byte(`{"entity_id":7,"pos_x":0.25,"pos_y":9}`+"\n"+`{"entity_id":8,"pos_x":1,"pos_y":1}`+"\n"), 0o644)
	if a, errno := ctl(t, mt.path("w", "ctl"), fmt.Sprintf(`{"op":"commit_tick","frames":{"body":%q}}`, jsonl)); errno != 0 {
		t.Fatalf("commit_tick from jsonl: %+v", a)
	}
	db := duck(t)
	for tick, want := range map[string]string{"1": "[0 1.5 2] [3 -1 0]", "2": "[7 0.25 9] [8 1 1]"} {
		got := rows(t, db, "SELECT [entity_id::DOUBLE, pos_x, pos_y] FROM read_parquet("+lit(mt.path("w", "runs", "main", "ticks", tick, "body.parquet"))+") ORDER BY entity_id")
		if strings.Join(got, " ") != want {
			t.Errorf("tick %s: %v, want %s", tick, got, want)
		}
	}
	// Fork at tick 1 and commit on the fork; resume the parent.
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"fork","world":"f","parent":"w","tick":1}`); errno != 0 {
		t.Fatalf("fork: %+v", a)
	}
	if a, errno := ctl(t, mt.path("f", "ctl"), `{"op":"commit_tick","frames":{"body":[{"entity_id":1,"pos_x":5,"pos_y":5}]}}`); errno != 0 {
		t.Fatalf("fork commit: %+v", a)
	}
	if got := ls(t, mt.path("f", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 2)) {
		t.Errorf("fork ticks %v", got)
	}
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"resume","world":"w"}`); errno != 0 || a.Result.(map[string]any)["writer_epoch"] != 2.0 {
		t.Fatalf("resume: %+v", a)
	}
	if a, errno := ctl(t, mt.path("w", "ctl"), `{"op":"commit_tick","tick":3,"frames":{"body":[]}}`); errno != 0 {
		t.Fatalf("commit after resume: %+v", a)
	}
	// A shell's "echo … > ctl" (O_TRUNC) works too.
	if err := os.WriteFile(mt.path("w", "ctl"), []byte(`{"op":"commit_tick","frames":{"body":[]}}`+"\n"), 0o644); err != nil {
		t.Fatalf("echo > ctl: %v", err)
	}
	if got, _ := os.Readlink(mt.path("w", "runs", "main", "head")); got != "ticks/000000000004" {
		t.Errorf("head after the shell commit: %s", got)
	}
}

// Every ctl error maps to its errno, is readable on the same file, and
// commits nothing.
func TestCtlErrors(t *testing.T) {
	base := localBucket(t)
	script := faulty.NewScript()
	b := faulty.Wrap(base, script)
	// "p" is a world this mount does not hold the writer of.
	particleWorld(t, base, "p", 1)
	mt := testMount(t, b)
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	if a, errno := ctl(t, mt.path("w", "ctl"), `{"op":"commit_tick","frames":{"body":[{"entity_id":0,"pos_x":1,"pos_y":1}]}}`); errno != 0 {
		t.Fatalf("commit: %+v", a)
	}
	row := `[{"entity_id":1,"pos_x":1,"pos_y":1}]`
	cases := []struct {
		name, file, cmd string
		want            syscall.Errno
		setup           func()
	}{
		{name: "not json", file: "w/ctl", cmd: `commit please`, want: syscall.EINVAL},
		{name: "two commands", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":[]}}` + "\n" + `{"op":"commit_tick","frames":{"body":[]}}`, want: syscall.EINVAL},
		{name: "unknown op", file: "w/ctl", cmd: `{"op":"explode"}`, want: syscall.EINVAL},
		{name: "root op on a world ctl", file: "w/ctl", cmd: `{"op":"create","world":"x","tables":` + bodyTables + `}`, want: syscall.EINVAL},
		{name: "unknown field", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":` + row + `},"colour":"red"}`, want: syscall.EINVAL},
		{name: "no frames", file: "w/ctl", cmd: `{"op":"commit_tick"}`, want: syscall.EINVAL},
		{name: "unknown archetype", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"ghost":` + row + `}}`, want: syscall.EINVAL},
		{name: "unknown column", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":[{"entity_id":1,"pos_z":1}]}}`, want: syscall.EINVAL},
		{name: "wrong type", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":[{"entity_id":1,"pos_x":"far"}]}}`, want: syscall.EINVAL},
		{name: "no entity id", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":[{"pos_x":1}]}}`, want: syscall.EINVAL},
		{name: "duplicate entity", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":[{"entity_id":1},{"entity_id":1}]}}`, want: syscall.EINVAL},
		{name: "relative path", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":"rows.jsonl"}}`, want: syscall.EINVAL},
		{name: "missing file", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":"/nonexistent/rows.parquet"}}`, want: syscall.EINVAL},
		{name: "tick from the future", file: "w/ctl", cmd: `{"op":"commit_tick","tick":9,"frames":{"body":` + row + `}}`, want: syscall.EINVAL},
		{name: "tick taken", file: "w/ctl", cmd: `{"op":"commit_tick","tick":0,"frames":{"body":` + row + `}}`, want: syscall.EEXIST},
		{name: "no writer held", file: "p/ctl", cmd: `{"op":"commit_tick","frames":{"particle":[]}}`, want: syscall.EINVAL},
		{name: "bad world id", file: "ctl", cmd: `{"op":"create","world":"../x","tables":` + bodyTables + `}`, want: syscall.EINVAL},
		{name: "bad schema", file: "ctl", cmd: `{"op":"create","world":"y","tables":[{"name":"Body","components":[]}]}`, want: syscall.EINVAL},
		{name: "world exists", file: "ctl", cmd: `{"op":"create","world":"w","tables":` + bodyTables + `}`, want: syscall.EEXIST},
		{name: "fork of nothing", file: "ctl", cmd: `{"op":"fork","world":"z","parent":"nope","tick":0}`, want: syscall.EINVAL},
		{name: "fork past the head", file: "ctl", cmd: `{"op":"fork","world":"z","parent":"w","tick":5}`, want: syscall.EINVAL},
		{name: "resume of nothing", file: "ctl", cmd: `{"op":"resume","world":"nope"}`, want: syscall.ENOENT},
		{name: "storage fails", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":` + row + `}}`, want: syscall.EIO,
			setup: func() {
				script.SetRules(faulty.Rule{Op: faulty.OpCreate, Prefix: index.DataPrefix("w"), Fault: faulty.Fault{Kind: faulty.FailBefore}})
			}},
		{name: "stale writer", file: "w/ctl", cmd: `{"op":"commit_tick","frames":{"body":` + row + `}}`, want: syscall.ESTALE,
			setup: func() {
				script.SetRules()
				// Another writer resumes w and fences this mount's writer out.
				w2, err := engine.ResumeWorld(ctxT(t), base, "w", []*engine.Table{bodyTable(t)}, quiet)
				if err != nil {
					t.Fatal(err)
				}
				w2.Close()
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			before := map[string]uint64{"w": seq(t, base, "w"), "p": seq(t, base, "p")}
			a, errno := ctl(t, mt.path(strings.Split(c.file, "/")...), c.cmd)
			if errno != c.want {
				t.Errorf("errno %v, want %v; answer %+v", errno, c.want, a)
			}
			if a.Error == "" || a.Errno == "" {
				t.Errorf("the answer carries no readable error: %+v", a)
			}
			// The reason stays where a plain read finds it: the last line
			// of the ctl.errors beside the ctl file.
			errs := filepath.Join(filepath.Dir(mt.path(strings.Split(c.file, "/")...)), "ctl.errors")
			data, err := os.ReadFile(errs)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if last := lines[len(lines)-1]; err != nil || !strings.Contains(last, " "+a.Errno+": "+a.Error) || !strings.Contains(last, fmt.Sprintf(" pid %d ", os.Getpid())) {
				t.Errorf("%s: %v\n%s\nits last line does not give this refusal (pid %d): %s: %s", errs, err, data, os.Getpid(), a.Errno, a.Error)
			}
			for world, s := range before {
				if got := seq(t, base, world); got != s {
					t.Errorf("world %s's catalog moved from %d to %d: something was committed", world, s, got)
				}
			}
			for _, x := range []string{"x", "y", "z"} {
				if _, err := index.ReadMarker(ctxT(t), base, x); err == nil {
					t.Errorf("world %s exists", x)
				}
			}
		})
	}
	if got := ls(t, mt.path("w", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 0)) {
		t.Errorf("ticks after the failed commands: %v", got)
	}
}

// A refused "echo … > ctl" in a shell prints only the errno; the reason
// is read back with a plain cat of ctl.errors beside the ctl file, by the
// user whose command it was and by no other.
func TestCtlErrorsReadBackWithCat(t *testing.T) {
	b := localBucket(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	bin := writerBinary(t)
	mt := testMountWith(t, b, wfs.Options{CtlGroup: "nogroup"}, wfs.MountOptions{AllowOther: true})
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	particleWorld(t, b, "p", 1) // a world this mount holds no writer for
	sh := func(script string) (string, error) {
		out, err := exec.Command(bash, "-c", script).CombinedOutput()
		return string(out), err
	}
	cases := []struct {
		file, cmd, why string
	}{
		{"p/ctl", `{"op":"commit_tick","frames":{"particle":[]}}`, `commit_tick EINVAL: world p: this mount holds no writer for the world; write {"op":"resume","world":"p"} to the root ctl first`},
		{"w/ctl", `{"op":"commit_tick","frames":{"body":[{"entity_id":1,"pos_x":1}]}}`, `commit_tick EINVAL: `},
		{"ctl", `{"op":"resume","world":"nope"}`, `resume ENOENT: resume "nope"`},
	}
	for _, c := range cases {
		out, err := sh(fmt.Sprintf("echo '%s' > %s", c.cmd, mt.path(c.file)))
		if err == nil || !strings.Contains(out, "Invalid argument") && !strings.Contains(out, "No such file") {
			t.Errorf("echo > %s: %v %q, want a write error", c.file, err, out)
		}
		dir := filepath.Dir(mt.path(c.file))
		out, err = sh("cat " + filepath.Join(dir, "ctl.errors"))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || !strings.Contains(lines[len(lines)-1], c.why) {
			t.Errorf("cat %s/ctl.errors after the refused echo: %v\n%s\nwant a last line with %q", c.file, err, out, c.why)
		}
	}
	// The size a stat gives is the bytes a read returns.
	var st syscall.Stat_t
	data, err := os.ReadFile(mt.path("w", "ctl.errors"))
	if err != nil || syscall.Stat(mt.path("w", "ctl.errors"), &st) != nil || st.Size != int64(len(data)) || len(data) == 0 {
		t.Errorf("w/ctl.errors: %d bytes read (%v), stat says %d", len(data), err, st.Size)
	}
	// Another user's refusals are theirs: nobody (in the ctl group) sees
	// only its own, and the owner never sees nobody's.
	r := writeAs(t, bin, nobody, nobody, nil, mt.path("w", "ctl"), `{"op":"commit_tick","frames":{"ghost":[]}}`)
	if r.WriteErrno != int(syscall.EINVAL) {
		t.Fatalf("nobody's refused commit: %+v", r)
	}
	cat := exec.Command("cat", mt.path("w", "ctl.errors"))
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	theirs, err := cat.CombinedOutput()
	if err != nil || strings.Count(string(theirs), "\n") != 1 || !strings.Contains(string(theirs), `has no archetype "ghost"`) {
		t.Errorf("nobody's cat of w/ctl.errors: %v\n%s\nwant its one refusal alone", err, theirs)
	}
	mine, err := os.ReadFile(mt.path("w", "ctl.errors"))
	if err != nil || strings.Contains(string(mine), "ghost") || string(mine) != string(data) {
		t.Errorf("the owner's w/ctl.errors after nobody's refusal: %v\n%s\nwant what it read before:\n%s", err, mine, data)
	}
}

func bodyTable(t *testing.T) *engine.Table {
	pos, err := engine.NewComponent("pos", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := engine.NewTable("body", pos)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
