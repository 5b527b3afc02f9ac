package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// demoCmd is "worldfs demo".
func demoCmd() command {
	var url *string
	var ticks *int64
	var emitters *int
	var world *string
	return command{
		name:    "demo",
		summary: "run the reference particle simulation on a new world: commit ticks, fence and resume, fork, cold-start",
		example: "worldfs demo --bucket ./worldfs-data --ticks 300",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			ticks = fs.Int64("ticks", 300, "ticks to run (the resumed writer and the fork run a few more)")
			emitters = fs.Int("emitters", 4, "particle emitters")
			world = fs.String("world", "", "name of the new world (default particles-<time>)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("demo takes no arguments")
			}
			if *ticks < 10 || *emitters < 1 {
				return usagef("--ticks must be at least 10 and --emitters positive")
			}
			b, err := openBucket(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			id := *world
			if id == "" {
				id = fmt.Sprintf("particles-%d", time.Now().UnixNano())
			}
			return demo(ctx, b, *url, id, *ticks, *emitters, out)
		},
	}
}

func frameRows(w *engine.World) string {
	s := ""
	for _, t := range w.Tables() {
		s += fmt.Sprintf(" %s=%d", t.Name, w.Frame(t.Name).Len())
	}
	return s
}

// demo is worldfs's main job at this stage, end to end on one bucket.
func demo(ctx context.Context, b bucket.Bucket, url, id string, ticks int64, emitters int, out io.Writer) error {
	tables := particles.Tables()
	w, err := engine.CreateWorld(ctx, b, id, tables, engine.Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	fmt.Fprintf(out, "bucket %s: world %s created (writer epoch %d); tables:", url, id, w.Epoch())
	for _, t := range tables {
		fmt.Fprintf(out, " %s (%s)", t.Name, t.ID)
	}
	fmt.Fprintln(out)

	if err := particles.Install(w); err != nil {
		return err
	}
	if err := particles.Setup(w, emitters); err != nil {
		return err
	}
	if err := demoRun(ctx, w, ticks, out); err != nil {
		return err
	}

	// A second writer resumes the world from its visible rows; the first
	// is fenced out and stops for good.
	r, err := engine.ResumeWorld(ctx, b, id, tables, engine.Options{})
	if err != nil {
		return err
	}
	defer r.Close()
	if err := particles.Install(r); err != nil {
		return err
	}
	if err := particles.Run(ctx, r, ticks+49, nil); err != nil {
		return err
	}
	particles.Schedule(w)
	_, err = w.Step(ctx)
	var stale *index.StaleWriterError
	if !errors.As(err, &stale) {
		return fmt.Errorf("the fenced-out writer stepped: %v", err)
	}
	fmt.Fprintf(out, "resumed by a new writer at epoch %d, which ran to tick %d; the old writer is stopped: %v\n", r.Epoch(), r.Tick(), err)

	if err := demoFacts(ctx, r, out); err != nil {
		return err
	}

	// A fork from the middle of history, with its own lineage.
	forkAt := ticks / 2
	fork, err := engine.ForkWorld(ctx, b, id, id+"-fork", index.DefaultRun, forkAt, tables, engine.Options{})
	if err != nil {
		return err
	}
	defer fork.Close()
	if err := particles.Install(fork); err != nil {
		return err
	}
	// The fork takes another course: a nudge its parent never had moves
	// its emitters at the tick after the fork point, so its particles
	// spawn elsewhere from then on (the simulation is deterministic: a fork
	// left alone would repeat its parent tick for tick).
	nudge := particles.Nudge("fork-nudge", forkAt+1, demoNudgeX, demoNudgeY)
	if err := fork.Enqueue(ctx, nudge); err != nil {
		return err
	}
	if err := particles.Run(ctx, fork, forkAt+20, nil); err != nil {
		return err
	}
	segs, err := index.Lineage(ctx, index.LoadFrom(b), fork.ID(), index.DefaultRun)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "forked at tick %d into %s, nudged its emitters by (%g, %g) at tick %d and ran it to tick %d; its history reads %d segments: %s up to tick %d, then its own\n",
		forkAt, fork.ID(), demoNudgeX, demoNudgeY, nudge.Due, fork.Tick(), len(segs), segs[0].World, segs[0].UpTo)

	return demoRead(ctx, b, url, id, out)
}

// The nudge the demo's fork gets after its fork point (emitter positions
// move by it): what makes the fork differ from its parent.
const demoNudgeX, demoNudgeY = 4.0, -3.0

// demoRun runs the first writer w to tick ticks-1 and prints what it
// committed.
func demoRun(ctx context.Context, w *engine.World, ticks int64, out io.Writer) error {
	var bytes, fragments int64
	start := time.Now()
	err := particles.Run(ctx, w, ticks-1, func(r engine.CommittedTickReceipt) {
		for _, a := range r.Appends {
			bytes += a.Bytes
			fragments++
		}
		if r.Tick%100 == 0 {
			fmt.Fprintf(os.Stderr, "demo: tick %d\n", r.Tick)
		}
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "%d ticks committed in %v (%.0f ticks/s): %d fragments, %.1f MiB of Parquet; rows at the head:%s\n",
		ticks, elapsed.Round(time.Millisecond), float64(ticks)/elapsed.Seconds(), fragments, float64(bytes)/(1<<20), frameRows(w))
	return nil
}

// demoRead reads world id back: a cold start from the bucket alone, and
// (on a local bucket) the SQL views; then it says what to try next.
func demoRead(ctx context.Context, b bucket.Bucket, url, id string, out io.Writer) error {
	// A cold start from the bucket alone.
	start := time.Now()
	s, info, err := index.Load(ctx, b, id)
	if err != nil {
		return err
	}
	run, _ := s.Run(index.DefaultRun)
	fmt.Fprintf(out, "cold start of %s in %v (%d slots replayed): head tick %d, %d ticks visible, fence epoch %d\n",
		id, time.Since(start).Round(time.Microsecond), info.SlotsReplayed, run.Head, run.Published, s.World.Epoch)

	// The same world through the SQL views: visible rows only.
	if _, isLocal := bucket.As[bucket.Local](b); isLocal {
		if err := demoSQL(ctx, b, id, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "next: worldfs sql --bucket %s --world %s \"SELECT tick, count(*) FROM particle GROUP BY tick ORDER BY tick DESC LIMIT 5\"\n", url, id)
	fmt.Fprintf(out, "      worldfs mount %s /mnt/worlds   (then ls /mnt/worlds/%s/runs/main/ticks)\n", url, id)
	return nil
}

// demoSQL counts the world's visible rows, facts and receipts through the
// SQL views.
func demoSQL(ctx context.Context, b bucket.Bucket, id string, out io.Writer) error {
	start := time.Now()
	// The views' fragment list goes where worldfs sql keeps its lists.
	script, err := wsql.Build(ctx, b, id, wsql.Options{Dir: filepath.Join(defaultCacheDir(), "views")})
	if err != nil {
		return err
	}
	db, err := wsql.Open(ctx, script)
	if err != nil {
		return err
	}
	defer db.Close()
	var rows, ticks, facts, receipts int64
	err = db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM particle), (SELECT count(DISTINCT tick) FROM particle),
		(SELECT count(*) FROM worldfs_facts), (SELECT count(*) FROM worldfs_receipts)`).Scan(&rows, &ticks, &facts, &receipts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "SQL views of %s (built and opened in %v): %d visible particle rows over %d ticks, %d facts, %d receipt\n",
		id, time.Since(start).Round(time.Millisecond), rows, ticks, facts, receipts)
	return nil
}

// claimNumber is a fact's or a receipt's id as a person reads it, "#n":
// facts and receipts take ids from a band below every entity id, the
// world's nth claim getting index.FactIDBase - n (-2^40 - n), so that they
// never collide with an entity of a table (a fact is a row of its fact
// table, its id the row's entity_id).
func claimNumber(id int64) string {
	if id < index.FactIDBase {
		return fmt.Sprintf("#%d", index.FactIDBase-id)
	}
	return fmt.Sprint(id)
}

// demoFacts ingests sensor facts into the live world, exactly once each,
// and records an evaluation receipt of its head.
func demoFacts(ctx context.Context, w *engine.World, out io.Writer) error {
	c, err := engine.NewComponent("reading", engine.Field{Name: "sensor", Type: engine.String}, engine.Field{Name: "celsius", Type: engine.Float64})
	if err != nil {
		return err
	}
	table, err := engine.NewFactTable("reading", c)
	if err != nil {
		return err
	}
	fact := func(id string, celsius float64) engine.Fact {
		return engine.Fact{Producer: "sensor-1", ExternalID: id, Table: table,
			Values: engine.Values{"reading_sensor": "sensor-1", "reading_celsius": celsius}}
	}
	var first engine.FactReceipt
	for i, f := range []engine.Fact{fact("evt-1", 21.5), fact("evt-2", 21.7), fact("evt-1", 21.5)} {
		r, err := w.Ingest(ctx, f)
		if err != nil {
			return err
		}
		if i == 0 {
			first = r
		}
	}
	_, conflict := w.Ingest(ctx, fact("evt-1", 99))
	var ce *index.ClaimConflictError
	if !errors.As(conflict, &ce) {
		return fmt.Errorf("a conflicting fact was not refused: %v", conflict)
	}
	fmt.Fprintf(out, "ingested facts %s and %s (fact_id %d and %d) at tick %d without advancing it; a resend was deduplicated and a changed resend refused: %v\n",
		claimNumber(first.FactID), claimNumber(first.FactID-1), first.FactID, first.FactID-1, first.Tick, conflict)

	s, err := w.Catalog().Exact(ctx)
	if err != nil {
		return err
	}
	sub, err := engine.PinSubject(s, index.DefaultRun, -1, engine.Selector{Tables: []string{"particle"}})
	if err != nil {
		return err
	}
	contract := engine.GraderContract{GraderID: "particles-fall", Implementation: "v1", Seed: 1}
	rec, err := w.Evaluate(ctx, engine.Evaluation{ID: "demo-eval-1", Subject: sub, Contract: contract},
		func(ctx context.Context, sub engine.Subject) ([]engine.Outcome, error) {
			return []engine.Outcome{{Criterion: "emitters-alive", Verdict: engine.Pass}}, nil
		})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "evaluation %s by %s@%s of tick %d: %s (receipt %s, receipt_id %d, under %s)\n",
		rec.EvaluationID, contract.GraderID, contract.Implementation, sub.HeadTick, rec.Outcomes[0].Verdict, claimNumber(rec.ReceiptID), rec.ReceiptID, rec.CommitToken[:8])
	return nil
}
