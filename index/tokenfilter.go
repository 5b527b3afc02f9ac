package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/worldfs/worldfs/bucket"
)

// Tick shard token filters. A lookup of a commit token that does not name
// its tick (TokenTick: a claim's, one minted before tokens named their
// tick, one a writer chose) needs every tick that may carry it: without
// more, every tick shard of the run. Beside each tick shard lies a Bloom
// filter over the commit tokens of its ticks: a lookup reads the run's
// filters (a few KB each) and decodes only the shards whose filter may
// hold the token (Want.Token, Partial.TickByToken).
//
// A Bloom filter has no false negatives (a token a shard's tick carries
// is always "may hold"), is built in one pass over a shard's ticks, and
// needs no deletion or update: a shard never changes (a changed shard is
// a new one, with a filter of its own). At 7 hash functions and about 10
// bits a token it answers "may hold" for about 1% of the tokens a shard
// does not carry: 4,096 ticks take about 5 KB.
//
// A filter is a sidecar object named from its shard's hash
// (ShardTokenFilterName), written with the shard, like a summary
// (summary.go): checkpoints are unchanged, so a worldfs that knows no
// filters reads what this one writes, and a shard without one (written by
// a worldfs that wrote none, or whose filter a collector of such a
// worldfs deleted) is decoded for every such lookup. A filter carries its
// shard's hash and key and a SHA-256 of its bytes: one that does not
// decode, does not match its shard or fails its sum is ErrCorrupt, never
// a reason to skip the shard or to decode it instead.

// tokenFilterMagic begins a filter's bytes (and versions them).
const tokenFilterMagic = "worldfs tick token filter 1\n"

// Filter parameters: tokenFilterK hash functions, tokenFilterBits bits a
// tick (about 1% false positives).
const (
	tokenFilterK    = 7
	tokenFilterBits = 10
)

// tokenFilter is the token filter of one tick shard.
type tokenFilter struct {
	key   shardKey
	hash  string // the shard's
	ticks int64  // how many ticks the shard holds
	k     uint64 // hash functions
	bits  []byte // the filter, len·8 bits
}

// tokenHashes returns the two hashes a filter derives its k probes from
// (double hashing): SHA-256 of the token, so that every build agrees.
func tokenHashes(token string) (uint64, uint64) {
	h := sha256.Sum256([]byte(token))
	return binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16]) | 1
}

func (f *tokenFilter) add(token string) {
	h1, h2 := tokenHashes(token)
	m := uint64(len(f.bits)) * 8
	for i := range f.k {
		j := (h1 + i*h2) % m
		f.bits[j/8] |= 1 << (j % 8)
	}
}

// may reports whether the shard may hold a tick that carries token:
// false only if none does.
func (f *tokenFilter) may(token string) bool {
	h1, h2 := tokenHashes(token)
	m := uint64(len(f.bits)) * 8
	for i := range f.k {
		j := (h1 + i*h2) % m
		if f.bits[j/8]&(1<<(j%8)) == 0 {
			return false
		}
	}
	return true
}

// tokenFilterOf returns the token filter of tick shard k of s (nil if s
// holds no tick of it).
func (s *State) tokenFilterOf(k shardKey, hash string) *tokenFilter {
	var tokens []string
	s.ascendTicks(&Tick{Run: k.Run, Tick: k.N * tickShardSpan}, func(t *Tick) bool {
		if t.Run != k.Run || t.Tick/tickShardSpan != k.N {
			return false
		}
		tokens = append(tokens, t.CommitToken)
		return true
	})
	if len(tokens) == 0 {
		return nil
	}
	f := &tokenFilter{key: k, hash: hash, ticks: int64(len(tokens)), k: tokenFilterK,
		bits: make([]byte, max(8, (len(tokens)*tokenFilterBits+7)/8))}
	for _, tok := range tokens {
		f.add(tok)
	}
	return f
}

// encode returns the filter's bytes: its fields, then the SHA-256 of them.
func (f *tokenFilter) encode() []byte {
	var e enc
	e.b = append(e.b, tokenFilterMagic...)
	e.str(f.hash)
	e.byte(f.key.Kind)
	e.str(f.key.Run)
	e.varint(f.key.N)
	e.varint(f.ticks)
	e.uvarint(f.k)
	e.bytes(f.bits)
	h := sha256.Sum256(e.b)
	return append(e.b, h[:]...)
}

// decodeTokenFilter decodes and checks the token filter of shard r of
// checkpoint name (its bytes data): anything wrong with it is ErrCorrupt.
func decodeTokenFilter(name string, r shardRef, data []byte) (*tokenFilter, error) {
	corrupt := func(format string, args ...any) error {
		return corruptCheckpoint(name, "token filter of shard %s: %s", r.Hash, fmt.Sprintf(format, args...))
	}
	if len(data) < len(tokenFilterMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(tokenFilterMagic)) {
		return nil, corrupt("not a token filter")
	}
	body := data[:len(data)-sha256.Size]
	if h := sha256.Sum256(body); !bytes.Equal(h[:], data[len(body):]) {
		return nil, corrupt("its checksum does not match its contents")
	}
	d := dec{b: body[len(tokenFilterMagic):]}
	f := &tokenFilter{hash: d.str()}
	f.key.Kind = d.byte()
	f.key.Run = d.str()
	f.key.N = d.varint()
	f.ticks = d.varint()
	f.k = d.uvarint()
	f.bits = d.bytes()
	if d.err == nil && len(d.b) != 0 {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return nil, corrupt("%v", d.err)
	}
	switch {
	case f.hash != r.Hash || f.key != r.key():
		return nil, corrupt("filters shard %s (%v), not shard %v", f.hash, f.key, r.key())
	case f.ticks < 1 || f.ticks > tickShardSpan || f.k < 1 || f.k > 32 || len(f.bits) == 0 || len(f.bits) > math.MaxInt32/8:
		return nil, corrupt("%d ticks, %d hash functions, %d bytes", f.ticks, f.k, len(f.bits))
	}
	return f, nil
}

// writeTokenFilter writes the token filter of tick shard r of s.
func writeTokenFilter(ctx context.Context, b bucket.Bucket, s *State, r shardRef) error {
	f := s.tokenFilterOf(r.key(), r.Hash)
	if f == nil {
		return nil
	}
	_, err := bucket.CreateOnce(ctx, b, ShardTokenFilterName(s.World.ID, r.Hash), f.encode())
	return err
}

// readTokenFilter reads the token filter of tick shard r of checkpoint
// name: nil if there is none (a worldfs that wrote none), ErrCorrupt if
// it is damaged.
func readTokenFilter(ctx context.Context, b bucket.Bucket, world, name string, r shardRef) (*tokenFilter, error) {
	data, _, err := b.Get(ctx, ShardTokenFilterName(world, r.Hash))
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: token filter of shard %s: %w", name, r.Hash, err)
	}
	return decodeTokenFilter(name, r, data)
}

// loadToken adds to s (whose partial p is) what Partial.TickByToken needs
// to answer for want.Token in want.Run (up to want.TokenTo, if set):
// nothing if the tick the token names carries it (namedTick); else the
// shards that may hold the token (candidates).
func (p *partial) loadToken(ctx context.Context, s *State, want Want) error {
	refs, err := p.candidates(ctx, s, want)
	if err != nil {
		return err
	}
	return p.add(ctx, s, refs)
}

// tokenShards returns the numbers of the tick shards of run that may
// hold a tick up to want.TokenTo (every shard of run if it is not set).
func (p *partial) tokenShards(want Want) []int64 {
	ns := p.shards[want.Run]
	if want.TokenTo <= 0 {
		return ns
	}
	i, _ := slices.BinarySearch(ns, tickShard(want.Run, want.TokenTo).N+1)
	return ns[:i]
}

// candidates returns the tick shards of want.Run (up to want.TokenTo)
// that s (whose partial p is) lacks and that may hold a tick carrying
// want.Token: none if the tick the token names carries it (namedTick)
// within that bound; else those whose token filter may hold it and those
// without one, after reading the filters of those shards that p has not
// read (several at once). A damaged filter is ErrCorrupt.
func (p *partial) candidates(ctx context.Context, s *State, want Want) ([]shardRef, error) {
	run, token := want.Run, want.Token
	if t, ok := s.namedTick(run, token); ok && (want.TokenTo <= 0 || t.Tick <= want.TokenTo) {
		return nil, nil
	}
	shards := p.tokenShards(want)
	var unread []shardRef
	for _, n := range shards {
		k := shardKey{'t', run, n}
		if _, read := p.filters[k]; !read && !p.loaded[k] {
			unread = append(unread, p.ref(k))
		}
	}
	fs := make([]*tokenFilter, len(unread))
	err := parallelReads(ctx, len(unread), func(i int) error {
		var err error
		fs[i], err = readTokenFilter(ctx, p.b, p.cp.World.ID, p.name, unread[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	if p.filters == nil {
		p.filters = map[shardKey]*tokenFilter{}
	}
	for i, f := range fs {
		p.filters[unread[i].key()] = f
	}
	var refs []shardRef
	for _, n := range shards {
		k := shardKey{'t', run, n}
		if f := p.filters[k]; !p.loaded[k] && (f == nil || f.may(token)) {
			refs = append(refs, p.ref(k))
		}
	}
	return refs, nil
}

// TokenCandidates returns how many checkpoint parts a Load of p for
// want.Token in want.Run (Want.Token, Want.TokenTo) would add for the
// token: those that may hold a tick carrying it, by their token filters,
// and those without a filter. It reads the filters p has not read (Load
// then reads none again), no part. A damaged filter is ErrCorrupt.
func (p *Partial) TokenCandidates(ctx context.Context, want Want) (int, error) {
	if p.s.part == nil {
		return 0, nil
	}
	refs, err := p.s.part.candidates(ctx, p.s, want)
	return len(refs), err
}

// coversToken is nil if s (whose partial p is) holds every tick of run
// up to upTo that may carry token: each tick shard of run that may hold
// one is loaded, or its token filter (read by loadToken) says it holds
// no tick that does.
func (p *partial) coversToken(run, token string, upTo int64) error {
	for _, n := range p.tokenShards(Want{Run: run, TokenTo: upTo}) {
		k := shardKey{'t', run, n}
		if p.loaded[k] {
			continue
		}
		if f := p.filters[k]; f == nil || f.may(token) {
			return fmt.Errorf("token %s in ticks %d..%d of run %s (checkpoint %s): %w", token, n*tickShardSpan, (n+1)*tickShardSpan-1, run, p.name, ErrNotLoaded)
		}
	}
	return nil
}
