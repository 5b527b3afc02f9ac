package sql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
	wsql "github.com/worldfs/worldfs/sql"
)

// compactedWorld commits ticks 0..150 of the particle world "w" in b and
// compacts them (the newest ticks stay as written: 128..150), and returns
// the first compacted particle file, which holds tick 10: the first file
// of the particle views' lists.
func compactedWorld(t *testing.T, b bucket.Bucket) index.Fragment {
	t.Helper()
	ctx := ctxT(t)
	enginetest.World(t, b, "w", 150).Close()
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10})
	cat.Close()
	if err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	s, _, err := index.Load(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 10)
	for _, tf := range enginetest.Tables(t, tk) {
		if tf.Table == particles.Tables()[0].ID && tf.Fragments[0].Span != nil {
			return tf.Fragments[0]
		}
	}
	t.Fatal("tick 10's particle rows are not in a compacted file")
	return index.Fragment{}
}

// runQuery runs q on db as worldfs sql does and returns its CSV.
func runQuery(t *testing.T, db *sql.DB, q string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := wsql.Run(ctxT(t), db, q, wsql.FormatCSV, &out, nil)
	return out.String(), err
}

// Queries that read no row of the lost file: the other tables, other
// ticks of its table (another compacted file, ticks as written, a diff and
// the changes between them), and the manifests.
var spared = []string{
	"SELECT count(*), sum(position_x), max(tick) FROM emitter",
	"SELECT count(*), max(tick) FROM debris",
	"SELECT * FROM particle_at(70) ORDER BY entity_id",
	"SELECT * FROM particle_at(140) ORDER BY entity_id",
	"SELECT * FROM particle_diff(70, 140)",
	"SELECT * FROM particle_changes(130, 135)",
	"SELECT tick, table_id, path FROM worldfs_manifests ORDER BY ALL",
	"SELECT count(*) FROM worldfs_facts",
}

// Queries that read it: the whole table, a tick it holds, and the whole
// table filtered on another tick (DuckDB opens every file of a view's
// list to learn what its row groups hold, the lost one too: the query
// fails, never answers without its rows).
var needLost = []string{
	"SELECT count(*) FROM particle",
	"SELECT * FROM particle_at(10)",
	"SELECT count(*) FROM particle WHERE tick = 70",
}

// One compacted file of one table missing or damaged fails only the
// queries that read it, each with a LostFileError naming the table, the
// ticks the file holds and the object (a CorruptFragmentError saying what
// is wrong): the views open, the other tables and the table's other ticks
// answer as before. On a local bucket the file is checked as a query is
// about to read it (missing: by its presence; flipped: by its sha256); on
// GCS as the views are built, which list it under a path of its own. The
// printed script, in a DuckDB of its own, defines its views and answers
// the other ticks too. Mutations: the lists of the views without the
// witness first (DuckDB opens their first two entries when the script
// defines a view) fail every query at "defining the views"; verify
// without lostFile fails the LostFileError checks; Build failing on a
// file GCS lost fails the GCS case at the build.
func TestALostFileFailsOnlyTheReadsThatNeedIt(t *testing.T) {
	for _, c := range []struct {
		name   string
		gcs    bool
		what   string
		damage func(t *testing.T, b bucket.Bucket, object string)
	}{
		{name: "missing", what: "presence", damage: func(t *testing.T, b bucket.Bucket, object string) {
			p, _ := b.(*local.Bucket).Path(object)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "flipped", what: "sha256", damage: func(t *testing.T, b bucket.Bucket, object string) {
			p, _ := b.(*local.Bucket).Path(object)
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			flipInPlace(t, p, info.Size()/2)
		}},
		{name: "missing on GCS", gcs: true, what: "presence", damage: func(t *testing.T, b bucket.Bucket, object string) {
			a, err := b.Stat(ctxT(t), object)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Delete(ctxT(t), object, a.Generation); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bucket.Bucket
			opts := func() wsql.Options { return wsql.Options{Dir: t.TempDir()} }
			if c.gcs {
				gcstest.Start(t, "worlds")
				gb, err := bucketurl.Open(context.Background(), "gs://worlds/lost")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { gb.Close() })
				b = gb
				opts = func() wsql.Options {
					cc, err := cache.Open(t.TempDir(), cache.Options{})
					if err != nil {
						t.Fatal(err)
					}
					return wsql.Options{Dir: t.TempDir(), Cache: cc, BucketID: "gs-worlds-lost"}
				}
			} else {
				lb, err := local.Open(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				b = lb
			}
			lost := compactedWorld(t, b)
			for _, tick := range []int64{70, 129, 140} {
				if lost.Span.Contains(tick) {
					t.Fatalf("the lost file %s (ticks %d..%d) holds tick %d, which the spared queries read", lost.Path, lost.Span.From, lost.Span.To, tick)
				}
			}
			open := func() (*wsql.Script, *sql.DB) {
				t.Helper()
				s, err := wsql.Build(ctxT(t), b, "w", opts())
				if err != nil {
					t.Fatal(err)
				}
				db, err := wsql.Open(ctxT(t), s)
				if err != nil {
					t.Fatalf("opening the views: %v", err)
				}
				t.Cleanup(func() { db.Close() })
				return s, db
			}
			_, before := open()
			want := map[string]string{}
			for _, q := range append(spared, needLost...) {
				out, err := runQuery(t, before, q)
				if err != nil || strings.Count(out, "\n") < 2 {
					t.Fatalf("%s, before the damage: %v\n%s", q, err, out)
				}
				want[q] = out
			}

			c.damage(t, b, lost.Path)
			s, db := open()
			for _, q := range spared {
				if got, err := runQuery(t, db, q); err != nil || got != want[q] {
					t.Errorf("%s: %v\n%s\nwant, as before the damage:\n%s", q, err, got, want[q])
				}
			}
			for _, q := range needLost {
				got, err := runQuery(t, db, q)
				wantCorrupt(t, err, lost.Path, c.what)
				var le *wsql.LostFileError
				if !errors.As(err, &le) || le.Table != "particle" || le.World != "w" || le.Run != "main" || le.Object != lost.Path ||
					le.From != lost.Span.From || le.To != lost.Span.To || le.Facts {
					t.Fatalf("%s: %v (%s); want a LostFileError of table particle, ticks %d..%d, %s", q, err, got, lost.Span.From, lost.Span.To, lost.Path)
				}
				if msg := fmt.Sprintf("table particle of world w, run main: ticks %d..%d are in %s, which ", lost.Span.From, lost.Span.To, lost.Path); !strings.HasPrefix(err.Error(), msg) {
					t.Fatalf("%s: %q; want it to start %q", q, err, msg)
				}
			}

			// The printed script, in a DuckDB of its own: its views define,
			// the spared ticks answer, the lost file fails DuckDB's read.
			text, err := s.SQL()
			if err != nil {
				t.Fatal(err)
			}
			own, err := sql.Open("duckdb", "")
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			own.SetMaxOpenConns(1)
			if _, err := own.Exec(text); err != nil {
				t.Fatalf("the printed script: %v", err)
			}
			for _, q := range []string{"SELECT * FROM particle_at(70) ORDER BY entity_id", "SELECT count(*), max(tick) FROM debris"} {
				if got, want := dump(t, own, q), dump(t, before, q); got != want {
					t.Errorf("the printed script: %s:\n%s\nwant:\n%s", q, got, want)
				}
			}
			if c.what == "presence" {
				if err := own.QueryRow("SELECT count(*) FROM particle").Scan(new(int64)); err == nil {
					t.Error("the printed script counted particle without its lost file")
				}
			}
		})
	}
}

// A lost file that the catalog does not prove to hold only its tick's
// rows (a manifest names it under another token), whose footer the
// script reads as it defines the views to learn whether it needs the row
// check: the views open all the same, the other tables answer, and the
// queries that read the file's table fail naming it. Mutation: verify
// failing on it rather than dropping it from the footers read fails the
// views at "defining the views".
func TestALostUnprovenFileSparesTheViews(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := enginetest.World(t, b, "w", 5)
	particle := particles.Tables()[0]
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tip, err := cat.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Tick 6's manifest names its own fragment and a file stored under
	// another token.
	fr := w.Frame("particle")
	tables := []index.TableFragments{{Table: particle.ID}}
	for _, token := range []string{"own-6", "other-6"} {
		data, err := engine.EncodeFragment(fr, engine.Stamp{Tick: 6, CommitToken: token, WriterEpoch: tip.World.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		path := index.FragmentPath("w", "main", particle.ID, token, 0)
		if _, err := b.Create(ctx, path, data); err != nil {
			t.Fatal(err)
		}
		tables[0].Fragments = append(tables[0].Fragments, index.Fragment{Path: path, Rows: int64(fr.Len()), Bytes: int64(len(data)), Digest: engine.Digest(data)})
	}
	last, _ := tip.Tick("main", 5)
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: 6,
		CommitToken: "own-6", WriterEpoch: tip.World.Epoch, Tables: tables, NextEntity: last.NextEntity}}); err != nil {
		t.Fatal(err)
	}
	other := tables[0].Fragments[1].Path
	p, _ := b.Path(other)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	s, err := wsql.Build(ctx, b, "w", wsql.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatalf("opening the views: %v", err)
	}
	defer db.Close()
	emitters, _ := expected(t, b, "w", particles.Tables()[1], math.MaxInt64)
	if out, err := runQuery(t, db, "SELECT count(*) FROM emitter"); err != nil || out != fmt.Sprintf("count_star()\n%d\n", emitters) || emitters == 0 {
		t.Fatalf("another table: %v\n%s", err, out)
	}
	_, err = runQuery(t, db, "SELECT count(*) FROM particle")
	wantCorrupt(t, err, other, "presence")
	var le *wsql.LostFileError
	if !errors.As(err, &le) || le.Table != "particle" || le.From != 6 || le.To != 6 || le.Object != other {
		t.Fatalf("%v; want a LostFileError of table particle, tick 6, %s", err, other)
	}
}
