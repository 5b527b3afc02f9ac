//go:build fixtures

package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
)

// TestWriteLegacyFixture rewrites ../testdata/legacy: a v0.2 world of five
// ticks of particles and emitters in tables without commit columns.
func TestWriteLegacyFixture(t *testing.T) {
	os.RemoveAll(fixtureDir)
	b, err := local.Open(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range enginetest.LegacyTables(t) {
		if lt.Name != "particle" && lt.Name != "emitter" {
			continue
		}
		for tick := range int64(5) {
			f := engine.NewFrame(lt)
			n := 3
			if lt.Name == "particle" {
				n = 5 + int(tick)
			}
			for i := range n {
				v := engine.Values{"position_x": float64(i) + float64(tick)/10, "position_y": float64(10 - i)}
				if lt.Name == "emitter" {
					v["emitter_rate"], v["emitter_label"] = int64(1), fmt.Sprintf("old-%d", i)
				} else {
					v["velocity_x"], v["velocity_y"] = 0.5, 1.0
				}
				id := int64(i)
				if lt.Name == "particle" {
					id += 100
				}
				if err := f.Insert(id, v); err != nil {
					t.Fatal(err)
				}
			}
			data, err := engine.EncodeFragment(f, engine.Stamp{Tick: tick})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Create(ctxT(t), index.LegacyPrefix("legacyworld", "main", lt.ID)+fmt.Sprintf("%d.parquet", tick), data); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.RemoveAll(filepath.Join(fixtureDir, bucket.ReservedPrefix))
}

// TestWriteTokenDirFixture rewrites ../testdata/tokendirs: a particle world
// published to tick 4 with every tick fragment in a directory of its
// token, data/<world>/<run>/<table>/<token>/0.parquet, the layout before
// tick fragments were named <token>.parquet. Run it on a checkout of that
// layout.
func TestWriteTokenDirFixture(t *testing.T) {
	os.RemoveAll(tokenDirFixture)
	b, err := local.Open(tokenDirFixture)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.CreateWorld(ctxT(t), b, "tokendirs", particles.Tables(), enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := enginetest.Drive(ctxT(t), w, 4); err != nil {
		t.Fatal(err)
	}
	w.Close()
	os.RemoveAll(filepath.Join(tokenDirFixture, bucket.ReservedPrefix))
}
