// Package faulty wraps any bucket with injected faults, so that the retry,
// ambiguity and crash paths above the bucket can be driven on purpose: an
// error before the operation applies, an error after it applied, a response
// that never arrives, or a stall.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// Op names a bucket operation.
type Op int

const (
	OpCreate Op = iota
	OpGet       // Get and GetRange
	OpStat
	OpList
	OpDelete
)

var opNames = [...]string{"create", "get", "stat", "list", "delete"}

func (o Op) String() string { return opNames[o] }

func (o Op) mutation() bool { return o == OpCreate || o == OpDelete }

// Kind is what goes wrong.
type Kind int

const (
	// None: the operation runs normally.
	None Kind = iota
	// FailBefore: the operation fails without taking effect.
	FailBefore
	// FailAfter: the operation takes effect, then fails as if the server
	// answered 503.
	FailAfter
	// DropResponse: the operation takes effect and its response never
	// arrives; the call returns when ctx ends.
	DropResponse
	// Stall: the operation waits Fault.Stall (or until ctx ends) before
	// it runs normally.
	Stall
)

var kindNames = [...]string{"none", "fail-before", "fail-after", "drop-response", "stall"}

func (k Kind) String() string { return kindNames[k] }

// Fault is one injected fault.
type Fault struct {
	Kind  Kind
	Stall time.Duration
}

// Injector decides the fault for each call. It MUST be safe for concurrent
// use.
type Injector interface {
	Fault(op Op, name string) Fault
}

// InjectedError is returned by an injected failure. For mutations it
// matches bucket.ErrAmbiguous, since a caller cannot tell a failure before
// from one after; for reads it matches bucket.ErrUnavailable.
type InjectedError struct {
	Op   Op
	Name string
	Kind Kind
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faulty: %s %s: injected %s (503)", e.Op, e.Name, e.Kind)
}

func (e *InjectedError) Is(target error) bool {
	if e.Op.mutation() {
		return target == bucket.ErrAmbiguous
	}
	return target == bucket.ErrUnavailable
}

// Bucket is a bucket with faults injected in front of another.
type Bucket struct {
	inner bucket.Bucket
	inj   Injector
}

var _ bucket.Bucket = (*Bucket)(nil)

// Wrap returns inner with faults from inj.
func Wrap(inner bucket.Bucket, inj Injector) *Bucket { return &Bucket{inner: inner, inj: inj} }

// do runs call under the fault inj picks for (op, name).
func (b *Bucket) do(ctx context.Context, op Op, name string, call func() error) error {
	f := b.inj.Fault(op, name)
	switch f.Kind {
	case FailBefore:
		return &InjectedError{op, name, f.Kind}
	case Stall:
		if err := bucket.Sleep(ctx, f.Stall); err != nil {
			return err
		}
	}
	err := call()
	switch f.Kind {
	case FailAfter:
		return &InjectedError{op, name, f.Kind}
	case DropResponse:
		<-ctx.Done()
		if op.mutation() {
			return fmt.Errorf("faulty: %s %s: response dropped: %w: %w", op, name, bucket.ErrAmbiguous, ctx.Err())
		}
		return ctx.Err()
	}
	return err
}

func (b *Bucket) Create(ctx context.Context, name string, data []byte) (a bucket.Attrs, err error) {
	err = b.do(ctx, OpCreate, name, func() error { a, err = b.inner.Create(ctx, name, data); return err })
	return a, err
}

func (b *Bucket) Get(ctx context.Context, name string) (data []byte, a bucket.Attrs, err error) {
	err = b.do(ctx, OpGet, name, func() error { data, a, err = b.inner.Get(ctx, name); return err })
	return data, a, err
}

func (b *Bucket) GetRange(ctx context.Context, name string, off, n int64) (data []byte, err error) {
	err = b.do(ctx, OpGet, name, func() error { data, err = b.inner.GetRange(ctx, name, off, n); return err })
	return data, err
}

func (b *Bucket) Stat(ctx context.Context, name string) (a bucket.Attrs, err error) {
	err = b.do(ctx, OpStat, name, func() error { a, err = b.inner.Stat(ctx, name); return err })
	return a, err
}

// List injects one fault per listing, decided when it starts.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	return func(yield func(bucket.Attrs, error) bool) {
		var stopped bool
		err := b.do(ctx, OpList, prefix, func() error {
			for a, err := range b.inner.List(ctx, prefix, startAfter) {
				if err != nil {
					return err
				}
				if !yield(a, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		})
		if err != nil && !stopped {
			yield(bucket.Attrs{}, err)
		}
	}
}

func (b *Bucket) Delete(ctx context.Context, name string, gen int64) error {
	return b.do(ctx, OpDelete, name, func() error { return b.inner.Delete(ctx, name, gen) })
}

func (b *Bucket) Close() error { return b.inner.Close() }

var _ bucket.Wrapper = (*Bucket)(nil)

// Unwrap returns the bucket the faults are injected in front of.
func (b *Bucket) Unwrap() bucket.Bucket { return b.inner }

func (b *Bucket) String() string { return fmt.Sprintf("faulty(%v)", b.inner) }

// Rule injects Fault into calls of Op on names starting with Prefix: it
// lets the first Skip matching calls through, then injects into the next
// Times calls (0: every call from then on).
type Rule struct {
	Op     Op
	Prefix string
	Skip   int
	Times  int
	Fault  Fault
}

// Script applies rules in order; the first rule that fires wins. It is
// deterministic for a given call order.
type Script struct {
	mu    sync.Mutex
	rules []Rule
	seen  []int
	// Injected counts the faults injected so far.
	Injected int
}

// NewScript returns an injector that follows rules.
func NewScript(rules ...Rule) *Script {
	return &Script{rules: rules, seen: make([]int, len(rules))}
}

// SetRules replaces the script's rules (and restarts their counts), so a
// test can change the faults of a bucket already in use.
func (s *Script) SetRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules, s.seen = rules, make([]int, len(rules))
}

func (s *Script) Fault(op Op, name string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.rules {
		if r.Op != op || !strings.HasPrefix(name, r.Prefix) {
			continue
		}
		s.seen[i]++
		n := s.seen[i] - r.Skip
		if n >= 1 && (r.Times == 0 || n <= r.Times) {
			s.Injected++
			return r.Fault
		}
	}
	return Fault{}
}

// Random injects each of Kinds with probability Rate per call, from a
// seeded source, so a failing run can be replayed.
type Random struct {
	mu    sync.Mutex
	rng   *rand.Rand
	rate  float64
	kinds []Kind
	ops   map[Op]bool
	stall time.Duration
}

// NewRandom returns a seeded random injector for ops (all ops when none are
// given). Stalls last stall.
func NewRandom(seed uint64, rate float64, kinds []Kind, stall time.Duration, ops ...Op) *Random {
	r := &Random{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rate: rate, kinds: kinds, stall: stall}
	if len(ops) > 0 {
		r.ops = map[Op]bool{}
		for _, op := range ops {
			r.ops[op] = true
		}
	}
	return r
}

func (r *Random) Fault(op Op, _ string) Fault {
	if r.ops != nil && !r.ops[op] {
		return Fault{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.kinds) == 0 || r.rng.Float64() >= r.rate {
		return Fault{}
	}
	return Fault{Kind: r.kinds[r.rng.IntN(len(r.kinds))], Stall: r.stall}
}

// IsInjected reports whether err came from an injected fault.
func IsInjected(err error) bool {
	var ie *InjectedError
	return errors.As(err, &ie)
}
