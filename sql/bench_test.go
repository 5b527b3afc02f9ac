package sql_test

import (
	"testing"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine/enginetest"
	wsql "github.com/worldfs/worldfs/sql"
)

// BenchmarkViews builds, opens and queries the views of a small world of
// the reference simulation (worldfs bench query measures at scale).
func BenchmarkViews(b *testing.B) {
	bk, _ := local.Open(b.TempDir())
	enginetest.World(b, bk, "w", 100).Close()
	opts := wsql.Options{Dir: b.TempDir()}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := wsql.Build(b.Context(), bk, "w", opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	s, err := wsql.Build(b.Context(), bk, "w", opts)
	if err != nil {
		b.Fatal(err)
	}
	db, err := wsql.Open(b.Context(), s)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range []struct{ name, sql string }{
		{"views", "SELECT count(*), sum(position_x) FROM particle"},
		{"raw", "SELECT count(*), sum(position_x) FROM read_parquet(getvariable('worldfs_files_particle_0'))"},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				var n int64
				var sum float64
				if err := db.QueryRow(q.sql).Scan(&n, &sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
