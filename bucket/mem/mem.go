// Package mem is an in-memory bucket for tests and simulation. With a
// Profile it models an object store's latency and per-name mutation limit
// from a seeded random source, so that commit paths can be measured and
// replayed against GCS-shaped timing without a network. Faults are injected
// by wrapping it with package faulty, as any backend can be.
package mem

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/worldfs/worldfs/bucket"
)

// PageSize is how many objects List takes from the store per lock hold.
const PageSize = 1000

// Dist is a latency distribution: log-normal with the given median and 99th
// percentile. The zero Dist is no latency.
type Dist struct {
	P50, P99 time.Duration
}

func (d Dist) sample(r *rand.Rand) time.Duration {
	if d.P50 <= 0 {
		return 0
	}
	if d.P99 <= d.P50 {
		return d.P50
	}
	sigma := math.Log(float64(d.P99)/float64(d.P50)) / 2.326348 // z of p99
	return time.Duration(float64(d.P50) * math.Exp(sigma*r.NormFloat64()))
}

// Profile is a latency and throttling model. Latency is spent half before
// and half after the operation takes effect, as a request and its response
// would.
type Profile struct {
	Name string
	// Create and Delete are mutation latencies.
	Create, Delete Dist
	// Read is the latency of Get, GetRange and Stat.
	Read Dist
	// List is the latency of one listing page.
	List Dist
	// MutationInterval is the least time between two mutations of one
	// object name; an earlier mutation that would take effect is refused
	// as throttled (HTTP 429), which callers see as ErrAmbiguous.
	MutationInterval time.Duration
	// UploadBytesPerSec is the throughput of one upload: a create of N
	// bytes takes N/UploadBytesPerSec on top of its Create latency (0: size
	// costs nothing).
	UploadBytesPerSec int64
}

// createLatency samples the latency of a create of n bytes.
func (p Profile) createLatency(r *rand.Rand, n int) time.Duration {
	lat := p.Create.sample(r)
	if p.UploadBytesPerSec > 0 {
		lat += time.Duration(float64(n) / float64(p.UploadBytesPerSec) * float64(time.Second))
	}
	return lat
}

// Profiles by name, for mem:// URLs.
var Profiles = map[string]Profile{
	// "none": no latency, no throttling.
	"none": {Name: "none"},
	// "gcs": what worldfs's design measured on real GCS: a small-object
	// create about 40 ms at p50 and 50 ms at p99, metadata reads 11–14 ms,
	// at most one mutation per object name per second. A create also pays
	// for its size at 25 MiB/s, the throughput of one upload stream: a
	// single request of a few hundred KiB is spent mostly in TCP slow
	// start, well below the 100+ MB/s a long parallel transfer reaches, so
	// the figure is deliberately low. A 1 KiB slot then costs 0.04 ms more,
	// a 256 KiB one 10 ms (a quarter of the base latency), 1 MiB 40 ms and
	// an 8 MiB fragment 320 ms: growing a slot is cheap up to a few hundred
	// KiB and then stops paying, as it does on GCS.
	"gcs": {
		Name:              "gcs",
		Create:            Dist{40 * time.Millisecond, 50 * time.Millisecond},
		Delete:            Dist{40 * time.Millisecond, 50 * time.Millisecond},
		Read:              Dist{12 * time.Millisecond, 14 * time.Millisecond},
		List:              Dist{13 * time.Millisecond, 20 * time.Millisecond},
		MutationInterval:  time.Second,
		UploadBytesPerSec: 25 << 20,
	},
}

// Options configure a memory bucket.
type Options struct {
	Profile Profile
	// Seed seeds the latency model, so a run can be replayed.
	Seed uint64
	// Timeout is the deadline a real backend would give a call (0: none).
	// A call whose sampled latency exceeds it waits Timeout and fails with
	// *bucket.NotAnsweringError; a mutation whose first half of latency
	// fits in Timeout still takes effect, as a request that reached the
	// server and lost its answer would.
	Timeout time.Duration
}

// EnsureDefaults fills in what is unset with its default and returns o.
// Every zero value is already one (no latency, no throttling, no
// timeout), so it changes nothing; it is here so that every options type
// is read the same way.
func (o *Options) EnsureDefaults() *Options { return o }

// Validate checks the options once their defaults are in (New calls
// EnsureDefaults, then Validate); the error names the field and its value.
func (o *Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("mem bucket options: Timeout %v is negative (0: none)", o.Timeout)
	}
	p := o.Profile
	for _, d := range []struct {
		field string
		dist  Dist
	}{{"Create", p.Create}, {"Delete", p.Delete}, {"Read", p.Read}, {"List", p.List}} {
		if d.dist.P50 < 0 || d.dist.P99 < 0 {
			return fmt.Errorf("mem bucket options: Profile.%s {P50 %v, P99 %v}: a latency is negative", d.field, d.dist.P50, d.dist.P99)
		}
	}
	if p.MutationInterval < 0 {
		return fmt.Errorf("mem bucket options: Profile.MutationInterval %v is negative", p.MutationInterval)
	}
	if p.UploadBytesPerSec < 0 {
		return fmt.Errorf("mem bucket options: Profile.UploadBytesPerSec %d is negative (0: size costs nothing)", p.UploadBytesPerSec)
	}
	return nil
}

// ThrottledError is the memory model's HTTP 429: a mutation of one name
// came sooner than Profile.MutationInterval after the last. Nothing was
// applied, but like a real 429 it matches bucket.ErrAmbiguous.
type ThrottledError struct{ Name string }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("mem: %s: 429 too many mutations of one name", e.Name)
}

func (e *ThrottledError) Is(target error) bool { return target == bucket.ErrAmbiguous }

type object struct {
	name    string
	data    []byte
	gen     int64
	created time.Time
}

func less(a, b *object) bool { return a.name < b.name }

// store is the shared state behind every Bucket opened on one name.
type store struct {
	mu struct {
		sync.Mutex
		objects *btree.BTreeG[*object]
		// lastMutation is when each name was last mutated; kept only when
		// the profile throttles.
		lastMutation map[string]time.Time
		lastGen      int64
	}
}

func newStore() *store {
	s := &store{}
	s.mu.objects = btree.NewG(32, less)
	s.mu.lastMutation = map[string]time.Time{}
	return s
}

// Bucket is a memory bucket. Buckets opened with the same name by Open share
// their objects, as two clients of one real bucket would.
type Bucket struct {
	store   *store
	profile Profile
	timeout time.Duration
	rngMu   sync.Mutex
	rng     *rand.Rand
}

var _ bucket.Bucket = (*Bucket)(nil)

// New returns an empty bucket of its own. It panics if opts do not
// Validate: a memory bucket's options are written in the program (Open's
// come from a URL that sets none a caller could get wrong).
func New(opts Options) *Bucket {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		panic(err)
	}
	return &Bucket{store: newStore(), profile: opts.Profile, timeout: opts.Timeout, rng: rand.New(rand.NewPCG(opts.Seed, 0x776f726c64667321))}
}

var registry struct {
	sync.Mutex
	stores map[string]*store
}

// Open returns a bucket on the process-wide store called name, creating it
// empty on first use.
func Open(name string, opts Options) *Bucket {
	registry.Lock()
	defer registry.Unlock()
	if registry.stores == nil {
		registry.stores = map[string]*store{}
	}
	s, ok := registry.stores[name]
	if !ok {
		s = newStore()
		registry.stores[name] = s
	}
	b := New(opts)
	b.store = s
	return b
}

// Forget drops the process-wide store called name.
func Forget(name string) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.stores, name)
}

// Profile returns the bucket's latency model.
func (b *Bucket) Profile() Profile { return b.profile }

// latency samples one latency from d.
func (b *Bucket) latency(d Dist) time.Duration {
	if d.P50 <= 0 {
		return 0
	}
	b.rngMu.Lock()
	defer b.rngMu.Unlock()
	return d.sample(b.rng)
}

// createLatency samples the latency of a create of n bytes.
func (b *Bucket) createLatency(n int) time.Duration {
	b.rngMu.Lock()
	defer b.rngMu.Unlock()
	return b.profile.createLatency(b.rng, n)
}

// around runs apply in the middle of a latency lat. A context
// that ends before apply leaves the store untouched; one that ends after
// reports the error as an unknown outcome for mutations. A latency past the
// bucket's timeout is a call that got no answer (op and name name it).
func (b *Bucket) around(ctx context.Context, lat time.Duration, op, name string, apply func() error) error {
	mutation := op == "create" || op == "delete"
	if b.timeout > 0 && lat > b.timeout {
		noReply := &bucket.NotAnsweringError{Bucket: b.String(), Op: op, Name: name, After: b.timeout}
		if lat/2 >= b.timeout {
			noReply.Unapplied = true
			if err := bucket.Sleep(ctx, b.timeout); err != nil {
				return err
			}
			return noReply
		}
		if err := bucket.Sleep(ctx, lat/2); err != nil {
			return err
		}
		_ = apply() // its answer never arrives
		if err := bucket.Sleep(ctx, b.timeout-lat/2); err != nil && mutation {
			return fmt.Errorf("%w: response lost: %w", bucket.ErrAmbiguous, err)
		} else if err != nil {
			return err
		}
		return noReply
	}
	if err := bucket.Sleep(ctx, lat/2); err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	if err := bucket.Sleep(ctx, lat-lat/2); err != nil {
		if mutation {
			return fmt.Errorf("%w: response lost: %w", bucket.ErrAmbiguous, err)
		}
		return err
	}
	return nil
}

func (b *Bucket) throttled(name string, now time.Time) bool {
	if b.profile.MutationInterval <= 0 {
		return false
	}
	last, ok := b.store.mu.lastMutation[name]
	return ok && now.Sub(last) < b.profile.MutationInterval
}

func (b *Bucket) mutated(name string, now time.Time) {
	if b.profile.MutationInterval > 0 {
		b.store.mu.lastMutation[name] = now
	}
}

func (b *Bucket) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return bucket.Attrs{}, err
	}
	var attrs bucket.Attrs
	err := b.around(ctx, b.createLatency(len(data)), "create", name, func() error {
		s := b.store
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.mu.objects.Get(&object{name: name}); ok {
			return fmt.Errorf("mem: create %s: %w", name, bucket.ErrExist)
		}
		now := time.Now()
		if b.throttled(name, now) {
			return &ThrottledError{name}
		}
		b.mutated(name, now)
		s.mu.lastGen = max(s.mu.lastGen+1, now.UnixMicro())
		o := &object{name: name, data: append([]byte(nil), data...), gen: s.mu.lastGen, created: now}
		s.mu.objects.ReplaceOrInsert(o)
		attrs = o.attrs()
		return nil
	})
	return attrs, err
}

func (o *object) attrs() bucket.Attrs {
	return bucket.Attrs{Name: o.name, Size: int64(len(o.data)), Generation: o.gen, Created: o.created}
}

// lookup finds name under the read latency.
func (b *Bucket) lookup(ctx context.Context, op, name string) (*object, error) {
	if err := bucket.ValidateName(name); err != nil {
		return nil, err
	}
	var o *object
	err := b.around(ctx, b.latency(b.profile.Read), op, name, func() error {
		b.store.mu.Lock()
		defer b.store.mu.Unlock()
		var ok bool
		if o, ok = b.store.mu.objects.Get(&object{name: name}); !ok {
			return fmt.Errorf("mem: %s %s: %w", op, name, bucket.ErrNotExist)
		}
		return nil
	})
	return o, err
}

func (b *Bucket) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	o, err := b.lookup(ctx, "get", name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	// Objects are immutable once stored, so the copy needs no lock.
	return append([]byte(nil), o.data...), o.attrs(), nil
}

func (b *Bucket) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	o, err := b.lookup(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	lo, hi, err := bucket.ClampRange(name, int64(len(o.data)), offset, length)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), o.data[lo:hi]...), nil
}

func (b *Bucket) Stat(ctx context.Context, name string) (bucket.Attrs, error) {
	o, err := b.lookup(ctx, "stat", name)
	if err != nil {
		return bucket.Attrs{}, err
	}
	return o.attrs(), nil
}

func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	return func(yield func(bucket.Attrs, error) bool) {
		if err := bucket.ValidatePrefix(prefix); err != nil {
			yield(bucket.Attrs{}, err)
			return
		}
		after := max(startAfter, prefix)
		inclusive := startAfter < prefix // prefix itself may be an object
		for {
			var page []bucket.Attrs
			err := b.around(ctx, b.latency(b.profile.List), "list", prefix, func() error {
				b.store.mu.Lock()
				defer b.store.mu.Unlock()
				b.store.mu.objects.AscendGreaterOrEqual(&object{name: after}, func(o *object) bool {
					if o.name == after && !inclusive {
						return true
					}
					if !strings.HasPrefix(o.name, prefix) || len(page) == PageSize {
						return false
					}
					page = append(page, o.attrs())
					return true
				})
				return nil
			})
			if err != nil {
				yield(bucket.Attrs{}, err)
				return
			}
			for _, a := range page {
				if !yield(a, nil) {
					return
				}
			}
			if len(page) < PageSize {
				return
			}
			after, inclusive = page[len(page)-1].Name, false
		}
	}
}

func (b *Bucket) Delete(ctx context.Context, name string, generation int64) error {
	if err := bucket.ValidateName(name); err != nil {
		return err
	}
	return b.around(ctx, b.latency(b.profile.Delete), "delete", name, func() error {
		s := b.store
		s.mu.Lock()
		defer s.mu.Unlock()
		o, ok := s.mu.objects.Get(&object{name: name})
		if !ok {
			return fmt.Errorf("mem: delete %s: %w", name, bucket.ErrNotExist)
		}
		if o.gen != generation {
			return fmt.Errorf("mem: delete %s at generation %d (now %d): %w", name, generation, o.gen, bucket.ErrGenerationMismatch)
		}
		now := time.Now()
		if b.throttled(name, now) {
			return &ThrottledError{name}
		}
		b.mutated(name, now)
		s.mu.objects.Delete(o)
		return nil
	})
}

func (b *Bucket) Close() error { return nil }

func (b *Bucket) String() string { return "mem (" + b.profile.Name + ")" }
