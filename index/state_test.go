package index

import (
	"errors"
	"strings"
	"testing"
)

// stateAfter applies entries one by one from an empty world, failing the
// test if any is refused.
func stateAfter(t *testing.T, entries ...Entry) *State {
	t.Helper()
	s := Empty("w")
	for _, e := range entries {
		n, _, err := s.Check(&e, s.Seq+1)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		s = n
	}
	return s
}

func create(mode string) Entry {
	return Entry{Kind: KindWorldCreate, WorldCreate: &WorldCreate{WriterMode: mode}}
}

func TestApplyTable(t *testing.T) {
	base := []Entry{create(ModeResumable), fence("a"), publish("r", 0, "t0", 1)}
	for _, tc := range []struct {
		name  string
		setup []Entry
		entry Entry
		check func(t *testing.T, r Result, err error, s *State)
	}{
		{"publish needs a world", nil, publish("r", 0, "x", 1), func(t *testing.T, _ Result, err error, _ *State) {
			if !errors.Is(err, ErrNoWorld) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"create twice", base, create(ModeResumable), func(t *testing.T, _ Result, err error, _ *State) {
			if !errors.Is(err, ErrWorldExists) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"publish advances head", base, publish("r", 5, "t5", 1), func(t *testing.T, _ Result, err error, s *State) {
			if run, _ := s.Run("r"); err != nil || run.Head != 5 || run.Published != 2 {
				t.Fatalf("run %+v, %v", run, err)
			}
		}},
		{"older tick keeps head", append(base, publish("r", 5, "t5", 1)), publish("r", 3, "t3", 1), func(t *testing.T, _ Result, err error, s *State) {
			if run, _ := s.Run("r"); err != nil || run.Head != 5 {
				t.Fatalf("run %+v, %v", run, err)
			}
		}},
		{"stale epoch", append(base, fence("b")), publish("r", 1, "t1", 1), func(t *testing.T, _ Result, err error, _ *State) {
			var se *StaleWriterError
			if !errors.As(err, &se) || se.Held != 1 || se.Current != 2 {
				t.Fatalf("err = %v", err)
			}
		}},
		{"stale writer's late rows at a visible tick", append(base, fence("b")), publish("r", 0, "late", 1), func(t *testing.T, _ Result, err error, _ *State) {
			var se *StaleWriterError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want StaleWriterError", err)
			}
		}},
		{"future epoch", base, publish("r", 1, "t1", 7), func(t *testing.T, _ Result, err error, _ *State) {
			var se *StaleWriterError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"other attempt of a published tick", base, publish("r", 0, "other", 1), func(t *testing.T, _ Result, err error, _ *State) {
			var ce *CatalogConflictError
			if !errors.As(err, &ce) || ce.Published != "t0" || ce.Attempted != "other" {
				t.Fatalf("err = %v", err)
			}
		}},
		{"identical republish", base, publish("r", 0, "t0", 1), func(t *testing.T, r Result, err error, s *State) {
			if run, _ := s.Run("r"); err != nil || !r.Republished || run.Published != 1 {
				t.Fatalf("result %+v run %+v err %v", r, run, err)
			}
		}},
		{"fence increments", base, fence("b"), func(t *testing.T, r Result, err error, s *State) {
			if err != nil || r.Epoch != 2 || s.World.Epoch != 2 || s.World.FenceHolder != "b" {
				t.Fatalf("r %+v world %+v err %v", r, s.World, err)
			}
		}},
		{"cleanup_only refuses mutable resume", []Entry{create(ModeCleanupOnly), fence("a")},
			Entry{Kind: KindFenceAcquire, FenceAcquire: &FenceAcquire{Holder: "b", Resume: true}}, func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"archived world refuses publishes", append(base, Entry{Kind: KindWorldStatus, WorldStatus: &WorldStatus{Status: StatusArchived}}),
			publish("r", 1, "t1", 1), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"claim acquire allocates a fact id at the head", base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			func(t *testing.T, r Result, err error, s *State) {
				if err != nil || r.Claim.FactID != FactIDBase-1 || r.Claim.State != ClaimPending || r.Claim.Tick != 0 || r.Claim.Epoch != 1 {
					t.Fatalf("claim %+v err %v", r.Claim, err)
				}
			}},
		{"claim conflict", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimAcquire, "r", "p", "e1", "other", "ct2", "h2", 100, 200), func(t *testing.T, _ Result, err error, _ *State) {
				var ce *ClaimConflictError
				if !errors.As(err, &ce) || ce.Claimed != "d" {
					t.Fatalf("err = %v", err)
				}
			}},
		{"claim pending", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct2", "h2", 150, 300), func(t *testing.T, _ Result, err error, _ *State) {
				var pe *ClaimPendingError
				if !errors.As(err, &pe) || pe.Holder != "h" {
					t.Fatalf("err = %v", err)
				}
			}},
		{"takeover before the lease ends", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimTakeover, "r", "p", "e1", "d", "", "h2", 199, 300), func(t *testing.T, _ Result, err error, _ *State) {
				var pe *ClaimPendingError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"takeover keeps the token", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimTakeover, "r", "p", "e1", "d", "", "h2", 200, 300), func(t *testing.T, r Result, err error, _ *State) {
				if err != nil || r.Claim.CommitToken != "ct" || r.Claim.Holder != "h2" || r.Claim.FactID != FactIDBase-1 {
					t.Fatalf("claim %+v err %v", r.Claim, err)
				}
			}},
		{"the holder renews its live lease", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimTakeover, "r", "p", "e1", "d", "", "h", 150, 400), func(t *testing.T, r Result, err error, s *State) {
				if err != nil || r.Claim.LeaseUntilMs != 400 || r.Claim.CommitToken != "ct" {
					t.Fatalf("claim %+v err %v", r.Claim, err)
				}
			}},
		{"a run name that is not a path segment", base, publish("r/x", 1, "t1", 1), func(t *testing.T, _ Result, err error, _ *State) {
			if err == nil || !strings.Contains(err.Error(), `run "r/x"`) {
				t.Fatalf("err %v", err)
			}
		}},
		{"complete publishes the token", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "ct", "", 150, 0), func(t *testing.T, r Result, err error, s *State) {
				if err != nil || r.Claim.State != ClaimComplete || !s.Allowlist("r").Admits(0, "ct", 1) {
					t.Fatalf("claim %+v err %v", r.Claim, err)
				}
			}},
		{"complete under another token", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "zz", "", 150, 0), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"release lets the same digest claim afresh", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 150, 0)),
			claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct2", "h2", 160, 300), func(t *testing.T, r Result, err error, s *State) {
				if err != nil || r.Existing || r.Claim.State != ClaimPending || r.Claim.CommitToken != "ct2" || r.Claim.FactID != FactIDBase-2 || r.Claim.Holder != "h2" {
					t.Fatalf("r %+v err %v", r.Claim, err)
				}
			}},
		{"a released claim keeps its digest: another is a conflict forever", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 150, 0)),
			claimEntry(KindClaimAcquire, "r", "p", "e1", "other", "ct2", "h2", 160, 300), func(t *testing.T, _ Result, err error, _ *State) {
				var conflict *ClaimConflictError
				if !errors.As(err, &conflict) {
					t.Fatalf("err = %v, want ClaimConflictError", err)
				}
			}},
		{"release marks the claim released", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 150, 0), func(t *testing.T, r Result, err error, s *State) {
				c, ok := s.Claim(ClaimKey{Run: "r", Producer: "p", ExternalID: "e1"})
				if err != nil || !ok || c.State != ClaimReleased || c.Digest != "d" || s.Allowlist("r").Admits(0, "ct", 1) {
					t.Fatalf("err %v, claim %+v", err, c)
				}
			}},
		{"a released token never completes", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 150, 0)),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "ct", "", 160, 0), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"release by another holder", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200)),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h2", 150, 0), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"release of a complete claim", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "ct", "", 150, 0)),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 160, 0), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"late completion under a released token", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimRelease, "r", "p", "e1", "d", "ct", "h", 150, 0), claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct2", "h2", 160, 300)),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "ct", "", 170, 0), func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"duplicate of a completed fact gets the original", append(base, claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct", "h", 100, 200),
			claimEntry(KindClaimComplete, "r", "p", "e1", "d", "ct", "", 150, 0)),
			claimEntry(KindClaimAcquire, "r", "p", "e1", "d", "ct9", "h9", 500, 900), func(t *testing.T, r Result, err error, _ *State) {
				if err != nil || !r.Existing || r.Claim.CommitToken != "ct" {
					t.Fatalf("r %+v err %v", r, err)
				}
			}},
		{"rewrite keeps rows", base, Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "r", Tick: 0, Table: "Position",
			Old: []string{FragmentPath("w", "r", "position", "t0", 0)}, New: []Fragment{{Path: "data/w/r/position/t0/opt.parquet", Rows: 10, Bytes: 500, Digest: "x"}}}},
			func(t *testing.T, _ Result, err error, s *State) {
				tk, _ := s.Tick("r", 0)
				if err != nil || tablesOf(t, tk)[0].Fragments[0].Path != "data/w/r/position/t0/opt.parquet" || tk.CommitToken != "t0" {
					t.Fatalf("tick %+v err %v", tk, err)
				}
			}},
		{"rewrite losing rows", base, Entry{Kind: KindFragmentsRewrite, Rewrite: &FragmentsRewrite{Run: "r", Tick: 0, Table: "Position",
			Old: []string{FragmentPath("w", "r", "position", "t0", 0)}, New: []Fragment{{Path: "x", Rows: 9}}}},
			func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"enqueue a command", base, enqueue("c1", 3), func(t *testing.T, _ Result, err error, s *State) {
			if c, ok := s.Command("c1"); err != nil || !ok || c.Settled != -1 || len(s.DueCommands("r", 3)) != 1 || len(s.DueCommands("r", 2)) != 0 {
				t.Fatalf("command %+v err %v", c, err)
			}
		}},
		{"identical enqueue is a no-op", append(base, enqueue("c1", 3)), enqueue("c1", 3), func(t *testing.T, _ Result, err error, _ *State) {
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"enqueue with other contents", append(base, enqueue("c1", 3)), enqueue("c1", 4), func(t *testing.T, _ Result, err error, _ *State) {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"publish settles due commands", append(base, enqueue("c1", 1)), settling(publish("r", 1, "t1", 1), "c1"),
			func(t *testing.T, _ Result, err error, s *State) {
				if c, _ := s.Command("c1"); err != nil || c.Settled != 1 || len(s.DueCommands("r", 9)) != 0 {
					t.Fatalf("command %+v err %v", c, err)
				}
			}},
		{"settle twice", append(base, enqueue("c1", 0), settling(publish("r", 1, "t1", 1), "c1")), settling(publish("r", 2, "t2", 1), "c1"),
			func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"settle before due", append(base, enqueue("c1", 5)), settling(publish("r", 1, "t1", 1), "c1"),
			func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
		{"settle unknown", base, settling(publish("r", 1, "t1", 1), "nope"),
			func(t *testing.T, _ Result, err error, _ *State) {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stateAfter(t, tc.setup...)
			n, r, err := s.Check(&tc.entry, s.Seq+1)
			if err != nil {
				n = s
			}
			tc.check(t, r, err, n)
		})
	}
}

// Check never changes the state it is called on.
func TestCheckLeavesStateAlone(t *testing.T) {
	s := stateAfter(t, create(ModeResumable), fence("a"), publish("r", 0, "t0", 1))
	before := tickCount(s)
	e := publish("r", 1, "t1", 1)
	if _, _, err := s.Check(&e, s.Seq+1); err != nil {
		t.Fatal(err)
	}
	if tickCount(s) != before {
		t.Fatal("Check mutated its receiver")
	}
}

func TestAllowlistCases(t *testing.T) {
	// No manifests and no fence: unfiltered.
	s := stateAfter(t, create(ModeResumable))
	if a := s.Allowlist("r"); a.Mode != Unfiltered || !a.Admits(3, "anything", 4) {
		t.Fatalf("unfenced world without manifests: %v", a.Mode)
	}
	// A fence but no manifests: nothing current-generation, legacy yes.
	s = stateAfter(t, create(ModeResumable), fence("a"))
	if a := s.Allowlist("r"); a.Mode != Filtered || a.Admits(0, "t0", 1) || !a.Admits(0, "", 0) {
		t.Fatal("fenced world without manifests admits current-generation rows")
	}
	// Manifests: only the published token of each tick, across history.
	s = stateAfter(t, create(ModeResumable), fence("a"), publish("r", 0, "t0", 1), fence("b"), publish("r", 1, "t1", 2))
	a := s.Allowlist("r")
	for _, tc := range []struct {
		tick  int64
		token string
		epoch int64
		want  bool
	}{
		{0, "t0", 1, true}, {1, "t1", 2, true}, {0, "t1", 2, false}, {1, "crashed-attempt", 2, false},
		{0, "stale-late", 1, false}, {2, "t2", 2, false}, {5, "", 0, true},
	} {
		if got := a.Admits(tc.tick, tc.token, tc.epoch); got != tc.want {
			t.Errorf("Admits(%d, %s, %d) = %v, want %v", tc.tick, tc.token, tc.epoch, got, tc.want)
		}
	}
	// Another run of the same fenced world is filtered too.
	if b := s.Allowlist("other"); b.Mode != Filtered || b.Admits(0, "t0", 1) {
		t.Fatal("a fenced world's unpublished run admitted rows")
	}
}

func enqueue(id string, due int64) Entry {
	return Entry{Kind: KindCommandEnqueue, Command: &Command{ID: id, Run: "r", Due: due, Kind: "nudge", Body: `{"dx":1}`}}
}

func settling(e Entry, ids ...string) Entry {
	e.TickPublish.Settle = ids
	return e
}
