package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/worldfs/worldfs/bucket"
)

// Tick shard summaries. A tick shard whose every tick names only compacted
// files (a compacted stretch of history) says, beside its records, what a
// planner reads of it: its ticks as stretches of consecutive ticks naming
// one fragment list, each with its first tick's number, commit token and
// writer epoch, its last tick's number, how many ticks it holds, and the
// list. A views build of a long compacted history reads a few hundred
// such summaries instead of decoding a million tick records
// (LoadSummarized, View.Files).
//
// A summary is a sidecar object named from its shard's hash
// (ShardSummaryName), written with the shard: checkpoints are unchanged,
// so a worldfs that knows no summaries reads what this one writes, and a
// shard written by one that wrote none (or whose summary a collector of
// such a worldfs deleted) is decoded instead. A summary carries its
// shard's hash and key and a SHA-256 of its bytes: one that does not
// decode, does not match its shard or fails its sum is ErrCorrupt, never
// a reason to decode the shard instead.

// summaryMagic begins a summary's bytes (and versions them).
const summaryMagic = "worldfs tick summary 1\n"

// tickSummary is the summary of one tick shard.
type tickSummary struct {
	key   shardKey
	hash  string // the shard's
	ticks int64  // how many ticks the shard holds
	spans []summarySpan
}

// summarySpan is a stretch of consecutive ticks of a shard (no other tick
// of the shard between them) that name the same fragment list, every
// fragment of which is compacted.
type summarySpan struct {
	From, To int64 // the first and last tick
	N        int64 // how many ticks
	Token    string
	Epoch    int64 // the first tick's
	Tables   []TableFragments
}

// contiguous reports whether the span holds every tick From..To.
func (p *summarySpan) contiguous() bool { return p.To-p.From+1 == p.N }

// summarize returns the summary of tick shard k of s, or nil if a tick of
// it names a file that is not compacted (or none).
func (s *State) summarize(k shardKey, hash string) (*tickSummary, error) {
	sum := &tickSummary{key: k, hash: hash}
	var prev *Tick
	var err error
	s.ascendTicks(&Tick{Run: k.Run, Tick: k.N * tickShardSpan}, func(t *Tick) bool {
		if t.Run != k.Run || t.Tick/tickShardSpan != k.N {
			return false
		}
		var tables []TableFragments
		if tables, err = t.Tables(); err != nil {
			return false
		}
		if !allCompacted(tables) {
			sum = nil
			return false
		}
		sum.ticks++
		if n := len(sum.spans); n > 0 && (t.SameTables(prev) || tablesEqual(tables, sum.spans[n-1].Tables)) {
			p := &sum.spans[n-1]
			p.To, p.N = t.Tick, p.N+1
		} else {
			sum.spans = append(sum.spans, summarySpan{From: t.Tick, To: t.Tick, N: 1, Token: t.CommitToken, Epoch: t.WriterEpoch, Tables: tables})
		}
		prev = t
		return true
	})
	if err != nil {
		return nil, err
	}
	if sum == nil || sum.ticks == 0 {
		return nil, nil
	}
	return sum, nil
}

// holdsTicks reports whether s holds every tick of tick shard k: it is a
// whole state, or one loaded in part that loaded k.
func (s *State) holdsTicks(k shardKey) bool { return s.part == nil || s.part.loaded[k] }

// encode returns the summary's bytes: its fields, then the SHA-256 of them.
func (sum *tickSummary) encode() []byte {
	var e enc
	e.b = append(e.b, summaryMagic...)
	e.str(sum.hash)
	e.byte(sum.key.Kind)
	e.str(sum.key.Run)
	e.varint(sum.key.N)
	e.varint(sum.ticks)
	e.uvarint(uint64(len(sum.spans)))
	for _, p := range sum.spans {
		e.varint(p.From)
		e.varint(p.To)
		e.varint(p.N)
		e.str(p.Token)
		e.varint(p.Epoch)
		e.tables(p.Tables)
	}
	h := sha256.Sum256(e.b)
	return append(e.b, h[:]...)
}

// decodeSummary decodes and checks the summary of shard r (its bytes
// data): anything wrong with it is ErrCorrupt.
func decodeSummary(name string, r shardRef, data []byte) (*tickSummary, error) {
	var tables slab[TableFragments]
	var frags slab[Fragment]
	return decodeSummaryInto(name, r, data, &tables, &frags)
}

// decodeSummaryInto is decodeSummary taking the fragment lists from
// tables and frags (a checkpoint's summaries share them).
func decodeSummaryInto(name string, r shardRef, data []byte, tables *slab[TableFragments], frags *slab[Fragment]) (*tickSummary, error) {
	corrupt := func(format string, args ...any) error {
		return corruptCheckpoint(name, "summary of shard %s: %s", r.Hash, fmt.Sprintf(format, args...))
	}
	if len(data) < len(summaryMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(summaryMagic)) {
		return nil, corrupt("not a summary")
	}
	body := data[:len(data)-sha256.Size]
	if h := sha256.Sum256(body); !bytes.Equal(h[:], data[len(body):]) {
		return nil, corrupt("its checksum does not match its contents")
	}
	// The strings decoded share data, which nothing writes again.
	d := dec{b: body[len(summaryMagic):]}
	sum := &tickSummary{hash: d.str()}
	sum.key.Kind = d.byte()
	sum.key.Run = d.str()
	sum.key.N = d.varint()
	sum.ticks = d.varint()
	n := d.count()
	var total int64
	for i := 0; i < n && d.err == nil; i++ {
		p := summarySpan{From: d.varint(), To: d.varint(), N: d.varint(), Token: d.str(), Epoch: d.varint()}
		p.Tables = d.tables(CheckpointFormat, tables, frags)
		if d.err != nil {
			break
		}
		switch {
		case tickShard(sum.key.Run, p.From) != sum.key || tickShard(sum.key.Run, p.To) != sum.key:
			d.fail(fmt.Errorf("ticks %d..%d are not the shard's", p.From, p.To))
		case p.N < 1 || p.To < p.From || p.N > p.To-p.From+1:
			d.fail(fmt.Errorf("%d ticks in %d..%d", p.N, p.From, p.To))
		case len(sum.spans) > 0 && sum.spans[len(sum.spans)-1].To >= p.From:
			d.fail(fmt.Errorf("ticks %d..%d out of order", p.From, p.To))
		case !allCompacted(p.Tables):
			d.fail(fmt.Errorf("ticks %d..%d name files that are not compacted", p.From, p.To))
		}
		total += p.N
		sum.spans = append(sum.spans, p)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return nil, corrupt("%v", d.err)
	}
	if sum.hash != r.Hash || sum.key != r.key() || sum.ticks != total || total == 0 {
		return nil, corrupt("summarizes %d ticks of shard %s (%v), not shard %v", total, sum.hash, sum.key, r.key())
	}
	return sum, nil
}

// writeSummary writes the summary of tick shard r of s, if it has one,
// and returns its bytes (nil: none).
func writeSummary(ctx context.Context, b bucket.Bucket, s *State, r shardRef) ([]byte, error) {
	sum, err := s.summarize(r.key(), r.Hash)
	if err != nil || sum == nil {
		return nil, err
	}
	data := sum.encode()
	if _, err = bucket.CreateOnce(ctx, b, ShardSummaryName(s.World.ID, r.Hash), data); err != nil {
		return nil, err
	}
	return data, nil
}

// readSummary reads the summary of tick shard r of checkpoint name: nil
// if there is none (a worldfs that wrote none, or a shard that names
// files not compacted), ErrCorrupt if it is damaged.
func readSummary(ctx context.Context, b bucket.Bucket, world, name string, r shardRef) (*tickSummary, error) {
	data, _, err := b.Get(ctx, ShardSummaryName(world, r.Hash))
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: summary of shard %s: %w", name, r.Hash, err)
	}
	return decodeSummary(name, r, data)
}

// WriteSummaries writes the summaries that the tick shards of world's
// newest checkpoint lack (shards written by a worldfs that wrote none):
// a views build of the world then reads them instead of decoding those
// shards. It writes their token filters too (WriteSidecars), and returns
// how many summaries it wrote.
func WriteSummaries(ctx context.Context, b bucket.Bucket, world string) (int, error) {
	n, err := WriteSidecars(ctx, b, world, false)
	return n.Summaries, err
}

// SidecarCounts is how many sidecars of a world's tick shards
// WriteSidecars wrote (or, dry, would write), and whether it wrote the
// newest checkpoint's summaries object.
type SidecarCounts struct {
	Summaries, TokenFilters int
	CheckpointSummaries     bool
}

// WriteSidecars writes the summaries and token filters (tokenfilter.go)
// that the tick shards of world's newest checkpoint lack (shards written
// by a worldfs that wrote none), and the checkpoint's summaries object if
// it has none: a views build reads the summaries instead of decoding
// those shards, a lookup of a token that names no tick the filters. It reads the checkpoint's state whole, and returns
// how many of each it wrote (dry: would write, writing none).
func WriteSidecars(ctx context.Context, b bucket.Bucket, world string, dry bool) (SidecarCounts, error) {
	newest, _, err := newestCheckpoint(ctx, b, world)
	if err != nil || newest == "" {
		return SidecarCounts{}, err
	}
	have := map[string]bool{}
	for a, err := range b.List(ctx, ShardPrefix(world), "") {
		if err != nil {
			return SidecarCounts{}, err
		}
		have[a.Name] = true
	}
	s, cp, err := LoadCheckpoint(ctx, b, world, newest)
	if err != nil {
		return SidecarCounts{}, err
	}
	// A sidecar to write: its name and its bytes (nil: none).
	type sidecar struct {
		name   string
		encode func() ([]byte, error)
	}
	var lack []sidecar
	for _, r := range cp.Shards {
		if r.Kind != "t" {
			continue
		}
		if name := ShardSummaryName(world, r.Hash); !have[name] {
			lack = append(lack, sidecar{name, func() ([]byte, error) {
				sum, err := s.summarize(r.key(), r.Hash)
				if err != nil || sum == nil {
					return nil, err
				}
				return sum.encode(), nil
			}})
		}
		if name := ShardTokenFilterName(world, r.Hash); !have[name] {
			lack = append(lack, sidecar{name, func() ([]byte, error) {
				if f := s.tokenFilterOf(r.key(), r.Hash); f != nil {
					return f.encode(), nil
				}
				return nil, nil
			}})
		}
	}
	written := make([]bool, len(lack))
	var n SidecarCounts
	if name := CheckpointSummariesName(world, cp.Sum); !have[name] {
		// The checkpoint's summaries object, from the state whole.
		n.CheckpointSummaries = true
		if !dry {
			entries := summaryEntries{}
			for _, r := range cp.Shards {
				if r.Kind != "t" {
					continue
				}
				sum, err := s.summarize(r.key(), r.Hash)
				if err != nil {
					return SidecarCounts{}, err
				}
				entries[r.Hash] = nil
				if sum != nil {
					entries[r.Hash] = sum.encode()
				}
			}
			if err := writeSummaries(ctx, b, s, cp, nil, entries); err != nil {
				return SidecarCounts{}, err
			}
		}
	}
	err = parallel(ctx, len(lack), func(i int) error {
		data, err := lack[i].encode()
		if err != nil || data == nil {
			return err
		}
		written[i] = true
		if dry {
			return nil
		}
		_, err = bucket.CreateOnce(ctx, b, lack[i].name, data)
		if errors.Is(err, bucket.ErrExist) {
			err = nil
		}
		return err
	})
	for i, w := range written {
		switch _, sum := ShardOfSummary(lack[i].name); {
		case !w:
		case sum:
			n.Summaries++
		default:
			n.TokenFilters++
		}
	}
	return n, err
}

// Checkpoint summaries. At a million ticks a checkpoint has 245 tick
// shards, and a views build that read each one's summary read 245
// objects: a cost that grows with the history, a bucket round trip each.
// So each checkpoint also writes the summaries of its tick shards as one
// object (CheckpointSummariesName, named from the checkpoint's checksum),
// which LoadSummarized reads first: each entry is a shard's summary as
// its own object holds it, checked as that one is (decodeSummary), or
// says that the shard has none (its ticks said so to the writer). A shard
// without an entry (one an older worldfs wrote, whose summary it may
// write later) has its own summary object read as before, so what the
// views plan from is what the per-shard summaries say, whichever is read.
// Like them the object is a sidecar a worldfs that knows none ignores;
// it lives as long as its checkpoint does (CheckpointObjects). A damaged
// one is ErrCorrupt.
//
// A checkpoint writer takes the entries of the shards it did not rewrite
// from the previous checkpoint's object (or, lacking it, from their own
// summary objects), so its cost follows the change, plus one read and
// one write of a few hundred bytes a tick shard.

// summariesMagic begins a checkpoint summaries object (and versions it).
const summariesMagic = "worldfs checkpoint summaries 1\n"

// summaryEntries are the entries of a checkpoint summaries object, by
// shard hash: a summary's bytes, or nil for a shard with none.
type summaryEntries map[string][]byte

// encodeSummaries returns the bytes of the summaries object of the
// checkpoint cp (sealed) with entries for the tick shards of cp in e, in
// cp's order, then the SHA-256 of them.
func encodeSummaries(cp *checkpoint, e summaryEntries) []byte {
	var out enc
	out.b = append(out.b, summariesMagic...)
	out.str(cp.Sum)
	var n uint64
	for _, r := range cp.Shards {
		if _, ok := e[r.Hash]; ok && r.Kind == "t" {
			n++
		}
	}
	out.uvarint(n)
	for _, r := range cp.Shards {
		data, ok := e[r.Hash]
		if !ok || r.Kind != "t" {
			continue
		}
		out.str(r.Hash)
		out.bytes(data)
	}
	h := sha256.Sum256(out.b)
	return append(out.b, h[:]...)
}

// decodeSummaries decodes and checks the summaries object of checkpoint
// cp (called name): its entries, each summary decoded, by shard key.
// none holds the shards whose entry says they have none. Anything wrong
// is ErrCorrupt.
func decodeSummaries(name string, cp *checkpoint, data []byte) (sums map[shardKey]*tickSummary, none map[shardKey]bool, raw summaryEntries, err error) {
	corrupt := func(format string, args ...any) error {
		return corruptCheckpoint(name, "summaries object: %s", fmt.Sprintf(format, args...))
	}
	if len(data) < len(summariesMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(summariesMagic)) {
		return nil, nil, nil, corrupt("not a summaries object")
	}
	body := data[:len(data)-sha256.Size]
	if h := sha256.Sum256(body); !bytes.Equal(h[:], data[len(body):]) {
		return nil, nil, nil, corrupt("its checksum does not match its contents")
	}
	refs := map[string]shardRef{}
	for _, r := range cp.Shards {
		if r.Kind == "t" {
			refs[r.Hash] = r
		}
	}
	d := dec{b: body[len(summariesMagic):]}
	if s := d.str(); d.err == nil && s != cp.Sum {
		return nil, nil, nil, corrupt("it is of the checkpoint whose checksum is %s", s)
	}
	n := d.count()
	sums, none, raw = map[shardKey]*tickSummary{}, map[shardKey]bool{}, summaryEntries{}
	var tables slab[TableFragments]
	var frags slab[Fragment]
	for i := 0; i < n && d.err == nil; i++ {
		hash, data := d.str(), d.bytes()
		if d.err != nil {
			break
		}
		r, ok := refs[hash]
		if _, dup := raw[hash]; !ok || dup {
			return nil, nil, nil, corrupt("an entry for shard %s, which is not a tick shard of the checkpoint or has another entry", hash)
		}
		raw[hash] = data
		if len(data) == 0 {
			none[r.key()] = true
			continue
		}
		sum, err := decodeSummaryInto(name, r, data, &tables, &frags)
		if err != nil {
			return nil, nil, nil, err
		}
		sums[r.key()] = sum
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return nil, nil, nil, corrupt("%v", d.err)
	}
	return sums, none, raw, nil
}

// readSummaries reads the summaries object of checkpoint cp (called
// name): ok false if there is none.
func readSummaries(ctx context.Context, b bucket.Bucket, world, name string, cp *checkpoint) (sums map[shardKey]*tickSummary, none map[shardKey]bool, raw summaryEntries, ok bool, err error) {
	data, _, err := b.Get(ctx, CheckpointSummariesName(world, cp.Sum))
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("checkpoint %s: summaries: %w", name, err)
	}
	sums, none, raw, err = decodeSummaries(name, cp, data)
	return sums, none, raw, err == nil, err
}

// writeSummaries writes the summaries object of checkpoint cp (sealed)
// of s's world: the entries e holds for the shards written with it (their
// summaries, or none), and for the others what the summaries object of
// the checkpoint prev (may be nil) holds, else what their own summary
// objects hold. A shard without one has none if s holds its ticks to
// tell; otherwise (a shard an older worldfs wrote, whose summary may be
// written later) it gets no entry, and a reader reads its own object.
func writeSummaries(ctx context.Context, b bucket.Bucket, s *State, cp, prev *checkpoint, e summaryEntries) error {
	world := s.World.ID
	var old summaryEntries
	if prev != nil && prev.Sum != "" {
		// A previous object that is missing or damaged only means its
		// shards' own summaries are read instead.
		_, _, raw, ok, err := readSummaries(ctx, b, world, CheckpointName(world, prev.Seq), prev)
		if ok && err == nil {
			old = raw
		}
	}
	var lack []shardRef
	for _, r := range cp.Shards {
		if _, ok := e[r.Hash]; ok || r.Kind != "t" {
			continue
		}
		if data, ok := old[r.Hash]; ok {
			e[r.Hash] = data
		} else {
			lack = append(lack, r)
		}
	}
	got := make([][]byte, len(lack))
	missing := make([]bool, len(lack))
	err := parallelReads(ctx, len(lack), func(i int) error {
		data, _, err := b.Get(ctx, ShardSummaryName(world, lack[i].Hash))
		switch {
		case errors.Is(err, bucket.ErrNotExist):
			missing[i] = true
		case err == nil:
			// A damaged summary gets no entry: a reader reads it and
			// fails closed, or reads the one written in its place.
			// Carried, it would fail every load of the checkpoint even
			// then, or (emptied) say the shard has none.
			if _, derr := decodeSummary(CheckpointName(world, cp.Seq), lack[i], data); derr == nil {
				got[i] = data
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	for i, r := range lack {
		switch {
		case got[i] != nil:
			e[r.Hash] = got[i]
		case missing[i] && s.holdsTicks(r.key()):
			sum, err := s.summarize(r.key(), r.Hash)
			if err != nil {
				return err
			}
			e[r.Hash] = nil
			if sum != nil {
				e[r.Hash] = sum.encode()
			}
		}
	}
	_, err = bucket.CreateOnce(ctx, b, CheckpointSummariesName(world, cp.Sum), encodeSummaries(cp, e))
	if errors.Is(err, bucket.ErrExist) {
		err = nil // a racing writer of the same checkpoint wrote it
	}
	return err
}
