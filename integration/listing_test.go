package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// A names-only listing of a long ticks/ (os.ReadDir, ls without -l) costs
// the mount no lookup per entry: the kernel asks for attributes with the
// entries (READDIRPLUS) only in its first reply, since nobody stats them.
func TestTickListingLooksUpNoEntry(t *testing.T) {
	const n = 3000
	mt := testMount(t, ticksWorld(t, n))
	des, err := os.ReadDir(mt.path("w", "runs", "main", "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != n {
		t.Fatalf("ticks/ lists %d entries, want %d", len(des), n)
	}
	seen := map[string]bool{}
	for _, de := range des {
		seen[de.Name()] = true
	}
	for tick := range n {
		if !seen[wfs.TickName(int64(tick))] {
			t.Fatalf("tick %d is not listed", tick)
		}
	}
	if st := mountStats(t, mt); st.Ops["lookup"].Count >= n/2 {
		t.Fatalf("listing %d ticks made %d lookups; a names-only listing looks up one reply's entries at most", n, st.Ops["lookup"].Count)
	}
}

// ticksWorld is a bucket holding world w, whose run main published ticks
// 0..n-1 (one fragment each, never written: only the catalog is read).
func ticksWorld(t *testing.T, n int64) bucket.Bucket {
	t.Helper()
	b := localBucket(t)
	c, epoch, err := index.CreateWorld(ctxT(t), b, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var entries []index.Entry
	for tick := range n {
		token := fmt.Sprintf("%032x", tick)
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: tick, CommitToken: token, WriterEpoch: epoch,
			Tables: []index.TableFragments{{Table: "t", Fragments: []index.Fragment{{Path: index.FragmentPath("w", "main", "t", token, 0), Rows: 1}}}}}})
	}
	if _, err := c.CommitAll(ctxT(t), entries...); err != nil {
		t.Fatal(err)
	}
	return b
}

// ls -l of a long ticks/ costs the mount no xattr request per entry: ls
// asks for an SELinux label and two POSIX ACLs of every entry unless the
// file system answers that it supports none (EOPNOTSUPP), which ls
// remembers for the device; the commit identity stays readable.
func TestLongListingAsksNoXattrPerEntry(t *testing.T) {
	const n = 2000
	mt := testMount(t, ticksWorld(t, n))
	ticks := mt.path("w", "runs", "main", "ticks")
	tick := filepath.Join(ticks, "7")
	for _, name := range []string{"security.selinux", "system.posix_acl_access", "system.posix_acl_default", "trusted.x"} {
		for _, p := range []string{ticks, tick} {
			if _, err := syscall.Getxattr(p, name, make([]byte, 256)); err != syscall.EOPNOTSUPP {
				t.Errorf("getxattr %s of %s: %v, want EOPNOTSUPP (the mount supports no such attribute)", name, p, err)
			}
		}
	}
	if _, err := syscall.Getxattr(tick, "user.x", make([]byte, 256)); err != syscall.ENODATA {
		t.Errorf("getxattr user.x of %s: %v, want ENODATA", tick, err)
	}
	if got := xattr(t, tick, wfs.XattrToken); got != fmt.Sprintf("%032x", 7) {
		t.Errorf("%s of %s = %q", wfs.XattrToken, tick, got)
	}
	before := mountStats(t, mt).Ops["getxattr"].Count
	out, err := exec.Command("ls", "-l", ticks).Output()
	if err != nil {
		t.Fatalf("ls -l %s: %v", ticks, err)
	}
	if lines := strings.Count(string(out), "\n"); lines != n+1 { // and "total 0"
		t.Fatalf("ls -l printed %d lines, want %d:\n%.300s", lines, n+1, out)
	}
	if asked := mountStats(t, mt).Ops["getxattr"].Count - before; asked >= 10 {
		t.Fatalf("ls -l of %d ticks sent the mount %d getxattr requests; it should ask a few for the whole listing", n, asked)
	}
}

// ls -l of a long ticks/ or tokens/ searches the catalog for no entry: the
// kernel's lookup of each entry with the listing (READDIRPLUS) is answered
// from the tick record the listing just returned, and what it makes is the
// right tick.
func TestLongListingResolvesNoEntry(t *testing.T) {
	const n = 2000
	mt := testMount(t, ticksWorld(t, n))
	for _, dir := range []string{mt.path("w", "runs", "main", "ticks"), mt.path("w", "tokens")} {
		before := mountStats(t, mt).Ops["resolve"].Count
		out, err := exec.Command("ls", "-l", dir).Output()
		if err != nil {
			t.Fatalf("ls -l %s: %v", dir, err)
		}
		if lines := strings.Count(string(out), "\n"); lines != n+1 { // and "total 0"
			t.Fatalf("ls -l %s printed %d lines, want %d:\n%.300s", dir, lines, n+1, out)
		}
		if resolved := mountStats(t, mt).Ops["resolve"].Count - before; resolved >= n/10 {
			t.Fatalf("ls -l %s of %d entries searched the catalog %d times; the listing's records answer the lookups", dir, n, resolved)
		}
	}
	for _, tick := range []int{0, 7, n - 1} {
		token := fmt.Sprintf("%032x", tick)
		for _, p := range []string{mt.path("w", "runs", "main", "ticks", strconv.Itoa(tick)), mt.path("w", "tokens", token)} {
			if got := xattr(t, p, wfs.XattrTick); got != strconv.Itoa(tick) {
				t.Errorf("%s of %s = %q, want %d", wfs.XattrTick, p, got, tick)
			}
			if got := xattr(t, p, wfs.XattrToken); got != token {
				t.Errorf("%s of %s = %q, want %s", wfs.XattrToken, p, got, token)
			}
		}
	}
}

// ticks/ and tables/<t>/ name ticks one way, zero-padded to a fixed width,
// so lexical order is tick order in both (and `ls ticks | tail -1` is the
// head); a tick's plain decimal name, which scripts written before the
// padding use, still resolves (a link to the padded name, never listed).
func TestTickNamesSortAsTicks(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 120)
	mt := testMount(t, b)
	names := ls(t, mt.path("w", "runs", "main", "ticks"))
	files := ls(t, mt.path("w", "runs", "main", "tables", "particle"))
	if !slices.Equal(names, ticks(0, 120)) {
		t.Fatalf("ticks/ lists %v", names)
	}
	if !slices.IsSorted(names) || !slices.IsSorted(files) {
		t.Errorf("lexical order is not tick order: %v / %v", names, files)
	}
	for i, f := range files {
		if f != names[i]+".parquet" {
			t.Fatalf("tables/particle/ entry %d is %s, ticks/ entry %s", i, f, names[i])
		}
	}
	if head, err := os.Readlink(mt.path("w", "runs", "main", "head")); err != nil || head != "ticks/"+names[len(names)-1] {
		t.Errorf("head -> %q (%v), the last of ticks/ is %s", head, err, names[len(names)-1])
	}
	for _, n := range []int64{7, 100} {
		old := mt.path("w", "runs", "main", "ticks", strconv.FormatInt(n, 10))
		if target, err := os.Readlink(old); err != nil || target != wfs.TickName(n) {
			t.Errorf("ticks/%d -> %q (%v), want %s", n, target, err, wfs.TickName(n))
		}
		got, err := os.ReadFile(filepath.Join(old, "particle.parquet"))
		want, err2 := os.ReadFile(mt.path("w", "runs", "main", "ticks", wfs.TickName(n), "particle.parquet"))
		if err != nil || err2 != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("tick %d by its old name: %d bytes (%v), by its name %d (%v)", n, len(got), err, len(want), err2)
		}
	}
	for _, bad := range []string{"007", "0000000000007", "+7", "121", "000000000121"} {
		if _, err := os.Lstat(mt.path("w", "runs", "main", "ticks", bad)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ticks/%s: %v, want ENOENT", bad, err)
		}
	}
}
