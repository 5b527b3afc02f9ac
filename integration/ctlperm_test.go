package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

const nobody = 65534 // uid and gid (group nogroup)

// writerResult is what the ctl writer subprocess saw.
type writerResult struct {
	OpenErrno  int    `json:"open_errno"`
	WriteErrno int    `json:"write_errno"`
	Answer     string `json:"answer"`
}

// ctlWriter is the subprocess: it writes one command (p[1]) to the ctl
// file at p[0], as whoever it runs as, and prints what happened.
func ctlWriter(p []string) int {
	var r writerResult
	fd, err := syscall.Open(p[0], syscall.O_RDWR, 0)
	if err != nil {
		r.OpenErrno = int(err.(syscall.Errno))
	} else {
		if _, err := syscall.Write(fd, []byte(p[1]+"\n")); err != nil {
			r.WriteErrno = int(err.(syscall.Errno))
		}
		buf := make([]byte, 1<<16)
		n, _ := syscall.Read(fd, buf)
		r.Answer = string(buf[:max(n, 0)])
	}
	out, _ := json.Marshal(r)
	fmt.Printf("CTLWRITER %s\n", out)
	return 0
}

// writerBinary copies this test binary where other users may run it (the
// build directory is root's alone) and opens the test's temporary tree to
// them, so that they can reach the mounts made in it.
func writerBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "ctlwriter")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeAs writes cmd to the ctl file at path as uid/gid with the given
// supplementary groups (none if nil), through a subprocess.
func writeAs(t *testing.T, bin string, uid, gid uint32, groups []uint32, path, cmd string) writerResult {
	t.Helper()
	c := crashtest.CommandOf(bin, "ctlwriter", path, cmd)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("ctl writer as %d: %v\n%s", uid, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "CTLWRITER "); ok {
			var r writerResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("ctl writer as %d printed no result:\n%s", uid, out)
	return writerResult{}
}

// objects lists every object name in the bucket.
func objects(t testing.TB, b bucket.Bucket) []string {
	t.Helper()
	var out []string
	for a, err := range b.List(ctxT(t), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Name)
	}
	return out
}

func sameObjects(t testing.TB, b bucket.Bucket, before []string, what string) {
	t.Helper()
	if after := objects(t, b); !slices.Equal(after, before) {
		var added []string
		for _, n := range after {
			if !slices.Contains(before, n) {
				added = append(added, n)
			}
		}
		t.Errorf("%s changed the bucket: %d objects became %d (new: %v)", what, len(before), len(after), added)
	}
}

// On a mount others may enter, the kernel enforces the files' modes: the
// ctl files are the owner's (0600), so another user can neither create a
// world nor commit; with --ctl-group, that group's members can.
func TestCtlIsTheOwners(t *testing.T) {
	b := localBucket(t)
	bin := writerBinary(t)
	mt := testMountWith(t, b, wfs.Options{}, wfs.MountOptions{AllowOther: true})
	var st syscall.Stat_t
	if err := syscall.Stat(mt.path("ctl"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o600 || st.Uid != uint32(os.Getuid()) || st.Nlink != 1 {
		t.Errorf("ctl: mode %o uid %d nlink %d; want 0600, the mount's owner %d, 1", st.Mode&0o7777, st.Uid, st.Nlink, os.Getuid())
	}
	before := objects(t, b)
	r := writeAs(t, bin, nobody, nobody, nil, mt.path("ctl"), `{"op":"create","world":"intruder","tables":`+bodyTables+`}`)
	if r.OpenErrno != int(syscall.EACCES) {
		t.Errorf("nobody opened the root ctl: %+v, want EACCES", r)
	}
	sameObjects(t, b, before, "nobody's create")
	if _, err := index.ReadMarker(ctxT(t), b, "intruder"); !errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("nobody created a world: %v", err)
	}
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("the owner's create: %+v", a)
	}
	before = objects(t, b)
	if r := writeAs(t, bin, nobody, nobody, nil, mt.path("w", "ctl"), `{"op":"commit_tick","frames":{"body":[]}}`); r.OpenErrno != int(syscall.EACCES) {
		t.Errorf("nobody opened w/ctl: %+v, want EACCES", r)
	}
	sameObjects(t, b, before, "nobody's commit_tick")

	// With a ctl group, its members write ctl files; others still do not.
	mg := testMountWith(t, b, wfs.Options{CtlGroup: "nogroup"}, wfs.MountOptions{AllowOther: true})
	if err := syscall.Stat(mg.path("ctl"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o660 || st.Gid != nobody {
		t.Errorf("ctl with a ctl group: mode %o gid %d; want 0660, %d", st.Mode&0o7777, st.Gid, nobody)
	}
	before = objects(t, b)
	if r := writeAs(t, bin, 4242, 4242, nil, mg.path("ctl"), `{"op":"create","world":"outsider","tables":`+bodyTables+`}`); r.OpenErrno != int(syscall.EACCES) {
		t.Errorf("a user outside the ctl group opened ctl: %+v", r)
	}
	sameObjects(t, b, before, "an outsider's create")
	r = writeAs(t, bin, nobody, nobody, nil, mg.path("ctl"), `{"op":"create","world":"g","tables":`+bodyTables+`}`)
	if r.OpenErrno != 0 || r.WriteErrno != 0 || !strings.Contains(r.Answer, `"ok":true`) {
		t.Fatalf("a ctl group member's create: %+v", r)
	}
	if _, err := index.ReadMarker(ctxT(t), b, "g"); err != nil {
		t.Errorf("the member's world: %v", err)
	}
}

// A command reads the files it names with its writer's rights, never the
// mount's: a file the writer cannot read is EACCES and commits nothing.
func TestCtlReadsFilesAsTheWriter(t *testing.T) {
	b := localBucket(t)
	bin := writerBinary(t)
	mt := testMountWith(t, b, wfs.Options{CtlGroup: "nogroup"}, wfs.MountOptions{AllowOther: true})
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	dir := t.TempDir()
	row := []byte(`{"entity_id":1,"pos_x":1,"pos_y":2}` + "\n")
	files := map[string]struct {
		mode     os.FileMode
		gid      int
		readable bool // by nobody
	}{
		"secret.jsonl": {0o600, 0, false},
		"group.jsonl":  {0o640, 4242, false}, // nobody is not in 4242 (the subprocess drops every group)
		"open.jsonl":   {0o644, 0, true},
	}
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, row, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, f.gid); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(name string) string {
		return fmt.Sprintf(`{"op":"commit_tick","frames":{"body":%q}}`, filepath.Join(dir, name))
	}
	for _, name := range []string{"secret.jsonl", "group.jsonl"} {
		before := objects(t, b)
		r := writeAs(t, bin, nobody, nobody, nil, mt.path("w", "ctl"), commit(name))
		if r.WriteErrno != int(syscall.EACCES) || !strings.Contains(r.Answer, `"EACCES"`) || !strings.Contains(r.Answer, name) {
			t.Errorf("nobody's commit_tick of %s: %+v, want EACCES naming the file", name, r)
		}
		sameObjects(t, b, before, "a commit_tick of "+name)
	}
	// The supplementary groups of the writer count: in group 4242 nobody
	// reads group.jsonl.
	if r := writeAs(t, bin, nobody, nobody, []uint32{4242}, mt.path("w", "ctl"), commit("group.jsonl")); r.WriteErrno != 0 {
		t.Errorf("nobody in group 4242, commit_tick of a 0640 root:4242 file: %+v", r)
	}
	if r := writeAs(t, bin, nobody, nobody, nil, mt.path("w", "ctl"), commit("open.jsonl")); r.WriteErrno != 0 {
		t.Errorf("nobody's commit_tick of a readable file: %+v", r)
	}
	// The owner reads with its own rights.
	if a, errno := ctl(t, mt.path("w", "ctl"), commit("secret.jsonl")); errno != 0 {
		t.Errorf("the owner's commit_tick of its own file: %+v", a)
	}
	if got := ls(t, mt.path("w", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 2)) {
		t.Errorf("ticks: %v, want 0,1,2", got)
	}
}
