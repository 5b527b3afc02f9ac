package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// <world>/facts/ holds what seed 003 makes visible:
//
//	receipts.parquet, receipts.csv   the world's evaluation receipts (worldfs_receipts)
//	<run>/<table>.parquet, .csv      the visible facts of each fact table of a run
//
// The files change as facts are completed, so they are revalidated like
// ticks/ and rematerialized (once per set of visible facts) when read.

const receiptsFile = "receipts"

// factsDir is <world>/facts.
type factsDir struct {
	dirBase
	world string
}

var (
	_ = (gofs.NodeLookuper)((*factsDir)(nil))
	_ = (gofs.NodeReaddirer)((*factsDir)(nil))
)

func (d *factsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	runs, err := d.m.factRuns(ctx, d.world)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	var out []fuse.DirEntry
	for _, f := range formats {
		out = append(out, dirEntry(receiptsFile+"."+f, syscall.S_IFREG, ino(d.world, "facts", receiptsFile+"."+f)))
	}
	for _, run := range runs {
		out = append(out, dirEntry(run, syscall.S_IFDIR, ino(d.world, "facts", run)))
	}
	return list(out)
}

func (d *factsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	id := ino(d.world, "facts", name)
	if base, format, ok := splitFormat(name); ok && base == receiptsFile {
		return d.m.child(ctx, d.EmbeddedInode(), d.m.factFile(id, d.world, engine.EvaluationRun, wsql.ReceiptsView, format), out)
	}
	runs, err := d.m.factRuns(ctx, d.world)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	if !slices.Contains(runs, name) {
		return nil, syscall.ENOENT
	}
	return d.m.child(ctx, d.EmbeddedInode(), &factRunDir{dirBase{m: d.m, ino: id}, d.world, name}, out)
}

// factRunDir is <world>/facts/<run>: a file per fact table and format.
type factRunDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*factRunDir)(nil))
	_ = (gofs.NodeReaddirer)((*factRunDir)(nil))
)

func (d *factRunDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	tables, err := d.m.factTables(ctx, d.world, d.run)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	var out []fuse.DirEntry
	for _, name := range sortedKeys(tables) {
		for _, f := range formats {
			out = append(out, dirEntry(name+"."+f, syscall.S_IFREG, ino(d.world, "facts", d.run, name+"."+f)))
		}
	}
	return list(out)
}

func (d *factRunDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	base, format, ok := splitFormat(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	tables, err := d.m.factTables(ctx, d.world, d.run)
	if err != nil {
		return nil, d.m.errno("facts of "+d.world, err)
	}
	if _, ok := tables[base]; !ok {
		return nil, syscall.ENOENT
	}
	return d.m.child(ctx, d.EmbeddedInode(), d.m.factFile(ino(d.world, "facts", d.run, name), d.world, d.run, base, format), out)
}

func splitFormat(name string) (base, format string, ok bool) {
	for _, f := range formats {
		if b, found := strings.CutSuffix(name, "."+f); found && b != "" {
			return b, f, true
		}
	}
	return "", "", false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// factRuns returns the runs of world with visible facts: its own (with or
// without ticks) and, for a fork, those it inherits.
func (m *Mount) factRuns(ctx context.Context, world string) ([]string, error) {
	s, err := m.state(ctx, world, false)
	if err != nil {
		return nil, err
	}
	runs, err := m.runs(ctx, world)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, run := range s.ClaimRuns() {
		if !slices.Contains(runs, run) {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	for _, run := range runs {
		if run == engine.EvaluationRun {
			continue
		}
		tables, err := m.factTables(ctx, world, run)
		if err != nil {
			return nil, err
		}
		if len(tables) > 0 {
			out = append(out, run)
		}
	}
	return out, nil
}

// factTables returns the fact tables with visible facts in run of world,
// by name, each with the completed claim tokens of its facts, sorted: the
// same lineage walk as the SQL views (a fork shows its ancestors' facts up
// to its fork point). Run engine.EvaluationRun gives the receipts, which
// are the world's own.
func (m *Mount) factTables(ctx context.Context, world, run string) (map[string][]string, error) {
	var v *index.View
	if run == engine.EvaluationRun {
		s, err := m.state(ctx, world, false)
		if err != nil {
			return nil, err
		}
		v = index.OwnView(s, run)
	} else {
		var err error
		if v, err = m.view(ctx, world, run, false); err != nil {
			return nil, err
		}
	}
	out := map[string][]string{}
	var ferr error
	v.Facts(math.MaxInt64, func(c index.FactRef) bool {
		for _, tf := range c.Tables {
			ti, err := m.tableInfo(ctx, c.World, tf.Table)
			if err != nil {
				ferr = err
				return false
			}
			name := ti.Name
			if run == engine.EvaluationRun {
				name = wsql.ReceiptsView
			}
			out[name] = append(out[name], c.CommitToken)
		}
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	for _, tokens := range out {
		slices.Sort(tokens)
	}
	return out, nil
}

// factFile is a facts file: the visible facts of table (or the receipts),
// materialized once per set of visible facts.
func (m *Mount) factFile(id uint64, world, run, table, format string) *bytesFile {
	return &bytesFile{m: m, ino: id, content: func(ctx context.Context) ([]byte, error) {
		tables, err := m.factTables(ctx, world, run)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(strings.Join(tables[table], "\n")))
		key := fmt.Sprintf("facts/%s/%s/%s-%s.%s", world, run, table, hex.EncodeToString(sum[:12]), format)
		p, err := m.derive(ctx, key, func(ctx context.Context, tmp string) error {
			viewRun := run
			if run == engine.EvaluationRun {
				viewRun = "main" // receipts are the world's: any run's views show them
			}
			return wsql.CopyFacts(ctx, m.b, world, wsql.Options{Run: viewRun, Cache: m.opts.Cache, BucketID: m.opts.BucketID, Verified: m.verified}, table, format, tmp)
		})
		if err != nil {
			return nil, err
		}
		return os.ReadFile(p)
	}}
}
