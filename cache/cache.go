// Package cache keeps local copies of bucket objects. worldfs objects never
// change once created (a name, if ever deleted, is never reused with other
// content), so a copy needs no expiry. Disk keeps fragment files for
// readers that need paths (DuckDB), bounded in bytes with least recently
// used eviction; Memory keeps small hot objects (catalog slots and shards,
// table descriptions) in a ristretto cache.
package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// DefaultMaxBytes is the size a disk cache is held to unless told
// otherwise (Options.MaxBytes, the CLI's --cache-size): 10 GiB.
const DefaultMaxBytes = 10 << 30

// DefaultGrace is how long a file used stays safe from eviction unless
// told otherwise (Options.Grace).
const DefaultGrace = 10 * time.Minute

// Options configure a disk cache.
type Options struct {
	// MaxBytes bounds the cache's size (DefaultMaxBytes).
	MaxBytes int64
	// Grace: a file used this recently is never evicted, so a path handed
	// to a reader (another process, perhaps) stays readable while it is
	// being read (DefaultGrace).
	Grace time.Duration
}

// EnsureDefaults fills in what is unset (zero) with its default and
// returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	return o
}

// Validate checks the options once their defaults are in (Open calls
// EnsureDefaults, then Validate); the error names the field and its value.
func (o *Options) Validate() error {
	if o.MaxBytes < 0 {
		return fmt.Errorf("cache options: MaxBytes %d is negative (0: the default, %d)", o.MaxBytes, int64(DefaultMaxBytes))
	}
	if o.Grace < 0 {
		return fmt.Errorf("cache options: Grace %v is negative (0: the default, %v)", o.Grace, DefaultGrace)
	}
	return nil
}

// Disk is a directory of object copies, shared safely by goroutines and by
// processes: files appear by atomic rename and are read in place.
type Disk struct {
	dir  string
	opts Options
	// waiting, if set (by this package's tests, before any call), is
	// called when a caller starts waiting for another's load.
	waiting func()
	mu      struct {
		sync.Mutex
		size    int64
		entries map[string]*entry // by file path
		loads   map[string]*load  // fetches in progress, by file path
		hits    int64
		misses  int64
	}
}

// Stats counts lookups.
type Stats struct {
	Hits, Misses, Bytes int64
}

// Stats returns the cache's counters and the bytes this process knows it
// holds.
func (d *Disk) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Hits: d.mu.hits, Misses: d.mu.misses, Bytes: d.mu.size}
}

type entry struct {
	size int64
	used time.Time
}

type load struct {
	done chan struct{}
	err  error
}

// Open opens (creating it if needed) the cache in dir.
func Open(dir string, opts Options) (*Disk, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	d := &Disk{dir: dir, opts: opts}
	d.mu.entries = map[string]*entry{}
	d.mu.loads = map[string]*load{}
	if err := os.MkdirAll(filepath.Join(dir, "objects"), 0o755); err != nil {
		return nil, err
	}
	// Learn what is there (other processes keep adding; each process
	// bounds what it knows of).
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return nil
		}
		if strings.Contains(de.Name(), ".tmp-") {
			if time.Since(info.ModTime()) > time.Minute {
				os.Remove(p) // a fetch that died
			}
			return nil
		}
		d.mu.entries[p] = &entry{size: info.Size(), used: info.ModTime()}
		d.mu.size += info.Size()
		return nil
	})
	return d, err
}

// Path returns a local file holding the object called name in b, fetching
// it on first use. Concurrent callers of one name share one fetch.
func (d *Disk) Path(ctx context.Context, b bucket.Bucket, bucketID, name string) (string, error) {
	if err := bucket.ValidateName(name); err != nil {
		return "", err
	}
	p := filepath.Join(d.dir, "objects", bucketID, filepath.FromSlash(name))
	return d.produce(ctx, p, func(tmp string) error {
		data, _, err := b.Get(ctx, name)
		if err != nil {
			return err
		}
		return os.WriteFile(tmp, data, 0o644)
	})
}

// DerivedPrefix keys the files Derived keeps, apart from object copies
// (a bucket id never starts with it).
const DerivedPrefix = "~derived"

// Derived returns a local file holding a file derived from immutable
// objects (a materialized snapshot, say), named by key (a relative,
// slash-separated path that determines the content). make writes the
// content to the temporary path it is given; the file appears at its
// final path by rename, once, and counts against the cache's bound like
// any object copy. Concurrent callers of one key share one make.
func (d *Disk) Derived(ctx context.Context, key string, make func(tmp string) error) (string, error) {
	if err := bucket.ValidateName(key); err != nil {
		return "", fmt.Errorf("derived key: %w", err)
	}
	return d.produce(ctx, filepath.Join(d.dir, "objects", DerivedPrefix, filepath.FromSlash(key)), make)
}

// DerivedSize reports the size of the derived file called key if it is
// already in the cache (made by this or another process), without making
// it or counting a lookup: what a stat may learn for free.
func (d *Disk) DerivedSize(key string) (int64, bool) {
	if bucket.ValidateName(key) != nil {
		return 0, false
	}
	info, err := os.Stat(filepath.Join(d.dir, "objects", DerivedPrefix, filepath.FromSlash(key)))
	if err != nil || !info.Mode().IsRegular() {
		return 0, false
	}
	return info.Size(), true
}

// produce returns p, filling it with fill (through a temporary file and a
// rename) unless this or another process already did.
func (d *Disk) produce(ctx context.Context, p string, fill func(tmp string) error) (string, error) {
	for {
		d.mu.Lock()
		if e, ok := d.mu.entries[p]; ok {
			if _, err := os.Stat(p); err == nil {
				now := time.Now()
				e.used = now
				d.mu.hits++
				d.mu.Unlock()
				_ = os.Chtimes(p, now, now) // recency for other processes
				return p, nil
			}
			d.mu.size -= e.size // removed by another process
			delete(d.mu.entries, p)
		}
		if l, ok := d.mu.loads[p]; ok {
			d.mu.Unlock()
			if d.waiting != nil {
				d.waiting()
			}
			select {
			case <-l.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if l.err != nil && !loaderGaveUp(l.err) {
				return "", l.err
			}
			continue // made, or its caller gave up: look again (and make it)
		}
		if info, err := os.Stat(p); err == nil { // another process made it
			d.mu.entries[p] = &entry{size: info.Size(), used: time.Now()}
			d.mu.size += info.Size()
			d.mu.hits++
			d.mu.Unlock()
			return p, nil
		}
		l := &load{done: make(chan struct{})}
		d.mu.loads[p] = l
		d.mu.misses++
		d.mu.Unlock()
		size, err := d.fill(p, fill)
		d.mu.Lock()
		delete(d.mu.loads, p)
		if err == nil {
			d.mu.entries[p] = &entry{size: size, used: time.Now()}
			d.mu.size += size
		}
		l.err = err
		close(l.done)
		d.evictLocked()
		d.mu.Unlock()
		if err != nil {
			return "", err
		}
		return p, nil
	}
}

// loaderGaveUp reports whether a load failed because its own caller's
// context ended: that is no answer for the callers waiting on it, who
// have contexts of their own and try again.
func loaderGaveUp(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// fill makes p through a temporary file and a rename, so readers never
// see a partial file.
func (d *Disk) fill(p string, fill func(tmp string) error) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := p + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := fill(tmp); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("cache: %w", err)
	}
	info, err := os.Stat(tmp)
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("cache: %w", err)
	}
	return info.Size(), nil
}

// evictLocked removes least recently used files past their grace until the
// cache fits its bound.
func (d *Disk) evictLocked() {
	if d.mu.size <= d.opts.MaxBytes {
		return
	}
	type cand struct {
		path string
		e    *entry
	}
	var cs []cand
	for p, e := range d.mu.entries {
		if time.Since(e.used) >= d.opts.Grace {
			cs = append(cs, cand{p, e})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return a.e.used.Compare(b.e.used) })
	for _, c := range cs {
		if d.mu.size <= d.opts.MaxBytes {
			return
		}
		if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		d.mu.size -= c.e.size
		delete(d.mu.entries, c.path)
	}
}

// KeptPrefix keys the files Keep stores, apart from object copies and
// derived files (a bucket id never starts with it).
const KeptPrefix = "~kept"

// Keep stores data as the kept file called key (a relative, slash-separated
// path), replacing any, counted against the cache's bound like any object
// copy. Unlike Derived, key need not determine the content: a kept file
// remembers something that may go stale (a built views script), and its
// reader checks that it is still current before using it.
func (d *Disk) Keep(key string, data []byte) error {
	if err := bucket.ValidateName(key); err != nil {
		return fmt.Errorf("kept key: %w", err)
	}
	p := filepath.Join(d.dir, "objects", KeptPrefix, filepath.FromSlash(key))
	size, err := d.fill(p, func(tmp string) error { return os.WriteFile(tmp, data, 0o600) })
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.mu.entries[p]; ok {
		d.mu.size -= e.size
	}
	d.mu.entries[p] = &entry{size: size, used: time.Now()}
	d.mu.size += size
	d.evictLocked()
	return nil
}

// Kept returns the content of the kept file called key and marks it used,
// or an error wrapping fs.ErrNotExist if there is none (never kept, or
// evicted).
func (d *Disk) Kept(key string) ([]byte, error) {
	if err := bucket.ValidateName(key); err != nil {
		return nil, fmt.Errorf("kept key: %w", err)
	}
	p := filepath.Join(d.dir, "objects", KeptPrefix, filepath.FromSlash(key))
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // recency for other processes
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.mu.entries[p]; ok {
		d.mu.size += int64(len(data)) - e.size
		e.size, e.used = int64(len(data)), now
	} else {
		d.mu.entries[p] = &entry{size: int64(len(data)), used: now}
		d.mu.size += int64(len(data))
	}
	d.mu.hits++
	return data, nil
}
