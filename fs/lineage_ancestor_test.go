package fs

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/index"
)

// A fork whose parent does not exist: every lineage question the mount
// answers is EIO (ErrCorrupt), as index.OpenView's is, read cold and
// through open catalogs.
func TestLineageMissingAncestorIsEIO(t *testing.T) {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	for _, cp := range []bool{false, true} {
		name := fmt.Sprintf("f%v", cp)
		buildLineage(t, b, []lineageWorld{{name: name, parent: "ghost", at: 5, own: map[string][]int64{"main": {7}}, checkpoint: cp}})
		if _, err := index.OpenView(ctx, index.LoadFrom(b), name, "main"); Errno(err) != syscall.EIO {
			t.Fatalf("%s: index.OpenView: %v; the test assumes it is EIO", name, err)
		}
		m := lineageMount(t, b)
		check := func(what string, err error) {
			t.Helper()
			if Errno(err) != syscall.EIO {
				t.Errorf("%s: %s: %v (errno %v), want EIO", name, what, err, Errno(err))
			}
		}
		_, _, err := m.tick(ctx, name, "main", 3)
		check("inherited tick 3", err)
		_, _, err = m.head(ctx, name, "other")
		check("head of run other", err)
		_, err = m.openStream(ctx, &ticksDir{dirBase{m: m}, name, "main"})
		check("listing of ticks/", err)
		_, err = m.worldJSON(ctx, name)
		check("world.json", err)
		_, err = m.tableNames(ctx, name, "main", false)
		check("tables/", err)
	}
}
