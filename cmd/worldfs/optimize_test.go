package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
)

// tickIndexFiles returns the tick indexes under the local bucket dir.
func tickIndexFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ticks2") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// worldfs optimize gives each compacted file without a tick index the one
// compaction wrote (--dry-run counts them and writes none), and names a
// damaged index, leaves it as it is and exits 1.
func TestOptimizeWritesMissingTickIndexes(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 140).Close()
	b.Close()
	if code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--recent", "8"); code != 0 {
		t.Fatalf("optimize: exit %d\n%s%s", code, out, stderr)
	}
	written := map[string][]byte{}
	for _, p := range tickIndexFiles(t, dir) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		written[p] = data
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(written) == 0 {
		t.Fatal("optimize wrote no tick index")
	}
	var res struct {
		Missing int `json:"tick_indexes_missing"`
		Written int `json:"tick_indexes_written"`
	}
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Missing != len(written) || len(tickIndexFiles(t, dir)) != 0 {
		t.Fatalf("optimize --dry-run: exit %d, %v, %+v; want %d missing, none written\n%s%s", code, err, res, len(written), out, stderr)
	}
	code, out, stderr = cli(t, "optimize", "--bucket", dir, "--world", "w", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Written != len(written) {
		t.Fatalf("optimize: exit %d, %v, %+v; want %d written\n%s%s", code, err, res, len(written), out, stderr)
	}
	var damaged string
	for p, want := range written {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: not the index compaction wrote (%v)", p, err)
		}
		damaged = p
	}
	bad := bytes.Clone(written[damaged])
	bad[len(bad)/2] ^= 1
	if err := os.Chmod(damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, bad, 0o444); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = cli(t, "optimize", "--bucket", dir, "--world", "w")
	if got, _ := os.ReadFile(damaged); code != exitFailed || !strings.Contains(stderr, filepath.Base(filepath.Dir(damaged))) || !bytes.Equal(got, bad) {
		t.Fatalf("optimize with a damaged index: exit %d, index left: %v\n%s%s", code, bytes.Equal(got, bad), out, stderr)
	}
}

// worldfs optimize writes the token filters a world's tick shards lack
// (--dry-run counts them and writes none).
func TestOptimizeWritesMissingTokenFilters(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", 140).Close()
	b.Close()
	if code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w"); code != 0 {
		t.Fatalf("optimize: exit %d\n%s%s", code, out, stderr)
	}
	filters := func() []string {
		var out []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".tok") {
				out = append(out, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	written := map[string][]byte{}
	for _, p := range filters() {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		written[p] = data
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(written) == 0 {
		t.Fatal("no token filter written with the world's checkpoint")
	}
	var res struct {
		Missing int `json:"token_filters_missing"`
		Written int `json:"token_filters_written"`
	}
	code, out, stderr := cli(t, "optimize", "--bucket", dir, "--world", "w", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Missing != len(written) || len(filters()) != 0 {
		t.Fatalf("optimize --dry-run: exit %d, %v, %+v; want %d missing, none written\n%s%s", code, err, res, len(written), out, stderr)
	}
	code, out, stderr = cli(t, "optimize", "--bucket", dir, "--world", "w", "--json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Written != len(written) {
		t.Fatalf("optimize: exit %d, %v, %+v; want %d written\n%s%s", code, err, res, len(written), out, stderr)
	}
	for p, want := range written {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: not the filter the checkpoint wrote (%v)", p, err)
		}
	}
}
