package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// A tag made through the root ctl shows at once as runs/<run>/tags/NAME,
// a link to the tick's directory; what the mount serves there, what SQL
// shows at tag:NAME and what iceberg-go reads at the export's tag ref
// (its rows of the tagged tick) are the same rows. A taken name and a
// tick that is not visible are refused (EEXIST, ENOENT), writing
// nothing; a tag deleted leaves tags/ at once.
func TestTagsOnTheMountInSQLAndTheExport(t *testing.T) {
	ctx := ctxT(t)
	b := localBucket(t)
	particleWorld(t, b, "w", 30)
	forkWorld(t, b, "w", "f", 12, 20)
	mt := testMount(t, b)
	root := mt.path("ctl")
	if a, errno := ctl(t, root, `{"op":"tag","world":"w","at":"17","name":"fig3","message":"figure 3"}`); errno != 0 {
		t.Fatalf("tag: %+v", a)
	}
	if a, errno := ctl(t, root, `{"op":"tag","world":"f","at":"head~15","name":"early"}`); errno != 0 { // tick 5: the parent's
		t.Fatalf("tag of an inherited tick: %+v", a)
	}
	for _, c := range []struct {
		cmd   string
		errno syscall.Errno
	}{
		{`{"op":"tag","world":"w","at":"3","name":"fig3"}`, syscall.EEXIST},
		{`{"op":"tag","world":"w","at":"99","name":"late"}`, syscall.ENOENT},
		{`{"op":"tag","world":"w","at":"3","name":"a/b"}`, syscall.EINVAL},
	} {
		if a, errno := ctl(t, root, c.cmd); errno != c.errno {
			t.Errorf("%s: %v (%+v), want %v", c.cmd, errno, a, c.errno)
		}
	}
	if got := ls(t, mt.path("w", "runs", "main", "tags")); !slices.Equal(got, []string{"fig3"}) {
		t.Fatalf("w's tags/: %v, want fig3 alone (nothing written by the refusals)", got)
	}
	for _, c := range []struct {
		world, name string
		tick        int64
	}{{"w", "fig3", 17}, {"f", "early", 5}} {
		link := mt.path(c.world, "runs", "main", "tags", c.name)
		target, err := os.Readlink(link)
		if want := fmt.Sprintf("../ticks/%012d", c.tick); err != nil || target != want {
			t.Fatalf("readlink %s = %q, %v; want %s", link, target, err, want)
		}
		m := index.Moment{Text: index.TagPrefix + c.name, Tag: c.name}
		s, err := wsql.Build(ctx, b, c.world, wsql.Options{At: &m, Only: true, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		views, err := wsql.Open(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := rows(t, views, "SELECT entity_id, tick, position_x, position_y, velocity_x, velocity_y FROM particle ORDER BY entity_id")
		views.Close()
		got := rows(t, duck(t), "SELECT entity_id, tick, position_x, position_y, velocity_x, velocity_y FROM read_parquet("+
			lit(filepath.Join(link, "particle.parquet"))+") ORDER BY entity_id")
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s: tags/%s/particle.parquet has %d rows, SQL at tag:%s %d", c.world, c.name, len(got), c.name, len(want))
		}
		// The export's tag ref, read by iceberg-go: its rows of the tick.
		res, err := iceberg.Export(ctx, b, iceberg.Options{World: c.world})
		if err != nil {
			t.Fatal(err)
		}
		var meta string
		for _, tr := range res.Tables {
			if tr.Table == "particle" {
				meta = tr.Metadata
			}
		}
		if ice := icebergTick(t, meta, c.name, c.tick); !slices.Equal(ice, want) {
			t.Fatalf("%s: iceberg-go at ref %s reads %d rows of tick %d, SQL %d:\n%v\n%v", c.world, c.name, len(ice), c.tick, len(want), ice, want)
		}
	}
	if a, errno := ctl(t, root, `{"op":"untag","world":"w","name":"fig3"}`); errno != 0 {
		t.Fatalf("untag: %+v", a)
	}
	if got := ls(t, mt.path("w", "runs", "main", "tags")); len(got) != 0 {
		t.Fatalf("w's tags/ after the tag's deletion: %v", got)
	}
	if _, err := os.Readlink(mt.path("w", "runs", "main", "tags", "fig3")); !os.IsNotExist(err) {
		t.Fatalf("readlink of a deleted tag: %v, want ENOENT", err)
	}
}

// icebergTick scans the table whose metadata is at metadata with
// iceberg-go at the snapshot its ref name names, and returns its rows of
// tick as rows renders them: entity_id, tick and the components, by
// entity.
func icebergTick(t *testing.T, metadata, name string, tick int64) []string {
	t.Helper()
	ctx := ctxT(t)
	fsys := icebergio.LocalFS{}
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"worldfs", "t"}, metadata,
		func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := tbl.SnapshotByName(name)
	if s == nil {
		t.Fatalf("%s has no ref %s", metadata, name)
	}
	at, err := tbl.Scan(table.WithSnapshotID(s.SnapshotID)).ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	cols := []string{"entity_id", "tick", "position_x", "position_y", "velocity_x", "velocity_y"}
	type row struct {
		id   int64
		line string
	}
	var out []row
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		idx := map[string]int{}
		for i := range int(rec.NumCols()) {
			idx[rec.ColumnName(i)] = i
		}
		for r := range int(rec.NumRows()) {
			if rec.Column(idx["tick"]).(*array.Int64).Value(r) != tick {
				continue
			}
			vals := make([]any, len(cols))
			for i, c := range cols {
				vals[i] = arrowValue(t, rec.Column(idx[c]), r)
			}
			out = append(out, row{vals[0].(int64), fmt.Sprint(vals...)})
		}
	}
	slices.SortFunc(out, func(a, b row) int { return int(a.id - b.id) })
	lines := make([]string, len(out))
	for i, r := range out {
		lines[i] = r.line
	}
	return lines
}

func arrowValue(t *testing.T, col arrow.Array, i int) any {
	t.Helper()
	switch a := col.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	}
	t.Fatalf("unexpected Arrow column %T", col)
	return nil
}

// Run parameters through the root ctl: a create's "meta" (strings,
// numbers, booleans as their text) and a fork's over its parent's show in
// each world's world.json; metadata over a bound is refused (EINVAL)
// and the name stays free.
func TestRunParametersOnTheMount(t *testing.T) {
	b := localBucket(t)
	mt := testMount(t, b)
	root := mt.path("ctl")
	tables := `[{"name":"agent","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]}]`
	if a, errno := ctl(t, root, `{"op":"create","world":"base","tables":`+tables+`,"meta":{"seed":17,"gravity":"9.81","fast":true}}`); errno != 0 {
		t.Fatalf("create: %+v", a)
	}
	if a, errno := ctl(t, mt.path("base", "ctl"), `{"op":"commit_tick","frames":{"agent":[{"entity_id":1,"pos_x":0.5}]}}`); errno != 0 {
		t.Fatalf("commit_tick: %+v", a)
	}
	if a, errno := ctl(t, root, `{"op":"fork","world":"base-18","parent":"base","tick":0,"meta":{"seed":"18"}}`); errno != 0 {
		t.Fatalf("fork: %+v", a)
	}
	for world, want := range map[string]map[string]string{
		"base":    {"seed": "17", "gravity": "9.81", "fast": "true"},
		"base-18": {"seed": "18", "gravity": "9.81", "fast": "true"},
	} {
		data, err := os.ReadFile(mt.path(world, "world.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Meta map[string]string `json:"meta"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || !maps.Equal(doc.Meta, want) {
			t.Errorf("%s/world.json meta: %v (%v), want %v", world, doc.Meta, err, want)
		}
	}
	big := strings.Repeat("x", index.MaxMetaValueLen+1)
	for _, cmd := range []string{
		`{"op":"create","world":"big","tables":` + tables + `,"meta":{"seed":"` + big + `"}}`,
		`{"op":"create","world":"big","tables":` + tables + `,"meta":{"seed":{"nested":1}}}`,
		`{"op":"fork","world":"big","parent":"base","tick":0,"meta":{"Seed":"1"}}`,
	} {
		if a, errno := ctl(t, root, cmd); errno != syscall.EINVAL {
			t.Errorf("%.80s: %v (%+v), want EINVAL", cmd, errno, a)
		}
	}
	if _, err := os.Stat(mt.path("big")); !os.IsNotExist(err) {
		t.Fatalf("a refused world exists: %v", err)
	}
}
