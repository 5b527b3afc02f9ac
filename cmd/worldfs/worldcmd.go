package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	wfs "github.com/worldfs/worldfs/fs"
	"github.com/worldfs/worldfs/index"
)

// worldInfo is one world as `worldfs worlds` and `worldfs world status`
// show it: its catalog state, with the field names of the mount's
// world.json (its runs are the world's own, as a list).
type worldInfo struct {
	frame.WorldRecord
	Runs []runInfo `json:"runs"`
}

type runInfo struct {
	Name      string `json:"name"`
	Head      int64  `json:"head_tick"`
	Published int64  `json:"published"`
}

// loadWorldInfo reads world's catalog state.
func loadWorldInfo(ctx context.Context, b bucket.Bucket, world string) (worldInfo, error) {
	s, _, err := index.Load(ctx, b, world)
	if err != nil {
		return worldInfo{}, err
	}
	if !s.World.Created {
		return worldInfo{}, fmt.Errorf("world %s: %w (its marker exists, its log does not: a creation that crashed; create it again with the same arguments)", world, index.ErrNoWorld)
	}
	info := worldInfo{WorldRecord: frame.RecordOf(s.World, s.Seq), Runs: []runInfo{}}
	for _, r := range s.Runs() {
		info.Runs = append(info.Runs, runInfo{Name: r.Name, Head: r.Head, Published: r.Published})
	}
	return info, nil
}

func printWorlds(out io.Writer, ws []worldInfo) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORLD\tFORKED FROM\tRUNS (head tick)\tEPOCH\tSTATUS\tWRITER MODE\tMETA")
	for _, w := range ws {
		fork := "-"
		if w.Parent != "" {
			fork = fmt.Sprintf("%s %s@%d", w.Parent, w.ForkRun, *w.ForkTick)
		}
		runs := make([]string, 0, len(w.Runs))
		for _, r := range w.Runs {
			runs = append(runs, fmt.Sprintf("%s@%d", r.Name, r.Head))
		}
		if len(runs) == 0 {
			runs = append(runs, "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", w.ID, fork, strings.Join(runs, " "), w.Epoch, w.Status, w.WriterMode, dash(metaFlag(w.Meta).String()))
	}
	return tw.Flush()
}

// logRecord is one committed catalog entry as `worldfs log` and `worldfs
// watch` print it.
type logRecord struct {
	Seq   uint64 `json:"seq"`
	Time  string `json:"time,omitempty"` // the committer's clock, where the entry records it
	Kind  string `json:"kind"`
	Run   string `json:"run,omitempty"`
	Tick  *int64 `json:"tick,omitempty"`
	Claim string `json:"claim,omitempty"` // run/producer/external id
	Token string `json:"token,omitempty"`
	Epoch int64  `json:"epoch,omitempty"`
	Store string `json:"store"`
	// Entry is the entry itself, as the change feed delivers it.
	Entry *index.Entry `json:"entry,omitempty"`
}

func newLogRecord(c index.Change, withEntry bool) logRecord {
	e := c.Entry
	r := logRecord{Seq: c.Seq, Kind: string(e.Kind), Store: c.Store}
	ms := int64(0)
	switch {
	case e.WorldCreate != nil:
		ms = e.WorldCreate.CreatedUnixMs
	case e.TickPublish != nil:
		p := e.TickPublish
		r.Run, r.Tick, r.Token, r.Epoch, ms = p.Run, &p.Tick, p.CommitToken, p.WriterEpoch, p.PublishedUnixMs
	case e.Claim != nil:
		r.Run, r.Claim, r.Token, ms = e.Claim.Key.Run, e.Claim.Key.String(), e.Claim.CommitToken, e.Claim.NowMs
	case e.Rewrite != nil:
		r.Run = e.Rewrite.Run
		if e.Rewrite.Tick != 0 {
			r.Tick = &e.Rewrite.Tick
		}
	case e.Command != nil:
		r.Run, r.Tick = e.Command.Run, &e.Command.Due
	case e.Intent != nil:
		ms = e.Intent.NowMs
	case e.Tag != nil:
		r.Run, ms = e.Tag.Run, e.Tag.NowMs
		if e.Kind == index.KindTagCreate {
			r.Tick, r.Token = &e.Tag.Tick, e.Tag.CommitToken
		}
	}
	if ms != 0 {
		r.Time = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	if withEntry {
		r.Entry = &e
	}
	return r
}

// logBounds returns the first sequence the world's log still holds and the
// last committed one (0, 0: an empty log).
func logBounds(ctx context.Context, b bucket.Bucket, world string) (oldest, tip uint64, err error) {
	oldest, tip, _, err = logSlots(ctx, b, world)
	return oldest, tip, err
}

// slotAt is a slot of a world's log: its first sequence, and when the
// bucket created it (the commit of its entries, by the bucket's clock).
type slotAt struct {
	first   uint64
	created time.Time
}

// logSlots is logBounds, with every slot the log holds, in order.
func logSlots(ctx context.Context, b bucket.Bucket, world string) (oldest, tip uint64, slots []slotAt, err error) {
	var last string
	for a, err := range b.List(ctx, index.LogPrefix(world), "") {
		if err != nil {
			return 0, 0, nil, err
		}
		first, err := index.ParseSlotName(world, a.Name)
		if err != nil {
			return 0, 0, nil, err
		}
		slots = append(slots, slotAt{first: first, created: a.Created})
		last = a.Name
	}
	if last == "" {
		return 0, 0, nil, nil
	}
	data, _, err := b.Get(ctx, last)
	if err != nil {
		return 0, 0, nil, err
	}
	slot, _, err := index.DecodeSlot(world, last, data)
	if err != nil {
		return 0, 0, nil, err
	}
	return slots[0].first, slot.LastSeq(), slots, nil
}

// committedAt is when the bucket created the slot holding seq (zero if
// slots do not hold it).
func committedAt(slots []slotAt, seq uint64) time.Time {
	i := sort.Search(len(slots), func(i int) bool { return slots[i].first > seq })
	if i == 0 {
		return time.Time{}
	}
	return slots[i-1].created
}

// fenceEpochs tells the epoch each fence.acquire of a world's log took,
// as the log is read in order: one more than the epoch before it, which
// world.create starts at 0 and each tick publish records (its writer's
// epoch, the fence's then); for a fence read before any of those, the
// catalog state's epoch less the fences committed after it.
type fenceEpochs struct {
	b     bucket.Bucket
	world string
	epoch int64 // in force after the last entry seen; -1: not known
}

// see is the epoch change c took if it is a fence.acquire, else 0.
func (f *fenceEpochs) see(ctx context.Context, c index.Change) (int64, error) {
	e := c.Entry
	switch {
	case e.WorldCreate != nil:
		f.epoch = 0
	case e.TickPublish != nil:
		f.epoch = e.TickPublish.WriterEpoch
	case e.FenceAcquire != nil:
		if f.epoch >= 0 {
			f.epoch++
			return f.epoch, nil
		}
		s, _, err := index.LoadSummarized(ctx, f.b, f.world)
		if err != nil {
			return 0, err
		}
		later := int64(0)
		if s.Seq() > c.Seq {
			ctx, stop := context.WithCancel(ctx)
			defer stop()
			for n, err := range index.Changes(ctx, f.b, f.world, c.Seq+1, time.Second) {
				if err != nil {
					return 0, err
				}
				if n.Entry.FenceAcquire != nil {
					later++
				}
				if n.Seq >= s.Seq() {
					break
				}
			}
		}
		f.epoch = s.World().Epoch - later
		return f.epoch, nil
	}
	return 0, nil
}

// logDetail is what the table of worldfs log shows of an entry under
// WHAT: its tick or claim, else what it knows of the entry.
func logDetail(r logRecord, e index.Entry) string {
	switch {
	case r.Tick != nil && e.Rewrite == nil && e.Tag == nil:
		return fmt.Sprint(*r.Tick)
	case r.Claim != "":
		return r.Claim
	case e.WorldCreate != nil && e.WorldCreate.Parent != "":
		return fmt.Sprintf("fork of %s %s@%d", e.WorldCreate.Parent, e.WorldCreate.ForkRun, e.WorldCreate.ForkTick)
	case e.WorldCreate != nil:
		return "writer mode " + e.WorldCreate.WriterMode
	case e.FenceAcquire != nil:
		return "holder " + e.FenceAcquire.Holder
	case e.WorldStatus != nil && e.WorldStatus.WriterMode != "":
		return "status " + e.WorldStatus.Status + ", writer mode " + e.WorldStatus.WriterMode
	case e.WorldStatus != nil:
		return "status " + e.WorldStatus.Status
	case e.Rewrite != nil && e.Rewrite.Facts:
		return fmt.Sprintf("facts of claim shard %d", e.Rewrite.ClaimShard)
	case e.Rewrite != nil && e.Rewrite.Span != nil:
		return fmt.Sprintf("ticks %d..%d", e.Rewrite.Span.From, e.Rewrite.Span.To)
	case e.Rewrite != nil:
		return fmt.Sprintf("tick %d table %s", e.Rewrite.Tick, e.Rewrite.Table)
	case e.Kind == index.KindIntentOpen:
		return fmt.Sprintf("intent %s: %s, held by %s until %s", e.Intent.ID, e.Intent.What, e.Intent.Holder,
			time.UnixMilli(e.Intent.LeaseUntilMs).UTC().Format(time.RFC3339))
	case e.Intent != nil:
		return fmt.Sprintf("intent %s, closed by %s", e.Intent.ID, e.Intent.Holder)
	case e.Kind == index.KindTagCreate:
		return fmt.Sprintf("tag %s: %s@%d", e.Tag.Name, e.Tag.Run, e.Tag.Tick)
	case e.Tag != nil:
		return "tag " + e.Tag.Name + " deleted"
	}
	return ""
}

// resyncError explains a cursor past the retention (exit status 6).
func resyncError(err error, world string, from uint64) error {
	return fmt.Errorf("%w\nsequence %d of world %s was collected (gc keeps the log for its retention); read the current state "+
		"(worldfs worlds, worldfs sql) and follow on with 'worldfs watch --world %s' from the tip", err, from, world, world)
}

// initCmd is "worldfs init".
func initCmd() command {
	var initURL *string
	return command{
		name:    "init",
		summary: "make a local bucket's directory (the first write makes it too), or check that a bucket answers",
		usage:   "[BUCKET]",
		example: "worldfs init --bucket ./worldfs-data",
		flags:   func(fs *flag.FlagSet) { initURL = bucketFlag(fs) },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			url := *initURL
			if len(args) == 1 && !isSet(fs, "bucket") {
				url = args[0]
			} else if len(args) != 0 {
				return usagef("init takes one bucket: --bucket URL or a BUCKET argument")
			}
			b, err := openBucket(ctx, url)
			if err != nil {
				return err
			}
			defer b.Close()
			if lb, ok := bucket.As[bucket.Made](b); ok {
				if err := lb.Make(); err != nil {
					return err
				}
			}
			worlds, err := index.ListWorlds(ctx, b)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "bucket %s is ready (%d worlds)\n", b, len(worlds))
			return err
		},
	}
}

// worldsCmd is "worldfs worlds".
func worldsCmd() command {
	var worldsURL *string
	var worldsJSON *bool
	return command{
		name:    "worlds",
		summary: "list the bucket's worlds: lineage, runs with their head tick, fence epoch, status, writer mode",
		example: "worldfs worlds --bucket ./worldfs-data --json",
		flags: func(fs *flag.FlagSet) {
			worldsURL = bucketFlag(fs)
			worldsJSON = fs.Bool("json", false, "print a JSON array")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("worlds takes no arguments")
			}
			return withBucket(ctx, *worldsURL, func(b bucket.Bucket) error {
				markers, err := index.ListWorlds(ctx, b)
				if err != nil {
					return err
				}
				ws := []worldInfo{}
				for _, m := range markers {
					w, err := loadWorldInfo(ctx, b, m.ID)
					if err != nil {
						return err
					}
					ws = append(ws, w)
				}
				if *worldsJSON {
					return writeJSON(out, ws)
				}
				return printWorlds(out, ws)
			})
		},
	}
}

// logCmd is "worldfs log".
func logCmd() command {
	var logURL, logWorld *string
	var since, limit *int64
	var logJSON *bool
	return command{
		name: "log",
		summary: "a world's commit history, oldest first: sequence, time (the committer's clock where the entry records it, else when the bucket created its slot), " +
			"kind, run, what (the tick or claim, else what the entry holds: a fence's holder, compacted ticks, a status), token, epoch (a tick's writer's; the one a fence took)",
		example: "worldfs log --bucket ./worldfs-data --world w1 --limit 20   # the newest 20\n  worldfs log --world w1 --since 100 --json",
		flags: func(fs *flag.FlagSet) {
			logURL = bucketFlag(fs)
			logWorld = fs.String("world", "", "world (required)")
			since = fs.Int64("since", 0, "first sequence to show (default: the oldest the log holds; with --limit alone, the newest N)")
			limit = fs.Int64("limit", 0, "show at most this many commits (0: all)")
			logJSON = fs.Bool("json", false, "print one JSON object per line, with the entry itself")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 || *since < 0 || *limit < 0 {
				return usagef("log takes no arguments, and --since and --limit are not negative")
			}
			return withWorld(ctx, *logURL, *logWorld, func(b bucket.Bucket) error {
				oldest, tip, slots, err := logSlots(ctx, b, *logWorld)
				if err != nil || tip == 0 {
					return err
				}
				from := logFrom(oldest, tip, *since, *limit)
				if from > tip {
					return nil
				}
				var tw *tabwriter.Writer
				if !*logJSON {
					tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tRUN\tWHAT\tTOKEN\tEPOCH")
				}
				epochs := &fenceEpochs{b: b, world: *logWorld, epoch: -1}
				ctx, stop := context.WithCancel(ctx)
				defer stop()
				n := int64(0)
				for c, err := range index.Changes(ctx, b, *logWorld, from, time.Second) {
					if err != nil {
						if errors.Is(err, index.ErrResync) {
							return resyncError(err, *logWorld, from)
						}
						return err
					}
					r := newLogRecord(c, *logJSON)
					if tw == nil {
						if err := json.NewEncoder(out).Encode(r); err != nil {
							return err
						}
					} else {
						epoch, err := epochs.see(ctx, c)
						if err != nil {
							return err
						}
						if c.Entry.FenceAcquire != nil {
							r.Epoch = epoch
						}
						if t := committedAt(slots, c.Seq); r.Time == "" && !t.IsZero() {
							r.Time = t.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, dash(r.Time), r.Kind, dash(r.Run), dash(logDetail(r, c.Entry)), dash(r.Token), dash(epochText(r.Epoch)))
					}
					if n++; c.Seq >= tip || (*limit > 0 && n >= *limit) {
						break
					}
				}
				if tw != nil {
					return tw.Flush()
				}
				return nil
			})
		},
	}
}

// logFrom is the first sequence worldfs log shows of a log holding
// oldest..tip: since, or the newest limit (since 0), or the oldest.
func logFrom(oldest, tip uint64, since, limit int64) uint64 {
	from := uint64(since)
	switch {
	case from == 0 && limit > 0 && tip >= uint64(limit):
		from = max(oldest, tip-uint64(limit)+1)
	case from == 0:
		from = oldest
	}
	return from
}

// watchCmd is "worldfs watch".
func watchCmd() command {
	var watchURL, watchWorld *string
	var watchFrom *int64
	var poll *time.Duration
	return command{
		name: "watch",
		summary: "follow a world's change feed: one JSON line per commit, in order, until interrupted; " +
			"--from resumes after a restart (exit status 6: the cursor is past the retention)",
		example: "worldfs watch --bucket ./worldfs-data --world w1 --from 1 | jq -c '{seq, kind, tick}'",
		flags: func(fs *flag.FlagSet) {
			watchURL = bucketFlag(fs)
			watchWorld = fs.String("world", "", "world (required)")
			watchFrom = fs.Int64("from", 0, "first sequence to print: the last one handled plus one (default: the next commit)")
			poll = fs.Duration("poll", 200*time.Millisecond, "how often to look for the next commit")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 || *watchFrom < 0 || *poll <= 0 {
				return usagef("watch takes no arguments, a --from that is not negative and a positive --poll")
			}
			return withWorld(ctx, *watchURL, *watchWorld, func(b bucket.Bucket) error {
				from := uint64(*watchFrom)
				if from == 0 {
					_, tip, err := logBounds(ctx, b, *watchWorld)
					if err != nil {
						return err
					}
					from = tip + 1
				}
				enc := json.NewEncoder(out)
				for c, err := range index.Changes(ctx, b, *watchWorld, from, *poll) {
					if err != nil {
						if errors.Is(err, index.ErrResync) {
							return resyncError(err, *watchWorld, from)
						}
						return err
					}
					if err := enc.Encode(newLogRecord(c, true)); err != nil {
						return err
					}
				}
				return ctx.Err() // the feed ends only when interrupted
			})
		},
	}
}

// withWorld runs fn on the existing bucket at url, in which world exists.
func withWorld(ctx context.Context, url, world string, fn func(bucket.Bucket) error) error {
	if world == "" {
		return usagef("--world is required")
	}
	return withBucket(ctx, url, func(b bucket.Bucket) error {
		if err := requireWorld(ctx, b, world); err != nil {
			return err
		}
		return fn(b)
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func epochText(e int64) string {
	if e == 0 {
		return ""
	}
	return fmt.Sprint(e)
}

// worldCmd is one of `worldfs world …` (but copy): each runs the root ctl
// command a mount would (fs.Mount.Command), so the two always agree.
type worldCmd struct {
	name, summary, usage, example string
	flags                         func(fs *flag.FlagSet)
	// line builds the ctl command from the arguments; nil: status
	// without --set only reads.
	line func(fs *flag.FlagSet, args []string) (map[string]any, error)
}

// worldCommands are `worldfs world …` (but copy).
func worldCommands() []command {
	var cs []command
	for _, wc := range []worldCmd{worldCreate(), worldFork(), worldResume(), worldStatus(), worldMode()} {
		cs = append(cs, ctlCommand(wc))
	}
	return cs
}

// metaFlag is --meta KEY=VALUE, given once per key: a world's run
// parameters (index.ValidateMeta).
type metaFlag map[string]string

func (m metaFlag) String() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

func (m metaFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE (seed=17)", v)
	}
	if _, dup := m[k]; dup {
		return fmt.Errorf("key %s is given twice", k)
	}
	m[k] = val
	return nil
}

// metaVar adds --meta to fs.
func metaVar(fs *flag.FlagSet, what string) metaFlag {
	m := metaFlag{}
	fs.Var(m, "meta", "a run parameter as `KEY=VALUE`, once per key ("+what+"): immutable metadata, shown by worldfs world, world.json, SQL (worldfs_worlds) and the web interface; "+
		fmt.Sprintf("keys are a-z 0-9 . _ - (starting with a letter), at most %d keys, %d bytes a value, %d bytes in all", index.MaxMetaKeys, index.MaxMetaValueLen, index.MaxMetaBytes))
	return m
}

// worldCreate is "worldfs world create" as a root ctl command.
func worldCreate() worldCmd {
	var tables, writerMode *string
	var meta metaFlag
	return worldCmd{
		name: "create", summary: "create a world with its tables (a writer then resumes it: world resume, the mount's ctl, engine.ResumeWorld)",
		usage: "WORLD",
		example: `worldfs world create w1 --tables '[{"name":"particle","components":[{"name":"pos","fields":[{"name":"x","type":"double"}]}]}]'` + "\n" +
			`  worldfs world create sweep-base --tables @tables.json --meta seed=17 --meta gravity=9.81`,
		flags: func(fs *flag.FlagSet) {
			tables = fs.String("tables", "", "the tables, as the root ctl's create takes them: a JSON array, or @FILE holding one (required)")
			writerMode = fs.String("writer-mode", index.ModeResumable, "resumable, or cleanup_only (a writer that dies is never resumed)")
			meta = metaVar(fs, "seed=17 --meta gravity=9.81")
		},
		line: func(fs *flag.FlagSet, args []string) (map[string]any, error) {
			if *tables == "" {
				return nil, usagef("--tables is required")
			}
			spec, err := readTablesFlag(*tables)
			if err != nil {
				return nil, err
			}
			if err := index.ValidateMeta(meta); err != nil {
				return nil, usagef("--meta: %v", err)
			}
			line := map[string]any{"op": "create", "world": args[0], "tables": json.RawMessage(spec), "writer_mode": *writerMode}
			if len(meta) > 0 {
				line["meta"] = map[string]string(meta)
			}
			return line, nil
		},
	}
}

// worldFork is "worldfs world fork" as a root ctl command.
func worldFork() worldCmd {
	var parent, forkRun *string
	var forkTick *int64
	var meta metaFlag
	return worldCmd{
		name: "fork", summary: "fork a world from a visible tick of a parent's run; its run parameters are its parent's, each --meta adding or replacing one", usage: "WORLD",
		example: "worldfs world fork w1-b --parent w1 --tick 20\n  worldfs world fork sweep-18 --parent sweep-base --tick 0 --meta seed=18",
		flags: func(fs *flag.FlagSet) {
			parent = fs.String("parent", "", "the world to fork from (required)")
			forkRun = fs.String("run", index.DefaultRun, "the parent's run")
			forkTick = fs.Int64("tick", -1, "the parent's tick to fork from (required)")
			meta = metaVar(fs, "seed=18: over the parent's")
		},
		line: func(fs *flag.FlagSet, args []string) (map[string]any, error) {
			if *parent == "" || !isSet(fs, "tick") {
				return nil, usagef("fork needs --parent and --tick")
			}
			if err := index.ValidateMeta(meta); err != nil {
				return nil, usagef("--meta: %v", err)
			}
			line := map[string]any{"op": "fork", "world": args[0], "parent": *parent, "run": *forkRun, "tick": *forkTick}
			if len(meta) > 0 {
				line["meta"] = map[string]string(meta)
			}
			return line, nil
		},
	}
}

// worldResume is "worldfs world resume" as a root ctl command.
func worldResume() worldCmd {
	return worldCmd{
		name: "resume", summary: "take a world's fence (a new writer epoch), staling its previous writer, e.g. a dead one's", usage: "WORLD",
		example: "worldfs world resume w1",
		line: func(fs *flag.FlagSet, args []string) (map[string]any, error) {
			return map[string]any{"op": "resume", "world": args[0]}, nil
		},
	}
}

// worldStatus is "worldfs world status" as a root ctl command.
func worldStatus() worldCmd {
	var setStatus *string
	return worldCmd{
		name: "status", summary: "show a world (as worlds does); --set archives or reactivates it", usage: "WORLD",
		example: "worldfs world status w1 --json\n  worldfs world status w1 --set archived",
		flags: func(fs *flag.FlagSet) {
			setStatus = fs.String("set", "", "set the status: active, or archived (which refuses further publishes)")
		},
		line: func(fs *flag.FlagSet, args []string) (map[string]any, error) {
			if *setStatus == "" {
				return nil, nil
			}
			return map[string]any{"op": "status", "world": args[0], "status": *setStatus}, nil
		},
	}
}

// worldMode is "worldfs world mode" as a root ctl command.
func worldMode() worldCmd {
	return worldCmd{
		name: "mode", summary: "move a world's writer mode to cleanup_only (final: no writer ever resumes it mutably)", usage: "WORLD cleanup_only",
		example: "worldfs world mode w1 cleanup_only",
		line: func(fs *flag.FlagSet, args []string) (map[string]any, error) {
			if len(args) != 2 {
				return nil, usagef("mode takes WORLD and the mode (%s)", index.ModeCleanupOnly)
			}
			return map[string]any{"op": "status", "world": args[0], "writer_mode": args[1]}, nil
		},
	}
}

// ctlCommand is wc as a command: it opens the bucket, runs wc's ctl
// command and prints the world as worlds does.
func ctlCommand(wc worldCmd) command {
	var url *string
	var asJSON *bool
	return command{
		name: wc.name, summary: wc.summary, usage: wc.usage, example: wc.example,
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			asJSON = fs.Bool("json", false, "print the answer as one JSON object")
			if wc.flags != nil {
				wc.flags(fs)
			}
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) < 1 || (wc.name != "mode" && len(args) != 1) {
				return usagef("world %s takes %s", wc.name, wc.usage)
			}
			line, err := wc.line(fs, args)
			if err != nil {
				return err
			}
			open := openBucket // create and fork make a missing local bucket
			if wc.name != "create" && wc.name != "fork" {
				open = openExisting
			}
			b, err := open(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			if wc.name != "create" && wc.name != "fork" {
				if err := requireWorld(ctx, b, args[0]); err != nil {
					return err
				}
			}
			if line != nil {
				if err := worldCommand(ctx, b, *url, line); err != nil {
					return err
				}
			}
			info, err := loadWorldInfo(ctx, b, args[0])
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(out, info)
			}
			if line != nil {
				fmt.Fprintf(out, "world %s: %s done\n", args[0], line["op"])
			}
			return printWorlds(out, []worldInfo{info})
		},
	}
}

// worldCommand runs one root ctl command on b through a mount that is not
// served: the same code a write to <mount>/ctl runs.
func worldCommand(ctx context.Context, b bucket.Bucket, url string, line map[string]any) error {
	_, err := ctlAnswer(ctx, b, url, line)
	return err
}

// ctlAnswer is worldCommand, returning the command's answer.
func ctlAnswer(ctx context.Context, b bucket.Bucket, url string, line map[string]any) (any, error) {
	data, err := json.Marshal(line)
	if err != nil {
		return nil, err
	}
	c, id, err := openCache(url, defaultCacheDir(), 1<<30)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	m, err := wfs.New(b, wfs.Options{Cache: c, BucketID: id, Holder: fmt.Sprintf("cli@%s:%d", host, os.Getpid())})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	answer, err := m.Command(ctx, "", data)
	if err != nil {
		return nil, fmt.Errorf("world %s %s: %w", line["op"], line["world"], err)
	}
	return answer, nil
}
