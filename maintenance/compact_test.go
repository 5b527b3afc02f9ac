package maintenance_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/maintenance"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/crashtest"
)

// Windows chosen by the caller cut the history into their own levels:
// with windows of 32 and 8 ticks and 4 recent ones, 60 ticks compact into
// one file of 0..31 and three of 8 ticks each, per table.
func TestCompactWithWindowsOfOnesOwn(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 60)
	before := visibleRows(t, b, "w", "main")
	res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Recent: 4, Windows: []int64{32, 8}})
	if err != nil || res.Windows != 4 {
		t.Fatalf("Compact with windows 32, 8: %+v, %v; want 4 windows", res, err)
	}
	s, _ := w.Catalog().Exact(ctx)
	spans := map[index.Span]bool{}
	s.Ticks("main", 0, func(tk *index.Tick) bool {
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				if f.Span != nil {
					spans[*f.Span] = true
				}
			}
		}
		return true
	})
	// A table's file spans the ticks of its window it holds rows of.
	windows := []index.Span{{From: 0, To: 31}, {From: 32, To: 39}, {From: 40, To: 47}, {From: 48, To: 55}}
	covered := map[index.Span]bool{}
	for sp := range spans {
		i := slices.IndexFunc(windows, func(w index.Span) bool { return w.Contains(sp.From) && w.Contains(sp.To) })
		if i < 0 {
			t.Fatalf("a compacted file spans %v, in none of the windows %v", sp, windows)
		}
		covered[windows[i]] = true
	}
	if len(covered) != len(windows) {
		t.Fatalf("compacted spans %v cover %d of the windows %v", spans, len(covered), windows)
	}
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("the visible rows changed")
	}
}

// visibleRows returns, per published tick of run, every visible row of
// every table as the text of its Parquet values, commit columns included:
// what compaction must keep byte for byte.
func visibleRows(t *testing.T, b bucket.Bucket, world, run string) map[int64]string {
	t.Helper()
	ctx := ctxT(t)
	s, _, err := index.Load(ctx, b, world)
	if err != nil {
		t.Fatal(err)
	}
	type stamp struct {
		tick  int64
		token string
	}
	byStamp := map[string]map[stamp][]string{} // by file
	rowsOf := func(path string) map[stamp][]string {
		if rows, ok := byStamp[path]; ok {
			return rows
		}
		f := openFile(t, b, path)
		cols := f.Schema().Columns()
		rows := map[stamp][]string{}
		for _, rg := range f.RowGroups() {
			rr := rg.Rows()
			buf := make([]parquet.Row, 64)
			for {
				n, err := rr.ReadRows(buf)
				for _, r := range buf[:n] {
					var st stamp
					text := make([]string, len(r))
					for i, v := range r {
						text[i] = cols[i][0] + "=" + v.String()
						switch cols[i][0] {
						case engine.ColTick:
							st.tick = v.Int64()
						case engine.ColCommitToken:
							st.token = string(v.ByteArray())
						}
					}
					rows[st] = append(rows[st], strings.Join(text, " "))
				}
				if err != nil {
					break
				}
			}
			rr.Close()
		}
		byStamp[path] = rows
		return rows
	}
	out := map[int64]string{}
	s.Ticks(run, 0, func(tk *index.Tick) bool {
		var rows []string
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				for _, r := range rowsOf(f.Path)[stamp{tk.Tick, tk.CommitToken}] {
					rows = append(rows, tf.Table+" "+r)
				}
			}
		}
		slices.Sort(rows)
		out[tk.Tick] = strings.Join(rows, "\n")
		return true
	})
	return out
}

// files counts the distinct files the ticks from..to of run name per table,
// and how many of them are compacted.
// openFile opens the Parquet file at path.
func openFile(t *testing.T, b bucket.Bucket, path string) *parquet.File {
	t.Helper()
	data, _, err := b.Get(ctxT(t), path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func files(t *testing.T, b bucket.Bucket, world string, from, to int64) (all, compacted int) {
	t.Helper()
	for _, c := range filesOf(t, b, world, from, to) {
		all++
		if c {
			compacted++
		}
	}
	return all, compacted
}

// filesOf returns the files ticks from..to of world's run main name, each
// with whether it is a compacted file.
func filesOf(t *testing.T, b bucket.Bucket, world string, from, to int64) map[string]bool {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	s.Ticks("main", from, func(tk *index.Tick) bool {
		if tk.Tick > to {
			return false
		}
		for _, tf := range enginetest.Tables(t, tk) {
			for _, f := range tf.Fragments {
				out[f.Path] = f.Span != nil
			}
		}
		return true
	})
	return out
}

func TestCompactKeepsEveryVisibleRow(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctx, w, 299); err != nil {
		t.Fatal(err)
	}
	before := visibleRows(t, b, "w", "main")
	opts := maintenance.CompactOptions{Recent: 10}
	res, err := maintenance.Compact(ctx, b, w.Catalog(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Ticks 0..255 are four windows of 64; 256..299 stay as written.
	if res.Windows != 4 || res.Refused != 0 {
		t.Fatalf("compaction %+v: want 4 windows", res)
	}
	if all, compacted := files(t, b, "w", 0, 255); all != 4*3 || compacted != all {
		t.Fatalf("ticks 0..255 name %d files (%d compacted), want 4 per table", all, compacted)
	}
	if all, compacted := files(t, b, "w", 256, 299); all != 44*3 || compacted != 0 {
		t.Fatalf("the recent ticks name %d files (%d compacted), want their own", all, compacted)
	}
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("compaction changed the visible rows")
	}
	// Compacted files delta-encode their integer columns; tick fragments
	// stay PLAIN (the bytes the mount rebuilds a tick's file to).
	for path, compacted := range filesOf(t, b, "w", 0, 299) {
		for _, rg := range openFile(t, b, path).Metadata().RowGroups {
			for _, c := range rg.Columns {
				md := c.MetaData
				delta := slices.Contains(md.Encoding, format.DeltaBinaryPacked)
				integer := md.Type == format.Int64 || md.Type == format.Int32
				if delta != (compacted && integer) {
					t.Fatalf("%s (compacted: %v): column %s (%s) is encoded %v", path, compacted, strings.Join(md.PathInSchema, "."), md.Type, md.Encoding)
				}
			}
		}
	}
	// Idempotent: nothing more to do.
	if res, err := maintenance.Compact(ctx, b, w.Catalog(), opts); err != nil || res.Windows != 0 || res.Files != 0 {
		t.Fatalf("a second compaction: %+v, %v; want nothing done", res, err)
	}
	// More history: the eight 64-tick files of 0..511 merge into one.
	if err := drive(ctx, w, 599); err != nil {
		t.Fatal(err)
	}
	before = visibleRows(t, b, "w", "main")
	if _, err := maintenance.Compact(ctx, b, w.Catalog(), opts); err != nil {
		t.Fatal(err)
	}
	if all, compacted := files(t, b, "w", 0, 575); all != 2*3 || compacted != all {
		t.Fatalf("ticks 0..575 name %d files (%d compacted), want a 512-tick and a 64-tick file per table", all, compacted)
	}
	if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
		t.Fatal("the second level changed the visible rows")
	}
	// A resumed writer reads its head from the compacted history.
	live := particles.Fingerprint(w)
	w.Close()
	r, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := particles.Fingerprint(r); got != live {
		t.Fatalf("resumed from compacted history: %s\nlive: %s", got, live)
	}
}

// Compaction beside a live writer, and two compactors racing: the writer
// never stops, no window is rewritten twice, and the world ends where an
// uninterrupted one does.
func TestCompactBesideALiveWriter(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctx, w, 200); err != nil {
		t.Fatal(err)
	}
	other, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	results := make([]maintenance.CompactResult, 2)
	errs := make([]error, 3)
	for i, cat := range []*index.Catalog{w.Catalog(), other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10})
		}()
	}
	errs[2] = drive(ctx, w, 400)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if won := results[0].Windows + results[1].Windows; won != 2 {
		t.Fatalf("compactors %+v: the two windows of 0..127 are rewritten once each", results)
	}
	if got, want := particles.Fingerprint(w), reference(t, 400); got != want {
		t.Fatalf("with compaction alongside: %s\nuninterrupted: %s", got, want)
	}
	checkAll(t, b, 400)
}

// checkAll asserts ticks 0..last are published once each and their visible
// rows are exactly those of an uninterrupted run's.
func checkAll(t *testing.T, b bucket.Bucket, last int64) {
	t.Helper()
	ref, _ := local.Open(t.TempDir())
	w, err := engine.CreateWorld(ctxT(t), ref, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := drive(ctxT(t), w, last); err != nil {
		t.Fatal(err)
	}
	want, got := visibleRows(t, ref, "w", "main"), visibleRows(t, b, "w", "main")
	if len(got) != int(last+1) {
		t.Fatalf("%d ticks visible, want %d", len(got), last+1)
	}
	for tick, rows := range want {
		if stripTokens(got[tick]) != stripTokens(rows) {
			t.Fatalf("tick %d differs from an uninterrupted run:\n%s\nwant\n%s", tick, got[tick], rows)
		}
	}
}

// stripTokens drops commit tokens (random per attempt) from visibleRows'
// text, keeping everything else.
func stripTokens(s string) string {
	return tokenRE.ReplaceAllString(s, "commit_token=T")
}

var tokenRE = regexp.MustCompile(`commit_token=\S*`)

func mapsEqual(a, b map[int64]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// compactChild compacts world w in the bucket at p[0] (see
// TestCompactCrash).
func compactChild(p []string) int {
	ctx := context.Background()
	b, err := local.Open(p[0])
	if err != nil {
		return 3
	}
	cat, err := index.Open(ctx, b, "w", index.Options{NoCompactor: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer cat.Close()
	if _, err := maintenance.Compact(ctx, b, cat, maintenance.CompactOptions{Recent: 10}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

// A compactor killed at each of its failpoints (the second window's) loses
// no visible row, and a compactor run afterwards finishes the job.
func TestCompactCrash(t *testing.T) {
	for _, fp := range []string{maintenance.FailpointCompactWritten, maintenance.FailpointCompactCommitted} {
		t.Run(fp, func(t *testing.T) {
			dir := t.TempDir()
			b, _ := local.Open(dir)
			w, err := engine.CreateWorld(ctxT(t), b, "w", particles.Tables(), quiet)
			if err != nil {
				t.Fatal(err)
			}
			if err := drive(ctxT(t), w, 150); err != nil {
				t.Fatal(err)
			}
			w.Close()
			before := visibleRows(t, b, "w", "main")
			hit := "@2"
			if fp == maintenance.FailpointCompactWritten {
				hit = "@5" // the second window's second table
			}
			crashtest.KilledAt(t, fp+hit, "compact", dir)
			if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
				t.Fatalf("a compactor killed at %s changed the visible rows", fp)
			}
			if code := compactChild([]string{dir}); code != 0 {
				t.Fatalf("compaction after the crash exited %d", code)
			}
			if after := visibleRows(t, b, "w", "main"); !mapsEqual(before, after) {
				t.Fatal("compaction after the crash changed the visible rows")
			}
			if all, compacted := files(t, b, "w", 0, 127); all != 2*3 || compacted != all {
				t.Fatalf("ticks 0..127 name %d files (%d compacted) after recovery, want 2 per table", all, compacted)
			}
		})
	}
}

// An open world compacts its own history as it goes: nobody runs
// optimize, and the small fragments per table stay bounded.
func TestWorldCompactsByItself(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	opts := quiet
	opts.NoMaintenance = false
	opts.Compaction = maintenance.CompactOptions{Recent: 16, MinFacts: 1}
	w, err := engine.CreateWorld(ctx, b, "w", particles.Tables(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := drive(ctx, w, 20); err != nil {
		t.Fatal(err)
	}
	// A fact and a receipt, which the world compacts by itself too.
	if _, err := w.Ingest(ctx, reading("p", "1", 1)); err != nil {
		t.Fatal(err)
	}
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", 20, engine.Selector{})
	if _, err := w.Evaluate(ctx, engine.Evaluation{ID: "ev", Subject: sub, Contract: contract("v1")}, passing); err != nil {
		t.Fatal(err)
	}
	if err := drive(ctx, w, 300); err != nil {
		t.Fatal(err)
	}
	want := particles.Fingerprint(w)
	if err := w.Close(); err != nil { // waits for a compaction under way
		t.Fatal(err)
	}
	res, err := w.Maintenance()
	if err != nil || res.Windows == 0 || res.Facts != 2 {
		t.Fatalf("background compaction: %+v, %v; want windows, the fact and the receipt", res, err)
	}
	s, _, _ = index.Load(ctx, b, "w")
	for _, run := range []string{"main", engine.EvaluationRun} {
		s.Claims(run, func(c *index.Claim) bool {
			if c.Tables[0].Fragments[0].Span == nil {
				t.Errorf("run %s: claim %s is not compacted", run, c.Key)
			}
			return true
		})
	}
	// By tick 300 at least the windows below tick 255 were due.
	if all, compacted := files(t, b, "w", 0, 191); compacted != all || all > 3*3 {
		t.Fatalf("ticks 0..191 name %d files (%d compacted): the world did not keep its history compact", all, compacted)
	}
	r, err := engine.ResumeWorld(ctx, b, "w", particles.Tables(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := particles.Fingerprint(r); got != want {
		t.Fatalf("resumed %s, live %s", got, want)
	}
	checkAll(t, b, 300)
}

// Facts and receipts compact claim shard by claim shard: fewer files, the
// same visible rows, and a repeat of an ingested fact or of an evaluation
// still gets its original receipt (read back from the compacted file).
func TestCompactFacts(t *testing.T) {
	ctx := ctxT(t)
	b, _ := local.Open(t.TempDir())
	w := simWorld(t, b, "w", 5)
	var first engine.FactReceipt
	for i := range 300 {
		r, err := w.Ingest(ctx, reading("p", fmt.Sprint(i), float64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			first = r
		}
	}
	s, _ := w.Catalog().Exact(ctx)
	sub, _ := engine.PinSubject(s, "main", 5, engine.Selector{})
	ev := engine.Evaluation{ID: "ev", Subject: sub, Contract: contract("v1")}
	graded, err := w.Evaluate(ctx, ev, passing)
	if err != nil {
		t.Fatal(err)
	}
	// Two more receipts in ev's claim shard, so that its compacted file
	// holds several.
	shardOf := func(id string) int64 {
		return index.ClaimShardOf(index.ClaimKey{Run: engine.EvaluationRun, Producer: engine.EvaluationProducer, ExternalID: id})
	}
	for i, n := 0, 0; n < 2; i++ {
		if id := fmt.Sprint("other-", i); shardOf(id) == shardOf("ev") {
			if _, err := w.Evaluate(ctx, engine.Evaluation{ID: id, Subject: sub, Contract: contract("v1")}, passing); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	before := visibleFactRows(t, b, "w", "main")
	for _, run := range []string{"main", engine.EvaluationRun} {
		res, err := maintenance.Compact(ctx, b, w.Catalog(), maintenance.CompactOptions{Run: run, MinFacts: 1})
		if err != nil || res.Facts == 0 {
			t.Fatalf("compaction of run %s: %+v, %v", run, res, err)
		}
	}
	if after := visibleFactRows(t, b, "w", "main"); !mapsEqual(before, after) || len(after) != 300 {
		t.Fatalf("compaction changed the visible facts (%d before, %d after)", len(before), len(after))
	}
	s, _ = w.Catalog().Exact(ctx)
	files := map[string]bool{}
	s.Claims("main", func(c *index.Claim) bool {
		if c.Tables[0].Fragments[0].Span == nil {
			t.Fatalf("fact %s is not compacted", c.Key)
		}
		files[c.Tables[0].Fragments[0].Path] = true
		return true
	})
	if len(files) > 256 {
		t.Fatalf("300 facts in %d files after compaction", len(files))
	}
	again, err := w.Ingest(ctx, reading("p", "7", 7))
	if err != nil || again.CommitToken != first.CommitToken || !again.Deduplicated {
		t.Fatalf("a resend after compaction: %+v, %v; want the original receipt %+v", again, err, first)
	}
	repeat, err := w.Evaluate(ctx, ev, func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		t.Fatal("a repeat graded again")
		return nil, nil
	})
	if err != nil || repeat.CommitToken != graded.CommitToken || repeat.Outcomes[0].Verdict != engine.Pass {
		t.Fatalf("a repeat of the evaluation after compaction: %+v, %v", repeat, err)
	}
}

// visibleFactRows returns the visible fact rows of run, by fact id, read
// through the catalog's claims.
func visibleFactRows(t *testing.T, b bucket.Bucket, world, run string) map[int64]string {
	t.Helper()
	s, _, err := index.Load(ctxT(t), b, world)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	s.Claims(run, func(c *index.Claim) bool {
		if c.State != index.ClaimComplete {
			return true
		}
		data, _, err := b.Get(ctxT(t), c.Tables[0].Fragments[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := engine.DecodeFragment(readingTable(), data, func(r engine.StampedRow) bool {
			return r.Entity == c.FactID && r.CommitToken == c.CommitToken && r.Tick == c.Tick
		})
		if err != nil || f.Len() != 1 {
			t.Fatalf("fact %s: %d rows, %v", c.Key, f.Len(), err)
		}
		out[c.FactID] = fmt.Sprint(f.Row(c.FactID))
		return true
	})
	return out
}
