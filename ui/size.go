package ui

import (
	"math"

	"github.com/worldfs/worldfs/index"
)

// keptSize is a world's live bytes at a catalog sequence.
type keptSize struct {
	seq   uint64
	bytes int64
}

// liveBytes is the size of a world's live data: the bytes of the files
// its own catalog names now (an ancestor's files are the ancestor's),
// from the catalog's records, no object listed or read: every run's
// published ticks' fragments (a compacted file once, however many ticks
// name it) and its completed claims' (facts, evaluation receipts). Files
// no catalog names (legacy or uncoordinated history, orphans waiting for
// collection) are not live data.
func liveBytes(st *index.State) (int64, error) {
	var n int64
	shared := map[string]bool{} // compacted files and fact batches, named more than once
	add := func(tables []index.TableFragments, fact bool) {
		for _, tf := range tables {
			for _, f := range tf.Fragments {
				if f.Span != nil || fact {
					if shared[f.Path] {
						continue
					}
					shared[f.Path] = true
				}
				n += f.Bytes
			}
		}
	}
	runs := map[string]bool{}
	for _, r := range st.Runs() {
		runs[r.Name] = true
	}
	for _, r := range st.ClaimRuns() {
		runs[r] = true
	}
	var err error
	for run := range runs {
		var prev *index.Tick
		st.Ticks(run, math.MinInt64, func(t *index.Tick) bool {
			if t.SameTables(prev) {
				return true // a compacted span's ticks share one list
			}
			prev = t
			var tables []index.TableFragments
			if tables, err = t.Tables(); err != nil {
				return false
			}
			add(tables, false)
			return true
		})
		if err != nil {
			return 0, err
		}
		st.Claims(run, func(c *index.Claim) bool {
			if c.State == index.ClaimComplete {
				add(c.Tables, true)
			}
			return true
		})
	}
	return n, nil
}
