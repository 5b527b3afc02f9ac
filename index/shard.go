package index

import (
	"cmp"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Checkpoint shards. A world's state is cut into shards that change
// independently: ticks by (run, tick / tickShardSpan), claims by (run, a
// hash bucket of the claim key). A checkpoint rewrites only the shards
// changed since the previous one; the rest are referenced by hash.
const (
	tickShardSpan = 4096
	claimBuckets  = 256
)

type shardKey struct {
	Kind byte // 't' ticks, 'c' claims
	Run  string
	N    int64
}

func shardKeyCompare(a, b shardKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Run, b.Run), cmp.Compare(a.N, b.N))
}

func tickShard(run string, tick int64) shardKey {
	return shardKey{'t', run, tick / tickShardSpan}
}

func claimBucket(k ClaimKey) int64 {
	h := fnv.New32a()
	h.Write([]byte(k.Producer))
	h.Write([]byte{0})
	h.Write([]byte(k.ExternalID))
	return int64(h.Sum32() % claimBuckets)
}

func claimShard(k ClaimKey) shardKey { return shardKey{'c', k.Run, claimBucket(k)} }

// ClaimShardOf is the claim shard of key: the unit fact compaction
// rewrites (FragmentsRewrite.ClaimShard).
func ClaimShardOf(key ClaimKey) int64 { return claimBucket(key) }

const commandBuckets = 64

func commandBucket(id string) int64 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int64(h.Sum32() % commandBuckets)
}

func commandShard(id string) shardKey { return shardKey{'m', "", commandBucket(id)} }

// shardMark records the last sequence that changed a shard.
type shardMark struct {
	key shardKey
	seq uint64
}

func shardMarkLess(a, b shardMark) bool { return shardKeyCompare(a.key, b.key) < 0 }

func (n *State) mark(k shardKey, seq uint64) { n.shardSeq.ReplaceOrInsert(shardMark{k, seq}) }

// encodeShard returns the canonical bytes of one shard of s: a compact
// binary encoding (varints and length-prefixed strings), so that a cold
// start decodes a million ticks in well under a second. A tick shard
// (format 4) holds its tick records, then its distinct fragment lists,
// compressed on their own: a cold start decodes the records and keeps the
// lists compressed until a reader asks for one (shardLists). It fails only
// if a fragment list of s does not decode (ErrCorrupt).
func (s *State) encodeShard(k shardKey) ([]byte, error) {
	var e enc
	e.byte(k.Kind)
	e.str(k.Run)
	e.varint(k.N)
	switch k.Kind {
	case 't':
		var ticks []*Tick
		s.ascendTicks(&Tick{Run: k.Run, Tick: k.N * tickShardSpan}, func(t *Tick) bool {
			if t.Run != k.Run || t.Tick/tickShardSpan != k.N { // (N+1)*span overflows in the last shard
				return false
			}
			ticks = append(ticks, t)
			return true
		})
		e.uvarint(uint64(len(ticks)))
		var lists enc
		var prev []TableFragments
		n := 0
		for i, t := range ticks {
			tables, err := t.Tables()
			if err != nil {
				return nil, err
			}
			e.varint(t.Tick)
			e.str(t.CommitToken)
			e.varint(t.WriterEpoch)
			e.varint(t.NextEntity)
			e.uvarint(t.Seq)
			e.varint(t.PublishedUnixMs)
			// Ticks of a compacted span name the same files: say so once.
			if i > 0 && tablesEqual(tables, prev) {
				e.uvarint(0)
				continue
			}
			e.uvarint(1)
			lists.tables(tables)
			prev = tables
			n++
		}
		var body enc
		body.uvarint(uint64(n))
		body.b = append(body.b, lists.b...)
		e.bytes(encoder.EncodeAll(body.b, nil))
	case 'm':
		var cmds []*CommandState
		s.commands.AscendGreaterOrEqual(&CommandState{shard: k.N}, func(c *CommandState) bool {
			if c.shard != k.N {
				return false
			}
			cmds = append(cmds, c)
			return true
		})
		e.uvarint(uint64(len(cmds)))
		for _, c := range cmds {
			e.str(c.ID)
			e.str(c.Run)
			e.varint(c.Due)
			e.str(c.Kind)
			e.str(c.Body)
			e.varint(c.Settled)
			e.uvarint(c.Seq)
		}
	case 'c':
		var claims []*Claim
		s.claims.AscendGreaterOrEqual(&Claim{Key: ClaimKey{Run: k.Run}, shard: k.N}, func(c *Claim) bool {
			if c.Key.Run != k.Run || c.shard != k.N {
				return false
			}
			claims = append(claims, c)
			return true
		})
		e.uvarint(uint64(len(claims)))
		for i, c := range claims {
			e.str(c.Key.Producer)
			e.str(c.Key.ExternalID)
			e.str(c.Digest)
			e.str(c.CommitToken)
			e.str(c.State)
			e.str(c.Holder)
			e.varint(c.LeaseUntilMs)
			e.varint(c.Epoch)
			e.varint(c.Tick)
			e.varint(c.FactID)
			// Claims whose facts were compacted together name the same
			// files: say so once.
			if i > 0 && tablesEqual(c.Tables, claims[i-1].Tables) {
				e.uvarint(0)
			} else {
				e.uvarint(1)
				e.tables(c.Tables)
			}
			e.uvarint(c.Seq)
		}
	}
	return e.b, nil
}

// shardLists is the fragment lists of a format-4 tick shard, compressed as
// the shard stores them until a reader asks for one; then all of them are
// decoded and kept in the process's decoded-list cache (decodedLists), a
// bounded LRU: a mount that browses all of history holds the lists of the
// shards it read last, never all of them. Once evicted, a shard's lists
// are decoded again when read. A shard's lists are shared by every state
// derived from the one that loaded it. Code that needs to know whether two
// ticks name the same list compares the ticks (Tick.SameTables), never the
// slices: those of an evicted and decoded-again shard are new ones.
type shardLists struct {
	key  shardKey
	hash string // the shard's object, for errors
	n    int    // lists its records name
	raw  []byte // zstd of the lists

	mu  sync.Mutex // serializes decodes of this shard
	err error      // a decode failed: it fails for good (under mu)

	// Under decodedLists.mu: the decoded lists (nil: not resident), their
	// size, and the shard's place in the LRU (nil: not in it).
	lists [][]TableFragments
	size  int64
	elem  *list.Element
}

// listDecodes counts decodes of shards' fragment lists (tests).
var listDecodes atomic.Int64

// ListCacheBytes bounds the fragment lists decoded from checkpoint shards
// that a process keeps (an estimate of their memory): the shards read
// least recently are dropped beyond it.
const ListCacheBytes = 64 << 20

// decodedLists is the process's cache of decoded shard lists: an LRU of
// shards, at most limit bytes in all but the shard just read.
var decodedLists = listCache{limit: ListCacheBytes}

type listCache struct {
	mu    sync.Mutex
	lru   list.List // *listEntry, the most recently read first
	bytes int64
	limit int64
}

// listEntry is a shard in the cache. It holds the shard weakly: the
// cache bounds the decoded lists of shards that states still hold, and
// never keeps a shard, nor the decoded checkpoint bytes its state's
// records share, past the last state that holds it (a process that loads
// many states, such as worldfs check comparing every checkpoint with the
// log, would otherwise keep all of them). A shard collected with its
// state leaves its entry, which counts its size until it is trimmed.
type listEntry struct {
	l    weak.Pointer[shardLists]
	size int64
}

// cached returns l's lists if they are resident, marking them read.
func (l *shardLists) cached() [][]TableFragments {
	c := &decodedLists
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.elem != nil {
		c.lru.MoveToFront(l.elem)
	}
	return l.lists
}

// keep makes lists l's resident ones, dropping the least recently read
// shards beyond the cache's bound.
func (l *shardLists) keep(lists [][]TableFragments, size int64) {
	c := &decodedLists
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.elem != nil {
		c.drop(l)
	}
	l.lists, l.size, l.elem = lists, size, c.lru.PushFront(&listEntry{l: weak.Make(l), size: size})
	c.bytes += size
	c.trim(l)
}

// trim drops the least recently read shards' lists while the cache holds
// more than its bound, but never keep's (under mu).
func (c *listCache) trim(keep *shardLists) {
	for c.bytes > c.limit {
		e := c.lru.Back()
		if e == nil {
			return
		}
		l := e.Value.(*listEntry).l.Value()
		if l != nil && l == keep {
			return
		}
		c.remove(e)
		if l != nil {
			l.lists, l.size, l.elem = nil, 0, nil
		}
	}
}

// drop takes l out of the cache and lets its lists go (under mu).
func (c *listCache) drop(l *shardLists) {
	c.remove(l.elem)
	l.lists, l.size, l.elem = nil, 0, nil
}

// remove takes entry e out of the cache (under mu).
func (c *listCache) remove(e *list.Element) {
	c.lru.Remove(e)
	c.bytes -= e.Value.(*listEntry).size
}

func (l *shardLists) decode() ([][]TableFragments, error) {
	if lists := l.cached(); lists != nil {
		return lists, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if lists := l.cached(); lists != nil { // decoded while this one waited
		return lists, nil
	}
	listDecodes.Add(1)
	plain, err := shardDecoder.DecodeAll(l.raw, nil)
	var lists [][]TableFragments
	var size int64
	if err == nil {
		d := dec{b: plain}
		if n := d.count(); d.err == nil && n != l.n {
			d.fail(fmt.Errorf("%d lists, its ticks name %d", n, l.n))
		}
		var tables slab[TableFragments]
		var frags slab[Fragment]
		lists = make([][]TableFragments, l.n)
		for i := 0; i < l.n && d.err == nil; i++ {
			lists[i] = d.tables(4, &tables, &frags)
		}
		if d.err == nil && len(d.b) != 0 {
			d.fail(errors.New("trailing bytes"))
		}
		err = d.err
		// What they hold: the plain bytes their strings share, and the
		// records carved from the slabs.
		size = int64(len(plain)) + int64(l.n)*int64(unsafe.Sizeof([]TableFragments(nil))) +
			tables.allocated*int64(unsafe.Sizeof(TableFragments{})) + frags.allocated*int64(unsafe.Sizeof(Fragment{}))
	}
	if err != nil {
		l.err = fmt.Errorf("checkpoint shard %s (%c/%s/%d): fragment lists: %v: %w", l.hash, l.key.Kind, l.key.Run, l.key.N, err, ErrCorrupt)
		return nil, l.err
	}
	if lists == nil {
		lists = [][]TableFragments{} // resident, though empty
	}
	l.keep(lists, size)
	return lists, nil
}

// decodeShard decodes a shard into the records it holds; it returns the
// shard's key and its last changing sequence. Records are carved from a few
// slabs and their strings share data's bytes (never modified afterwards),
// so a cold start allocates per shard, not per record, and the collector
// has little to trace. A format-4 tick shard's fragment lists are not
// decoded here (see shardLists); hash names the shard in their errors.
// addTick is told the shard's number of records too, so that its caller
// can size what it collects them in.
func decodeShard(format int, hash string, data []byte, addTick func(t *Tick, of int), addClaim func(*Claim), addCommand func(*CommandState)) (k shardKey, last uint64, err error) {
	d := dec{b: data}
	k.Kind = d.byte()
	k.Run = d.str()
	k.N = d.varint()
	n := d.count()
	var ticks []Tick
	var prevClaim *Claim
	var tables slab[TableFragments]
	var frags slab[Fragment]
	var held slab[fragList]
	var lazy *shardLists
	if k.Kind == 't' {
		ticks = make([]Tick, n)
		if format >= 4 {
			lazy = &shardLists{key: k, hash: hash}
		}
	}
	for i := 0; i < n && d.err == nil; i++ {
		switch k.Kind {
		case 't':
			t := &ticks[i]
			*t = Tick{Run: k.Run, Tick: d.varint(), CommitToken: d.str(), WriterEpoch: d.varint(), NextEntity: d.varint(), Seq: d.uvarint()}
			if format >= 3 {
				t.PublishedUnixMs = d.varint()
			}
			if d.err == nil && tickShard(t.Run, t.Tick) != k {
				d.err = fmt.Errorf("tick %d in shard %v", t.Tick, k)
			}
			switch {
			case format >= 3 && d.uvarint() == 0:
				if i == 0 {
					d.fail(errors.New("the first tick of a shard repeats its predecessor's fragments"))
				} else {
					t.frags = ticks[i-1].frags
				}
			case lazy != nil:
				t.frags = &held.take(1)[0]
				*t.frags = fragList{lazy: lazy, i: lazy.n}
				lazy.n++
			default:
				t.frags = &held.take(1)[0]
				t.frags.tables = d.tables(format, &tables, &frags)
			}
			if d.err == nil {
				last = max(last, t.Seq)
				addTick(t, n)
			}
		case 'c':
			c := &Claim{Key: ClaimKey{Run: k.Run, Producer: d.str(), ExternalID: d.str()}, Digest: d.str(),
				CommitToken: d.str(), State: d.str(), Holder: d.str(), LeaseUntilMs: d.varint(),
				Epoch: d.varint(), Tick: d.varint(), FactID: d.varint()}
			switch {
			case format >= 3 && d.uvarint() == 0:
				if prevClaim == nil {
					d.fail(errors.New("the first claim of a shard repeats its predecessor's fragments"))
				} else {
					c.Tables = prevClaim.Tables
				}
			case format >= 2:
				c.Tables = d.tables(format, &tables, &frags)
			}
			prevClaim = c
			c.Seq = d.uvarint()
			c.shard = claimBucket(c.Key)
			if d.err == nil && c.shard != k.N {
				d.err = fmt.Errorf("claim %s in shard %d", c.Key, k.N)
			}
			if d.err == nil {
				last = max(last, c.Seq)
				addClaim(c)
			}
		case 'm':
			c := &CommandState{Command: Command{ID: d.str(), Run: d.str(), Due: d.varint(), Kind: d.str(), Body: d.str()},
				Settled: d.varint(), Seq: d.uvarint()}
			c.shard = commandBucket(c.ID)
			if d.err == nil && c.shard != k.N {
				d.err = fmt.Errorf("command %s in shard %d", c.ID, k.N)
			}
			if d.err == nil {
				last = max(last, c.Seq)
				addCommand(c)
			}
		default:
			d.err = fmt.Errorf("unknown shard kind %q", k.Kind)
		}
	}
	if lazy != nil {
		lazy.raw = d.bytes()
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	return k, last, d.err
}

// slab hands out short slices of larger allocations, which grow from 16
// to 1024 records: a shard of a few records (most claim shards) costs a
// few records.
type slab[T any] struct {
	free      []T
	next      int
	allocated int64 // records allocated in all
}

func (s *slab[T]) take(n int) []T {
	if n == 0 {
		return nil
	}
	if len(s.free) < n {
		s.next = min(max(2*s.next, 16), 1024)
		s.free = make([]T, max(n, s.next))
		s.allocated += int64(len(s.free))
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	return out
}

type enc struct{ b []byte }

func (e *enc) byte(c byte)      { e.b = append(e.b, c) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.b = append(e.b, b...) }

type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated shard")

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that must fit in what is left of the input.
func (d *dec) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)) || v > math.MaxInt32 {
		d.fail(errShort)
		return 0
	}
	return int(v)
}

// str returns the next string, sharing the decoder's bytes.
func (d *dec) str() string {
	n := d.count()
	if d.err != nil || n == 0 {
		return ""
	}
	s := unsafe.String(&d.b[0], n)
	d.b = d.b[n:]
	return s
}

// bytes returns the next length-prefixed bytes, sharing the decoder's.
func (d *dec) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// tables encodes a publication's fragment lists.
func (e *enc) tables(ts []TableFragments) {
	e.uvarint(uint64(len(ts)))
	for _, tf := range ts {
		e.str(tf.Table)
		e.uvarint(uint64(len(tf.Fragments)))
		for _, f := range tf.Fragments {
			e.str(f.Path)
			e.varint(f.Rows)
			e.varint(f.Bytes)
			e.str(f.Digest)
			e.varint(f.Generation)
			if f.Span == nil {
				e.byte(0)
			} else {
				e.byte(1)
				e.varint(f.Span.From)
				e.varint(f.Span.To)
			}
		}
	}
}

// tablesEqual reports whether two fragment lists are the same.
func tablesEqual(a, b []TableFragments) bool {
	return slices.EqualFunc(a, b, func(x, y TableFragments) bool {
		return x.Table == y.Table && slices.EqualFunc(x.Fragments, y.Fragments, func(f, g Fragment) bool {
			return f.Path == g.Path && f.Rows == g.Rows && f.Bytes == g.Bytes && f.Digest == g.Digest && f.Generation == g.Generation &&
				(f.Span == nil) == (g.Span == nil) && (f.Span == nil || *f.Span == *g.Span)
		})
	})
}

// tables decodes what enc.tables wrote, carving from the shard's slabs.
// Before format 3 a fragment carried no generation or span.
func (d *dec) tables(format int, tables *slab[TableFragments], frags *slab[Fragment]) []TableFragments {
	ts := tables.take(d.count())
	for j := range ts {
		ts[j].Table = d.str()
		ts[j].Fragments = frags.take(d.count())
		for f := range ts[j].Fragments {
			fr := Fragment{Path: d.str(), Rows: d.varint(), Bytes: d.varint(), Digest: d.str()}
			if format >= 3 {
				fr.Generation = d.varint()
				switch d.byte() {
				case 0:
				case 1:
					fr.Span = &Span{From: d.varint(), To: d.varint()}
				default:
					d.fail(errors.New("bad fragment flags"))
				}
			}
			ts[j].Fragments[f] = fr
		}
	}
	return ts
}
