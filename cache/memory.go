package cache

import (
	"context"
	"fmt"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/worldfs/worldfs/bucket"
)

// Memory is an in-memory cache of small, hot, immutable objects (log slots,
// checkpoint shards, table descriptions, Parquet footers read by range),
// built on ristretto: admission and eviction by frequency, bounded in
// bytes.
type Memory struct {
	c *ristretto.Cache[string, cached]
}

type cached struct {
	data  []byte
	attrs bucket.Attrs
}

// NewMemory returns a cache of at most maxBytes.
func NewMemory(maxBytes int64) (*Memory, error) {
	c, err := ristretto.NewCache(&ristretto.Config[string, cached]{
		NumCounters: max(1000, maxBytes/1000), // about ten per expected entry of ~10 KB
		MaxCost:     maxBytes,
		BufferItems: 64,
	})
	if err != nil {
		return nil, fmt.Errorf("memory cache: %w", err)
	}
	return &Memory{c: c}, nil
}

// Close releases the cache.
func (m *Memory) Close() { m.c.Close() }

// MaxObject is the largest object the memory cache keeps.
const MaxObject = 4 << 20

// Wrap returns b with whole-object reads served from the cache. Only
// successful reads are cached: a missing name is asked again every time,
// so not-found stays strong.
func (m *Memory) Wrap(b bucket.Bucket) bucket.Bucket { return &memBucket{Bucket: b, m: m} }

type memBucket struct {
	bucket.Bucket
	m *Memory
}

func (mb *memBucket) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if v, ok := mb.m.c.Get(name); ok {
		return append([]byte(nil), v.data...), v.attrs, nil
	}
	data, attrs, err := mb.Bucket.Get(ctx, name)
	if err == nil && len(data) <= MaxObject {
		mb.m.c.Set(name, cached{append([]byte(nil), data...), attrs}, int64(len(data))+64)
	}
	return data, attrs, err
}

func (mb *memBucket) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	if v, ok := mb.m.c.Get(name); ok {
		lo, hi, err := bucket.ClampRange(name, int64(len(v.data)), offset, length)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), v.data[lo:hi]...), nil
	}
	return mb.Bucket.GetRange(ctx, name, offset, length)
}

var _ bucket.Wrapper = (*memBucket)(nil)

// Unwrap returns the bucket the cache reads through.
func (mb *memBucket) Unwrap() bucket.Bucket { return mb.Bucket }

func (mb *memBucket) String() string { return fmt.Sprintf("%v", mb.Bucket) }
