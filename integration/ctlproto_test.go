package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
)

// writeAll writes data to fd as cat, Python and Go do: one write(2), and
// the rest again after a short write, until all is written or a write
// fails. It returns the bytes written and the errno that stopped it.
func writeAll(fd int, data []byte) (int, syscall.Errno) {
	done := 0
	for done < len(data) {
		n, err := syscall.Write(fd, data[done:])
		if err != nil {
			return done, err.(syscall.Errno)
		}
		done += n
	}
	return done, 0
}

// answer reads the answer to the last command written on fd.
func answer(t testing.TB, fd int) wfs.Answer {
	t.Helper()
	buf := make([]byte, 1<<20)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var a wfs.Answer
	if err := json.Unmarshal(buf[:n], &a); err != nil {
		t.Fatalf("answer %q: %v", buf[:n], err)
	}
	return a
}

func openCtl(t testing.TB, path string) int {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

// worldW makes a mount with world w whose tick 0 is committed.
func worldW(t *testing.T) (*mounted, bucket.Bucket) {
	b := localBucket(t)
	mt := testMount(t, b)
	if a, errno := ctl(t, mt.path("ctl"), `{"op":"create","world":"w","tables":`+bodyTables+`}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	if a, errno := ctl(t, mt.path("w", "ctl"), `{"op":"commit_tick","frames":{"body":[{"entity_id":0,"pos_x":1,"pos_y":1}]}}`); errno != 0 {
		t.Fatalf("commit: %+v", a)
	}
	return mt, b
}

// A command larger than the kernel's write size fails with its own errno:
// the kernel hands it over in pieces and a refusal of the last one is a
// short write, which the writer retries with the rest; the retry gets the
// command's errno instead of running as a command about the tail.
func TestCtlHugeFailingCommand(t *testing.T) {
	mt, b := worldW(t)
	before := objects(t, b)
	pad := strings.Repeat(" ", 4<<20)
	// Tick 0 is taken (EEXIST); the decoder learns that at the very end.
	cmd := []byte(`{"op":"commit_tick","tick":0,` + pad + `"frames":{"body":[]}}` + "\n")
	fd := openCtl(t, mt.path("w", "ctl"))
	n, errno := writeAll(fd, cmd)
	if errno != syscall.EEXIST {
		t.Errorf("a 4 MiB command for a taken tick: %d of %d bytes written, errno %v; want EEXIST", n, len(cmd), errno)
	}
	if a := answer(t, fd); a.OK || a.Errno != "EEXIST" || !strings.Contains(a.Error, "tick 0") {
		t.Errorf("answer %+v, want the command's own EEXIST about tick 0", a)
	}
	// Go's os.File loops the same way.
	f, err := os.OpenFile(mt.path("w", "ctl"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(cmd); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("os.File.Write of the command: %v, want EEXIST", err)
	}
	// A refusal the bytes show early fails on the piece carrying them.
	bad := []byte(`{"op":"commit_tick",` + pad[:2<<20] + `@` + pad[:2<<20] + `"frames":{"body":[]}}` + "\n")
	if n, errno := writeAll(fd, bad); errno != syscall.EINVAL || n >= len(bad) {
		t.Errorf("a 4 MiB command with a stray byte: %d written, errno %v; want EINVAL", n, errno)
	}
	sameObjects(t, b, before, "the refused huge commands")
	if got := ls(t, mt.path("w", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 0)) {
		t.Errorf("ticks: %v", got)
	}
}

// Bytes that cannot begin a command fail the write that carries them, so
// a shell's printf reports it; only a valid but unfinished command is
// left for close to refuse.
func TestCtlGarbageFailsAtTheWrite(t *testing.T) {
	mt, b := worldW(t)
	before := objects(t, b)
	fd := openCtl(t, mt.path("w", "ctl"))
	for _, garbage := range []string{"garbage", "  x", "{\"op\":\"commit_tick\"\n}", "{\"op\":\"commit_tick\"]", "{\"op\":\"commit_tick\"}{}"} {
		if _, err := syscall.Write(fd, []byte(garbage)); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("write %q: %v, want EINVAL", garbage, err)
		}
	}
	sh := exec.Command("sh", "-c", `printf garbage > "$1"`, "sh", mt.path("w", "ctl"))
	if out, err := sh.CombinedOutput(); err == nil {
		t.Errorf("printf garbage > ctl succeeded (%s)", out)
	}
	// An unfinished command is refused at close.
	ufd, err := syscall.Open(mt.path("w", "ctl"), syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(ufd, []byte(`{"op":"commit_tick",`)); err != nil {
		t.Errorf("a valid prefix: %v", err)
	}
	if err := syscall.Close(ufd); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("close after an unfinished command: %v, want EINVAL", err)
	}
	sameObjects(t, b, before, "the garbage")
}

// A valid command arrives in any number of writes, split anywhere (its
// newline too), and commands up to the 64 MiB bound run; one byte more
// is EINVAL and runs nothing.
func TestCtlSplitAndHugeValidCommands(t *testing.T) {
	mt, b := worldW(t)
	cmd := []byte(`{"op":"commit_tick","frames":{"body":[{"entity_id":5,"pos_x":0.5,"pos_y":-2}]}}` + "\n")
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 5 {
		fd := openCtl(t, mt.path("w", "ctl"))
		cuts := []int{0, len(cmd) - 1, len(cmd)} // the newline alone, last
		for range i * 3 {
			cuts = append(cuts, rng.IntN(len(cmd)))
		}
		slices.Sort(cuts)
		for j := 1; j < len(cuts); j++ {
			if cuts[j] == cuts[j-1] {
				continue
			}
			if n, err := syscall.Write(fd, cmd[cuts[j-1]:cuts[j]]); err != nil || n != cuts[j]-cuts[j-1] {
				t.Fatalf("split %v, piece %d: %d, %v", cuts, j, n, err)
			}
		}
		if a := answer(t, fd); !a.OK {
			t.Fatalf("split %v: %+v", cuts, a)
		}
	}
	if got := ls(t, mt.path("w", "runs", "main", "ticks")); len(got) != 6 {
		t.Errorf("ticks after five split commands: %v", got)
	}
	// The bound, exactly: a JSON object of 64 MiB, then its newline.
	head, tail := `{"op":"commit_tick",`, `"frames":{"body":[]}}`
	huge := []byte(head + strings.Repeat(" ", 64<<20-len(head)-len(tail)) + tail + "\n")
	fd := openCtl(t, mt.path("w", "ctl"))
	if n, errno := writeAll(fd, huge); errno != 0 || n != len(huge) {
		t.Fatalf("a 64 MiB command: %d written, %v", n, errno)
	}
	if a := answer(t, fd); !a.OK {
		t.Fatalf("a 64 MiB command: %+v", a)
	}
	before := objects(t, b)
	over := append([]byte(head+" "), huge[len(head):]...)
	if n, errno := writeAll(fd, over); errno != syscall.EINVAL {
		t.Errorf("a command of 64 MiB and one byte: %d written, errno %v; want EINVAL", n, errno)
	}
	if a := answer(t, fd); a.OK || !strings.Contains(a.Error, "64 MiB") {
		t.Errorf("answer %+v, want the bound named", a)
	}
	sameObjects(t, b, before, "the oversized command")
}

// Snapshot entries are files with one link, and every change to them
// (extended attributes and links included) is EROFS.
func TestSnapshotsAreReadOnlyFiles(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 2)
	mt := testMount(t, b)
	tick := mt.path("w", "runs", "main", "ticks", "2")
	files := []string{filepath.Join(tick, "particle.parquet"), filepath.Join(tick, "particle.csv"),
		filepath.Join(tick, "manifest.json"), mt.path("w", "world.json"), mt.path("w", "ctl"),
		mt.path("w", "runs", "main", "tables", "particle", "000000000001.parquet")}
	for _, p := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Nlink != 1 {
			t.Errorf("%s: st_nlink %d, want 1", p, st.Nlink)
		}
		for name, err := range map[string]error{
			"setxattr":    syscall.Setxattr(p, "user.x", []byte("y"), 0),
			"removexattr": syscall.Removexattr(p, wfs.XattrToken),
			"link":        os.Link(p, filepath.Join(tick, "copy")),
			"link (root)": os.Link(p, mt.path("copy")),
		} {
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s %s: %v, want EROFS", name, p, err)
			}
		}
	}
	var lst syscall.Stat_t
	if err := syscall.Lstat(mt.path("w", "runs", "main", "head"), &lst); err != nil || lst.Nlink != 1 {
		t.Errorf("head: nlink %d, %v", lst.Nlink, err)
	}
	p := files[0]
	for name, err := range map[string]error{
		"chmod":     os.Chmod(p, 0o644),
		"chown":     os.Chown(p, 1, 1),
		"truncate":  os.Truncate(p, 0),
		"utimes":    syscall.UtimesNano(p, []syscall.Timespec{{Sec: 1}, {Sec: 1}}),
		"dir xattr": syscall.Removexattr(tick, wfs.XattrToken),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", name, err)
		}
	}
}

// The protocol under random input: random bytes, commands with a byte
// changed, cut short or grown past a piece with a failing end, each
// written in random pieces by a writer that retries short writes. Every
// refusal reaches the writer as an errno (at a write; at close only for a
// valid unfinished prefix), and after every refusal the bucket holds
// exactly the objects it held before.
func TestCtlProtocolFuzz(t *testing.T) {
	seed := uint64(20261130)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	mt, b := worldW(t)
	valid := func() []byte {
		return []byte(`{"op":"commit_tick","frames":{"body":[{"entity_id":` + string(rune('0'+rng.IntN(10))) + `,"pos_x":1.25,"pos_y":-3}]}}` + "\n")
	}
	pad := func(n int) string { return strings.Repeat(" \t", n/2) }
	refusals, successes := 0, 0
	for i := range 60 {
		var data []byte
		var want syscall.Errno // 0: any errno (or success where noted)
		mayPass := false
		switch kind := rng.IntN(6); kind {
		case 0: // random bytes
			data = make([]byte, 1+rng.IntN(3000))
			for j := range data {
				data[j] = byte(rng.IntN(256))
			}
			if rng.IntN(2) == 0 {
				data[0] = '{'
			}
		case 1: // a valid command with one byte changed
			data = valid()
			data[rng.IntN(len(data)-1)] = byte(rng.IntN(256))
			mayPass = true
		case 2: // a valid command cut short, with or without a newline
			v := valid()
			data = v[:1+rng.IntN(len(v)-2)]
			if rng.IntN(2) == 0 {
				data = append(data, '\n')
			}
		case 3: // huge, failing at its end with its own errno
			data = []byte(`{"op":"commit_tick","tick":0,` + pad(1<<20+rng.IntN(3<<20)) + `"frames":{"body":[]}}` + "\n")
			want = syscall.EEXIST
		case 4: // huge, with a stray byte somewhere in the middle
			data = []byte(`{"op":"commit_tick",` + pad(rng.IntN(3<<20)) + "#" + pad(rng.IntN(2<<20)) + `"frames":{"body":[]}}` + "\n")
			want = syscall.EINVAL
		case 5: // a valid command: it commits
			data = valid()
			mayPass = true
		}
		before := objects(t, b)
		fd, err := syscall.Open(mt.path("w", "ctl"), syscall.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Random pieces, each written like cat writes.
		cuts := []int{0, len(data)}
		for range rng.IntN(4) {
			cuts = append(cuts, rng.IntN(len(data)+1))
		}
		slices.Sort(cuts)
		var errno syscall.Errno
		for j := 1; j < len(cuts) && errno == 0; j++ {
			_, errno = writeAll(fd, data[cuts[j-1]:cuts[j]])
		}
		var a wfs.Answer
		answered := errno != 0 || len(bytes.TrimSpace(data)) > 0 && bytes.HasSuffix(data, []byte("\n"))
		if answered {
			a = answer(t, fd)
		}
		cerr := syscall.Close(fd)
		switch {
		case errno == 0 && cerr == nil && answered && a.OK:
			if !mayPass {
				t.Fatalf("case %d: %q... was accepted: %+v", i, head(data), a)
			}
			successes++
			continue
		case errno == 0 && cerr == nil:
			t.Fatalf("case %d: %q... refused silently (no errno at write or close; answer %+v)", i, head(data), a)
		case errno == 0:
			// Refused at close: only a valid unfinished prefix may be.
			if bytes.Contains(data, []byte("\n")) || !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r"), []byte("{")) {
				t.Errorf("case %d: %q... refused only at close (%v), not at the write", i, head(data), cerr)
			}
		case want != 0 && errno != want:
			t.Errorf("case %d: %q...: errno %v, want %v (answer %+v)", i, head(data), errno, want, a)
		}
		if first := bytes.TrimLeft(data, " \t\r"); len(first) > 0 && first[0] != '{' && errno == 0 {
			t.Errorf("case %d: %q does not begin a command, yet its write succeeded", i, head(data))
		}
		refusals++
		sameObjects(t, b, before, "a refused command")
	}
	t.Logf("%d refusals, %d commits", refusals, successes)
	if refusals < 30 {
		t.Errorf("only %d refusals; the test proves little", refusals)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 60)] }
