package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
)

// tickQuestions asks part, a state loaded in part, and whole, the whole
// state at the same sequence, every tick question of a Partial about run
// at and between the ticks ns (each tick, each range, Last at each tick,
// the token of each tick): part answers each as whole does or refuses it
// with ErrNotLoaded. held(n) says whether part holds tick n: a question
// that reads only held ticks must be answered. It returns how many
// questions part refused and answered.
func tickQuestions(t *testing.T, part *Partial, whole *State, run string, ns []int64, held func(n int64) bool) (refused, answered int) {
	t.Helper()
	// Each tick record is printed once: the walks below visit it for every
	// pair of bounds around it (printing was most of the test's time).
	printed := map[*Tick]string{}
	val := func(tk *Tick, ok bool) string {
		if !ok {
			return "none"
		}
		if s, ok := printed[tk]; ok {
			return s
		}
		v, err := valueOf(tk)
		if err != nil {
			t.Fatal(err)
		}
		printed[tk] = fmt.Sprintf("%+v", v)
		return printed[tk]
	}
	heldAll := func(from, to int64) bool { return heldRange(whole, run, held, from, to) }
	check := func(q string, mustAnswer bool, got func() (string, error), want string) {
		t.Helper()
		g, err := got()
		switch {
		case errors.Is(err, ErrNotLoaded) && mustAnswer:
			t.Fatalf("%s: refused, though the state holds what it reads: %v", q, err)
		case errors.Is(err, ErrNotLoaded):
			refused++
		case err != nil:
			t.Fatalf("%s: %v", q, err)
		case g != want:
			t.Fatalf("%s: the state loaded in part answers %s, the whole state %s", q, g, want)
		default:
			answered++
		}
	}
	answer := func(tk *Tick, ok bool, err error) (string, error) { return val(tk, ok), err }
	for _, n := range ns {
		check(fmt.Sprintf("Partial.Tick(%d)", n), held(n), func() (string, error) { return answer(part.Tick(run, n)) }, val(whole.Tick(run, n)))
		wt, wok := whole.Last(run, n)
		from := int64(math.MinInt64)
		if wok {
			from = wt.Tick
		}
		check(fmt.Sprintf("Partial.Last(%d)", n), heldAll(from, n), func() (string, error) { return answer(part.Last(run, n)) }, val(wt, wok))
		token := fmt.Sprint("t", n)
		if tk, ok := whole.Tick(run, n); ok {
			token = tk.CommitToken
		}
		// A token that names its tick is answered wherever that tick is
		// held; the others need every tick.
		named, isNamed := TokenTick(token)
		byToken := heldAll(math.MinInt64, math.MaxInt64) || isNamed && named == n && held(n)
		check("Partial.TickByToken("+token+")", byToken, func() (string, error) { return answer(part.TickByToken(run, token)) }, val(whole.TickByToken(run, token)))
		for _, to := range ns {
			var want []string
			whole.Ticks(run, n, func(tk *Tick) bool {
				if tk.Tick > to {
					return false
				}
				want = append(want, val(tk, true))
				return true
			})
			check(fmt.Sprintf("Partial.Ticks(%d, %d)", n, to), heldAll(n, to), func() (string, error) {
				var out []string
				err := part.Ticks(run, n, to, func(tk *Tick) bool { out = append(out, val(tk, true)); return true })
				return fmt.Sprint(len(out), out), err
			}, fmt.Sprint(len(want), want))
		}
	}
	return refused, answered
}

// A state loaded in part says so in its type. LoadFor, LoadSummarized
// and LoadSummarizedAtMost return a *Partial, and a plan over such
// states is a *Plan: a whole state's tick questions (which return no
// error) are not among their methods, and those they have return an
// error (ErrNotLoaded for what the state does not hold); neither hands
// out a *State, *View or *Allowlist but whole (Partial.Whole,
// Partial.LoadAll, Plan.View). Much of it holds at compile time; the
// rest is checked on the method sets.
func TestPartialStatesSayWhatTheyHold(t *testing.T) {
	var (
		_ func(context.Context, bucket.Bucket, string, Want) (*Partial, LoadInfo, error) = LoadFor
		_ func(context.Context, bucket.Bucket, string) (*Partial, LoadInfo, error)       = LoadSummarized
		_ func(context.Context, bucket.Bucket, string, int) (*Partial, LoadInfo, error)  = LoadSummarizedAtMost
		_ PartLoader                                                                     = LoadSummarizedFrom(nil)
		_ interface {
			Tick(run string, tick int64) (*Tick, bool, error)
			Last(run string, upTo int64) (*Tick, bool, error)
			TickByToken(run, token string) (*Tick, bool, error)
			Ticks(run string, from, to int64, fn func(*Tick) bool) error
		} = (*Partial)(nil)
		_ interface {
			Files(from, to int64, fn func(File) bool) error
			Visible(upTo int64) (*Span, error)
		} = (*Plan)(nil)
	)
	questions := []string{"Tick", "Last", "TickByToken", "Ticks", "Head", "Token", "Files", "Visible", "Allowlist", "Publishes"}
	wholeTypes := []reflect.Type{reflect.TypeFor[*State](), reflect.TypeFor[*View](), reflect.TypeFor[*Allowlist](), reflect.TypeFor[[]Segment]()}
	whole := map[string]bool{"Partial.Whole": true, "Partial.LoadAll": true, "Plan.View": true}
	errType := reflect.TypeFor[error]()
	for _, typ := range []reflect.Type{reflect.TypeFor[*Partial](), reflect.TypeFor[*Plan]()} {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			name := typ.Elem().Name() + "." + m.Name
			for j := range m.Type.NumOut() {
				if slices.Contains(wholeTypes, m.Type.Out(j)) && !whole[name] {
					t.Errorf("%s returns a %v: a state loaded in part would pass for a whole one", name, m.Type.Out(j))
				}
			}
			if n := m.Type.NumOut(); slices.Contains(questions, m.Name) && (n == 0 || m.Type.Out(n-1) != errType) {
				t.Errorf("%s %v asks about ticks without an error to refuse what the state does not hold", name, m.Type)
			}
		}
		for j := range typ.Elem().NumField() {
			if f := typ.Elem().Field(j); f.IsExported() && slices.Contains(wholeTypes, f.Type) {
				t.Errorf("%s.%s is a %v: a state loaded in part would pass for a whole one", typ.Elem().Name(), f.Name, f.Type)
			}
		}
	}
}

// What a Partial from LoadSummarized cannot answer it refuses with
// ErrNotLoaded, never a panic nor an answer from the ticks it holds: a
// summarized tick, a walk over summarized ticks, the newest tick below
// them, a plan that starts inside a summarized stretch. LoadAll answers.
func TestSummarizedPartialRefusesWithAnError(t *testing.T) {
	ctx := ctxT(t)
	n := int64(3 * tickShardSpan) // shards 0..2 summarized, ticks n..n+9 decoded
	b, _, _ := summaryWorld(t, n, 1, 3000)
	p, _, err := LoadSummarized(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Tick("main", 5); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("Tick(5), summarized: %v; want ErrNotLoaded", err)
	}
	if err := p.Ticks("main", 0, n+9, func(*Tick) bool { return true }); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("Ticks(0, %d): %v; want ErrNotLoaded", n+9, err)
	}
	if _, _, err := p.Last("main", n-1); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("Last(%d): %v; want ErrNotLoaded", n-1, err)
	}
	if err := OwnPlan(p, "main").Files(4000, math.MaxInt64, func(File) bool { return true }); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("Plan.Files from 4000, inside a stretch of ticks 3000..5999: %v; want ErrNotLoaded", err)
	}
	if tk, ok, err := p.Tick("main", n+4); err != nil || !ok || tk.Tick != n+4 {
		t.Errorf("Tick(%d), decoded: %v, %v, %v", n+4, tk, ok, err)
	}
	s, err := p.LoadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok := s.Tick("main", 5); !ok || tk.CommitToken != "t5" {
		t.Errorf("Tick(5) of the state loaded whole: %v, %v", tk, ok)
	}
}

// heldRange reports whether every tick of run from..to (up to its head in
// whole) is held.
func heldRange(whole *State, run string, held func(n int64) bool, from, to int64) bool {
	r, _ := whole.Run(run)
	to = min(to, r.Head)
	if from > to {
		return true
	}
	for n := max(from, 0); n < to; n += tickShardSpan {
		if !held(n) {
			return false
		}
	}
	return held(to)
}

// Every tick question of the Partial LoadSummarized returns is answered
// as the whole state answers it or refused with ErrNotLoaded: never
// answered from the decoded ticks alone, which miss the summarized ones.
func TestSummarizedStateAnswersOrRefuses(t *testing.T) {
	n := int64(3 * tickShardSpan) // shards 0..2 summarized; ticks n..n+9 decoded
	_, cat, load := summaryWorld(t, n, 1, 3000)
	whole, err := cat.Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := load()
	ns := []int64{0, 5, 2999, 3000, tickShardSpan, 2*tickShardSpan + 7, n - 1, n, n + 4, n + 9, n + 10, math.MaxInt64}
	refused, answered := tickQuestions(t, &Partial{s: sum}, whole, "main", ns, func(k int64) bool { return k >= n })
	if refused == 0 || answered == 0 {
		t.Fatalf("%d questions refused, %d answered: want some of each", refused, answered)
	}
}

// The same of a Partial from LoadFor: the questions about what it loaded
// are answered, the others answered as the whole state does or refused;
// a Plan's Files and Visible return ErrNotLoaded where they would read
// ticks it does not hold.
func TestPartialStateAnswersOrRefuses(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	n := 3*tickShardSpan + 100
	whole := spanWorld(t, b, n)
	ns := []int64{0, 5, 999, 4000, 5000, 9000, int64(n) - 1, int64(n), int64(n) + 2, int64(n) + 3, math.MaxInt64}
	for _, want := range []Want{{Run: "r", From: 5000, To: 5000}, {Run: "r", From: 1, To: 0, Head: true}, {Run: "r", From: 0, To: math.MaxInt64}} {
		p, _, err := LoadFor(ctx, b, "w", want)
		if err != nil {
			t.Fatal(err)
		}
		// Held: the shards asked for, shard 0 (the log after the
		// checkpoint rewrote tick 5) and shard 3 (it published ticks).
		held := func(k int64) bool {
			sh := k / tickShardSpan
			return sh == 0 || sh >= 3 || want.From <= want.To && want.From/tickShardSpan <= sh && sh <= min(want.To, int64(n))/tickShardSpan
		}
		refused, answered := tickQuestions(t, p, whole, "r", ns, held)
		// Loaded for all of r, it holds every tick the questions read.
		if all := want.From <= 0 && want.To == math.MaxInt64; all != (refused == 0) || answered == 0 {
			t.Fatalf("%+v: %d questions refused, %d answered", want, refused, answered)
		}
		pv, wv := OwnPlan(p, "r"), OwnView(whole, "r")
		for _, from := range ns {
			for _, to := range ns {
				wf, err := filesOf(wv, from, to)
				if err != nil {
					t.Fatal(err)
				}
				pf, err := filesOf(pv, from, to)
				switch {
				case errors.Is(err, ErrNotLoaded):
					if heldRange(whole, "r", held, from, to) {
						t.Fatalf("%+v: files %d..%d refused: %v", want, from, to, err)
					}
				case err != nil || !reflect.DeepEqual(pf, wf):
					t.Fatalf("%+v: files %d..%d of the partial state: %v, %v; the whole state's %v", want, from, to, pf, err, wf)
				}
			}
			wvis, err := wv.Visible(from)
			if err != nil {
				t.Fatal(err)
			}
			if pvis, err := pv.Visible(from); !errors.Is(err, ErrNotLoaded) && (err != nil || *pvis != *wvis) {
				t.Fatalf("%+v: visible up to %d: %v, %v; the whole state's %v", want, from, pvis, err, wvis)
			}
		}
	}
}

// A fork's plan whose own state is loaded in part (its head's shard) and
// whose parent's is whole: Plan.Visible and Plan.Files answer as the
// whole states' view or return ErrNotLoaded; the Partial's head is the
// view's, never a parent's tick for the fork's own that the state does
// not hold.
func TestForkViewOfAStateLoadedInPart(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket()
	parent, pe := newWorld(t, b, "parent", Options{NoCompactor: true})
	for tick := range int64(10) {
		if _, err := parent.Commit(ctx, publish("main", tick, fmt.Sprint("p", tick), pe)); err != nil {
			t.Fatal(err)
		}
	}
	fork, fe, err := CreateWorld(ctx, b, "fork", WorldCreate{Parent: "parent", ForkRun: "main", ForkTick: 4}, "f", Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	head := int64(2*tickShardSpan + 10)
	var es []Entry
	for tick := int64(5); tick <= head; tick++ {
		es = append(es, publish("main", tick, fmt.Sprint("f", tick), fe))
	}
	for len(es) > 0 {
		k := min(len(es), 1000)
		if _, err := fork.CommitAll(ctx, es[:k]...); err != nil {
			t.Fatal(err)
		}
		es = es[k:]
	}
	if _, err := fork.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	whole, err := OpenView(ctx, LoadFrom(b), "fork", "main")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := LoadFor(ctx, b, "fork", Want{Run: "main", From: 1, To: 0, Head: true})
	if err != nil {
		t.Fatal(err)
	}
	part, err := OpenPlan(ctx, func(ctx context.Context, w string) (*Partial, error) {
		if w == "fork" {
			return p, nil
		}
		s, err := LoadFrom(b)(ctx, w)
		return PartialOf(s), err
	}, "fork", "main")
	if err != nil {
		t.Fatal(err)
	}
	ph, _, err := p.Last("main", math.MaxInt64)
	wh, _ := whole.Head()
	if got, want := fmt.Sprint("fork", ph.Tick, ph.CommitToken, err), fmt.Sprint(wh.World, wh.Tick.Tick, wh.CommitToken, nil); got != want {
		t.Fatalf("head of the fork: %s, the whole view's %s", got, want)
	}
	refused := 0
	for _, upTo := range []int64{3, 4, 5, tickShardSpan + 5, 2 * tickShardSpan, head - 1, head, math.MaxInt64} {
		want, err := whole.Visible(upTo)
		if err != nil {
			t.Fatal(err)
		}
		got, err := part.Visible(upTo)
		switch {
		case errors.Is(err, ErrNotLoaded):
			refused++
		case err != nil || *got != *want:
			t.Fatalf("visible up to %d: %v, %v; the whole view's %v", upTo, got, err, want)
		}
		wf, err := filesOf(whole, 2*tickShardSpan, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if pf, err := filesOf(part, 2*tickShardSpan, upTo); err != nil || !reflect.DeepEqual(pf, wf) {
			t.Fatalf("files %d..%d: %v, %v; the whole view's %v", 2*tickShardSpan, upTo, pf, err, wf)
		}
	}
	if refused == 0 {
		t.Fatal("no bound was refused: the fork's unloaded ticks were not asked for")
	}
}

// A checkpoint whose run head disagrees with its ticks fails a load in
// part closed (ErrCorrupt), as it fails LoadCheckpoint: a head inside its
// last tick shard but not its newest tick, and a head in an earlier shard.
func TestLoadInPartChecksRunHeads(t *testing.T) {
	ctx := ctxT(t)
	n := int64(3 * tickShardSpan) // shards 0..2 summarized, ticks n..n+9 decoded
	_, cat, _ := summaryWorld(t, n, 1, 3000)
	whole, err := cat.Exact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, head := range []int64{-1, n + 8, 5} {
		b := memBucket()
		name, cp, err := WriteCheckpoint(ctx, b, whole, nil)
		if err != nil {
			t.Fatal(err)
		}
		if head >= 0 {
			cp.Runs[0].Head = head
			data, err := cp.seal()
			if err != nil {
				t.Fatal(err)
			}
			buckettest.Replace(t, b, name, data)
		}
		_, _, perr := LoadFor(ctx, b, "w", Want{Run: "main", From: 1, To: 0, Head: true})
		// Loaded for its newest ticks, not the recorded head's.
		_, _, lerr := LoadFor(ctx, b, "w", Want{Run: "main", From: n, To: n})
		_, _, serr := LoadSummarized(ctx, b, "w")
		for i, err := range []error{perr, lerr, serr} {
			if head < 0 && err != nil || head >= 0 && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("run head %d recorded (-1: as written), %d published: load %d (for the head, for tick %d, summarized): %v", head, n+9, i, n, err)
			}
		}
	}
}

// BenchmarkWholeStateTickQuestions times the tick questions of a whole
// state (Load), which answer at once (a build that checks invariants
// first checks that it is whole): a tick, the newest at or below a tick, a token, a walk of a
// hundred ticks.
//
//	go test ./index -run '^$' -bench WholeStateTickQuestions
func BenchmarkWholeStateTickQuestions(b *testing.B) {
	ctx := context.Background()
	bk := memBucket()
	c, epoch := newWorld(b, bk, "w", Options{NoCompactor: true})
	n := int64(3 * tickShardSpan)
	for lo := int64(0); lo < n; lo += 1000 {
		var es []Entry
		for tk := lo; tk < min(lo+1000, n); tk++ {
			es = append(es, publish("r", tk, fmt.Sprint("t", tk), epoch))
		}
		if _, err := c.CommitAll(ctx, es...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	s, _, err := Load(ctx, bk, "w")
	if err != nil || s.part != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		k := int64(i*7919) % n
		if _, ok := s.Tick("r", k); !ok {
			b.Fatal("no tick")
		}
		if _, ok := s.Last("r", k); !ok {
			b.Fatal("no last")
		}
		if _, ok := s.TickByToken("r", fmt.Sprint("t", k)); !ok {
			b.Fatal("no token")
		}
		m := 0
		s.Ticks("r", k, func(*Tick) bool { m++; return m < 100 })
	}
}
