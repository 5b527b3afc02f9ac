package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/check"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
)

// lostCompacted returns, of world "w" in the local bucket dir (compacted
// by optimizedWorld), the first compacted particle file (it holds tick
// 10), its file in dir, and the commit token of each tick of its span.
func lostCompacted(t *testing.T, dir string) (index.Fragment, string, map[int64]string) {
	t.Helper()
	b := mustOpen(t, dir)
	defer b.Close()
	s, _, err := index.Load(context.Background(), b, "w")
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Tick("main", 10)
	for _, tf := range enginetest.Tables(t, tk) {
		if f := tf.Fragments[0]; tf.Table == particles.Tables()[0].ID && f.Span != nil {
			tokens := map[int64]string{}
			for n := f.Span.From; n <= f.Span.To; n++ {
				t, _ := s.Tick("main", n)
				tokens[n] = t.CommitToken
			}
			p, _ := b.Path(f.Path)
			return f, p, tokens
		}
	}
	t.Fatal("tick 10's particle rows are not in a compacted file")
	return index.Fragment{}, "", nil
}

// One compacted file of one table lost (deleted by hand, or its bytes
// changed): worldfs sql answers the other tables and that table's other
// ticks as before, and fails a query of the lost ticks naming the table,
// the ticks and the file (exit 1, with the line naming worldfs check);
// worldfs check (exit 1, as for any damage) lists the file with its table
// and ticks, and, for each tick, the fragment a compaction replaced that
// is still in the bucket and can restore it, verified against the file's
// tick index; a replaced fragment collected is a tick nothing restores,
// one whose bytes changed is not offered. Mutations: findLosses returning
// nothing fails the listing; restorer not checking the tick index offers
// the changed fragment.
func TestCheckListsWhatALostCompactedFileLoses(t *testing.T) {
	for _, missing := range []bool{true, false} {
		t.Run(map[bool]string{true: "missing", false: "damaged"}[missing], func(t *testing.T) {
			dir := optimizedWorld(t, "--recent", "8")
			lost, path, tokens := lostCompacted(t, dir)
			sqlcmd := func(q string) (int, string, string) {
				t.Helper()
				return cli(t, "sql", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--format", "csv", q)
			}
			spared := []string{"SELECT count(*), sum(position_x) FROM emitter", "SELECT * FROM particle_at(70) ORDER BY entity_id"}
			want := map[string]string{}
			for _, q := range spared {
				code, out, stderr := sqlcmd(q)
				if code != 0 || strings.Count(out, "\n") < 2 {
					t.Fatalf("%s: exit %d\n%s%s", q, code, out, stderr)
				}
				want[q] = out
			}

			what, state, readData := "presence", "missing from the bucket", []string{}
			if missing {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 1
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				what, state, readData = "sha256", "damaged (its sha256 differs from the catalog's record)", []string{"--read-data"}
			}
			for _, q := range spared {
				if code, out, stderr := sqlcmd(q); code != 0 || out != want[q] {
					t.Errorf("%s: exit %d\n%s%s\nwant, as before:\n%s", q, code, out, stderr, want[q])
				}
			}
			ticks := fmt.Sprintf("ticks %d..%d are in %s, which ", lost.Span.From, lost.Span.To, lost.Path)
			for _, q := range []string{"SELECT count(*) FROM particle", "SELECT count(*) FROM particle_at(10)"} {
				code, out, stderr := sqlcmd(q)
				if code != exitFailed || !strings.Contains(stderr, "table particle of world w, run main: "+ticks) || !strings.Contains(stderr, "worldfs check --world W --read-data") {
					t.Errorf("%s: exit %d\n%s%s\nwant exit 1 naming table particle, %s", q, code, out, stderr, ticks)
				}
			}

			checkJSON := func() check.Loss {
				t.Helper()
				code, out, stderr := cli(t, append([]string{"check", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir(), "--json"}, readData...)...)
				var res check.Report
				if err := json.Unmarshal([]byte(out), &res); code != exitFailed || err != nil || len(res.Lost) != 1 {
					t.Fatalf("check --json: exit %d, %v\n%s%s\nwant exit 1 and one lost file", code, err, out, stderr)
				}
				l := res.Lost[0]
				if l.Fragment != lost.Path || l.What != what || l.World != "w" || l.Run != "main" || l.Table != "particle" || l.Facts ||
					l.From != lost.Span.From || l.To != lost.Span.To || l.Ticks != int64(len(tokens)) {
					t.Fatalf("check lists %+v; want %s (%s) of table particle, ticks %d..%d (%d ticks)", l, lost.Path, what, lost.Span.From, lost.Span.To, len(tokens))
				}
				return l
			}
			l := checkJSON()
			if l.Unrestorable != 0 || len(l.Restore) != len(tokens) {
				t.Fatalf("check: %d ticks restorable, %d not; want all %d by the fragments compaction replaced", len(l.Restore), l.Unrestorable, len(tokens))
			}
			for _, r := range l.Restore {
				if p := index.TickFragmentPath("w", "main", particles.Tables()[0].ID, tokens[r.Tick]); len(r.Fragments) != 1 || r.Fragments[0] != p || !r.Verified {
					t.Fatalf("check: tick %d restored by %v (verified %t); want %s, verified against the tick index", r.Tick, r.Fragments, r.Verified, p)
				}
			}
			code, out, _ := cli(t, append([]string{"check", "--bucket", dir, "--world", "w", "--cache-dir", t.TempDir()}, readData...)...)
			line := fmt.Sprintf("lost: table particle of world w, run main: the rows of ticks %d..%d (%d ticks) are in %s, which is %s\n", lost.Span.From, lost.Span.To, len(tokens), lost.Path, state)
			restorable := fmt.Sprintf("  %d of those ticks can be restored from the fragments a compaction replaced, still in the bucket (%d verified against the lost file's tick index)", len(tokens), len(tokens))
			if code != exitFailed || !strings.Contains(out, line) || !strings.Contains(out, restorable) || !strings.Contains(out, "worldfs gc deletes replaced fragments") {
				t.Fatalf("check: exit %d\n%s\nwant exit 1 and\n%s%s", code, out, line, restorable)
			}

			// The first tick's replaced fragment collected, the second's
			// bytes changed: neither restores its tick.
			b := mustOpen(t, dir)
			first, second := l.Restore[0], l.Restore[1]
			p1, _ := b.Path(first.Fragments[0])
			p2, _ := b.Path(second.Fragments[0])
			b.Close()
			if err := os.Remove(p1); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p2)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 1
			if err := os.WriteFile(p2, data, 0o644); err != nil {
				t.Fatal(err)
			}
			l = checkJSON()
			if l.Unrestorable != 2 || l.Differ != 1 || len(l.Restore) != len(tokens)-2 || l.Restore[0].Tick == first.Tick || l.Restore[0].Tick == second.Tick {
				t.Fatalf("check after tick %d's replaced fragment was collected and tick %d's changed: %d ticks restorable from tick %d, %d not, %d differ; want %d, 2, 1",
					first.Tick, second.Tick, len(l.Restore), l.Restore[0].Tick, l.Unrestorable, l.Differ, len(tokens)-2)
			}
		})
	}
}
