package main

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/worldfs/worldfs/internal/browsertest"
)

// Every page of `worldfs ui` on the demo's bucket (worldfs demo, as make
// demo runs it, then worldfs ui) fits a laptop's 1,280 px without
// scrolling sideways, in chromium: the worlds page, the world's and its
// fork's runs, an entity's history, two ticks compared and the fork
// against its parent, a query, facts and receipts, and the sweep of the
// world's lineage. The demo's worlds have no run parameters and ids of
// four digits: what a fixture of tests may not have.
func TestUIPagesOfTheDemoFit(t *testing.T) {
	dir := t.TempDir()
	if code, out, stderr := cli(t, "demo", "--bucket", dir, "--world", "demo"); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, stderr)
	}
	ctx := browsertest.Chromium(t)
	u, _ := startUI(t, "--bucket", dir, "--cache-dir", t.TempDir())
	br := browsertest.New(t, ctx)
	ready := browsertest.ReadyAt
	var id string
	br.Do("the demo's head tick", chromedp.Navigate(u.String()+"w/demo"), ready(`[data-shown-tick]`))
	br.Eval(&id, `new URL(document.querySelector("#tick-rows a.entity").href).searchParams.get("id")`)
	sql := url.QueryEscape("SELECT tick, count(*) AS n, avg(position_y) AS y FROM particle GROUP BY tick ORDER BY tick")
	for _, p := range []struct{ name, path, ready string }{
		{"demo-worlds", "", `[data-ready="1"]`},
		{"demo-run", "w/demo", `[data-shown-tick]`},
		{"demo-fork-run", "w/demo-fork?tick=160", `[data-shown-tick="160"]`},
		{"demo-entity", "w/demo/entity?table=particle&id=" + url.QueryEscape(id), `[data-page="entity"][data-ready="1"]`},
		{"demo-compare", "w/demo/compare?a=100&b=200&table=particle", `[data-compared="demo@100 demo@200"]`},
		{"demo-fork-vs-parent", "w/demo/compare?a=160&vs=demo-fork&b=160&table=particle", `[data-compared="demo@160 demo-fork@160"]`},
		{"demo-sql", "w/demo/sql?q=" + sql, `[data-queries="1"]`},
		{"demo-facts", "w/demo/facts", `[data-ready="1"]`},
		{"demo-sweep", "sweep?lineage=demo", `[data-swept$=" 2"]`},
	} {
		br.Do(p.name, chromedp.Navigate(u.String()+p.path), ready(p.ready))
		br.Shot(p.name)
		br.Fits(p.name)
	}
}
