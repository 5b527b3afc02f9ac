package sql

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// Reuse of built scripts across processes (Options.Reuse). Building the
// views means loading the catalog of every world in the lineage, which
// costs what the catalog holds; a fresh `worldfs sql` on a world whose
// catalog did not change since the last build needs none of it. A build
// keeps its script in the size-bounded cache with, for each world whose
// catalog it read, the slot the catalog state it read ends with (name and
// generation) and that state's last sequence. A later Build reuses the
// script only if, for each of those worlds,
//
//   - that slot is still the object it was (same generation): since a
//     slot names its predecessor's hash, it pins the whole log before it,
//     and so the state; and
//   - no slot follows it: the next slot of a log is always named by the
//     sequence after the state's last, so one lookup of that name tells.
//     (Collection deletes old slots oldest first and never the log's
//     last, so while the kept slot exists, any slot after it does too.)
//
// Two lookups per world, whatever the length of its history. Any change to
// a catalog, a world deleted and created again, or a check that cannot be
// made, builds afresh. The files the script reads are checked as a
// build's are (in place: as queries read them; fetched again into the
// cache if evicted), and the views directory's files it names must still
// be there. Views that read files no catalog names (an unfiltered
// segment, legacy history) are never kept: only a listing finds those.
//
// A kept script does not list the ticks that name compacted files
// (compacted.go): that costs a row per tick, and only worldfs_manifests
// reads them. A process that reuses the script and reads
// worldfs_manifests loads the catalogs then, and serves them only from
// the very states the script was built from (each world's log ending
// with the same sequence and slot hash); a catalog changed since fails
// that query rather than mix two states.

// reuseFormat versions kept scripts: a worldfs that keeps them otherwise
// reads none of an older format.
const reuseFormat = 8

// maxKeptFiles bounds the files of a script that is kept: a kept script
// lists its files, and views of that many files (a long history not yet
// compacted) cost far more to read than to build, while their list would
// cost memory in every build.
const maxKeptFiles = 1 << 14

// keptScript is what a build keeps for reuse, as gob (encoding/json took
// 1.5 ms to decode a world's, 0.15 s for a sweep of 100; gob a sixth).
type keptScript struct {
	Format int
	Key    string // what the script was built for, in full
	Script Script
	// Tips: per world whose catalog the build read, where its log ended.
	Tips []logTip
	// Files: the bucket files the views read, checked again on reuse.
	Files []keptFile
	// Local: the files of the views directory the script reads.
	Local []string
	// Text: the script's text, with its markers (Script.text).
	Text string
	// Compacted: the ticks whose compacted files worldfs_manifests shows
	// (nil: none).
	Compacted *index.Span
	// Ticks: the ticks worldfs_ticks shows (nil: none).
	Ticks *index.Span
}

type logTip struct {
	World      string
	Slot       string
	Generation int64
	Seq        uint64
	Hash       string // of the slot holding Seq
}

type keptFile struct {
	Path     string
	Fragment index.Fragment
}

// reuseKey is what a script is built for: the bucket, the world and the
// options that pick the views. It returns the key in full and the name of
// the kept file.
func reuseKey(b bucket.Bucket, world string, opts Options, dir string) (string, string) {
	where := "remote " + opts.BucketID
	if lb, ok := bucket.As[bucket.Local](b); ok {
		where = "local " + lb.Root()
	}
	at := "head"
	if opts.AtTick != nil {
		at = fmt.Sprint(*opts.AtTick)
	}
	if opts.AtTime != nil {
		at += " time " + opts.AtTime.UTC().Format(time.RFC3339Nano)
	}
	if opts.At != nil && opts.At.Back != nil {
		at += fmt.Sprintf(" head~%d", *opts.At.Back)
	}
	if opts.At != nil && opts.At.Tag != "" {
		at += " " + index.TagPrefix + opts.At.Tag
	}
	key := fmt.Sprintf("worldfs views %d\x00%s\x00%s\x00%s\x00%s\x00%s\x00%t\x00%s\x00%s",
		reuseFormat, where, world, opts.Run, at, opts.Token, opts.Only, opts.Table, dir)
	sum := sha256.Sum256([]byte(key))
	return key, "views/" + world + "/" + hex.EncodeToString(sum[:16]) + ".gob"
}

// reused returns the script kept for (world, opts) if it is still
// current (see above), with its files checked; nil if there is none to
// reuse.
func reused(ctx context.Context, b bucket.Bucket, world string, opts Options) (*Script, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	dir, err := opts.dir()
	if err != nil {
		return nil, err
	}
	key, name := reuseKey(b, world, opts, dir)
	data, err := opts.Reuse.Kept(name)
	if err != nil {
		return nil, nil // none (or unreadable): build
	}
	var k keptScript
	if gob.NewDecoder(bytes.NewReader(data)).Decode(&k) != nil || k.Format != reuseFormat || k.Key != key || len(k.Tips) == 0 {
		return nil, nil
	}
	for _, t := range k.Tips {
		if ok, err := t.current(ctx, b); err != nil || !ok {
			return nil, nil // changed, or not known to be the same: build
		}
	}
	for _, p := range k.Local {
		if _, err := os.Stat(p); err != nil {
			return nil, nil // collected: build (and write it again)
		}
		touch(p)
	}
	path, err := pather(b, opts)
	if err != nil {
		return nil, err
	}
	fpath, checks := verifier(b, path, opts, dir)
	for _, f := range k.Files {
		p, err := fpath(ctx, f.Fragment)
		if err != nil {
			return nil, err
		}
		if p != f.Path {
			return nil, nil
		}
	}
	s := &k.Script
	s.text, s.local, s.checks = k.Text, k.Local, checks
	// The catalogs are loaded again (once) only if a query needs them.
	var once sync.Once
	var view *index.View
	var verr error
	loaded := func() (*index.View, error) {
		once.Do(func() { view, verr = keptView(ctx, b, world, opts.Run, k.Tips) })
		return view, verr
	}
	if c := k.Compacted; c != nil {
		s.compacted = &compacted{from: c.From, to: c.To, dir: dir, view: loaded}
	}
	if t := k.Ticks; t != nil {
		s.ticks = &tickList{from: t.From, to: t.To, dir: dir, view: loaded}
	}
	s.finish()
	return s, nil
}

// ErrCatalogChanged: a kept script was reused, and one of the catalogs it
// was built from changed before a query needed to read it.
var ErrCatalogChanged = errors.New("the catalog changed since the views were defined; run the query again")

// keptView returns the view of (world, run) from catalogs loaded again,
// each required to be the state tips record.
func keptView(ctx context.Context, b bucket.Bucket, world, run string, tips []logTip) (*index.View, error) {
	load := index.LoadFrom(b)
	segs, err := index.Lineage(ctx, func(ctx context.Context, w string) (*index.State, error) {
		st, err := load(ctx, w)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(tips, func(t logTip) bool { return t.World == w })
		if i < 0 || st.Seq != tips[i].Seq || st.Hash != tips[i].Hash {
			return nil, fmt.Errorf("world %s: %w", w, ErrCatalogChanged)
		}
		return st, nil
	}, world, run)
	if err != nil {
		return nil, err
	}
	return &index.View{World: world, Run: run, Segments: segs}, nil
}

// current reports whether world's log still ends with the slot t names.
func (t logTip) current(ctx context.Context, b bucket.Bucket) (bool, error) {
	a, err := b.Stat(ctx, t.Slot)
	if err != nil || a.Generation != t.Generation {
		return false, err
	}
	_, err = b.Stat(ctx, index.SlotName(t.World, t.Seq+1))
	if errors.Is(err, bucket.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// probes is how many slot names before a state's last sequence tipOf
// tries before it lists the log.
const probes = 16

// tipOf returns where the log of s's world ends for the state at s: the
// slot holding its last sequence, read to check that it is the very slot
// s ends with. ok is false if that cannot
// be shown (no log, the slot collected or replaced): the build is then
// not kept.
func tipOf(ctx context.Context, b bucket.Bucket, s position) (logTip, bool, error) {
	world := s.World
	if s.Seq == 0 {
		return logTip{}, false, nil
	}
	// The slot holding s.Seq is named by its first sequence, at most
	// MaxSlotEntries before: most slots hold a few entries, so the names
	// just before are tried first, then the log is listed from there.
	last := ""
	var data []byte
	var attrs bucket.Attrs
	for seq := s.Seq; seq > 0 && seq+probes > s.Seq; seq-- {
		var err error
		if data, attrs, err = b.Get(ctx, index.SlotName(world, seq)); err == nil {
			last = index.SlotName(world, seq)
			break
		} else if !errors.Is(err, bucket.ErrNotExist) {
			return logTip{}, false, err
		}
	}
	if last == "" {
		a, found, _, err := index.SlotHolding(ctx, b, world, s.Seq)
		if err != nil || !found {
			return logTip{}, false, err
		}
		last = a.Name
		if data, attrs, err = b.Get(ctx, last); err != nil {
			return logTip{}, false, nil
		}
	}
	slot, hash, err := index.DecodeSlot(world, last, data)
	if err != nil || slot.LastSeq() != s.Seq || hash != s.Hash {
		return logTip{}, false, nil
	}
	return logTip{World: world, Slot: last, Generation: attrs.Generation, Seq: s.Seq, Hash: hash}, true, nil
}

// position is where a catalog state is in its world's log: its last
// sequence, and the hash of the slot holding it.
type position struct {
	World string
	Seq   uint64
	Hash  string
}

// keep stores the script built from segs (and own, the world's state)
// for reuse, unless the views read files no catalog names. A failure to
// keep it costs only a build next time.
func keep(ctx context.Context, b bucket.Bucket, opts Options, dir string, own *index.Partial, segs []index.PlanSegment, h *history, s *Script) {
	if opts.Reuse == nil || opts.View != nil || h.listed || h.unkept {
		return
	}
	states := []position{{own.World().ID, own.Seq(), own.Hash()}}
	for _, seg := range segs {
		if seg.Mode != index.Filtered {
			return
		}
		if !slices.ContainsFunc(states, func(st position) bool { return st.World == seg.World }) {
			states = append(states, position{seg.World, seg.Seq, seg.Hash})
		}
	}
	k := keptScript{Format: reuseFormat, Script: Script{World: s.World, Run: s.Run, AtTick: s.AtTick, Views: s.Views, FragmentList: s.FragmentList, Visible: s.Visible,
		Tags: s.Tags, Columns: s.Columns, TableIDs: s.TableIDs, Mixed: s.Mixed, Unlisted: s.Unlisted, WorldRow: s.WorldRow},
		Local: s.local, Text: s.text}
	if c := s.compacted; c != nil {
		k.Compacted = &index.Span{From: c.from, To: c.to}
	}
	if t := s.ticks; t != nil {
		k.Ticks = &index.Span{From: t.from, To: t.to}
	}
	k.Key, _ = reuseKey(b, own.World().ID, opts, dir)
	for _, st := range states {
		t, ok, err := tipOf(ctx, b, st)
		if err != nil || !ok {
			return
		}
		k.Tips = append(k.Tips, t)
	}
	seen := map[string]bool{}
	for _, f := range h.read {
		if !seen[f.Path] {
			seen[f.Path] = true
			k.Files = append(k.Files, f)
		}
	}
	var data bytes.Buffer
	if gob.NewEncoder(&data).Encode(k) != nil {
		return
	}
	_, name := reuseKey(b, own.World().ID, opts, dir)
	_ = opts.Reuse.Keep(name, data.Bytes())
}

// witnessPath is where the empty file of a table's schema is kept in dir.
func witnessPath(dir, tableID string) string {
	return filepath.Join(dir, index.ViewsFileName(index.ViewsEmpty, tableID))
}
