package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/realpart"
)

// copiedQuery reads every visible particle row, in one order.
const copiedQuery = "SELECT * FROM particle ORDER BY ALL"

// readAll returns worldfs sql's answer to copiedQuery over world w in the
// bucket at url, failing the test if it fails.
func readAll(t *testing.T, url string) string {
	t.Helper()
	code, out, stderr := cli(t, "sql", "--bucket", url, "--world", "w", "--cache-dir", t.TempDir(), "--format", "csv", copiedQuery)
	if code != 0 || strings.Count(out, "\n") < 10 {
		t.Fatalf("sql over %s: exit %d\n%s%s", url, code, out, stderr)
	}
	return out
}

// checkCopy runs worldfs check over the copy at url and wants it clean,
// with every one of its fragments re-verified by its bytes.
func checkCopy(t *testing.T, url string) {
	t.Helper()
	code, out, stderr := cli(t, "check", "--bucket", url, "--world", "w", "--cache-dir", t.TempDir(), "--verbose")
	if code != 0 || !strings.Contains(out, "no errors were found") || !strings.Contains(out, "fragments re-verified by their bytes") ||
		!strings.Contains(out, "re-verified: data/w/") {
		t.Fatalf("check of the copy %s: exit %d\n%s%s", url, code, out, stderr)
	}
	n, _, _ := strings.Cut(out[strings.Index(out, "folded;"):], " fragments checked")
	n = n[strings.LastIndex(n, "\n")+1:]
	if !strings.Contains(out, "\n"+n+" fragments re-verified") {
		t.Fatalf("check of the copy %s: not every one of its %s fragments was re-verified\n%s", url, n, out)
	}
}

// tool returns the path of a command the test runs; where it is missing
// the test is skipped, except under CI=true, where it fails.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		realpart.Missing(t, name, fmt.Sprintf("%v (apt-get install %s)", err, name))
	}
	return p
}

// copyTree copies every file of src into dst anew, as rsync -r without -t
// or a tar extracted with -m does: same bytes, new modification times.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// A local bucket copied by any tool that gives its files new modification
// times (cp -r, tar extracted without times, rsync -r without -t, a copy
// written file by file) reads as the original: check finds it clean,
// naming every fragment re-verified by its bytes, and sql answers as over
// the original; check remembers what it re-verified, so neither a second
// check nor a query hashes those files again. A byte flipped in a copy
// (size and time kept) is damage:
// check finds it without --read-data (its generation differs, so its
// bytes decide), and sql refuses on the first read.
//
// Mutation: cache.Record.checkStat failing on a different generation
// whatever the digest (the rule before) fails every copy here with
// "generation is …, the catalog records …"; check keeping its memory apart
// from the views' (VerifiedMemory(cacheDir/elsewhere) instead of
// VerifiedMemory(cacheDir/views)) makes the query hash 8 files again.
func TestCopiedBucketReadsAsTheOriginal(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig")
	_, frag := checkWorld(t, orig)
	want := readAll(t, orig)
	copies := []struct {
		name string
		copy func(dst string)
	}{
		{"written anew", func(dst string) { copyTree(t, orig, dst) }},
		{"cp -r", func(dst string) { runTool(t, tool(t, "cp"), "-r", orig, dst) }},
		{"tar without times", func(dst string) {
			tar := tool(t, "tar")
			os.MkdirAll(dst, 0o755)
			runTool(t, "sh", "-c", `"$0" -C "$1" -cf - . | "$0" -C "$2" -xmf -`, tar, orig, dst)
		}},
		{"rsync -r", func(dst string) { runTool(t, tool(t, "rsync"), "-r", orig+"/", dst+"/") }},
	}
	for i, c := range copies {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(dir, "copy"+itoa(int64(i)))
			c.copy(dst)
			checkCopy(t, dst)
			if got := readAll(t, dst); got != want {
				t.Fatalf("sql over the copy differs from the original:\n%s\nwant\n%s", got, want)
			}
			// What check re-verified, sql does not hash again (the same
			// memory, in the same cache directory), nor a second check.
			cacheDir := t.TempDir()
			if code, out, _ := cli(t, "check", "--bucket", dst, "--world", "w", "--cache-dir", cacheDir); code != 0 {
				t.Fatalf("check: exit %d\n%s", code, out)
			}
			hashed := cache.HashCount()
			if code, out, _ := cli(t, "check", "--bucket", dst, "--world", "w", "--cache-dir", cacheDir); code != 0 ||
				!strings.Contains(out, "fragments re-verified") {
				t.Fatalf("check again: exit %d\n%s", code, out)
			}
			if code, out, stderr := cli(t, "sql", "--bucket", dst, "--world", "w", "--cache-dir", cacheDir, copiedQuery); code != 0 {
				t.Fatalf("sql: exit %d\n%s%s", code, out, stderr)
			}
			if n := cache.HashCount() - hashed; n != 0 {
				t.Fatalf("a second check and a query after check hashed %d files again; want them remembered", n)
			}
			// One byte flipped in the copy, its size and time kept.
			p := filepath.Join(dst, filepath.FromSlash(frag.Path))
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			f.ReadAt(b[:], info.Size()/2)
			b[0] ^= 0x01
			f.WriteAt(b[:], info.Size()/2)
			f.Close()
			os.Chtimes(p, info.ModTime(), info.ModTime())
			code, out, _ := cli(t, "check", "--bucket", dst, "--world", "w", "--cache-dir", t.TempDir())
			if code != 1 || !strings.Contains(out, "error: fragment "+frag.Path+": sha256 is sha256:") ||
				!strings.Contains(out, "the catalog records "+frag.Digest) || !strings.Contains(out, "1 errors") {
				t.Fatalf("check of a copy with a flipped byte: exit %d\n%s", code, out)
			}
			code, out, stderr := cli(t, "sql", "--bucket", dst, "--world", "w", "--cache-dir", t.TempDir(), copiedQuery)
			if code != 1 || !strings.Contains(stderr, frag.Path) || !strings.Contains(stderr, "sha256 is") {
				t.Fatalf("sql over a copy with a flipped byte: exit %d\n%s%s", code, out, stderr)
			}
		})
	}
}

// copyObjects copies every object of from into to, as a bucket-to-bucket
// transfer or a download does: the same bytes under new generations.
func copyObjects(t *testing.T, from, to bucket.Bucket) {
	t.Helper()
	ctx := context.Background()
	for a, err := range from.List(ctx, "", "") {
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := from.Get(ctx, a.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.Create(ctx, a.Name, data); err != nil {
			t.Fatal(err)
		}
	}
}

// A world in a GCS bucket (fake-gcs-server) copied to another GCS bucket,
// and downloaded to a local directory, reads as the original in both; a
// byte flipped in the GCS copy is damage.
//
// Mutation: as TestCopiedBucketReadsAsTheOriginal (the copies' objects
// have new generations, so every check and the first query fail).
func TestCopiedGCSBucketReadsAsTheOriginal(t *testing.T) {
	gcstest.Start(t, "src", "dst")
	ctx := context.Background()
	src, err := bucketurl.Open(ctx, "gs://src/worlds")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	enginetest.World(t, src, "w", 5).Close()
	want := readAll(t, "gs://src/worlds")

	dst, err := bucketurl.Open(ctx, "gs://dst/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	copyObjects(t, src, dst)
	checkCopy(t, "gs://dst/copy")
	if got := readAll(t, "gs://dst/copy"); got != want {
		t.Fatalf("sql over the GCS copy differs:\n%s\nwant\n%s", got, want)
	}

	// One object of the GCS copy written again with a byte flipped.
	var frag string
	for a, err := range dst.List(ctx, index.DataPrefix("w"), "") {
		if err == nil && strings.HasSuffix(a.Name, ".parquet") {
			frag = a.Name
			break
		}
	}
	data, a, err := dst.Get(ctx, frag)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Delete(ctx, frag, a.Generation); err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if _, err := dst.Create(ctx, frag, data); err != nil {
		t.Fatal(err)
	}
	code, out, _ := cli(t, "check", "--bucket", "gs://dst/copy", "--world", "w", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(out, "error: fragment "+frag+": sha256 is sha256:") {
		t.Fatalf("check of a GCS copy with a flipped byte: exit %d\n%s", code, out)
	}

	dir := filepath.Join(t.TempDir(), "download")
	down, err := bucketurl.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	copyObjects(t, src, down)
	checkCopy(t, dir)
	if got := readAll(t, dir); got != want {
		t.Fatalf("sql over the downloaded copy differs:\n%s\nwant\n%s", got, want)
	}
}
