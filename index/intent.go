package index

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Intents: how the catalog protects what is written before an entry names
// it (docs/ARCHITECTURE.md, invariant 16). The entries are intent.open and
// intent.close (IntentOp); this file holds what a state keeps of them and
// how they apply.

// Intent is an open intent as the state holds it.
type Intent struct {
	ID           string `json:"id"`
	Holder       string `json:"holder"`
	What         string `json:"what,omitempty"`
	LeaseUntilMs int64  `json:"lease_until_ms"`
	// Seq is the sequence that opened it: the catalog is pinned there
	// (nothing named at or after it is collected while it is open).
	Seq uint64 `json:"seq"`
}

// NewIntentID returns a fresh intent id (64 random bits).
func NewIntentID() string {
	var b [IntentIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// Intents returns the open intents, by id.
func (s *State) Intents() []Intent { return slices.Clone(s.intents) }

// Intent returns the open intent id (false: not open).
func (s *State) Intent(id string) (Intent, bool) {
	i, ok := slices.BinarySearchFunc(s.intents, id, func(in Intent, id string) int { return strings.Compare(in.ID, id) })
	if !ok {
		return Intent{}, false
	}
	return s.intents[i], true
}

// PinSeq returns the lowest sequence an open intent pins (ok false: no
// intent is open). Whatever the catalog named at that sequence or later is
// kept by collection, whatever its age.
func (s *State) PinSeq() (seq uint64, ok bool) {
	for _, in := range s.intents {
		if !ok || in.Seq < seq {
			seq, ok = in.Seq, true
		}
	}
	return seq, ok
}

// applyIntent applies intent.open and intent.close: see IntentOp.
func (n *State) applyIntent(kind Kind, op *IntentOp, seq uint64) error {
	i, found := slices.BinarySearchFunc(n.intents, op.ID, func(in Intent, id string) int { return strings.Compare(in.ID, id) })
	// The slice is shared with the states this one was cloned from: every
	// change copies it.
	switch kind {
	case KindIntentOpen:
		if !found {
			n.intents = slices.Insert(slices.Clone(n.intents), i, Intent{ID: op.ID, Holder: op.Holder, What: op.What, LeaseUntilMs: op.LeaseUntilMs, Seq: seq})
			return nil
		}
		old := n.intents[i]
		if old.Holder != op.Holder {
			return refused("intent %s is held by %s, not %s", op.ID, old.Holder, op.Holder)
		}
		n.intents = slices.Clone(n.intents)
		n.intents[i].LeaseUntilMs = max(old.LeaseUntilMs, op.LeaseUntilMs)
		return nil
	default: // KindIntentClose
		if !found {
			return nil
		}
		if old := n.intents[i]; old.Holder != op.Holder && op.NowMs < old.LeaseUntilMs {
			return refused("intent %s is held by %s until %d ms, now is %d ms", op.ID, old.Holder, old.LeaseUntilMs, op.NowMs)
		}
		n.intents = slices.Delete(slices.Clone(n.intents), i, i+1)
		return nil
	}
}

// checkIntent refuses a new compaction entry citing an intent that is not
// open, or naming a compacted file that does not carry its intent's id: a
// compaction publishes only files written under its own live intent
// (invariant 16).
func (s *State) checkIntent(rw *FragmentsRewrite) error {
	if rw.Intent == "" {
		return nil
	}
	if _, ok := s.Intent(rw.Intent); !ok {
		return refused("rewrite of run %s under intent %s, which is not open (closed, or its lease ended and a collector closed it)", rw.Run, rw.Intent)
	}
	for _, tf := range rw.Tables {
		for _, f := range tf.Fragments {
			if CompactedIntentOf(f.Path) != rw.Intent {
				return refused("rewrite of run %s under intent %s names %s, which was not written under it", rw.Run, rw.Intent, f.Path)
			}
		}
	}
	return nil
}

// DefaultIntentLease is how long an intent stays open unless its holder
// renews it: far longer than a compaction window or an export takes, so
// that only a holder that died loses it. A collector closes an intent
// whose lease ended; its holder's entry is then refused, and its files
// are garbage.
const DefaultIntentLease = time.Hour

// HeldIntent is an intent this process opened (Catalog.OpenIntent): the id
// its objects carry and the sequence it pins, with the means to renew and
// close it.
type HeldIntent struct {
	cat   *Catalog
	op    IntentOp
	lease time.Duration
	// Seq is the sequence that opened the intent.
	Seq uint64

	mu      sync.Mutex
	renewed time.Time // when the lease was last set
}

// ID is the intent's id.
func (h *HeldIntent) ID() string { return h.op.ID }

// OpenIntent opens a fresh intent (invariant 16), held by this catalog's
// store, for lease (DefaultIntentLease if ≤ 0); what says, for people,
// what it is for. Everything written under the intent must be written
// after OpenIntent returns. An ambiguous outcome is an error: the intent
// may be open, and its lease ends it.
func (c *Catalog) OpenIntent(ctx context.Context, what string, lease time.Duration) (*HeldIntent, error) {
	if lease <= 0 {
		lease = DefaultIntentLease
	}
	h := &HeldIntent{cat: c, lease: lease,
		op: IntentOp{ID: NewIntentID(), Holder: c.opts.Store, What: what}}
	now := time.Now()
	op := h.op
	op.NowMs, op.LeaseUntilMs = now.UnixMilli(), now.Add(lease).UnixMilli()
	r, err := c.Commit(ctx, Entry{Kind: KindIntentOpen, Intent: &op})
	if err != nil {
		return nil, fmt.Errorf("world %s: opening an intent for %s: %w", c.world, what, err)
	}
	h.Seq, h.renewed = r.Seq, now
	return h, nil
}

// Renew extends the lease once half of it has passed (otherwise it does
// nothing): a holder calls it before each entry it commits under the
// intent. It fails if the intent is no longer open (a collector closed it
// when its lease ended): what the holder wrote will never be named.
func (h *HeldIntent) Renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if now.Sub(h.renewed) < h.lease/2 {
		return nil
	}
	s, err := h.cat.Exact(ctx)
	if err != nil {
		return err
	}
	if _, ok := s.Intent(h.op.ID); !ok {
		return refused("intent %s (%s) was closed: its lease ended", h.op.ID, h.op.What)
	}
	op := h.op
	op.NowMs, op.LeaseUntilMs = now.UnixMilli(), now.Add(h.lease).UnixMilli()
	if _, err := h.cat.Commit(ctx, Entry{Kind: KindIntentOpen, Intent: &op}); err != nil {
		return fmt.Errorf("world %s: renewing intent %s: %w", h.cat.world, h.op.ID, err)
	}
	h.renewed = now
	return nil
}

// Close closes the intent. It is safe to call more than once; a failure
// leaves the intent to its lease.
func (h *HeldIntent) Close(ctx context.Context) error {
	op := h.op
	op.NowMs = time.Now().UnixMilli()
	_, err := h.cat.Commit(ctx, Entry{Kind: KindIntentClose, Intent: &op})
	if err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("world %s: closing intent %s: %w", h.cat.world, h.op.ID, err)
	}
	return err
}

// CloseExpired closes, for a collector, the open intents of s whose lease
// ended by now, each with its own entry (one whose holder renewed it
// meanwhile is refused and stays open). It returns those it closed.
func (c *Catalog) CloseExpired(ctx context.Context, s *State, holder string, now time.Time) ([]Intent, error) {
	var closed []Intent
	for _, in := range s.intents {
		if now.UnixMilli() < in.LeaseUntilMs {
			continue
		}
		op := IntentOp{ID: in.ID, Holder: holder, NowMs: now.UnixMilli()}
		_, err := c.Commit(ctx, Entry{Kind: KindIntentClose, Intent: &op})
		if errors.Is(err, ErrRefused) {
			continue // renewed since
		}
		if err != nil {
			return closed, fmt.Errorf("world %s: closing intent %s, whose lease ended: %w", c.world, in.ID, err)
		}
		closed = append(closed, in)
	}
	return closed, nil
}
