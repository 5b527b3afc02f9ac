package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/maintenance"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// objectSet lists every object of the bucket under prefix.
func objectSet(t *testing.T, b bucket.Bucket, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for a, err := range b.List(ctxT(t), prefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = true
	}
	return out
}

// plant stores a fragment of the particle table stamped (tick, token,
// epoch), as an attempt that never published would leave it.
func plant(t *testing.T, b bucket.Bucket, w *engine.World, tick int64, token string, epoch int64) string {
	t.Helper()
	data, err := engine.EncodeFragment(w.Frame("particle"), engine.Stamp{Tick: tick, CommitToken: token, WriterEpoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	path := index.FragmentPath("w", "main", particles.Tables()[0].ID, token, 0)
	if _, err := b.Create(ctxT(t), path, data); err != nil {
		t.Fatal(err)
	}
	return path
}

// collect runs Collect on world w of b at now, returning what it reported.
func collect(t *testing.T, b bucket.Bucket, now time.Time, dry bool) (maintenance.CollectResult, map[string]maintenance.Collected) {
	t.Helper()
	cat, err := index.Open(ctxT(t), b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	seen := map[string]maintenance.Collected{}
	res, err := maintenance.Collect(ctxT(t), b, cat, maintenance.CollectOptions{DryRun: dry, Now: func() time.Time { return now },
		Report: func(c maintenance.Collected) { seen[c.Name] = c }})
	if err != nil {
		t.Fatal(err)
	}
	return res, seen
}

// Vacuum deletes the attempts the catalog proves dead (a tick published
// under another token; a fenced-out epoch above the head) and never the
// attempt a live writer may still publish, nor a pending claim's rows; a
// dry run deletes nothing.
func TestCollectVacuum(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	old, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctx, old, 40); err != nil {
		t.Fatal(err)
	}
	staleEpoch := old.Epoch()
	old.Close()
	w, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctx, w, 80); err != nil {
		t.Fatal(err)
	}
	head := w.Tick()
	crashed := plant(t, b, w, 50, "crashed", w.Epoch())    // tick 50 is published under another token
	fenced := plant(t, b, w, head+1, "fenced", staleEpoch) // the old writer, fenced out, above the head
	live := plant(t, b, w, head+1, "live", w.Epoch())      // the live writer's next tick, not yet published
	ahead := plant(t, b, w, head+3, "ahead", w.Epoch())    // current epoch: may still publish
	r, err := w.Catalog().Commit(ctx, index.Entry{Kind: index.KindClaimAcquire, Claim: &index.ClaimOp{
		Key: index.ClaimKey{Run: "main", Producer: "p", ExternalID: "x"}, Digest: "sha256:x",
		CommitToken: "pending-token", Holder: "h", NowMs: 1, LeaseUntilMs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	pending := plant(t, b, w, r.Claim.Tick, "pending-token", w.Epoch())
	// No stamp statistics at all: kept and reported.
	garbled := index.FragmentPath("w", "main", particles.Tables()[0].ID, "garbled", 0)
	if _, err := b.Create(ctx, garbled, []byte("not parquet")); err != nil {
		t.Fatal(err)
	}
	before := visibleRows(t, b, "w", "main")
	all := objectSet(t, b, "")

	res, seen := collect(t, b, time.Now(), true)
	if got := objectSet(t, b, ""); len(got) != len(all) {
		t.Fatalf("a dry run deleted %d objects", len(all)-len(got))
	}
	if _, ok := seen[crashed]; !ok || res.Deleted != 2 {
		t.Fatalf("the dry run reports %d (%v), want the crashed and fenced-out attempts", res.Deleted, seen)
	}

	res, seen = collect(t, b, time.Now(), false)
	got := objectSet(t, b, "")
	for _, p := range []string{crashed, fenced} {
		if got[p] || seen[p].Kind != maintenance.KindAttempt {
			t.Errorf("dead attempt %s: still there %v, reported %+v", p, got[p], seen[p])
		}
	}
	for _, p := range []string{live, ahead, pending, garbled} {
		if !got[p] {
			t.Errorf("%s was deleted: a live writer or a claim may still publish it", p)
		}
	}
	if c := seen[garbled]; !c.Kept || res.Kept != 1 {
		t.Errorf("a file without statistics: reported %+v, %d kept", c, res.Kept)
	}
	if res.Deleted != 2 || len(all)-len(got) != 2 {
		t.Fatalf("collection deleted %d objects (%d reported), want the 2 dead attempts", len(all)-len(got), res.Deleted)
	}
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("vacuum changed the visible rows")
	}
	// The live writer publishes its next tick; its own attempt was kept.
	if err := drive(ctx, w, head+1); err != nil {
		t.Fatal(err)
	}
}

// Fragments a rewrite replaced stay for the retention (a reader pinned
// before the compaction reads them), then go; old slots, checkpoints and
// shards go too, and cold start, the catalog check and a change feed from
// a recent sequence keep working while one from a collected sequence is
// told to resync.
func TestCollectReplacedAndCatalog(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.Catalog = index.Options{NoCompactor: true, Store: "writer"}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctx, w, 200); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	pinned, _, err := index.Load(ctx, b, "w") // a reader pinned before the rewrite
	if err != nil {
		t.Fatal(err)
	}
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 10}); err != nil || res.Windows == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if err := drive(ctx, w, 230); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	before := visibleRows(t, b, "w", "main")
	var replaced []string
	pinned.Ticks("main", 0, func(tk *index.Tick) bool {
		if tk.Tick < 128 { // two 64-tick windows below head - Recent
			for _, tf := range enginetest.Tables(t, tk) {
				for _, f := range tf.Fragments {
					replaced = append(replaced, f.Path)
				}
			}
		}
		return true
	})

	// Within the retention: nothing the pinned reader reads goes.
	res, _ := collect(t, b, time.Now(), false)
	if res.ByKind[maintenance.KindReplaced] != 0 || res.ByKind[maintenance.KindSlot] != 0 {
		t.Fatalf("within the retention collection deleted %+v", res.ByKind)
	}
	for _, p := range replaced {
		if _, _, err := b.Get(ctx, p); err != nil {
			t.Fatalf("a pinned reader's fragment %s: %v", p, err)
		}
	}

	// Past the retention: the replaced fragments and the old slots go.
	tip := w.Catalog().Tip().Seq
	later := time.Now().Add(maintenance.DefaultRetention + time.Hour)
	res, seen := collect(t, b, later, false)
	for _, p := range replaced {
		if seen[p].Kind != maintenance.KindReplaced {
			t.Logf("not reported: %s %+v", p, seen[p])
		}
	}
	if res.ByKind[maintenance.KindReplaced] != len(replaced) {
		t.Fatalf("past the retention %d replaced fragments went (%+v), want %d", res.ByKind[maintenance.KindReplaced], res.ByKind, len(replaced))
	}
	for _, p := range replaced {
		if _, err := b.Stat(ctx, p); !errors.Is(err, bucket.ErrNotExist) || seen[p].Kind != maintenance.KindReplaced {
			t.Fatalf("replaced fragment %s: %v, reported %+v", p, err, seen[p])
		}
	}
	if res.ByKind[maintenance.KindSlot] == 0 {
		t.Fatalf("no slot was collected: %+v", res.ByKind)
	}
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("collection changed the visible rows")
	}
	// Cold start, the check, and the change feed.
	s, info, err := index.Load(ctx, b, "w")
	if err != nil || s.Seq != tip || info.CheckpointSeq == 0 {
		t.Fatalf("cold start after collection: %v at %d (tip %d), %+v", err, s.Seq, tip, info)
	}
	chk, err := index.VerifyCatalog(ctx, b, "w", nil)
	if err != nil || len(chk.Problems) != 0 || chk.FirstSlot <= 1 {
		t.Fatalf("the catalog check after collection: %v %+v", err, chk)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c, err := range index.Changes(fctx, b, "w", 1, time.Millisecond) {
		if !errors.Is(err, index.ErrResync) {
			t.Fatalf("a feed from a collected sequence: %+v, %v; want ErrResync", c, err)
		}
		break
	}
	for c, err := range index.Changes(fctx, b, "w", chk.FirstSlot, time.Millisecond) {
		if err != nil || c.Seq != chk.FirstSlot {
			t.Fatalf("a feed from a recent sequence: %+v, %v", c, err)
		}
		break
	}
	// Collected once more: the writer goes on, shards of collected
	// checkpoints go, and the check still passes.
	if err := drive(ctx, w, 240); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Catalog().Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	collect(t, b, later.Add(maintenance.DefaultRetention), false)
	if chk, err := index.VerifyCatalog(ctx, b, "w", nil); err != nil || len(chk.Problems) != 0 {
		t.Fatalf("the catalog check after a second collection: %v %+v", err, chk)
	}
	if _, _, err := index.Load(ctx, b, "w"); err != nil {
		t.Fatalf("cold start after a second collection: %v", err)
	}
	r, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), quiet)
	if err == nil {
		// The live writer holds the fence; a resume takes it over.
		r.Close()
	}
	if err != nil {
		t.Fatalf("resume after collection: %v", err)
	}
}

// gcChild runs optimize (p[0] "optimize") or gc as of p[0] days from now
// on world w in the bucket at p[1] (TestCollectKillLoop).
func gcChild(p []string) int {
	op, dir := p[0], p[1]
	ctx := context.Background()
	b, err := local.Open(dir)
	if err != nil {
		return 3
	}
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer cat.Close()
	switch op {
	case "optimize":
		_, err = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10})
	default:
		days, _ := strconv.Atoi(op)
		now := time.Now().Add(time.Duration(days) * 24 * time.Hour)
		_, err = maintenance.Collect(ctx, b, cat, maintenance.CollectOptions{Now: func() time.Time { return now }})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

// Optimize and gc, alternating and each killed (SIGKILL) at its
// failpoints, lose no visible row and leave no duplicate; the writer
// resumes between rounds, and the catalog check passes throughout.
func TestCollectKillLoop(t *testing.T) {
	dir := t.TempDir()
	b, _ := local.Open(dir)
	w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(100)
	if err := drive(ctxT(t), w, last); err != nil {
		t.Fatal(err)
	}
	w.Catalog().Checkpoint(ctxT(t))
	w.Close()
	days := 0
	child := func(op, fp string) {
		cmd := crashtest.Command("gc", op, dir)
		if fp != "" {
			cmd.Env = append(cmd.Env, crashtest.Failpoint(fp))
		}
		out, _ := cmd.CombinedOutput()
		killed := crashtest.Killed(cmd)
		if fp == "" && !cmd.ProcessState.Success() || fp != "" && !killed && !cmd.ProcessState.Success() {
			t.Fatalf("%s (%s): %v %s", op, fp, cmd.ProcessState, out)
		}
	}
	check := func(when string, want map[int64]string) {
		t.Helper()
		if got := visibleRows(t, b, "w", "main"); !mapsEqual(want, got) {
			t.Fatalf("%s: the visible rows changed", when)
		}
		if chk, err := index.VerifyCatalog(ctxT(t), b, "w", nil); err != nil || len(chk.Problems) != 0 {
			t.Fatalf("%s: the catalog check: %v %+v", when, err, chk)
		}
	}
	for round := 1; round <= 3; round++ {
		r, err := engine.ResumeWorld(ctxT(t), b, "w", particles.Tables(), quiet)
		if err != nil {
			t.Fatalf("round %d: resume: %v", round, err)
		}
		last += 100
		if err := drive(ctxT(t), r, last); err != nil {
			t.Fatal(err)
		}
		// A crashed attempt of a published tick, for vacuum.
		plant(t, b, r, last-5, fmt.Sprintf("crashed-%d", round), r.Epoch())
		r.Catalog().Checkpoint(ctxT(t))
		r.Close()
		want := visibleRows(t, b, "w", "main")
		days += 8
		gc := strconv.Itoa(days)
		for _, step := range []struct{ op, fp string }{
			{"optimize", maintenance.FailpointCompactWritten + "@2"},
			{gc, maintenance.FailpointGCDeleted + "@1"},
			{"optimize", maintenance.FailpointCompactCommitted + "@1"},
			{gc, maintenance.FailpointGCDeleted + ".replaced@3"},
			{gc, maintenance.FailpointGCDeleted + ".attempt@1"},
			{gc, maintenance.FailpointGCDeleted + ".slot@2"},
			{"optimize", ""},
			{gc, maintenance.FailpointGCDeleted + ".checkpoint@1"},
			{gc, maintenance.FailpointGCDeleted + ".shard@1"},
			{gc, ""},
		} {
			child(step.op, step.fp)
			check(fmt.Sprintf("round %d after %s killed at %q", round, step.op, step.fp), want)
		}
		if s, _, err := index.Load(ctxT(t), b, "w"); err != nil || s.Allowlist("main") == nil {
			t.Fatalf("round %d: cold start: %v", round, err)
		}
		if got := objectSet(t, b, index.FragmentPath("w", "main", particles.Tables()[0].ID, fmt.Sprintf("crashed-%d", round), 0)); len(got) != 0 {
			t.Fatalf("round %d: the crashed attempt was not vacuumed", round)
		}
	}
	if n := len(objectSet(t, b, "worlds/w/log/")); n == 0 {
		t.Fatal("the log is empty")
	}
}

// An open world collects by itself after its compactions: the fragments
// they replaced go once past the retention (a clock set ahead), while the
// writer goes on and every visible row stays.
func TestWorldCollectsByItself(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.NoMaintenance = false
	opts.Compaction = maintenance.CompactOptions{Recent: 16}
	later := time.Now().Add(maintenance.DefaultRetention + time.Hour)
	opts.Collection = maintenance.CollectOptions{Every: 1, Now: func() time.Time { return later }}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctx, w, 300); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Maintenance(); err != nil || w.Collected() == 0 {
		t.Fatalf("background collection deleted %d objects (%v)", w.Collected(), err)
	}
	checkAll(t, b, 300)
	if chk, err := index.VerifyCatalog(ctx, b, "w", nil); err != nil || len(chk.Problems) != 0 {
		t.Fatalf("the catalog check: %v %+v", err, chk)
	}
}

// tokenFilters returns the token filters of world w's tick shards, by
// the name of their shard.
func tokenFilters(t *testing.T, b bucket.Bucket) map[string]string {
	t.Helper()
	out := map[string]string{}
	for a, err := range b.List(ctxT(t), index.ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		if shard, ok := index.ShardOfSidecar(a.Name); ok {
			if _, sum := index.ShardOfSummary(a.Name); !sum {
				out[shard] = a.Name
			}
		}
	}
	return out
}

// checkpointSummaries returns world w's checkpoints, each with its
// summaries object ("": none); a summaries object of no checkpoint in the
// bucket fails the test.
func checkpointSummaries(t *testing.T, b bucket.Bucket) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	out, named := map[string]string{}, map[string]bool{}
	for a, err := range b.List(ctx, index.CheckpointPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = ""
		kept, err := index.CheckpointObjects(ctx, b, "w", a.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range kept {
			if strings.HasSuffix(n, ".sums") {
				named[n] = true
				if _, err := b.Stat(ctx, n); err == nil {
					out[a.Name] = n
				}
			}
		}
	}
	for a, err := range b.List(ctx, index.ShardPrefix("w"), "") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(a.Name, ".sums") && !named[a.Name] {
			t.Fatalf("the summaries object %s of no checkpoint left", a.Name)
		}
	}
	return out
}

// A tick shard's summary and token filter live as long as their shard:
// collection keeps the summary and filter of a shard a checkpoint names,
// past the retention, and deletes those of a shard none names with the
// shard.
func TestCollectKeepsTheSummariesOfNamedShards(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.Catalog = index.Options{NoCompactor: true}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cat, table := w.Catalog(), particles.Tables()[0].ID
	var es []index.Entry
	for tk := range int64(index.PartTicks) {
		token := fmt.Sprintf("t%d", tk)
		es = append(es, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: tk, CommitToken: token, WriterEpoch: w.Epoch(),
			Tables: []index.TableFragments{{Table: table, Fragments: []index.Fragment{{Path: index.TickFragmentPath("w", "main", table, token), Rows: 1}}}}}})
	}
	if _, err := cat.CommitAll(ctx, es...); err != nil {
		t.Fatal(err)
	}
	compact := func(digest string) {
		t.Helper()
		tip, err := cat.Exact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f := index.Fragment{Path: index.CompactedPath("w", "main", table, digest, ""), Rows: index.PartTicks, Span: &index.Span{From: 0, To: index.PartTicks - 1}}
		rw := &index.FragmentsRewrite{Run: "main", Span: f.Span, ReadSeq: tip.Seq, Tables: []index.TableFragments{{Table: table, Fragments: []index.Fragment{f}}}}
		if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindFragmentsRewrite, Rewrite: rw}); err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	summaries := func() []string {
		t.Helper()
		var out []string
		for a, err := range b.List(ctx, index.ShardPrefix("w"), "") {
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := index.ShardOfSummary(a.Name); ok {
				out = append(out, a.Name)
			}
		}
		return out
	}
	compact("a")
	first := summaries()
	compact("b") // the shard again, with another file: a new shard and summary
	if _, err := cat.Commit(ctx, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{Run: "main", Tick: index.PartTicks, CommitToken: "fresh", WriterEpoch: w.Epoch()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	both := summaries()
	if len(first) != 1 || len(both) != 2 {
		t.Fatalf("summaries %v, then %v; want one, then two", first, both)
	}
	filtersBefore := tokenFilters(t, b)
	checkpointsBefore := checkpointSummaries(t, b)
	later := time.Now().Add(100 * maintenance.DefaultRetention)
	_, seen := collect(t, b, later, false)
	// A checkpoint's summaries object lives as long as the checkpoint.
	if kept, left := checkpointSummaries(t, b), len(checkpointsBefore); len(kept) == 0 || len(kept) == left {
		t.Fatalf("checkpoints with their summaries objects before collection %v, after %v; want some collected", checkpointsBefore, kept)
	} else {
		for cp, sums := range kept {
			if sums == "" {
				t.Fatalf("the summaries object of the checkpoint %s left was collected", cp)
			}
		}
	}
	left := summaries()
	if seen[first[0]].Kind != maintenance.KindShard || len(left) != 1 || left[0] == first[0] {
		t.Fatalf("after collection: summaries %v (of %v), the first reported %+v; want only the named shard's", left, both, seen[first[0]])
	}
	if shard, _ := index.ShardOfSummary(left[0]); seen[shard].Kind != "" {
		t.Fatalf("the named shard %s was collected: %+v", shard, seen[shard])
	}
	// The token filters too: the unnamed shard's goes with it, the named
	// shards' stay.
	if n := len(filtersBefore); n != 3 {
		t.Fatalf("token filters before collection %v; want those of the 3 tick shards written", filtersBefore)
	}
	filters := tokenFilters(t, b)
	gone, _ := index.ShardOfSummary(first[0])
	named, _ := index.ShardOfSummary(left[0])
	if filters[gone] != "" || filters[named] == "" || len(filters) != 2 {
		t.Fatalf("token filters left %v; want those of the 2 named tick shards (%s and the fresh tick's), not of %s", filters, named, gone)
	}
}
