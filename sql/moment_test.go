package sql_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// Each form of a point a person types parses, by the one parser
// (ParseMoment), and resolves among a world's visible ticks to the tick
// expected, both by Moment.In over the catalog's ticks and by the views
// Build pins (worldfs sql --at); an instant before the first tick pins
// the views to no tick (empty, as _as_of), not an error. The world's
// ticks 0..5 were published at 09:58, 09:59, 10:00, 10:00:30, 10:01 and
// 10:05 on 2026-12-01 in a zone 5 hours west of UTC; now is 10:06 there.
func TestEveryPointFormResolvesToItsTick(t *testing.T) {
	ctx := ctxT(t)
	zone := time.FixedZone("UTC-5", -5*3600)
	at := func(hms string) time.Time {
		t0, err := time.ParseInLocation("2006-01-02 15:04:05", "2026-12-01 "+hms, zone)
		if err != nil {
			t.Fatal(err)
		}
		return t0
	}
	published := []time.Time{at("09:58:00"), at("09:59:00"), at("10:00:00"), at("10:00:30"), at("10:01:00"), at("10:05:00")}
	now := at("10:06:00")
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, epoch, err := index.CreateWorld(ctx, lb, "w", index.WorldCreate{WriterMode: index.ModeResumable, CreatedUnixMs: 1}, "writer", index.Options{NoCompactor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	token := func(tick int64) string { return index.TickToken(tick, [16]byte{0: 7, 1: byte(tick)}) }
	var entries []index.Entry
	for tick, p := range published {
		entries = append(entries, index.Entry{Kind: index.KindTickPublish, TickPublish: &index.TickPublish{
			Run: "main", Tick: int64(tick), CommitToken: token(int64(tick)), WriterEpoch: epoch, PublishedUnixMs: p.UnixMilli()}})
	}
	if _, err := c.CommitAll(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	st, _, err := index.Load(ctx, lb, "w")
	if err != nil {
		t.Fatal(err)
	}
	ticks := index.ViewTicks(index.OwnView(st, "main"), 1<<62)

	const none = -1 // an instant before the first tick: no tick
	for _, c := range []struct {
		point string
		want  int64
	}{
		{"3", 3}, {"0", 0}, {"head", 5}, {"HEAD", 5}, {"head~0", 5}, {"head~2", 3}, {"head~5", 0},
		{token(2), 2},
		{"2026-12-01T15:00:00Z", 2}, {"2026-12-01T15:00:29.999Z", 2}, {"2026-12-01T10:00:30-05:00", 3},
		{"2026-12-01 15:00:45+00", 3}, {"2026-12-01 15:00:45.5+00:00", 3}, // as DuckDB prints published_at
		{"2026-12-01 10:00", 2}, {"2026-12-01 10:00:29", 2}, {"2026-12-01T10:00:30", 3}, {"2026-12-01T10:04", 4},
		{"2026-12-01", none}, {"2026-12-01 09:57", none},
		{"10:00", 2}, {"10:01", 4}, {"9:58", 0}, {"09:57:59", none}, {"23:59", 5},
		{"-1m", 5}, {"-6m", 2}, {"-5m30s", 3}, {"-5m31s", 2}, {"5 minutes ago", 4}, {"5m ago", 4}, {"2h ago", none},
		{"1 hour ago", none}, {"0.1h ago", 2}, {"now", 5}, {" now ", 5},
	} {
		m, err := index.ParseMoment(c.point, now)
		if err != nil {
			t.Errorf("%q: %v", c.point, err)
			continue
		}
		got, ok, err := m.In(ticks)
		if !ok {
			got = none
		}
		if err != nil || got != c.want {
			t.Errorf("%q: tick %d (%v), want %d", c.point, got, err, c.want)
			continue
		}
		// The views pinned there show that tick alone; before the first
		// tick, none.
		s, err := wsql.Build(ctx, lb, "w", wsql.Options{At: &m, Only: true, Dir: t.TempDir()})
		if err != nil || s.AtTick != c.want {
			t.Errorf("%q: views pinned at %v (%v), want tick %d", c.point, s, err, c.want)
			continue
		}
		db, err := wsql.Open(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		listed := count(t, db, "SELECT count(*) FROM worldfs_ticks")
		db.Close()
		if wantListed := map[bool]int64{true: 0, false: 1}[c.want == none]; listed != wantListed {
			t.Errorf("%q: the views pinned there list %d ticks, want %d", c.point, listed, wantListed)
		}
	}

	// What is no point, or names no tick, says so.
	for _, c := range []struct{ point, says string }{
		{"", "no point given"}, {"head~x", "after head~ comes how many ticks"}, {"-5", "ticks are 0 or more; for ticks before the head write head~5"},
		{"yesterday", `"yesterday" is not a point: give a tick (170), head, head~10`}, {"10:61", "is not a point"}, {"2026-13-01", "is not a point"},
		{"-1 fortnight", "is not a point"}, {"99999999999999999999", "a tick number is at most"},
	} {
		if _, err := index.ParseMoment(c.point, now); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want an error saying %q", c.point, err, c.says)
		}
	}
	for _, c := range []struct{ point, says string }{
		{"head~6", "head~6 is before the first tick: the run's ticks are 0..5"}, {token(9), "names no visible tick"},
	} {
		m, err := index.ParseMoment(c.point, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.In(ticks); !errors.Is(err, wsql.ErrNotFound) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want not found, saying %q", c.point, err, c.says)
		}
	}
	// ParseInstant (--at-time) takes the times alone.
	for _, p := range []string{"3", "head~1", token(2)} {
		if _, err := index.ParseInstant(p, now); err == nil {
			t.Errorf("ParseInstant(%q) took it as a time", p)
		}
	}
	if got, err := index.ParseInstant("10:00", now); err != nil || !got.Equal(at("10:00:00")) {
		t.Errorf("ParseInstant(10:00) = %v, %v; want 10:00 in now's zone", got, err)
	}
}
