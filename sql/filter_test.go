package sql

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// Even when a fragment holding a crashed or stale attempt's rows is handed
// to DuckDB under a published tick, the token check keeps its rows out.
func TestTokenCheckKeepsForeignRowsOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, _ := local.Open(t.TempDir())
	opts := engine.Options{Catalog: index.Options{NoCompactor: true}}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	particles.Install(w)
	particles.Setup(w, 3)
	if err := particles.Run(ctx, w, 5, nil); err != nil {
		t.Fatal(err)
	}
	particle := particles.Tables()[0]
	// A crashed attempt of tick 5: the same frame under another token.
	data, err := engine.EncodeFragment(w.Frame("particle"), engine.Stamp{Tick: 5, CommitToken: "crashed-attempt", WriterEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	orphan := engine.FragmentPath("w", "main", particle.ID, "crashed-attempt", 0)
	if _, err := b.Create(ctx, orphan, data); err != nil {
		t.Fatal(err)
	}
	s, _, _ := index.Load(ctx, b, "w")
	tk, _ := s.Tick("main", 5)
	var frags []fragment
	infos := map[string]engine.TableInfo{}
	s.Ticks("main", 0, func(x *index.Tick) bool {
		for _, tf := range x.Tables {
			if tf.Table == particle.ID {
				p, _ := b.Path(tf.Fragments[0].Path)
				frags = append(frags, fragment{"w", tf.Table, p, x.Tick, x.CommitToken, true})
			}
		}
		return true
	})
	p, _ := b.Path(orphan)
	frags = append(frags, fragment{"w", particle.ID, p, 5, tk.CommitToken, true}) // handed in by mistake
	infos["w/"+particle.ID] = particle.Info()
	script := render("w", "main", math.MaxInt64, frags, infos, nil, []string{"(0, 'w', 'main', NULL)"})
	db, err := Open(ctx, script)
	if err != nil {
		t.Fatalf("%v\n%s", err, script.SQL)
	}
	defer db.Close()
	var n, foreign int64
	db.QueryRow("SELECT count(*), count(*) FILTER (WHERE commit_token = 'crashed-attempt') FROM particle_raw WHERE tick = 5").Scan(&n, &foreign)
	if foreign != 0 || n != int64(w.Frame("particle").Len()) {
		t.Fatalf("tick 5 shows %d rows, %d of them the crashed attempt's", n, foreign)
	}
	if !strings.Contains(script.SQL, "commit_token IN (") {
		t.Fatal("the views carry no prunable token check")
	}
}
