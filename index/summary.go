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
	var tables slab[TableFragments]
	var frags slab[Fragment]
	var total int64
	for i := 0; i < n && d.err == nil; i++ {
		p := summarySpan{From: d.varint(), To: d.varint(), N: d.varint(), Token: d.str(), Epoch: d.varint()}
		p.Tables = d.tables(CheckpointFormat, &tables, &frags)
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

// writeSummary writes the summary of tick shard r of s, if it has one.
func writeSummary(ctx context.Context, b bucket.Bucket, s *State, r shardRef) error {
	sum, err := s.summarize(r.key(), r.Hash)
	if err != nil || sum == nil {
		return err
	}
	_, err = bucket.CreateOnce(ctx, b, ShardSummaryName(s.World.ID, r.Hash), sum.encode())
	return err
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
// WriteSidecars wrote (or, dry, would write).
type SidecarCounts struct {
	Summaries, TokenFilters int
}

// WriteSidecars writes the summaries and token filters (tokenfilter.go)
// that the tick shards of world's newest checkpoint lack (shards written
// by a worldfs that wrote none): a views build reads the summaries
// instead of decoding those shards, a lookup of a token that names no
// tick the filters. It reads the checkpoint's state whole, and returns
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
	var n SidecarCounts
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
