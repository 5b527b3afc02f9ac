package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/check"
	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// checkWorld commits ticks 0..5 of particle world "w" in a local bucket in
// dir and returns the file of tick 3's particle fragment and its record.
func checkWorld(t *testing.T, dir string) (string, index.Fragment) {
	t.Helper()
	ctx := context.Background()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	enginetest.World(t, b, "w", 5).Close()
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 3)
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID {
			p, _ := b.Path(tf.Fragments[0].Path)
			return p, tf.Fragments[0]
		}
	}
	t.Fatal("no particle fragment at tick 3")
	return "", index.Fragment{}
}

// worldfs check finds a clean world clean; a byte flipped in place (size
// and modification time kept) only with --read-data, which names the file
// and exits 1, as worldfs sql does on its first query; a replaced file
// without reading data.
func TestCheckAndSQLFindDamagedFragments(t *testing.T) {
	dir := t.TempDir()
	p, frag := checkWorld(t, dir)
	code, out, stderr := cli(t, "check", "--bucket", dir, "--world", "w", "--read-data")
	if code != 0 || !strings.Contains(out, "no errors were found") || !strings.Contains(out, "fragments checked") {
		t.Fatalf("check of a clean world: exit %d\n%s%s", code, out, stderr)
	}

	info, _ := os.Stat(p)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c [1]byte
	f.ReadAt(c[:], info.Size()/2)
	c[0] ^= 0x10
	f.WriteAt(c[:], info.Size()/2)
	f.Close()
	os.Chtimes(p, info.ModTime(), info.ModTime())

	if code, out, _ := cli(t, "check", "--bucket", dir, "--world", "w"); code != 0 {
		t.Fatalf("check without --read-data reads no data, yet: exit %d\n%s", code, out)
	}
	code, out, stderr = cli(t, "check", "--bucket", dir, "--world", "w", "--read-data")
	if code != 1 || !strings.Contains(out, "error: fragment "+frag.Path+": sha256 is") || !strings.Contains(out, "1 errors") ||
		!strings.Contains(stderr, "1 error(s)") {
		t.Fatalf("check --read-data of a flipped fragment: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = cli(t, "check", "--bucket", dir, "--world", "w", "--read-data", "--json")
	var res check.Report
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || len(res.Errors) != 1 ||
		res.Errors[0].Fragment != frag.Path || res.Errors[0].What != "sha256" || res.Errors[0].Tick != 3 {
		t.Fatalf("check --json: exit %d, %v\n%s", code, err, out)
	}
	// The tick's own fragment: nothing restores it (the damaged file is
	// not its own restore).
	if l := res.Lost; len(l) != 1 || l[0].Table != "particle" || l[0].From != 3 || l[0].To != 3 || l[0].Ticks != 1 || len(l[0].Restore) != 0 || l[0].Unrestorable != 1 {
		t.Fatalf("check --json lists %+v; want tick 3 of particle lost, nothing to restore it", l)
	}
	code, out, stderr = cli(t, "sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "SELECT count(*) FROM particle")
	if code != 1 || !strings.Contains(stderr, frag.Path) || !strings.Contains(stderr, "does not match the catalog") || !strings.Contains(stderr, "worldfs check --world W --read-data") {
		t.Fatalf("sql over a flipped fragment: exit %d\n%s%s", code, out, stderr)
	}

	// Replaced by a longer file: caught from its size alone.
	data, _ := os.ReadFile(p)
	os.WriteFile(p+".new", append(data, 0), 0o644)
	os.Rename(p+".new", p)
	code, out, _ = cli(t, "check", "--bucket", dir, "--world", "w")
	if code != 1 || !strings.Contains(out, "size is "+itoa(frag.Bytes+1)+" bytes, the catalog records "+itoa(frag.Bytes)+" bytes") {
		t.Fatalf("check of a replaced fragment: exit %d\n%s", code, out)
	}
	if code, _, _ := cli(t, "check", "--bucket", dir, "--world", "nope"); code != exitNotFound {
		t.Fatalf("check of no world: exit %d", code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// worldfs check checks each file once, however many ticks name it: after
// compaction, the 64 ticks of a window name one compacted file of each
// table, and check reads it once (fragments: the distinct files; references:
// every tick's naming of them).
func TestCheckReadsACompactedFileOnce(t *testing.T) {
	dir := optimizedWorld(t, "--recent", "8")
	code, out, stderr := cli(t, "check", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--read-data", "--json")
	var res check.Report
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
		t.Fatalf("check --json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	// What the catalog names: every reference, and the distinct files.
	lb := mustOpen(t, dir)
	defer lb.Close()
	s, _, err := index.Load(context.Background(), lb, "w")
	if err != nil {
		t.Fatal(err)
	}
	files, refs, compacted := map[string]bool{}, 0, 0
	s.Fragments("", func(f index.FragmentRef) bool {
		refs++
		if f.Span != nil && !files[f.Path] {
			compacted++
		}
		files[f.Path] = true
		return true
	})
	if compacted == 0 || refs <= len(files) {
		t.Fatalf("the world has %d compacted files and %d references to %d files: optimize compacted nothing", compacted, refs, len(files))
	}
	if res.Fragments != int64(len(files)) || res.References != int64(refs) {
		t.Fatalf("check: %d fragments checked for %d references; the catalog names %d files %d times", res.Fragments, res.References, len(files), refs)
	}
}
