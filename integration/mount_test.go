package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

func ticks(from, to int64) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, wfs.TickName(i))
	}
	return out
}

// The tree shows exactly the published ticks and tokens, forks with their
// inherited ticks, head, world.json, manifests and commit identity; anything
// else is ENOENT and every write but ctl is EROFS.
func TestTree(t *testing.T) {
	b := localBucket(t)
	w := particleWorld(t, b, "w", 5)
	particleWorld(t, b, "other", 1)
	forkWorld(t, b, "w", "f", 2, 4)
	mt := testMount(t, b)

	if got, want := ls(t, mt.dir), []string{".worldfs", "ctl", "ctl.errors", "f", "other", "w"}; !slices.Equal(got, want) {
		t.Errorf("root lists %v, want %v", got, want)
	}
	if got := ls(t, mt.path("w", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 5)) {
		t.Errorf("w's ticks: %v", got)
	}
	// The fork shows its parent's ticks up to the fork point, then its own.
	if got := ls(t, mt.path("f", "runs", "main", "ticks")); !slices.Equal(got, ticks(0, 4)) {
		t.Errorf("f's ticks: %v", got)
	}
	for world, want := range map[string]string{"w": "ticks/000000000005", "f": "ticks/000000000004"} {
		if got, err := os.Readlink(mt.path(world, "runs", "main", "head")); err != nil || got != want {
			t.Errorf("%s head -> %q, %v; want %q", world, got, err, want)
		}
	}
	// An inherited tick's manifest is the parent's.
	var man struct {
		World       string `json:"world"`
		Tick        int64  `json:"tick"`
		CommitToken string `json:"commit_token"`
		Tables      []struct {
			Name string `json:"name"`
		} `json:"tables"`
	}
	data, err := os.ReadFile(mt.path("f", "runs", "main", "ticks", "1", "manifest.json"))
	if err != nil || json.Unmarshal(data, &man) != nil {
		t.Fatalf("manifest: %v %s", err, data)
	}
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := s.Tick("main", 1)
	if man.World != "w" || man.Tick != 1 || man.CommitToken != t1.CommitToken || len(man.Tables) != 3 {
		t.Errorf("f's tick 1 manifest: %+v, want w's tick 1 token %s", man, t1.CommitToken)
	}
	// Tokens: each published token is a directory with the tick's tables.
	tokens := ls(t, mt.path("w", "tokens"))
	if len(tokens) != 6 {
		t.Errorf("w has %d tokens listed, want 6", len(tokens))
	}
	last := w.LastReceipt().Token
	if got := ls(t, mt.path("w", "tokens", last)); !slices.Equal(got, []string{"manifest.json", "debris.csv", "debris.parquet", "emitter.csv", "emitter.parquet", "particle.csv", "particle.parquet"}) {
		t.Errorf("token dir lists %v", got)
	}
	// Commit identity in xattrs, on the tick directory and its files.
	for _, p := range []string{mt.path("w", "runs", "main", "ticks", "5"), mt.path("w", "runs", "main", "ticks", "5", "particle.parquet"), mt.path("w", "tokens", last, "manifest.json")} {
		for attr, want := range map[string]string{wfs.XattrToken: last, wfs.XattrTick: "5", wfs.XattrEpoch: "1"} {
			buf := make([]byte, 128)
			n, err := syscall.Getxattr(p, attr, buf)
			if err != nil || string(buf[:n]) != want {
				t.Errorf("%s %s = %q, %v; want %q", p, attr, buf[:max(n, 0)], err, want)
			}
		}
	}
	// tables/<name>/ holds one file per visible tick.
	if got := ls(t, mt.path("f", "runs", "main", "tables", "particle")); len(got) != 5 || got[0] != "000000000000.parquet" {
		t.Errorf("f's particle table files: %v", got)
	}
	// world.json
	var wj struct {
		ID         string `json:"id"`
		Parent     string `json:"parent"`
		ForkTick   *int64 `json:"fork_tick"`
		FenceEpoch int64  `json:"fence_epoch"`
		Head       *int64 `json:"head"`
		Lineage    []struct {
			World string `json:"world"`
		} `json:"lineage"`
	}
	data, err = os.ReadFile(mt.path("f", "world.json"))
	if err != nil || json.Unmarshal(data, &wj) != nil {
		t.Fatalf("world.json: %v %s", err, data)
	}
	if wj.ID != "f" || wj.Parent != "w" || wj.ForkTick == nil || *wj.ForkTick != 2 || wj.Head == nil || *wj.Head != 4 || wj.FenceEpoch != 1 || len(wj.Lineage) != 2 {
		t.Errorf("world.json of the fork: %s", data)
	}
	// Only what was published exists.
	for _, p := range []string{
		mt.path("nope"), mt.path("w", "runs", "main", "ticks", "6"), mt.path("w", "runs", "main", "ticks", "05"),
		mt.path("w", "runs", "main", "ticks", "-1"), mt.path("w", "tokens", "0123456789abcdef0123456789abcdef"),
		mt.path("w", "runs", "other"), mt.path("w", "runs", "main", "ticks", "5", "nope.parquet"),
		mt.path("f", "runs", "main", "ticks", "5"), mt.path("w", "runs", "main", "tables", "nope"),
	} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s: %v, want ENOENT", p, err)
		}
	}
	// Every write but ctl is EROFS.
	tick := mt.path("w", "runs", "main", "ticks", "5")
	writes := map[string]error{
		"create":     os.WriteFile(filepath.Join(tick, "new"), []byte("x"), 0o644),
		"overwrite":  os.WriteFile(filepath.Join(tick, "particle.parquet"), []byte("x"), 0o644),
		"mkdir":      os.Mkdir(mt.path("w", "new"), 0o755),
		"unlink":     os.Remove(filepath.Join(tick, "particle.parquet")),
		"rmdir":      os.Remove(tick),
		"rename":     os.Rename(filepath.Join(tick, "particle.csv"), filepath.Join(tick, "p.csv")),
		"chmod":      os.Chmod(filepath.Join(tick, "particle.parquet"), 0o777),
		"truncate":   os.Truncate(mt.path("w", "world.json"), 0),
		"symlink":    os.Symlink("ticks/1", mt.path("w", "runs", "main", "latest")),
		"setxattr":   syscall.Setxattr(tick, "user.x", []byte("y"), 0),
		"root mkdir": os.Mkdir(mt.path("newworld"), 0o755),
	}
	for name, err := range writes {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", name, err)
		}
	}
	// Stats report what was served.
	var st wfs.StatsSnapshot
	if _, err := os.ReadFile(mt.path("w", "runs", "main", "ticks", "3", "particle.parquet")); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(mt.path(".worldfs", "stats"))
	if err != nil || json.Unmarshal(data, &st) != nil {
		t.Fatalf("stats: %v %s", err, data)
	}
	if st.Opens == 0 || st.BytesOpened == 0 || st.Ops["lookup"].Count == 0 {
		t.Errorf("stats after a read: %s", data)
	}
}

// Every snapshot file, read with DuckDB, holds exactly what the SQL views
// show for its tick: passthrough fragments, inherited ticks, tokens, the
// CSV rendition, tables/ globs, and a tick whose fragments optimize split
// (which the mount derives from their rows in Go).
func TestSnapshotsMatchSQL(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 4)
	forkWorld(t, b, "w", "f", 2, 4)
	splitFragment(t, b, "w", 3, "particle")
	mt := testMount(t, b)
	db := duck(t)
	tables := map[string]string{
		"particle": "entity_id, tick, position_x, position_y, velocity_x, velocity_y",
		"emitter":  "entity_id, tick, emitter_label, emitter_rate, position_x, position_y",
		"debris":   "entity_id, tick, position_x, position_y, ttl_remaining",
	}
	compared := 0
	for _, world := range []string{"w", "f"} {
		s, err := wsql.Build(ctxT(t), b, world, wsql.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		views, err := wsql.Open(ctxT(t), s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { views.Close() })
		for table, cols := range tables {
			for tick := int64(0); tick <= 4; tick++ {
				want := rows(t, views, fmt.Sprintf("SELECT %s FROM %s_at(%d) ORDER BY entity_id", cols, table, tick))
				compared += len(want)
				dir := mt.path(world, "runs", "main", "ticks", strconv.FormatInt(tick, 10))
				token := xattr(t, dir, wfs.XattrToken)
				for _, src := range []string{
					"read_parquet(" + lit(filepath.Join(dir, table+".parquet")) + ")",
					"read_csv(" + lit(filepath.Join(dir, table+".csv")) + ")",
					"read_parquet(" + lit(mt.path(world, "tokens", token, table+".parquet")) + ")",
					"read_parquet(" + lit(mt.path(world, "runs", "main", "tables", table, fmt.Sprintf("%012d.parquet", tick))) + ")",
				} {
					got := rows(t, db, fmt.Sprintf("SELECT %s FROM %s ORDER BY entity_id", cols, src))
					if !slices.Equal(got, want) {
						t.Errorf("%s tick %d: %s has %d rows, the views %d:\n got %v\nwant %v", world, tick, src, len(got), len(want), got, want)
					}
				}
			}
			// The whole history through a glob of tables/.
			glob := "read_parquet(" + lit(mt.path(world, "runs", "main", "tables", table, "*.parquet")) + ")"
			got := rows(t, db, fmt.Sprintf("SELECT %s FROM %s ORDER BY tick, entity_id", cols, glob))
			want := rows(t, views, fmt.Sprintf("SELECT %s FROM %s ORDER BY tick, entity_id", cols, table))
			if !slices.Equal(got, want) {
				t.Errorf("%s: tables/%s/*.parquet has %d rows, the view %d", world, table, len(got), len(want))
			}
		}
	}
	if compared < 100 {
		t.Fatalf("only %d rows compared; the comparison proves little", compared)
	}
	var st wfs.StatsSnapshot
	data, _ := os.ReadFile(mt.path(".worldfs", "stats"))
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	// (This test reads the files with DuckDB itself: that a stat or a
	// read runs none is TestDerivedFilesAreSizedAtLookup's.)
	if st.PassthroughOpens == 0 || st.Gathered == 0 {
		t.Errorf("expected passthrough opens and files derived in Go: %s", data)
	}
}

// splitFragment rewrites a tick's fragment of a table into two (as optimize
// may), so that no single fragment is the tick's rows any more.
func splitFragment(t *testing.T, b bucket.Bucket, world string, tick int64, table string) {
	t.Helper()
	ctx := ctxT(t)
	c, err := index.Open(ctx, b, world, index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", tick)
	var tb *engine.Table
	for _, x := range particles.Tables() {
		if x.Name == table {
			tb = x
		}
	}
	i := slices.IndexFunc(enginetest.Tables(t, tk), func(tf index.TableFragments) bool { return tf.Table == tb.ID })
	old := enginetest.Tables(t, tk)[i].Fragments[0]
	data, _, err := b.Get(ctx, old.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := engine.DecodeFragment(tb, data, func(engine.StampedRow) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	halves := [2]*engine.Frame{engine.NewFrame(tb), engine.NewFrame(tb)}
	for j, e := range f.Entities {
		if err := halves[j%2].Insert(e, f.Row(e)); err != nil {
			t.Fatal(err)
		}
	}
	var parts []index.Fragment
	for j, h := range halves {
		enc, err := engine.EncodeFragment(h, engine.Stamp{Tick: tick, CommitToken: tk.CommitToken, WriterEpoch: tk.WriterEpoch})
		if err != nil {
			t.Fatal(err)
		}
		p := index.FragmentPath(world, index.DefaultRun, tb.ID, fmt.Sprintf("optimized-%d", tick), j)
		if _, err := b.Create(ctx, p, enc); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, index.Fragment{Path: p, Rows: int64(h.Len()), Bytes: int64(len(enc)), Digest: engine.Digest(enc)})
	}
	if _, err := c.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: &index.FragmentsRewrite{
		Run: "main", Tick: tick, Table: tb.ID, Old: []string{old.Path}, New: parts}}); err != nil {
		t.Fatal(err)
	}
}

func xattr(t testing.TB, path, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := syscall.Getxattr(path, name, buf)
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	return string(buf[:n])
}

// A read-only subset of go-fuse's posixtest, and the read-only
// counterparts of the ones that write.
func TestPosixReadOnly(t *testing.T) {
	b := localBucket(t)
	particleWorld(t, b, "w", 40)
	mt := testMount(t, b)
	ticksDir := mt.path("w", "runs", "main", "ticks")
	t.Run("ReadDirConsistency", func(t *testing.T) { posixtest.ReadDirConsistency(t, ticksDir) })
	t.Run("ReadDirConsistencyRoot", func(t *testing.T) { posixtest.ReadDirConsistency(t, mt.dir) })
	t.Run("DirSeek", func(t *testing.T) {
		// Reading a directory in small batches yields the whole listing.
		f, err := os.Open(ticksDir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var got []string
		for {
			names, err := f.Readdirnames(3)
			got = append(got, names...)
			if err != nil || len(names) == 0 {
				break
			}
		}
		if !slices.Equal(got, ticks(0, 40)) {
			t.Errorf("batched listing: %v", got)
		}
	})
	t.Run("StableInodes", func(t *testing.T) {
		p := mt.path("w", "runs", "main", "ticks", "7", "particle.parquet")
		var a, c syscall.Stat_t
		if err := syscall.Stat(p, &a); err != nil {
			t.Fatal(err)
		}
		// The same path through a second mount has the same inode.
		mt2 := testMount(t, b)
		if err := syscall.Stat(mt2.path("w", "runs", "main", "ticks", "7", "particle.parquet"), &c); err != nil {
			t.Fatal(err)
		}
		if a.Ino != c.Ino || a.Size != c.Size || a.Size == 0 {
			t.Errorf("inode %d size %d, then %d size %d", a.Ino, a.Size, c.Ino, c.Size)
		}
	})
	t.Run("ParallelFileOpen", func(t *testing.T) {
		p := mt.path("w", "runs", "main", "ticks", "9", "particle.parquet")
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 10)
		for range 10 {
			go func() {
				got, err := os.ReadFile(p)
				if err == nil && string(got) != string(want) {
					err = errors.New("a parallel read differs")
				}
				errs <- err
			}()
		}
		for range 10 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("FstatSizeMatchesRead", func(t *testing.T) {
		// A derived file (the CSV) is 0 bytes to a stat until it is first
		// opened (a stat derives nothing); an open file's fstat, and every
		// stat after, give the size read.
		for _, name := range []string{"particle.parquet", "particle.csv", "manifest.json"} {
			p := mt.path("w", "runs", "main", "ticks", "11", name)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			info, err := f.Stat()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil || int64(len(data)) != info.Size() {
				t.Errorf("%s: fstat says %d bytes, read %d (%v)", name, info.Size(), len(data), err)
			}
			if after, err := os.Stat(p); err != nil || after.Size() != int64(len(data)) {
				t.Errorf("%s: stat after reading says %d bytes, read %d (%v)", name, after.Size(), len(data), err)
			}
		}
	})
	t.Run("SymlinkReadlink", func(t *testing.T) {
		p := mt.path("w", "runs", "main", "head")
		info, err := os.Lstat(p)
		if err != nil || info.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("head: %v %v", info, err)
		}
		target, _ := os.Readlink(p)
		if int64(len(target)) != info.Size() {
			t.Errorf("head's size %d, target %q", info.Size(), target)
		}
		if _, err := os.Stat(filepath.Join(p, "manifest.json")); err != nil {
			t.Errorf("through head: %v", err)
		}
	})
	t.Run("OpenForWriteIsEROFS", func(t *testing.T) {
		_, err := os.OpenFile(mt.path("w", "runs", "main", "ticks", "1", "particle.parquet"), os.O_RDWR, 0)
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("open O_RDWR: %v, want EROFS", err)
		}
	})
}
