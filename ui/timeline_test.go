package ui

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
)

// The timeline's events, read from the newest slot backward (at once, or
// page by page to the log's start), are what reading the log forward
// gives, each timed by the newest entry before it that records a time:
// on compacted worlds, whose compactions' entries record none and follow
// the tick publications that do.
func TestEventsReadBackwardAreTheLogs(t *testing.T) {
	f := newFixture(t)
	compactedWorlds(t, f)
	ctx := enginetest.Context(t)
	for _, world := range []string{"c", "cf"} {
		st, _, err := index.Load(ctx, f.b, world)
		if err != nil {
			t.Fatal(err)
		}
		exp := logEvents(t, f.b, world, st.Seq)
		rewrites := 0
		for _, e := range exp {
			if e.Kind == string(index.KindFragmentsRewrite) {
				rewrites++
			}
		}
		if rewrites == 0 {
			t.Fatalf("%s: no compaction in its log", world)
		}
		var tl Timeline
		if code := f.get(t, "/api/w/"+world+"/timeline", &tl); code != 200 {
			t.Fatalf("timeline of %s: %d", world, code)
		}
		if tl.LogFrom != 1 || !reflect.DeepEqual(tl.Events, exp) {
			t.Fatalf("events of %s (from %d):\n%+v\nthe log's:\n%+v", world, tl.LogFrom, tl.Events, exp)
		}
		// Page by page: a server reading a slot at a time.
		g := serve(t, f.b, f.dir, func(o *Options) { o.MaxLogEntries = 1 })
		tl = Timeline{}
		g.get(t, "/api/w/"+world+"/timeline", &tl)
		pages := 0
		for from := tl.LogFrom; from > 1; pages++ {
			var p EventPage
			if code := g.get(t, fmt.Sprintf("/api/w/%s/events?before=%d", world, from), &p); code != 200 || p.LogFrom >= from {
				t.Fatalf("%s: events before %d: %d, from %d", world, from, code, p.LogFrom)
			}
			from = p.LogFrom
		}
		tl = Timeline{}
		g.get(t, "/api/w/"+world+"/timeline", &tl)
		if pages < 2 || tl.LogFrom != 1 || !reflect.DeepEqual(tl.Events, exp) {
			t.Fatalf("%s after %d pages (from %d):\n%+v\nthe log's:\n%+v", world, pages, tl.LogFrom, tl.Events, exp)
		}
	}
}

// The server keeps the newest events of a world only: past keptEvents it
// forgets the oldest, and the timeline says from which sequence it holds
// them (a page asks for older ones again).
func TestKeptEventsAreBounded(t *testing.T) {
	f := newFixture(t)
	st, _, err := index.Load(enginetest.Context(t), f.b, "w")
	if err != nil {
		t.Fatal(err)
	}
	all := logEvents(t, f.b, "w", st.Seq)
	g := serve(t, f.b, f.dir)
	g.srv.keptEvents = 2
	var tl Timeline
	g.get(t, "/api/w/w/timeline", &tl)
	if n := len(all); n < 3 || !reflect.DeepEqual(tl.Events, all[n-2:]) || tl.LogFrom != all[n-3].Seq+1 {
		t.Fatalf("kept 2 of %d events: %+v from %d", len(all), tl.Events, tl.LogFrom)
	}
	var p EventPage
	if code := g.get(t, fmt.Sprintf("/api/w/w/events?before=%d", tl.LogFrom), &p); code != 200 || len(p.Events) == 0 || !reflect.DeepEqual(p.Events[len(p.Events)-1], all[len(all)-3]) {
		t.Fatalf("events before %d: %d %+v", tl.LogFrom, code, p.Events)
	}
	g.get(t, "/api/w/w/timeline", &tl)
	if len(tl.Events) != 2 {
		t.Fatalf("after a page of older events the server keeps %d", len(tl.Events))
	}
}

// The timeline shows the world's tags that name a visible tick of its
// run, by tick (a fork's tag of a tick it inherits among them), and a
// tag's creation among its events.
func TestTimelineShowsTags(t *testing.T) {
	f := newFixture(t)
	ctx := enginetest.Context(t)
	for _, c := range []struct {
		world, name string
		tick        int64
	}{{"f", "own", 8}, {"f", "inherited", 3}, {"w", "parents", 5}} {
		cat, err := index.Open(ctx, f.b, c.world, index.Options{NoCompactor: true})
		if err != nil {
			t.Fatal(err)
		}
		tick := c.tick
		if _, err := cat.Tag(ctx, index.LoadFrom(f.b), index.DefaultRun, index.Moment{Text: "n", Tick: &tick}, c.name, "why "+c.name); err != nil {
			t.Fatal(err)
		}
		cat.Close()
	}
	var tl Timeline
	if code := f.get(t, "/api/w/f/timeline", &tl); code != 200 {
		t.Fatalf("timeline of f: %d", code)
	}
	got := fmt.Sprint(tl.Tags)
	if len(tl.Tags) != 2 || tl.Tags[0].Name != "inherited" || tl.Tags[0].Tick != 3 || tl.Tags[1].Name != "own" || tl.Tags[1].Message != "why own" || tl.Tags[1].UnixMs == 0 {
		t.Fatalf("the fork's timeline tags: %s; want inherited at 3, own at 8 (not its parent's)", got)
	}
	tagged := 0
	for _, e := range tl.Events {
		if e.Kind == string(index.KindTagCreate) && e.Tick != nil {
			tagged++
		}
	}
	if tagged != 2 {
		t.Fatalf("the fork's events hold %d tag creations, want 2: %+v", tagged, tl.Events)
	}
}
