package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/worldfs/worldfs/bucket/buckettest"
)

// asked runs a tick question: refused when it panics with ErrNotLoaded
// (refuse); any other panic is the test's failure.
func asked(q func()) (refused bool) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, ErrNotLoaded) {
				refused = true
				return
			}
			panic(r)
		}
	}()
	q()
	return false
}

// tickQuestions asks part, a state loaded in part, and whole, the whole
// state at the same sequence, every tick question of State, View and
// Allowlist about run at and between the ticks ns (each tick, each range,
// Last at each tick, the token of each tick): part answers each as whole
// does or refuses it. held(n) says whether part holds tick n: a question
// that reads only held ticks must be answered. It returns how many
// questions part refused and answered.
func tickQuestions(t *testing.T, part, whole *State, run string, ns []int64, held func(n int64) bool) (refused, answered int) {
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
	ref := func(r TickRef, ok bool) string { return fmt.Sprintf("%s/%s %s", r.World, r.Run, val(r.Tick, ok)) }
	heldAll := func(from, to int64) bool { return heldRange(whole, run, held, from, to) }
	check := func(q string, mustAnswer bool, got func() string, want string) {
		t.Helper()
		var g string
		if asked(func() { g = got() }) {
			if mustAnswer {
				t.Fatalf("%s: refused, though the state holds what it reads", q)
			}
			refused++
			return
		}
		answered++
		if g != want {
			t.Fatalf("%s: the state loaded in part answers %s, the whole state %s", q, g, want)
		}
	}
	pv, wv := OwnView(part, run), OwnView(whole, run)
	pa, wa := part.Allowlist(run), whole.Allowlist(run)
	for _, n := range ns {
		check(fmt.Sprintf("State.Tick(%d)", n), held(n), func() string { return val(part.Tick(run, n)) }, val(whole.Tick(run, n)))
		check(fmt.Sprintf("View.Tick(%d)", n), held(n), func() string { return ref(pv.Tick(n)) }, ref(wv.Tick(n)))
		wt, wok := whole.Last(run, n)
		from := int64(math.MinInt64)
		if wok {
			from = wt.Tick
		}
		check(fmt.Sprintf("State.Last(%d)", n), heldAll(from, n), func() string { return val(part.Last(run, n)) }, val(wt, wok))
		token := fmt.Sprint("t", n)
		if tk, ok := whole.Tick(run, n); ok {
			token = tk.CommitToken
			check(fmt.Sprintf("Allowlist.Publishes(%d)", n), held(n), func() string { return fmt.Sprint(pa.Publishes(n, token)) }, fmt.Sprint(wa.Publishes(n, token)))
		}
		// A token that names its tick is answered wherever that tick is
		// held; the others need every tick.
		named, isNamed := TokenTick(token)
		byToken := heldAll(math.MinInt64, math.MaxInt64) || isNamed && named == n && held(n)
		check("State.TickByToken("+token+")", byToken, func() string { return val(part.TickByToken(run, token)) }, val(whole.TickByToken(run, token)))
		check("View.Token("+token+")", byToken, func() string { return ref(pv.Token(token)) }, ref(wv.Token(token)))
		for _, to := range ns {
			walk := func(s *State) string {
				var out []string
				s.Ticks(run, n, func(tk *Tick) bool {
					if tk.Tick > to {
						return false
					}
					out = append(out, val(tk, true))
					return true
				})
				return fmt.Sprint(len(out), out)
			}
			// State.Ticks is not bounded: it may refuse what a bounded
			// walk would answer, never answer otherwise.
			check(fmt.Sprintf("State.Ticks(%d) up to %d", n, to), false, func() string { return walk(part) }, walk(whole))
			view := func(v *View) string {
				var out []string
				v.Ticks(n, to, func(r TickRef) bool { out = append(out, ref(r, true)); return true })
				return fmt.Sprint(len(out), out)
			}
			check(fmt.Sprintf("View.Ticks(%d, %d)", n, to), heldAll(n, to), func() string { return view(pv) }, view(wv))
		}
	}
	check("View.Head", heldAll(math.MinInt64, math.MaxInt64) || held(math.MaxInt64), func() string { return ref(pv.Head()) }, ref(wv.Head()))
	allow := func(a *Allowlist) string {
		k := 0
		a.Ticks(func(int64, string) bool { k++; return true })
		return fmt.Sprint(k)
	}
	check("Allowlist.Ticks", heldAll(math.MinInt64, math.MaxInt64), func() string { return allow(pa) }, allow(wa))
	return refused, answered
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

// Every tick question of State, View and Allowlist asked of a state from
// LoadSummarized is answered as the whole state answers it or refused
// (a panic wrapping ErrNotLoaded): never answered from the decoded ticks
// alone, which miss the summarized ones.
func TestSummarizedStateAnswersOrRefuses(t *testing.T) {
	n := int64(3 * tickShardSpan) // shards 0..2 summarized; ticks n..n+9 decoded
	_, cat, load := summaryWorld(t, n, 1, 3000)
	whole, err := cat.Exact(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := load()
	ns := []int64{0, 5, 2999, 3000, tickShardSpan, 2*tickShardSpan + 7, n - 1, n, n + 4, n + 9, n + 10, math.MaxInt64}
	refused, answered := tickQuestions(t, sum, whole, "main", ns, func(k int64) bool { return k >= n })
	if refused == 0 || answered == 0 {
		t.Fatalf("%d questions refused, %d answered: want some of each", refused, answered)
	}
}

// The same of the state of a Partial (LoadFor): the questions about what
// it loaded are answered, the others answered as the whole state does or
// refused; View.Files and View.Visible, which return errors, return
// ErrNotLoaded where they would read ticks it does not hold.
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
		s := p.s
		// Held: the shards asked for, shard 0 (the log after the
		// checkpoint rewrote tick 5) and shard 3 (it published ticks).
		held := func(k int64) bool {
			sh := k / tickShardSpan
			return sh == 0 || sh >= 3 || want.From <= want.To && want.From/tickShardSpan <= sh && sh <= min(want.To, int64(n))/tickShardSpan
		}
		refused, answered := tickQuestions(t, s, whole, "r", ns, held)
		// Loaded for all of r, it holds every tick the questions read.
		if all := want.From <= 0 && want.To == math.MaxInt64; all != (refused == 0) || answered == 0 {
			t.Fatalf("%+v: %d questions refused, %d answered", want, refused, answered)
		}
		pv, wv := OwnView(s, "r"), OwnView(whole, "r")
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

// A fork's view whose own state is loaded in part (its head's shard) and
// whose parent's is whole: View.Visible and View.Files answer as the
// whole states' view or return ErrNotLoaded, View.Head answers, never
// falling back to the parent's ticks for the fork's own that the state
// does not hold.
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
	part, err := OpenView(ctx, func(ctx context.Context, w string) (*State, error) {
		if w == "fork" {
			return p.s, nil
		}
		return LoadFrom(b)(ctx, w)
	}, "fork", "main")
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := part.Head()
	wh, _ := whole.Head()
	if got, want := fmt.Sprint(ph.World, ph.Tick.Tick, ph.CommitToken), fmt.Sprint(wh.World, wh.Tick.Tick, wh.CommitToken); got != want {
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
// state (Load), which check only that it is whole (one branch) before
// answering: a tick, the newest at or below a tick, a token, a walk of a
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
