package index

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
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
	// Intents are the open intents (intent.go); a state with none writes
	// the same bytes as before intents existed.
	Intents []Intent `json:"intents,omitempty"`
	// Tags are the world's tags (tag.go), by name; a state with none
	// writes the same bytes as before tags existed.
	Tags []Tag `json:"tags,omitempty"`
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
//
// A checkpoint names objects written before it (its shards), which
// collection keeps only while a checkpoint names them or they are younger
// than its floor for shards (an hour). So a write is bounded
// (CheckpointWriteLimit) and a checkpoint is abandoned rather than name a
// shard that an earlier, failed attempt wrote long ago and that no
// checkpoint names (ErrStaleShard): collection may be deleting it. Its
// shards are otherwise either written by this call, or carried from prev,
// or written by a racer at the same moment (docs/ARCHITECTURE.md,
// invariant 16).
func WriteCheckpoint(ctx context.Context, b bucket.Bucket, s *State, prev *checkpoint) (string, *checkpoint, error) {
	if s.Seq == 0 {
		return "", nil, errors.New("checkpoint of an empty log")
	}
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(CheckpointWriteLimit))
	defer cancel()
	old := map[shardKey]shardRef{}
	if prev != nil && prev.Format == CheckpointFormat { // shards of another format are all rewritten
		for _, r := range prev.Shards {
			old[r.key()] = r
		}
	}
	cp := &checkpoint{Format: CheckpointFormat, World: s.World, Seq: s.Seq, Hash: s.Hash, Slots: s.Slots, Runs: s.Runs(), Intents: s.Intents(), Tags: s.Tags()}
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
	// The summaries of the tick shards written (nil: none), for the
	// checkpoint's summaries object (summary.go).
	entries := summaryEntries{}
	var mu sync.Mutex
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
		attrs, err := bucket.CreateOnce(ctx, b, ShardName(s.World.ID, r.Hash), data)
		if err != nil {
			return err
		}
		if !attrs.Created.IsZero() && attrs.Created.Before(start.Add(-CheckpointWriteLimit)) {
			return fmt.Errorf("shard %s was written %v ago: %w", r.Hash, start.Sub(attrs.Created).Round(time.Second), ErrStaleShard)
		}
		if r.Kind == "t" {
			if err := writeTokenFilter(ctx, b, s, *r); err != nil {
				return err
			}
			sum, err := writeSummary(ctx, b, s, *r)
			if err != nil {
				return err
			}
			mu.Lock()
			entries[r.Hash] = sum
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint of world %s at %d: %w", s.World.ID, s.Seq, err)
	}
	data, err := cp.seal()
	if err != nil {
		return "", nil, err
	}
	// The summaries object is named from the checkpoint's checksum and
	// lands before the checkpoint: a reader that finds the checkpoint
	// finds it.
	if err := writeSummaries(ctx, b, s, cp, prev, entries); err != nil {
		return "", nil, fmt.Errorf("checkpoint of world %s at %d: summaries: %w", s.World.ID, s.Seq, err)
	}
	name := CheckpointName(s.World.ID, s.Seq)
	if _, err := bucket.CreateOnce(ctx, b, name, data); err != nil {
		return "", nil, fmt.Errorf("checkpoint of world %s at %d: %w", s.World.ID, s.Seq, err)
	}
	return name, cp, nil
}

// CheckpointWriteLimit bounds a checkpoint's write, from its first shard
// to its object: half the hour for which collection keeps a shard that no
// checkpoint names (maintenance's floor for shards), so that every shard a
// checkpoint writes is still there when the checkpoint lands.
const CheckpointWriteLimit = 30 * time.Minute

// ErrStaleShard abandons a checkpoint that would name a shard written
// long ago by an attempt that never landed (WriteCheckpoint): no
// checkpoint names it, so collection may delete it at any moment. The
// next checkpoint, once collection deleted it, writes it anew.
var ErrStaleShard = errors.New("an earlier attempt wrote this shard long ago and no checkpoint names it; the checkpoint is abandoned")

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

// parallel runs fn(0..n-1) on a few goroutines (four per CPU: work that
// decodes or encodes what it reads) and returns the first error; after
// one, nothing more is started.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	return parallelUpTo(ctx, n, 4*runtime.GOMAXPROCS(0), fn)
}

// sidecarReads is how many small objects (summaries, token filters) a
// reader reads at once: each costs a bucket's round trip (about 12 ms on
// GCS) and little CPU, so a checkpoint of 245 parts is read in 4 rounds,
// not 31.
const sidecarReads = 64

// parallelReads is parallel for reads of small objects (sidecarReads at
// once).
func parallelReads(ctx context.Context, n int, fn func(i int) error) error {
	return parallelUpTo(ctx, n, sidecarReads, fn)
}

// parallelUpTo is parallel on at most limit goroutines.
func parallelUpTo(ctx context.Context, n, limit int, fn func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(n, limit)))
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
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return nil, nil, err
	}
	s, err := loadShards(ctx, b, name, cp, func(shardRef) bool { return true })
	if err != nil {
		return nil, nil, err
	}
	// Every tick is loaded: the runs the checkpoint records must be what
	// its ticks say.
	runs := map[string]Run{}
	for _, r := range cp.Runs {
		runs[r.Name] = Run{Name: r.Name, Head: -1}
	}
	for _, p := range s.tickParts {
		r, ok := runs[p[0].Run]
		if !ok {
			return nil, nil, corruptCheckpoint(name, "ticks of runs the checkpoint does not list")
		}
		r.Head, r.Published = max(r.Head, p[len(p)-1].Tick), r.Published+int64(len(p))
		runs[r.Name] = r
	}
	for _, r := range cp.Runs {
		if got := runs[r.Name]; got != r {
			return nil, nil, corruptCheckpoint(name, "run %s records %+v, its ticks say %+v", r.Name, r, got)
		}
	}
	return s, cp, nil
}

func corruptCheckpoint(name, format string, args ...any) error {
	return fmt.Errorf("checkpoint %s: %s: %w", name, fmt.Sprintf(format, args...), ErrCorrupt)
}

// decodedShard is the records of one checkpoint shard.
type decodedShard struct {
	ticks    []*Tick
	claims   []*Claim
	commands []*CommandState
}

// readShard reads, verifies and decodes shard r of checkpoint cp (called
// name). A missing or corrupt shard is ErrCorrupt.
func readShard(ctx context.Context, b bucket.Bucket, name string, cp *checkpoint, r shardRef) (*decodedShard, error) {
	world := cp.World.ID
	raw, _, err := b.Get(ctx, ShardName(world, r.Hash))
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, corruptCheckpoint(name, "shard %s is missing", r.Hash)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.Hash {
		return nil, corruptCheckpoint(name, "shard %s does not hash to its name", r.Hash)
	}
	plain, err := shardDecoder.DecodeAll(raw, nil)
	if err != nil {
		return nil, corruptCheckpoint(name, "shard %s: %v", r.Hash, err)
	}
	d := &decodedShard{}
	// plain is never written again: decoded strings share it.
	k, last, err := decodeShard(cp.Format, r.Hash, plain, func(t *Tick, of int) {
		if d.ticks == nil {
			d.ticks = make([]*Tick, 0, of)
		}
		d.ticks = append(d.ticks, t)
	},
		func(c *Claim) { d.claims = append(d.claims, c) }, func(c *CommandState) { d.commands = append(d.commands, c) })
	// The shard's records changed at most at its recorded sequence;
	// a release (claim.release) changes a shard by removing a record,
	// so the newest record may be older than the shard.
	if err != nil || k != r.key() || last > r.Seq {
		return nil, corruptCheckpoint(name, "shard %s: %v (key %v, last record sequence %d, shard sequence %d)", r.Hash, err, k, last, r.Seq)
	}
	// A writer lists a shard's ticks in order; an unsorted list is
	// sorted, as a tree of them would be, and a tick listed twice is
	// corrupt (parts are sets). A shard's ticks are one run's (decodeShard
	// gives each its key's run): they compare by number.
	byNumber := func(a, b *Tick) int { return cmp.Compare(a.Tick, b.Tick) }
	if !slices.IsSortedFunc(d.ticks, byNumber) {
		slices.SortFunc(d.ticks, byNumber)
	}
	for j, t := range d.ticks {
		if j > 0 && d.ticks[j-1].Tick == t.Tick {
			return nil, corruptCheckpoint(name, "shard %s: tick %s/%d listed twice", r.Hash, t.Run, t.Tick)
		}
		if t.Seq > cp.Seq {
			return nil, corruptCheckpoint(name, "tick %s/%d changed at sequence %d, after the checkpoint", t.Run, t.Tick, t.Seq)
		}
	}
	return d, nil
}

// loadShards rebuilds the state checkpoint cp (called name) records from
// the shards want selects (several read at once); the others are left
// unread. The runs and the shards' marks are the checkpoint's whole.
func loadShards(ctx context.Context, b bucket.Bucket, name string, cp *checkpoint, want func(shardRef) bool) (*State, error) {
	var refs []shardRef
	for _, r := range cp.Shards {
		if want(r) {
			refs = append(refs, r)
		}
	}
	out := make([]*decodedShard, len(refs))
	err := parallel(ctx, len(refs), func(i int) error {
		var err error
		out[i], err = readShard(ctx, b, name, cp, refs[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	s := Empty(cp.World.ID)
	s.World, s.Seq, s.Hash, s.Slots = cp.World, cp.Seq, cp.Hash, cp.Slots
	s.intents = slices.Clone(cp.Intents)
	s.tags = slices.Clone(cp.Tags)
	for i := range cp.Runs {
		s.runs.ReplaceOrInsert(&cp.Runs[i])
	}
	for _, r := range cp.Shards {
		s.shardSeq.ReplaceOrInsert(shardMark{r.key(), r.Seq})
	}
	for _, d := range out {
		if err := s.addShard(name, cp, d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// addShard adds a decoded shard's records to s, a state nobody else holds
// yet (a load's own). Its ticks become a part of their own, in order
// among the others.
func (s *State) addShard(name string, cp *checkpoint, d *decodedShard) error {
	for _, c := range d.claims {
		s.claims.ReplaceOrInsert(c)
	}
	for _, c := range d.commands {
		s.commands.ReplaceOrInsert(c)
	}
	if len(d.ticks) == 0 {
		return nil
	}
	if _, ok := s.runs.Get(&Run{Name: d.ticks[0].Run}); !ok {
		return corruptCheckpoint(name, "ticks of run %s, which the checkpoint does not list", d.ticks[0].Run)
	}
	s.tokens = append(slices.Clip(s.tokens), &tokenIndex{ticks: d.ticks})
	// The parts are ordered and disjoint: a tick shard holds one run's
	// ticks of its span, and a checkpoint lists each shard once.
	i := s.partAt(d.ticks[0])
	if i < len(s.tickParts) && !tickLess(d.ticks[len(d.ticks)-1], s.tickParts[i][0]) ||
		i > 0 && !tickLess(s.tickParts[i-1][len(s.tickParts[i-1])-1], d.ticks[0]) {
		return corruptCheckpoint(name, "tick shards of %s overlap at tick %d", d.ticks[0].Run, d.ticks[0].Tick)
	}
	s.tickParts = slices.Insert(slices.Clip(s.tickParts), i, d.ticks)
	return nil
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
	if cp.Format < 1 || cp.Format > CheckpointFormat || cp.World.ID != world || cp.Seq == 0 || cp.Hash == "" || ValidateMeta(cp.World.Meta) != nil {
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
	for i, in := range cp.Intents {
		if !ValidIntentID(in.ID) || in.Holder == "" || in.Seq == 0 || in.Seq > cp.Seq || i > 0 && cp.Intents[i-1].ID >= in.ID {
			return nil, corrupt("open intent %+v", in)
		}
	}
	for i, t := range cp.Tags {
		if ValidateTagName(t.Name) != nil || t.Run == "" || t.CommitToken == "" || t.Tick < 0 || t.Seq == 0 || t.Seq > cp.Seq || i > 0 && cp.Tags[i-1].Name >= t.Name {
			return nil, corrupt("tag %+v", t)
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
