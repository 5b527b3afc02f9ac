package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/internal/race"
)

// model is a deliberately simple in-memory model of the catalog: plain
// maps, no log, no slots.
type model struct {
	epoch   int64
	ticks   map[string]string // "run/tick" → token
	heads   map[string]int64
	claims  map[ClaimKey]*mclaim
	nclaims int64
}

type mclaim struct {
	digest, token, holder, state string
	lease                        int64
}

// outcome classes the model predicts.
const (
	okClass        = "ok"
	staleClass     = "stale"
	conflictClass  = "conflict"
	claimConflict  = "claim-conflict"
	pendingClass   = "pending"
	refusedClass   = "refused"
	existingClass  = "existing" // ok, with the original claim
	republishClass = "republish"
)

func classOf(err error, r Result) string {
	var se *StaleWriterError
	var ce *CatalogConflictError
	var cc *ClaimConflictError
	var pe *ClaimPendingError
	switch {
	case err == nil && r.Republished:
		return republishClass
	case err == nil && r.Existing:
		return existingClass
	case err == nil:
		return okClass
	case errors.As(err, &se):
		return staleClass
	case errors.As(err, &ce):
		return conflictClass
	case errors.As(err, &cc):
		return claimConflict
	case errors.As(err, &pe):
		return pendingClass
	case errors.Is(err, ErrRefused):
		return refusedClass
	}
	return "error: " + err.Error()
}

// predict returns the class e gets on the model and a function applying
// its effect.
func (m *model) predict(e Entry) (string, func()) {
	nothing := func() {}
	switch e.Kind {
	case KindFenceAcquire:
		return okClass, func() { m.epoch++ }
	case KindTickPublish:
		p := e.TickPublish
		key := fmt.Sprintf("%s/%d", p.Run, p.Tick)
		switch tok, ok := m.ticks[key]; {
		case p.WriterEpoch != m.epoch:
			return staleClass, nothing
		case ok && tok == p.CommitToken:
			return republishClass, nothing
		case ok:
			return conflictClass, nothing
		}
		return okClass, func() {
			m.ticks[key] = p.CommitToken
			if h, ok := m.heads[p.Run]; !ok || p.Tick > h {
				m.heads[p.Run] = p.Tick
			}
		}
	default:
		c := e.Claim
		old := m.claims[c.Key]
		if old != nil && old.digest != c.Digest {
			return claimConflict, nothing
		}
		switch e.Kind {
		case KindClaimAcquire:
			switch {
			case old != nil && old.state == ClaimComplete:
				return existingClass, nothing
			case old != nil && old.state != ClaimReleased:
				return pendingClass, nothing
			}
			return okClass, func() {
				m.nclaims++
				m.claims[c.Key] = &mclaim{digest: c.Digest, token: c.CommitToken, holder: c.Holder, state: ClaimPending, lease: c.LeaseUntilMs}
			}
		case KindClaimTakeover:
			switch {
			case old == nil || old.state == ClaimReleased:
				return refusedClass, nothing
			case old.state == ClaimComplete:
				return existingClass, nothing
			case c.NowMs < old.lease && c.Holder != old.holder: // the holder itself renews
				return pendingClass, nothing
			}
			return okClass, func() { old.holder, old.lease = c.Holder, c.LeaseUntilMs }
		case KindClaimComplete:
			switch {
			case old == nil || old.token != c.CommitToken || old.state == ClaimReleased:
				return refusedClass, nothing
			case old.state == ClaimComplete:
				return existingClass, nothing
			}
			return okClass, func() { old.state = ClaimComplete }
		case KindClaimRelease:
			switch {
			case old != nil && old.state == ClaimReleased && old.token == c.CommitToken:
				return okClass, nothing // the same release again
			case old == nil || old.state == ClaimComplete || old.token != c.CommitToken || old.holder != c.Holder:
				return refusedClass, nothing
			}
			return okClass, func() { old.state, old.holder, old.lease = ClaimReleased, "", 0 }
		}
	}
	panic("unmodeled entry " + e.Kind)
}

// applied reports whether e took effect in s (after an unknown outcome),
// given the model before it.
func (m *model) applied(e Entry, s *State) bool {
	switch e.Kind {
	case KindFenceAcquire:
		return s.World.Epoch == m.epoch+1
	case KindTickPublish:
		t, ok := s.Tick(e.TickPublish.Run, e.TickPublish.Tick)
		_, had := m.ticks[fmt.Sprintf("%s/%d", e.TickPublish.Run, e.TickPublish.Tick)]
		return ok && !had && t.CommitToken == e.TickPublish.CommitToken
	default:
		c, ok := s.Claim(e.Claim.Key)
		old := m.claims[e.Claim.Key]
		switch e.Kind {
		case KindClaimAcquire:
			return ok && (old == nil || old.state == ClaimReleased && c.State == ClaimPending)
		case KindClaimTakeover:
			return ok && old != nil && c.Holder == e.Claim.Holder && c.LeaseUntilMs == e.Claim.LeaseUntilMs && old.lease != c.LeaseUntilMs
		case KindClaimRelease:
			return ok && old != nil && old.state == ClaimPending && c.State == ClaimReleased
		default:
			return ok && old != nil && old.state == ClaimPending && c.State == ClaimComplete
		}
	}
}

// check compares the state with the model.
func (m *model) check(s *State) error {
	if s.World.Epoch != m.epoch || s.World.Claims != m.nclaims {
		return fmt.Errorf("epoch %d claims %d, model %d %d", s.World.Epoch, s.World.Claims, m.epoch, m.nclaims)
	}
	n := 0
	var err error
	allTicks(s, func(t *Tick) bool {
		n++
		if m.ticks[fmt.Sprintf("%s/%d", t.Run, t.Tick)] != t.CommitToken {
			err = fmt.Errorf("tick %s/%d token %s, model %q", t.Run, t.Tick, t.CommitToken, m.ticks[fmt.Sprintf("%s/%d", t.Run, t.Tick)])
			return false
		}
		return true
	})
	if err != nil || n != len(m.ticks) {
		return fmt.Errorf("%v (%d ticks, model %d)", err, n, len(m.ticks))
	}
	for run, h := range m.heads {
		if r, _ := s.Run(run); r.Head != h {
			return fmt.Errorf("run %s head %d, model %d", run, r.Head, h)
		}
	}
	if got := s.claims.Len(); got != len(m.claims) {
		return fmt.Errorf("%d claims, model %d", got, len(m.claims))
	}
	for k, mc := range m.claims {
		c, ok := s.Claim(k)
		if !ok || c.State != mc.state || c.CommitToken != mc.token || c.Holder != mc.holder || c.LeaseUntilMs != mc.lease {
			return fmt.Errorf("claim %s: %+v, model %+v", k, c, mc)
		}
	}
	return nil
}

func randomEntry(r *rand.Rand, epochs []int64, now int64) Entry {
	runs := []string{"r1", "r2"}
	key := ClaimKey{Run: runs[r.IntN(2)], Producer: "p", ExternalID: fmt.Sprint("e", r.IntN(4))}
	digest := fmt.Sprint("d", r.IntN(5)/4) // mostly d0, sometimes d1
	claim := func(kind Kind) Entry {
		op := &ClaimOp{Key: key, Digest: digest, CommitToken: "c-" + key.String() + digest,
			Holder: fmt.Sprint("h", r.IntN(3)), NowMs: now, LeaseUntilMs: now + int64(r.IntN(3)+1)}
		if kind == KindClaimComplete {
			op.Fragments = factFragments(key.Run, op.CommitToken)
		}
		return Entry{Kind: kind, Claim: op}
	}
	switch x := r.IntN(20); {
	case x < 2:
		return fence(fmt.Sprint("w", r.IntN(2)))
	case x < 13:
		// Ticks in three checkpoint shards, so that partial loads read
		// some of them.
		// Tokens "t0".."t2" publish at several ticks, and so do some
		// that name a tick (TickToken), at theirs or at others.
		tick := int64(r.IntN(6)) * tickShardSpan / 2
		token := fmt.Sprint("t", r.IntN(3))
		if r.IntN(3) == 0 {
			token = spanToken(3 * int64(r.IntN(4)) * tickShardSpan / 2)
		}
		return publish(runs[r.IntN(2)], tick, token, epochs[r.IntN(len(epochs))])
	case x < 16:
		return claim(KindClaimAcquire)
	case x < 17:
		return claim(KindClaimTakeover)
	case x < 18:
		return claim(KindClaimRelease)
	default:
		return claim(KindClaimComplete)
	}
}

// TestModel runs seeded random operations from two committers (one of them
// behind a faulty bucket) against the catalog and checks every outcome, and
// the final log read cold, against the model.
func TestModel(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 100
	}
	if race.Enabled {
		runs = 200 // each seed is as concurrent; the detector needs no thousand of them
	}
	ctx := ctxT(t)
	most := 0
	for seed := range uint64(runs) {
		n, err := modelRun(ctx, seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		most = max(most, n)
	}
	// The burst must have reached slots of hundreds of entries, or the
	// test did not exercise large batches.
	if most < burst/4 {
		t.Fatalf("the largest slot held %d entries; the burst of %d should have made slots of hundreds", most, burst)
	}
	t.Logf("largest slot: %d entries", most)
}

// modelRun runs one seed and returns the most entries a slot held.
func modelRun(ctx context.Context, seed uint64) (int, error) {
	r := rand.New(rand.NewPCG(seed, 42))
	inner := mem.New(mem.Options{})
	gate := &gateBucket{Bucket: inner}
	c0, epoch, err := CreateWorld(ctx, gate, "w", WorldCreate{CreatedUnixMs: 1}, "w0", Options{NoCompactor: true, YieldJitter: time.Nanosecond})
	if err != nil {
		return 0, err
	}
	defer c0.Close()
	fb := faulty.Wrap(gate, faulty.NewRandom(seed, 0.1, []faulty.Kind{faulty.FailBefore, faulty.FailAfter}, 0, faulty.OpCreate, faulty.OpGet))
	var c1 *Catalog
	for c1 == nil {
		if c1, err = Open(ctx, fb, "w", Options{NoCompactor: true, SlotTimeout: time.Second, YieldJitter: time.Nanosecond}); err != nil && !faulty.IsInjected(err) {
			return 0, err
		}
	}
	defer c1.Close()
	cats := []*Catalog{c0, c1}
	m := &model{epoch: epoch, ticks: map[string]string{}, heads: map[string]int64{}, claims: map[ClaimKey]*mclaim{}}
	epochs := []int64{epoch}
	for step := range 30 {
		e := randomEntry(r, epochs, int64(step))
		c := cats[r.IntN(2)]
		res, err := c.Commit(ctx, e)
		if errors.Is(err, bucket.ErrUnavailable) {
			continue // nothing committed; the tip could not be confirmed
		}
		if errors.Is(err, bucket.ErrAmbiguous) {
			s, rerr := c0.Exact(ctx)
			if rerr != nil {
				return 0, rerr
			}
			_, effect := m.predict(e)
			if m.applied(e, s) {
				effect()
			}
			if e.Kind == KindFenceAcquire && s.World.Epoch > epochs[len(epochs)-1] {
				epochs = append(epochs, s.World.Epoch)
			}
			continue
		}
		want, effect := m.predict(e)
		if got := classOf(err, res); got != want {
			return 0, fmt.Errorf("step %d: %s %+v: got %s (%v), model says %s (model epoch %d)", step, e.Kind, e.TickPublish, got, err, want, m.epoch)
		}
		effect()
		if e.Kind == KindFenceAcquire && err == nil {
			epochs = append(epochs, res.Epoch)
		}
		if r.IntN(15) == 0 {
			if _, err := c0.Checkpoint(ctx); err != nil {
				return 0, err
			}
		}
	}
	live, err := c0.Exact(ctx)
	if err != nil {
		return 0, err
	}
	if err := m.check(live); err != nil {
		return 0, fmt.Errorf("live state: %w", err)
	}
	// Partial states loaded here are refreshed from the log after the
	// burst (Partial.Refresh), and must then answer as a load at the tip.
	type early struct {
		want Want
		p    *Partial
	}
	var earlies []early
	for range 3 {
		e := early{want: randomWant(r)}
		if e.p, _, err = LoadFor(ctx, inner, "w", e.want); err != nil {
			return 0, fmt.Errorf("partial load of %+v: %w", e.want, err)
		}
		earlies = append(earlies, e)
	}
	// A concurrent burst from both committers exercises batching,
	// pipelining and rebase: slot creates are held until every request of
	// the burst is queued (or in a held slot), so that the next slots
	// take hundreds of entries. Then the whole log, replayed through a
	// fresh model, must hold only entries that apply, each operation once,
	// and end where the catalog does.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []Entry
	n := 12
	if seed%10 == 0 {
		n = burst
	}
	gate.hold()
	ops0 := c0.ops.Load() + c1.ops.Load()
	for i := range n {
		e := randomEntry(r, epochs, int64(100+i))
		if n == burst && i%4 != 0 {
			// Most random entries conflict; fresh claims fill the slots.
			e = Entry{Kind: KindClaimAcquire, Claim: &ClaimOp{Key: ClaimKey{Run: "r1", Producer: "burst", ExternalID: fmt.Sprint(i)},
				Digest: "d0", CommitToken: fmt.Sprint("c-burst-", i), Holder: "h0", NowMs: 100, LeaseUntilMs: 101}}
		}
		c := cats[r.IntN(2)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Commit(ctx, e); err == nil {
				mu.Lock()
				acked = append(acked, e)
				mu.Unlock()
			}
		}()
	}
	// Every request of the burst takes its operation id just before it is
	// queued.
	for c0.ops.Load()+c1.ops.Load()-ops0 < uint64(n) {
		runtime.Gosched()
	}
	gate.release()
	wg.Wait()
	if live, err = c0.Exact(ctx); err != nil {
		return 0, err
	}
	replay := &model{ticks: map[string]string{}, heads: map[string]int64{}, claims: map[ClaimKey]*mclaim{}}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ops := map[string]bool{}
	for ch, err := range Changes(cctx, inner, "w", 1, time.Millisecond) {
		if err != nil {
			return 0, err
		}
		if ops[ch.Entry.Op] {
			return 0, fmt.Errorf("operation %s is in the log twice (again at %d)", ch.Entry.Op, ch.Seq)
		}
		ops[ch.Entry.Op] = true
		if ch.Entry.Kind != KindWorldCreate {
			class, effect := replay.predict(ch.Entry)
			if class != okClass && class != republishClass && class != existingClass {
				return 0, fmt.Errorf("the log holds a %s entry at %d that does not apply (%s)", ch.Entry.Kind, ch.Seq, class)
			}
			effect()
		}
		if ch.Seq == live.Seq {
			break
		}
	}
	if err := replay.check(live); err != nil {
		return 0, fmt.Errorf("after the burst: %w", err)
	}
	for _, e := range acked {
		if e.Kind == KindTickPublish {
			if t, ok := live.Tick(e.TickPublish.Run, e.TickPublish.Tick); !ok || t.CommitToken != e.TickPublish.CommitToken {
				return 0, fmt.Errorf("an acknowledged publish of %s/%d is not in the log", e.TickPublish.Run, e.TickPublish.Tick)
			}
		}
	}
	cold, _, err := Load(ctx, inner, "w")
	if err != nil {
		return 0, err
	}
	if d := diff(live, cold); d != "" {
		return 0, fmt.Errorf("cold start differs from the live state: %s", d)
	}
	for _, e := range earlies {
		if err := e.p.Refresh(ctx); err != nil {
			return 0, fmt.Errorf("refresh of a partial load of %+v: %w", e.want, err)
		}
		if _, err := partialAlike(cold, e.p, e.want); err != nil {
			return 0, fmt.Errorf("partial load of %+v, refreshed after the burst: %w", e.want, err)
		}
	}
	// Partial loads (LoadFor) answer what they were loaded for as the
	// whole state does, and refuse the rest: from the newest checkpoint
	// and the log after it, then from a checkpoint of the tip.
	for round := range 2 {
		if round == 1 {
			if _, err := c0.Checkpoint(ctx); err != nil {
				return 0, err
			}
		}
		for range 4 {
			want := randomWant(r)
			p, _, err := LoadFor(ctx, inner, "w", want)
			if err != nil {
				return 0, fmt.Errorf("partial load of %+v: %w", want, err)
			}
			if _, err := partialAlike(cold, p, want); err != nil {
				return 0, fmt.Errorf("partial load of %+v: %w", want, err)
			}
		}
	}
	return largestSlot(ctx, inner)
}

// randomWant is what a random reader of the model's world reads: ticks,
// and sometimes the tick of a token.
func randomWant(r *rand.Rand) Want {
	from := int64(r.IntN(7)-1) * tickShardSpan / 2
	want := Want{Run: fmt.Sprint("r", 1+r.IntN(2)), From: from, To: from + int64(r.IntN(3))*tickShardSpan/2, Head: r.IntN(2) == 0}
	if r.IntN(3) == 0 {
		// A token: one of those published at many ticks (naming none),
		// or one never published.
		want.Token = fmt.Sprint("t", r.IntN(4))
	}
	return want
}

// burst is how many entries the model test offers at once on every tenth
// seed (12 on the others).
const burst = 600

// largestSlot returns the most entries any slot of world "w" holds.
func largestSlot(ctx context.Context, b bucket.Bucket) (int, error) {
	most := 0
	for a, err := range b.List(ctx, LogPrefix("w"), "") {
		if err != nil {
			return 0, err
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return 0, err
		}
		slot, _, err := DecodeSlot("w", a.Name, data)
		if err != nil {
			return 0, err
		}
		most = max(most, len(slot.Entries))
	}
	return most, nil
}

// gateBucket holds creates of log slots, while held, until released.
type gateBucket struct {
	bucket.Bucket
	mu   sync.Mutex
	gate chan struct{} // nil: not holding
}

func (g *gateBucket) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gateBucket) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gateBucket) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil && strings.HasPrefix(name, LogPrefix("w")) {
		<-gate
	}
	return g.Bucket.Create(ctx, name, data)
}
