package fs

import (
	lru "container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// canonical is a compacted tick's Parquet file as the writer published it
// (maintenance.TickFile): served when the compacted file holding the tick's
// rows has a tick index, which gives the file's size at lookup, without a
// row read. The bytes are rebuilt from the tick's rows on first open, into
// the cache under their sha256, so every plan of the tick (a later, larger
// compaction included) finds the same file.
type canonical struct {
	table  *engine.Table
	holder *index.Fragment // the compacted file of the tick's rows; nil: it has none
	entry  maintenance.TickEntry
}

func (c *canonical) size() int64 { return c.entry.Size }

// key names the file in the cache: its content's sha256.
func (c *canonical) key() string {
	return "ticks/" + hex.EncodeToString(c.entry.Digest[:]) + ".parquet"
}

// canonicalOf returns the canonical form of tick t's table tf when every
// fragment is a compacted file and the one holding the tick (if any) has a
// usable tick index; nil when the file must be derived (sql.CopyTick): a
// split tick, or a compacted file written before tick indexes. A damaged
// tick index is an error (EIO), never a fallback.
func (m *Mount) canonicalOf(ctx context.Context, t tickRef, tf index.TableFragments) (*canonical, error) {
	if len(tf.Fragments) == 0 {
		return nil, nil
	}
	n := t.Tick.Tick
	var holder *index.Fragment
	for i := range tf.Fragments {
		f := &tf.Fragments[i]
		if f.Span == nil {
			return nil, nil
		}
		if f.Span.From <= n && n <= f.Span.To {
			holder = f
		}
	}
	table, err := m.table(ctx, t.World, tf.Table)
	if err != nil {
		return nil, err
	}
	if holder != nil {
		x, err := m.tickIndex(ctx, *holder)
		if errors.Is(err, maintenance.ErrNoTickIndex) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if e, ok := x.Entry(n); ok {
			return &canonical{table: table, holder: holder, entry: e}, nil
		}
	}
	// No compacted file holds a row of the tick: its file is the empty one.
	data, err := maintenance.EmptyTickFile(table)
	if err != nil {
		return nil, err
	}
	return &canonical{table: table, entry: maintenance.TickEntry{Tick: n, Size: int64(len(data)), Digest: sha256.Sum256(data)}}, nil
}

// rebuild writes c's bytes to the file tmp: the tick's rows read from its
// compacted file (on a local bucket the bucket's own file, else a verified
// copy in the cache) and encoded again, checked against the tick index.
func (m *Mount) rebuild(ctx context.Context, c *canonical, tmp string) error {
	var data []byte
	if c.holder == nil {
		var err error
		if data, err = maintenance.EmptyTickFile(c.table); err != nil {
			return err
		}
	} else {
		p, err := m.fragmentPath(ctx, *c.holder)
		if err != nil {
			return err
		}
		file, err := os.Open(p)
		if err != nil {
			return err
		}
		defer file.Close()
		info, err := file.Stat()
		if err != nil {
			return err
		}
		if info.Size() != c.holder.Bytes {
			return fmt.Errorf("%s holds %d bytes, its catalog record %d: %w", c.holder.Path, info.Size(), c.holder.Bytes, index.ErrCorrupt)
		}
		if data, err = maintenance.TickFile(c.table, file, info.Size(), c.entry); err != nil {
			return fmt.Errorf("%s: %w", c.holder.Path, err)
		}
	}
	return os.WriteFile(tmp, data, 0o444)
}

// table returns world's table id, rebuilt from its description (kept).
func (m *Mount) table(ctx context.Context, world, id string) (*engine.Table, error) {
	key := world + "/" + id
	m.mu.Lock()
	t, ok := m.mu.tables[key]
	m.mu.Unlock()
	if ok {
		return t, nil
	}
	info, err := m.tableInfo(ctx, world, id)
	if err != nil {
		return nil, err
	}
	if t, err = engine.TableFromInfo(info); err != nil {
		return nil, fmt.Errorf("world %s: table %s: %w", world, id, err)
	}
	m.mu.Lock()
	m.mu.tables[key] = t
	m.mu.Unlock()
	return t, nil
}

// maxTickIndexes bounds the tick indexes a mount keeps decoded (about
// 256 KiB each for a 4,096-tick file): enough for the files of a few
// hundred thousand ticks.
const maxTickIndexes = 256

// tickIndexes keeps decoded tick indexes, and which compacted files have
// none (an index is written before any tick names its file, so a file
// found without one never gets one), the least recently used dropped
// first; each is read once however many lookups want it at once.
type tickIndexes struct {
	group singleflight.Group
	mu    sync.Mutex
	order *lru.List               // of tickIndexEntry; front: the newest use
	byKey map[string]*lru.Element // INVARIANT: the elements of order, by path
}

type tickIndexEntry struct {
	path string
	x    *maintenance.TickIndex // nil: the file has no usable tick index
}

// tickIndex returns the tick index of the compacted file f (see
// maintenance.ReadTickIndex; maintenance.ErrNoTickIndex if it has none).
func (m *Mount) tickIndex(ctx context.Context, f index.Fragment) (*maintenance.TickIndex, error) {
	c := &m.tickIndexes
	found := func(x *maintenance.TickIndex) (*maintenance.TickIndex, error) {
		if x == nil {
			return nil, fmt.Errorf("%s: %w", f.Path, maintenance.ErrNoTickIndex)
		}
		return x, nil
	}
	c.mu.Lock()
	if c.byKey == nil {
		c.order, c.byKey = lru.New(), map[string]*lru.Element{}
	}
	if e, ok := c.byKey[f.Path]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return found(e.Value.(tickIndexEntry).x)
	}
	c.mu.Unlock()
	v, err, _ := c.group.Do(f.Path, func() (any, error) {
		x, err := maintenance.ReadTickIndex(finish(ctx), m.b, f)
		if err != nil && !errors.Is(err, maintenance.ErrNoTickIndex) {
			return nil, err // damaged or unreadable: asked again next time
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.byKey[f.Path]; !ok {
			c.byKey[f.Path] = c.order.PushFront(tickIndexEntry{f.Path, x})
			for c.order.Len() > maxTickIndexes {
				old := c.order.Remove(c.order.Back()).(tickIndexEntry)
				delete(c.byKey, old.path)
			}
		}
		return x, nil
	})
	if err != nil {
		return nil, err
	}
	return found(v.(*maintenance.TickIndex))
}
