//go:build invariants || race

package index

import (
	"errors"
	"math"
	"testing"
)

// In a build that checks invariants (internal/invariants), a whole
// state's tick question asked of a state loaded in part, which only a bug
// of this package could ask (every such state is a Partial or a Plan's),
// panics with ErrNotLoaded rather than answer from the ticks it holds.
func TestInvariantWholeQuestionOfAPartState(t *testing.T) {
	n := int64(3 * tickShardSpan) // shards 0..2 summarized, ticks n..n+9 decoded
	_, _, load := summaryWorld(t, n, 1, 3000)
	s := load()
	for name, q := range map[string]func(){
		"Tick":        func() { s.Tick("main", 5) },
		"Last":        func() { s.Last("main", n-1) },
		"Ticks":       func() { s.Ticks("main", 0, func(*Tick) bool { return true }) },
		"TickByToken": func() { s.TickByToken("main", "no such token") },
		"View.Ticks":  func() { OwnView(s, "main").Ticks(0, math.MaxInt64, func(TickRef) bool { return true }) },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrNotLoaded) {
					t.Errorf("%s of a state loaded in part: recovered %v; want a panic wrapping ErrNotLoaded", name, err)
				}
			}()
			q()
		}()
	}
}
