package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/worldfs/worldfs/bucket"
)

// CheckpointFormat is the checkpoint format version written. Formats 1
// (claims without fragment lists), 2 (fragments without their generation
// or compaction span, ticks without their publish time) and 3 (each tick's
// fragment lists inline with its record, decoded at load) are still read:
// a checkpoint only ever shortens a replay, and an upgrade must not lock a
// world out. A reader refuses a format newer than its own (ErrCorrupt):
// it cannot know what it would miss.
const CheckpointFormat = 4

// checkpoint is a checkpoint object: the state's scalars and the shards
// that hold its records, by hash. Its bytes are a function of the state
// alone, so racing compactors create identical objects.
type checkpoint struct {
	// Sum is the SHA-256 of the checkpoint's JSON with Sum empty: a
	// checkpoint is named by its sequence, not its content, so it carries
	// its own check.
	Sum    string     `json:"sum"`
	Format int        `json:"format"`
	World  World      `json:"world"`
	Seq    uint64     `json:"seq"`
	Hash   string     `json:"hash"`
	Slots  uint64     `json:"slots"`
	Runs   []Run      `json:"runs"`
	Shards []shardRef `json:"shards"`
}

type shardRef struct {
	Kind string `json:"kind"`
	Run  string `json:"run"`
	N    int64  `json:"n"`
	Hash string `json:"hash"`
	// Seq is the last sequence that changed the shard.
	Seq uint64 `json:"seq"`
}

func (r shardRef) key() shardKey { return shardKey{r.Kind[0], r.Run, r.N} }

// WriteCheckpoint writes a checkpoint of s, reusing the shards of prev (the
// previous checkpoint's, may be nil) that did not change since, so its cost
// follows the change, not the world. It returns the checkpoint's name.
func WriteCheckpoint(ctx context.Context, b bucket.Bucket, s *State, prev *checkpoint) (string, *checkpoint, error) {
	if s.Seq == 0 {
		return "", nil, errors.New("checkpoint of an empty log")
	}
	old := map[shardKey]shardRef{}
	if prev != nil && prev.Format == CheckpointFormat { // shards of another format are all rewritten
		for _, r := range prev.Shards {
			old[r.key()] = r
		}
	}
	cp := &checkpoint{Format: CheckpointFormat, World: s.World, Seq: s.Seq, Hash: s.Hash, Slots: s.Slots, Runs: s.Runs()}
	var dirty []int
	s.shardSeq.Ascend(func(m shardMark) bool {
		r, ok := old[m.key]
		if !ok || r.Seq != m.seq {
			dirty = append(dirty, len(cp.Shards))
			r = shardRef{Kind: string(m.key.Kind), Run: m.key.Run, N: m.key.N, Seq: m.seq}
		}
		cp.Shards = append(cp.Shards, r)
		return true
	})
	err := parallel(ctx, len(dirty), func(i int) error {
		r := &cp.Shards[dirty[i]]
		plain, err := s.encodeShard(r.key())
		if err != nil {
			return err
		}
		if len(plain) > MaxShardBytes {
			// No reader would load it: fail this checkpoint (the log
			// stays the truth; cold starts replay further).
			return fmt.Errorf("shard %v is %d bytes, over the %d a reader loads", r.key(), len(plain), MaxShardBytes)
		}
		data := encoder.EncodeAll(plain, nil)
		sum := sha256.Sum256(data)
		r.Hash = hex.EncodeToString(sum[:])
		_, err = bucket.CreateOnce(ctx, b, ShardName(s.World.ID, r.Hash), data)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint of world %s at %d: %w", s.World.ID, s.Seq, err)
	}
	data, err := cp.seal()
	if err != nil {
		return "", nil, err
	}
	name := CheckpointName(s.World.ID, s.Seq)
	if _, err := bucket.CreateOnce(ctx, b, name, data); err != nil {
		return "", nil, fmt.Errorf("checkpoint of world %s at %d: %w", s.World.ID, s.Seq, err)
	}
	return name, cp, nil
}

// MaxShardBytes bounds a checkpoint shard's decoded size: writers refuse
// larger shards and readers refuse to decode them.
const MaxShardBytes = 512 << 20

var shardDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxShardBytes))

// seal sets Sum and returns the checkpoint's bytes.
func (cp *checkpoint) seal() ([]byte, error) {
	cp.Sum = ""
	body, err := json.Marshal(cp)
	if err != nil {
		return nil, err
	}
	cp.Sum = hashOf(body)
	return json.Marshal(cp)
}

// parallel runs fn(0..n-1) on a few goroutines and returns the first
// error; after one, nothing more is started.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(n, 4*runtime.GOMAXPROCS(0))))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// LoadCheckpoint reads and verifies the checkpoint called name and rebuilds
// the state it records. A missing or corrupt shard is ErrCorrupt: a
// checkpoint that names data it does not have fails closed.
func LoadCheckpoint(ctx context.Context, b bucket.Bucket, world, name string) (*State, *checkpoint, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s: %w", name, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return nil, nil, err
	}
	type decoded struct {
		ticks    []*Tick
		tokens   []tokenEntry
		claims   []*Claim
		commands []*CommandState
		last     uint64
	}
	out := make([]decoded, len(cp.Shards))
	err = parallel(ctx, len(cp.Shards), func(i int) error {
		r := cp.Shards[i]
		raw, _, err := b.Get(ctx, ShardName(world, r.Hash))
		if errors.Is(err, bucket.ErrNotExist) {
			return corrupt("shard %s is missing", r.Hash)
		}
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", name, err)
		}
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.Hash {
			return corrupt("shard %s does not hash to its name", r.Hash)
		}
		plain, err := shardDecoder.DecodeAll(raw, nil)
		if err != nil {
			return corrupt("shard %s: %v", r.Hash, err)
		}
		d := &out[i]
		// plain is never written again: decoded strings share it.
		k, last, err := decodeShard(cp.Format, r.Hash, plain, func(t *Tick, of int) {
			if d.ticks == nil {
				d.ticks, d.tokens = make([]*Tick, 0, of), make([]tokenEntry, 0, of)
			}
			d.ticks = append(d.ticks, t)
			d.tokens = append(d.tokens, tokenEntry{tokenKey(t.Run, t.CommitToken), t.Tick})
		},
			func(c *Claim) { d.claims = append(d.claims, c) }, func(c *CommandState) { d.commands = append(d.commands, c) })
		// The shard's records changed at most at its recorded sequence;
		// a release (claim.release) changes a shard by removing a record,
		// so the newest record may be older than the shard.
		if err != nil || k != r.key() || last > r.Seq {
			return corrupt("shard %s: %v (key %v, last record sequence %d, shard sequence %d)", r.Hash, err, k, last, r.Seq)
		}
		d.last = r.Seq
		slices.SortFunc(d.tokens, tokenCompare)
		// A writer lists a shard's ticks in order; an unsorted list is
		// sorted, as a tree of them would be, and a tick listed twice is
		// corrupt (parts are sets).
		if !slices.IsSortedFunc(d.ticks, tickCompare) {
			slices.SortFunc(d.ticks, tickCompare)
		}
		for j := 1; j < len(d.ticks); j++ {
			if !tickLess(d.ticks[j-1], d.ticks[j]) {
				return corrupt("shard %s: tick %s/%d listed twice", r.Hash, d.ticks[j].Run, d.ticks[j].Tick)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	s := Empty(world)
	s.World, s.Seq, s.Hash, s.Slots = cp.World, cp.Seq, cp.Hash, cp.Slots
	runs := map[string]Run{}
	for i := range cp.Runs {
		runs[cp.Runs[i].Name] = Run{Name: cp.Runs[i].Name, Head: -1}
		s.runs.ReplaceOrInsert(&cp.Runs[i])
	}
	for i, d := range out {
		if len(d.tokens) > 0 {
			s.tokens = append(s.tokens, d.tokens)
		}
		for _, t := range d.ticks {
			if t.Seq > cp.Seq {
				return nil, nil, corrupt("tick %s/%d changed at sequence %d, after the checkpoint", t.Run, t.Tick, t.Seq)
			}
			r := runs[t.Run]
			r.Head, r.Published = max(r.Head, t.Tick), r.Published+1
			runs[t.Run] = r
		}
		if len(d.ticks) > 0 {
			s.tickParts = append(s.tickParts, d.ticks)
		}
		for _, c := range d.claims {
			s.claims.ReplaceOrInsert(c)
		}
		for _, c := range d.commands {
			s.commands.ReplaceOrInsert(c)
		}
		s.shardSeq.ReplaceOrInsert(shardMark{cp.Shards[i].key(), d.last})
	}
	// The parts are ordered and disjoint: a tick shard holds one run's
	// ticks of its span, and a checkpoint lists each shard once, in order.
	slices.SortFunc(s.tickParts, func(a, b []*Tick) int { return tickCompare(a[0], b[0]) })
	for i := 1; i < len(s.tickParts); i++ {
		if a, b := s.tickParts[i-1], s.tickParts[i]; !tickLess(a[len(a)-1], b[0]) {
			return nil, nil, corrupt("tick shards of %s overlap at tick %d", b[0].Run, b[0].Tick)
		}
	}
	for _, r := range cp.Runs {
		if got := runs[r.Name]; got != r {
			return nil, nil, corrupt("run %s records %+v, its ticks say %+v", r.Name, r, got)
		}
	}
	if len(runs) != len(cp.Runs) {
		return nil, nil, corrupt("ticks of runs the checkpoint does not list")
	}
	return s, cp, nil
}

// readCheckpoint reads and checks a checkpoint object, not its shards.
func readCheckpoint(ctx context.Context, b bucket.Bucket, world, name string) (*checkpoint, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s: %w", name, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cp checkpoint
	if err := dec.Decode(&cp); err != nil {
		return nil, corrupt("undecodable: %v", err)
	}
	if cp.Format < 1 || cp.Format > CheckpointFormat || cp.World.ID != world || cp.Seq == 0 || cp.Hash == "" {
		return nil, corrupt("format %d world %q seq %d", cp.Format, cp.World.ID, cp.Seq)
	}
	sum := cp.Sum
	if _, err := cp.seal(); err != nil || cp.Sum != sum {
		return nil, corrupt("its checksum does not match its contents")
	}
	if checkpointSeq(world, name) != cp.Seq {
		return nil, corrupt("covers sequence %d", cp.Seq)
	}
	for _, r := range cp.Shards {
		if len(r.Kind) != 1 || len(r.Hash) != 64 {
			return nil, corrupt("shard reference %+v", r)
		}
	}
	return &cp, nil
}

// newestCheckpoint returns the name of world's newest checkpoint, or "".
func newestCheckpoint(ctx context.Context, b bucket.Bucket, world string) (string, []bucket.Attrs, error) {
	all, err := bucket.Collect(b.List(ctx, CheckpointPrefix(world), ""))
	if err != nil {
		return "", nil, err
	}
	if len(all) == 0 {
		return "", nil, nil
	}
	return all[len(all)-1].Name, all, nil
}

// CollectCheckpoints deletes old checkpoint objects of world: the newest
// keep stay, and so does any younger than minAge and the one the log
// starts from (its older slots were collected). Each delete is
// conditioned on the generation listed. It returns how many it deleted.
func CollectCheckpoints(ctx context.Context, b bucket.Bucket, world string, keep int, minAge time.Duration, now time.Time) (int, error) {
	_, dead, err := KeptCheckpoints(ctx, b, world, keep, minAge, now)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, a := range dead {
		err := bucket.DeleteOnce(ctx, b, a.Name, a.Generation)
		if err != nil && !errors.Is(err, bucket.ErrNotExist) && !errors.Is(err, bucket.ErrGenerationMismatch) {
			return deleted, err
		}
		if err == nil {
			deleted++
		}
	}
	return deleted, nil
}

// CollectSlots deletes slots that the oldest kept checkpoint covers and
// that are older than retention; a change feed cursor before them gets
// ErrResync. A catalog unconfirmed for Options.ReloadAfter reloads from the
// newest checkpoint instead of probing slot names, so retention MUST exceed
// ReloadAfter: a collected name would otherwise look like the log's tip. It
// returns how many slots it deleted.
func CollectSlots(ctx context.Context, b bucket.Bucket, world string, retention time.Duration, now time.Time) (int, error) {
	cps, err := bucket.Collect(b.List(ctx, CheckpointPrefix(world), ""))
	if err != nil || len(cps) == 0 {
		return 0, err
	}
	covered := checkpointSeq(world, cps[0].Name) // the oldest kept checkpoint
	limit := SlotName(world, covered+1)
	var prev *bucket.Attrs
	deleted := 0
	for a, err := range b.List(ctx, LogPrefix(world), "") {
		if err != nil {
			return deleted, err
		}
		if a.Name > limit {
			break
		}
		// prev is covered: the slot after it starts at or before covered+1.
		if prev != nil && now.Sub(prev.Created) >= retention {
			err := bucket.DeleteOnce(ctx, b, prev.Name, prev.Generation)
			if err != nil && !errors.Is(err, bucket.ErrNotExist) {
				return deleted, err
			}
			deleted++
		}
		a := a
		prev = &a
	}
	return deleted, nil
}
