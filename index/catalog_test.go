package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
)

func TestCreateCommitReopen(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w1", Options{NoCompactor: true})
	if epoch != 1 {
		t.Fatalf("creator epoch %d", epoch)
	}
	ctx := ctxT(t)
	for tick := range int64(5) {
		if _, err := c.Commit(ctx, publish("main", tick, fmt.Sprint("tok", tick), epoch)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := CreateWorld(ctx, b, "w1", WorldCreate{Parent: "zz", ForkRun: "main"}, "x", Options{}); !errors.Is(err, ErrWorldExists) {
		t.Fatalf("second CreateWorld = %v, want ErrWorldExists", err)
	}
	worlds, err := ListWorlds(ctx, b)
	if err != nil || len(worlds) != 1 || worlds[0].ID != "w1" {
		t.Fatalf("ListWorlds = %+v, %v", worlds, err)
	}
	live := c.Tip()
	loaded, _, err := Load(ctx, b, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(live, loaded); d != "" {
		t.Fatalf("reopened state differs from the live one: %s", d)
	}
	if run, _ := loaded.Run("main"); run.Head != 4 || run.Published != 5 {
		t.Fatalf("run %+v", run)
	}
}

func TestMissingCatalogReadsEmpty(t *testing.T) {
	c, err := Open(ctxT(t), memBucket(), "nothing-here", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.Tip()
	if s.World.Created || s.Seq != 0 || s.Allowlist("r").Mode != Unfiltered {
		t.Fatalf("missing catalog: %+v", s.World)
	}
}

// Concurrent callers share slots (group commit) and each is acknowledged
// with its own result.
func TestGroupCommit(t *testing.T) {
	b := mem.New(mem.Options{Profile: mem.Profiles["gcs"], Seed: 3})
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Commit(ctxT(t), publish("r", int64(i), fmt.Sprint("t", i), epoch))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	st := c.Stats()
	if st.Entries != n+2 || st.Slots >= n/4 { // +2: world.create and fence.acquire
		t.Fatalf("stats %+v: %d entries should share far fewer slots", st, n)
	}
	tip, _ := c.Exact(ctxT(t))
	if run, _ := tip.Run("r"); run.Published != n {
		t.Fatalf("published %d", run.Published)
	}
}

// A member that fails does so alone; the rest of its batch commits.
func TestMemberFailsAlone(t *testing.T) {
	b := memBucket()
	c, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
	ctx := ctxT(t)
	entries := []Entry{publish("r", 0, "a", epoch), publish("r", 0, "b", epoch), publish("r", 1, "c", epoch+1), publish("r", 2, "d", epoch)}
	var wg sync.WaitGroup
	errs := make([]error, len(entries))
	for i, e := range entries {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = c.Commit(ctx, e) }()
	}
	wg.Wait()
	var conflicts, stale, ok int
	for _, err := range errs {
		var ce *CatalogConflictError
		var se *StaleWriterError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &ce):
			conflicts++
		case errors.As(err, &se):
			stale++
		default:
			t.Fatal(err)
		}
	}
	if ok != 2 || conflicts != 1 || stale != 1 {
		t.Fatalf("ok %d conflicts %d stale %d", ok, conflicts, stale)
	}
}

func TestCommitAllIsAtomic(t *testing.T) {
	c, epoch := newWorld(t, memBucket(), "w", Options{NoCompactor: true})
	ctx := ctxT(t)
	_, err := c.CommitAll(ctx, publish("r", 0, "a", epoch), publish("r", 0, "b", epoch))
	var ce *CatalogConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("CommitAll with a conflicting pair = %v", err)
	}
	if _, ok := c.Tip().Tick("r", 0); ok {
		t.Fatal("half of a refused CommitAll was committed")
	}
}

// Several committers on one bucket (several processes, in effect): each
// acknowledged entry is in the log exactly once and every conflict is real.
func TestSeveralCommittersShareOneLog(t *testing.T) {
	for _, writers := range []int{2, 3} {
		t.Run(fmt.Sprint(writers, "-writers"), func(t *testing.T) {
			b := mem.New(mem.Options{Profile: mem.Profile{Create: mem.Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond}}})
			first, epoch := newWorld(t, b, "w", Options{NoCompactor: true})
			cats := []*Catalog{first}
			for range writers - 1 {
				c, err := Open(ctxT(t), b, "w", Options{NoCompactor: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				cats = append(cats, c)
			}
			checkShared(t, cats, epoch, 60)
		})
	}
}

// checkShared has every catalog publish ticks, some of them contested (the
// same tick with different tokens), and checks the outcome against the log.
func checkShared(t *testing.T, cats []*Catalog, epoch int64, perWriter int) {
	t.Helper()
	type ack struct {
		tick  int64
		token string
	}
	var mu sync.Mutex
	var acks []ack
	conflicts := 0
	var wg sync.WaitGroup
	for w, c := range cats {
		for i := range perWriter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := int64(w*1000 + i)
				if i%4 == 0 {
					tick = int64(i) // contested by every writer
				}
				token := fmt.Sprintf("w%d-%d", w, i)
				_, err := c.Commit(ctxT(t), publish("r", tick, token, epoch))
				mu.Lock()
				defer mu.Unlock()
				var ce *CatalogConflictError
				switch {
				case err == nil:
					acks = append(acks, ack{tick, token})
				case errors.As(err, &ce):
					conflicts++
				default:
					t.Errorf("writer %d: %v", w, err)
				}
			}()
		}
	}
	wg.Wait()
	final, err := cats[0].Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		tk, ok := final.Tick("r", a.tick)
		if !ok || tk.CommitToken != a.token {
			t.Fatalf("acknowledged publish of tick %d (%s) is not in the log (found %+v)", a.tick, a.token, tk)
		}
	}
	run, _ := final.Run("r")
	if int(run.Published) != len(acks) {
		t.Fatalf("log holds %d publishes, %d were acknowledged", run.Published, len(acks))
	}
	contested := (perWriter + 3) / 4
	if conflicts != contested*(len(cats)-1) {
		t.Fatalf("%d conflicts, want %d (each contested tick has one winner)", conflicts, contested*(len(cats)-1))
	}
	opsOnce(t, cats[0].b, cats[0].world)
	var lost int64
	for _, c := range cats {
		lost += c.Stats().LostSlots
	}
	t.Logf("%d writers: %d acks, %d conflicts, %d lost slots", len(cats), len(acks), conflicts, lost)
}

// A stale writer's publish fails even when its slot create races the new
// fence: whichever slot wins the name, the publish is judged against the
// state that slot follows. Each order is forced by stalling the other
// writer's slot create.
func TestStaleWriterRacingTheFence(t *testing.T) {
	stall := func(b bucket.Bucket) bucket.Bucket {
		return faulty.Wrap(b, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Prefix: LogPrefix("w"), Times: 1,
			Fault: faulty.Fault{Kind: faulty.Stall, Stall: time.Second}}))
	}
	for _, fenceFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("fence-first=", fenceFirst), func(t *testing.T) {
			inner := memBucket()
			creator, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
			creator.Close()
			oldB, newB := bucket.Bucket(inner), bucket.Bucket(inner)
			if fenceFirst {
				oldB = stall(inner)
			} else {
				newB = stall(inner)
			}
			old, err := Open(ctxT(t), oldB, "w", Options{NoCompactor: true})
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			newer, err := Open(ctxT(t), newB, "w", Options{NoCompactor: true})
			if err != nil {
				t.Fatal(err)
			}
			defer newer.Close()
			var wg sync.WaitGroup
			var pubErr, fenceErr error
			wg.Add(2)
			go func() { defer wg.Done(); _, pubErr = old.Commit(ctxT(t), publish("r", 0, "old", epoch)) }()
			go func() { defer wg.Done(); _, fenceErr = newer.Commit(ctxT(t), fence("new")) }()
			wg.Wait()
			if fenceErr != nil {
				t.Fatal(fenceErr)
			}
			final, _ := newer.Exact(ctxT(t))
			_, published := final.Tick("r", 0)
			var se *StaleWriterError
			if fenceFirst {
				if !errors.As(pubErr, &se) || published || old.Stats().LostSlots == 0 {
					t.Fatalf("publish racing a winning fence = %v (published %v, lost slots %d), want StaleWriterError after a lost slot",
						pubErr, published, old.Stats().LostSlots)
				}
			} else if pubErr != nil || !published {
				t.Fatalf("publish whose slot won before the fence = %v", pubErr)
			}
			// After the fence the old writer never publishes again.
			if _, err := old.Commit(ctxT(t), publish("r", 1, "old-late", epoch)); !errors.As(err, &se) {
				t.Fatalf("publish after the fence = %v, want StaleWriterError", err)
			}
		})
	}
}

// Faults on every bucket call of the commit path, before and after they
// apply: every acknowledged entry is in the log, nothing is in it twice,
// and entries whose outcome was unknown are either in it or not.
func TestAmbiguousOutcomesOnEveryCall(t *testing.T) {
	for _, kinds := range [][]faulty.Kind{
		{faulty.FailBefore}, {faulty.FailAfter}, {faulty.FailBefore, faulty.FailAfter, faulty.DropResponse},
	} {
		t.Run(fmt.Sprint(kinds), func(t *testing.T) {
			inner := memBucket()
			_, epoch := newWorld(t, inner, "w", Options{NoCompactor: true})
			b := faulty.Wrap(inner, faulty.NewRandom(11, 0.3, kinds, 0))
			// Every call may fail, opening included: retry it as a
			// process would.
			var c *Catalog
			for c == nil {
				var err error
				if c, err = Open(ctxT(t), b, "w", Options{NoCompactor: true, SlotTimeout: 2 * time.Second}); err != nil && !faulty.IsInjected(err) {
					t.Fatal(err)
				}
			}
			defer c.Close()
			acked := map[int64]string{}
			unknown := map[int64]string{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 80 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					tok := fmt.Sprint("t", i)
					_, err := c.Commit(ctx, publish("r", int64(i), tok, epoch))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						acked[int64(i)] = tok
					case errors.Is(err, bucket.ErrAmbiguous):
						unknown[int64(i)] = tok
					default:
						t.Errorf("commit %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			final, _, err := Load(ctxT(t), inner, "w")
			if err != nil {
				t.Fatal(err)
			}
			for tick, tok := range acked {
				if tk, ok := final.Tick("r", tick); !ok || tk.CommitToken != tok {
					t.Fatalf("acknowledged tick %d missing", tick)
				}
			}
			run, _ := final.Run("r")
			found := 0
			for tick := range unknown {
				if _, ok := final.Tick("r", tick); ok {
					found++
				}
			}
			if int(run.Published) != len(acked)+found {
				t.Fatalf("log holds %d, acked %d + unknown-but-present %d", run.Published, len(acked), found)
			}
			if len(acked) == 0 {
				t.Fatal("nothing was acknowledged: the test proves nothing")
			}
			opsOnce(t, inner, "w")
			t.Logf("%d acked, %d unknown (%d of them landed), %d slots, %d lost", len(acked), len(unknown), found, c.Stats().Slots, c.Stats().LostSlots)
		})
	}
}
