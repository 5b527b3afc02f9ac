package engine_test

import (
	"database/sql"
	"fmt"
	"github.com/worldfs/worldfs/engine/enginetest"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// DuckDB reads every fragment a running world writes, and the visible rows
// it finds through the manifests are exactly the rows the manifests count.
func TestDuckDBReadsWorldFragments(t *testing.T) {
	b, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, 15); err != nil {
		t.Fatal(err)
	}
	s, _, err := index.Load(ctxT(t), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	particle := particles.Tables()[0]
	var paths, pairs []string
	var want, wantTicks int64
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			if tf.Table != particle.ID {
				continue
			}
			for _, f := range tf.Fragments {
				p, _ := b.Path(f.Path)
				paths = append(paths, "'"+p+"'")
				want += f.Rows
				if f.Rows > 0 {
					wantTicks++
				}
			}
		}
		pairs = append(pairs, fmt.Sprintf("(%d, '%s')", tk.Tick, tk.CommitToken))
		return true
	})
	q := fmt.Sprintf(`WITH visible(tick, token) AS (VALUES %s)
		SELECT count(*), count(DISTINCT p.tick), min(p.writer_epoch)
		FROM read_parquet([%s]) p JOIN visible v ON p.tick = v.tick AND p.commit_token = v.token`,
		strings.Join(pairs, ","), strings.Join(paths, ","))
	var rows, ticks, epoch int64
	if err := db.QueryRow(q).Scan(&rows, &ticks, &epoch); err != nil {
		t.Fatal(err)
	}
	if rows != want || ticks != wantTicks || epoch != 1 || want == 0 {
		t.Fatalf("duckdb: %d visible rows over %d ticks (epoch %d); the manifests count %d rows over %d ticks", rows, ticks, epoch, want, wantTicks)
	}
}
