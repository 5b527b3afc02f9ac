package index

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfs/worldfs/bucket"
)

// CatalogCheck is what VerifyCatalog found.
type CatalogCheck struct {
	// State is the world's state at the tip, folded from the log.
	State *State
	// FirstSlot is the first slot of the log still in the bucket (1 unless
	// old slots were collected; the fold then starts from the checkpoint
	// at FirstSlot-1, or, while a collection is under way, from the oldest
	// checkpoint after it).
	FirstSlot uint64
	// Slots is how many slots were folded.
	Slots uint64
	// Checkpoints are the sequences of the checkpoints compared with the
	// fold; Problems describes each that does not match, and anything
	// else wrong with the catalog.
	Checkpoints []uint64
	Problems    []string
}

// VerifyCatalog checks world's catalog as a reader would never need to:
// it folds the whole log (every slot must decode, continue its
// predecessor and apply), and compares every checkpoint with the fold at
// its sequence, record by record, and its sidecars with its records (the
// checkpoint a collected log starts from has only the latter). slot is
// called after each slot folded (for progress). An error means the
// catalog could not be read at all (ErrCorrupt if the log itself is
// damaged); a checkpoint that differs is a Problem, since readers would
// fold the log past it anyway only if it were missing.
func VerifyCatalog(ctx context.Context, b bucket.Bucket, world string, slot func(seq uint64)) (*CatalogCheck, error) {
	cps, err := bucket.Collect(b.List(ctx, CheckpointPrefix(world), ""))
	if err != nil {
		return nil, fmt.Errorf("world %s: listing checkpoints: %w", world, err)
	}
	bySeq := map[uint64]string{}
	var seqs []uint64
	out := &CatalogCheck{}
	for _, a := range cps {
		seq, err := ParseCheckpointName(world, a.Name)
		if err != nil {
			out.Problems = append(out.Problems, fmt.Sprintf("checkpoint %s: not named by a sequence", a.Name))
			continue
		}
		bySeq[seq] = a.Name
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	state := Empty(world)
	// fold applies the slot called name and compares the checkpoint at
	// its end, if any.
	fold := func(name string) error {
		n, _, err := readSlot(ctx, b, state, name)
		if err != nil {
			return err
		}
		state = n
		out.Slots++
		if slot != nil {
			slot(state.Seq)
		}
		if name, ok := bySeq[state.Seq]; ok {
			out.Checkpoints = append(out.Checkpoints, state.Seq)
			out.Problems = append(out.Problems, compareCheckpoint(ctx, b, world, name, state)...)
		}
		return nil
	}
	first := true
	var skip uint64 // slots a collection under way left before its checkpoint
	for a, err := range b.List(ctx, LogPrefix(world), "") {
		if err != nil {
			return nil, fmt.Errorf("world %s: listing the log: %w", world, err)
		}
		seq, perr := strconv.ParseUint(strings.TrimPrefix(a.Name, LogPrefix(world)), 16, 64)
		if perr != nil {
			return nil, fmt.Errorf("world %s: log slot %s: not named by a sequence: %w", world, a.Name, ErrCorrupt)
		}
		if first {
			first = false
			out.FirstSlot = seq
			if seq > 1 { // older slots were collected: start from the checkpoint before them
				name, ok := bySeq[seq-1]
				if !ok {
					// A collection stopped midway deletes the slots a
					// checkpoint inside the log covers, oldest first:
					// start from the oldest such checkpoint.
					for _, cs := range seqs {
						if cs >= seq {
							name, ok, skip = bySeq[cs], true, cs
							break
						}
					}
				}
				if !ok {
					return nil, fmt.Errorf("world %s: the log starts at slot %d and no checkpoint covers the slots before it: %w", world, seq, ErrCorrupt)
				}
				var refs *checkpoint
				if state, refs, err = LoadCheckpoint(ctx, b, world, name); err != nil {
					return nil, err
				}
				// No slot is left to compare it with, but its sidecars
				// mislead a reader all the same.
				out.Problems = append(out.Problems, checkSidecars(ctx, b, name, state, refs)...)
			}
		}
		if seq <= skip {
			continue // covered by the checkpoint folded from
		}
		err := readSkipped(world, a.Name, state.Seq+1, func(name string) (uint64, error) {
			err := fold(name)
			return state.Seq + 1, err
		})
		if err != nil {
			return nil, err
		}
		if err := fold(a.Name); err != nil {
			return nil, err
		}
	}
	for _, seq := range seqs {
		if seq > state.Seq {
			out.Problems = append(out.Problems, fmt.Sprintf("checkpoint %s is past the end of the log (sequence %d)", bySeq[seq], state.Seq))
		}
	}
	out.State = state
	return out, nil
}

// compareCheckpoint compares checkpoint name with s, the fold of the log
// at its sequence, and returns the problems: the checkpoint's damage as
// LoadCheckpoint finds it, else how it differs from s, else what its
// sidecars say that its ticks (those of s, which it then holds) do not.
// It reads the checkpoint's shards a few at a time (checkpointDiff), so
// that a check of a long log holds the fold, not a second state beside
// it.
func compareCheckpoint(ctx context.Context, b bucket.Bucket, world, name string, s *State) []string {
	cp, err := readCheckpoint(ctx, b, world, name)
	if err != nil {
		return []string{err.Error()}
	}
	d, err := checkpointDiff(ctx, b, name, cp, s)
	switch {
	case err != nil:
		return []string{err.Error()}
	case d != "":
		return []string{fmt.Sprintf("checkpoint %s differs from the log at sequence %d: %s", name, s.Seq, d)}
	}
	return checkSidecars(ctx, b, name, s, cp)
}

// checkpointDiff describes how the state checkpoint cp (called name)
// records differs from s ("": equal): its world, then its position, then
// its runs, then shard by shard, s's shards in order and then cp's
// others. It reads cp's shards a window at a time, each checked as
// LoadCheckpoint checks it (missing, damaged, not this checkpoint's,
// overlapping another, ticks of a run cp does not list: ErrCorrupt, as
// are runs its ticks contradict), compares each shard's encoding with s's
// and drops it.
func checkpointDiff(ctx context.Context, b bucket.Bucket, name string, cp *checkpoint, s *State) (string, error) {
	runs := map[string]Run{} // what the ticks say, as LoadCheckpoint checks them
	for _, r := range cp.Runs {
		runs[r.Name] = Run{Name: r.Name, Head: -1}
	}
	differs := map[shardKey]string{}
	listed := map[shardKey]bool{}
	window := 4 * runtime.GOMAXPROCS(0)
	for lo := 0; lo < len(cp.Shards); lo += window {
		refs := cp.Shards[lo:min(lo+window, len(cp.Shards))]
		out := make([]*decodedShard, len(refs))
		if err := parallel(ctx, len(refs), func(i int) error {
			var err error
			out[i], err = readShard(ctx, b, name, cp, refs[i])
			return err
		}); err != nil {
			return "", err
		}
		for i, d := range out {
			k := refs[i].key()
			one := Empty(cp.World.ID) // the checkpoint's state of this shard alone
			for j := range cp.Runs {
				one.runs.ReplaceOrInsert(&cp.Runs[j])
			}
			if err := one.addShard(name, cp, d); err != nil {
				return "", err
			}
			if ts := d.ticks; len(ts) > 0 {
				if listed[k] {
					return "", corruptCheckpoint(name, "tick shards of %s overlap at tick %d", ts[0].Run, ts[0].Tick)
				}
				r := runs[ts[0].Run]
				r.Head, r.Published = max(r.Head, ts[len(ts)-1].Tick), r.Published+int64(len(ts))
				runs[r.Name] = r
			}
			listed[k] = true
			if d := shardDiff(k, s, one); d != "" {
				differs[k] = d
			}
		}
	}
	for _, r := range cp.Runs {
		if got := runs[r.Name]; got != r {
			return "", corruptCheckpoint(name, "run %s records %+v, its ticks say %+v", r.Name, r, got)
		}
	}
	cpRuns := slices.SortedFunc(slices.Values(cp.Runs), func(a, b Run) int { return cmp.Compare(a.Name, b.Name) })
	switch {
	case !s.World.Same(cp.World):
		return fmt.Sprintf("world %+v, the log says %+v", cp.World, s.World), nil
	case s.Seq != cp.Seq || s.Hash != cp.Hash || s.Slots != cp.Slots:
		return fmt.Sprintf("position %d/%.12s/%d, the log says %d/%.12s/%d", cp.Seq, cp.Hash, cp.Slots, s.Seq, s.Hash, s.Slots), nil
	case !slices.Equal(s.Runs(), cpRuns):
		return "runs differ", nil
	case !slices.Equal(s.Intents(), cp.Intents):
		return fmt.Sprintf("open intents %+v, the log says %+v", cp.Intents, s.Intents()), nil
	case !slices.Equal(s.Tags(), cp.Tags):
		return fmt.Sprintf("tags %+v, the log says %+v", cp.Tags, s.Tags()), nil
	}
	var first string
	s.shardSeq.Ascend(func(m shardMark) bool {
		if listed[m.key] {
			first = differs[m.key]
		} else {
			first = shardDiff(m.key, s, Empty(cp.World.ID)) // the checkpoint holds none of it
		}
		delete(differs, m.key)
		return first == ""
	})
	if first != "" {
		return first, nil
	}
	rest := slices.SortedFunc(maps.Keys(differs), shardKeyCompare)
	if len(rest) > 0 {
		return differs[rest[0]], nil
	}
	return "", nil
}

// shardDiff describes how shard k of state a and of state b differ ("":
// they encode alike).
func shardDiff(k shardKey, a, b *State) string {
	ea, erra := a.encodeShard(k)
	eb, errb := b.encodeShard(k)
	if err := cmp.Or(errb, erra); err != nil {
		return fmt.Sprintf("shard %c/%s/%d: %v", k.Kind, k.Run, k.N, err)
	}
	if !bytes.Equal(ea, eb) {
		return fmt.Sprintf("shard %c/%s/%d differs", k.Kind, k.Run, k.N)
	}
	return ""
}

// FragmentRef is one fragment the catalog references, with where.
type FragmentRef struct {
	Run   string
	Tick  int64
	Table string
	Token string
	Fragment
}

// Fragments calls fn with every fragment s references (run "": every
// run): each published tick's and each completed claim's, in order. It
// fails (ErrCorrupt) if a fragment list does not decode.
func (s *State) Fragments(run string, fn func(FragmentRef) bool) error {
	var runs []string
	for _, r := range s.Runs() {
		runs = append(runs, r.Name)
	}
	for _, r := range s.ClaimRuns() {
		if !slices.Contains(runs, r) {
			runs = append(runs, r)
		}
	}
	slices.Sort(runs)
	for _, r := range runs {
		if run != "" && r != run {
			continue
		}
		more := true
		emit := func(tick int64, token string, tables []TableFragments) {
			for _, tf := range tables {
				for _, f := range tf.Fragments {
					if more {
						more = fn(FragmentRef{Run: r, Tick: tick, Table: tf.Table, Token: token, Fragment: f})
					}
				}
			}
		}
		var err error
		s.Ticks(r, math.MinInt64, func(t *Tick) bool {
			var tables []TableFragments
			if tables, err = t.Tables(); err != nil {
				return false
			}
			emit(t.Tick, t.CommitToken, tables)
			return more
		})
		if err != nil {
			return err
		}
		s.Claims(r, func(c *Claim) bool {
			if c.State == ClaimComplete {
				emit(c.Tick, c.CommitToken, c.Tables)
			}
			return more
		})
		if !more {
			return nil
		}
	}
	return nil
}

// checkSidecars returns the problems of the sidecars of checkpoint name
// (refs), loaded as s: its tick shards' summaries and token filters.
func checkSidecars(ctx context.Context, b bucket.Bucket, name string, s *State, refs *checkpoint) []string {
	return append(checkSummaries(ctx, b, name, s, refs), checkTokenFilters(ctx, b, name, s, refs)...)
}

// checkSummaries compares each summary of a tick shard of checkpoint
// name (refs), and each entry of its summaries object, with what the
// shard's ticks, loaded in s, say: a summary that decodes but tells other
// ticks or files would mislead every views build. It returns the
// problems.
func checkSummaries(ctx context.Context, b bucket.Bucket, name string, s *State, refs *checkpoint) []string {
	var problems []string
	// The checkpoint's summaries object (summary.go): each entry is what
	// the shard's ticks say, a summary or none.
	_, _, entries, _, err := readSummaries(ctx, b, s.World.ID, name, refs)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, r := range refs.Shards {
		data, ok := entries[r.Hash]
		if r.Kind != "t" || !ok {
			continue
		}
		want, err := s.summarize(r.key(), r.Hash)
		if err != nil {
			problems = append(problems, err.Error())
		} else if want == nil && len(data) != 0 || want != nil && !bytes.Equal(want.encode(), data) {
			problems = append(problems, fmt.Sprintf("checkpoint %s: its summaries object's entry for shard %s does not say what its ticks say", name, r.Hash))
		}
	}
	for _, r := range refs.Shards {
		if r.Kind != "t" {
			continue
		}
		sum, err := readSummary(ctx, b, s.World.ID, name, r)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if sum == nil {
			continue
		}
		want, err := s.summarize(r.key(), r.Hash)
		if err != nil {
			problems = append(problems, err.Error())
		} else if want == nil || !bytes.Equal(want.encode(), sum.encode()) {
			problems = append(problems, fmt.Sprintf("checkpoint %s: the summary of shard %s does not say what its ticks say", name, r.Hash))
		}
	}
	return problems
}

// checkTokenFilters compares each token filter of a tick shard of
// checkpoint name (refs) with the filter of the shard's ticks, loaded in
// s: one that decodes but lacks a token its shard carries would hide the
// shard from a lookup of that token. It returns the problems.
func checkTokenFilters(ctx context.Context, b bucket.Bucket, name string, s *State, refs *checkpoint) []string {
	var problems []string
	for _, r := range refs.Shards {
		if r.Kind != "t" {
			continue
		}
		f, err := readTokenFilter(ctx, b, s.World.ID, name, r)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if f == nil {
			continue
		}
		if want := s.tokenFilterOf(r.key(), r.Hash); want == nil || !bytes.Equal(want.encode(), f.encode()) {
			problems = append(problems, fmt.Sprintf("checkpoint %s: the token filter of shard %s does not filter the tokens its ticks carry", name, r.Hash))
		}
	}
	return problems
}
