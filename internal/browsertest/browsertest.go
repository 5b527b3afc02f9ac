// Package browsertest drives Debian's headless chromium for the tests of
// worldfs's web interface (package ui, and the command's test of the
// demo's bucket): a page at a laptop's width, what it says, whether it
// scrolls sideways, and screenshots to look at.
package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/worldfs/worldfs/internal/realpart"
)

// PageWidth is the browser's width in the tests: a laptop's 1,280 px.
const PageWidth = 1280

// Zone is the browser's time zone in the tests: not UTC, so that a page
// showing UTC where it should show local time is found.
const Zone = "Asia/Kolkata"

// Chromium starts Debian's headless chromium for the test, with a
// profile of its own under the test's temp dir, PageWidth wide, in Zone.
// Without chromium the test fails under CI=true (.ci/run installs it) and
// is skipped elsewhere.
func Chromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		realpart.Missing(t, "chromium", "not installed (.ci/run installs it: apt-get install chromium)")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")),
		chromedp.WindowSize(PageWidth, 1400),
	)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: Zone})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

// Browser is a test's page in chromium (Chromium) and what the test does
// with it: each helper fails the test, saying what the page says.
type Browser struct {
	t   *testing.T
	ctx context.Context
	// Shots is where screenshots go: the test's temp dir, or
	// $WORLDFS_UI_SCREENSHOTS to look at them after the test.
	Shots string
}

// New is the page of chromium ctx (Chromium) for test t.
func New(t *testing.T, ctx context.Context) *Browser {
	shots := t.TempDir()
	if d := os.Getenv("WORLDFS_UI_SCREENSHOTS"); d != "" {
		shots = d
	}
	// Named first, so that a failing run says where its pages are.
	t.Logf("screenshots in %s (the test's temp dir is removed after it; WORLDFS_UI_SCREENSHOTS=DIR keeps them)", shots)
	return &Browser{t: t, ctx: ctx, Shots: shots}
}

// Shot saves a screenshot of the whole page as name.png.
func (b *Browser) Shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.Shots, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", name, err)
	}
}

// ReadyAt waits for the page's body to match sel (its data attributes).
func ReadyAt(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS("body" + sel))
}

// Do runs steps, failing with what the page says if one fails.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		msg, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.dataset.error || document.getElementById("status")?.textContent || ""`))
		b.t.Fatalf("%s: %v (page says %q)", what, err, msg)
	}
}

// Eval decodes the JSON of expr's value on the page into v.
func (b *Browser) Eval(v any, expr string) {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[json.RawMessage]("JSON.stringify("+expr+")"))
	if err == nil {
		var text string
		if err = json.Unmarshal(raw, &text); err == nil {
			err = json.Unmarshal([]byte(text), v)
		}
	}
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
}

// Str runs a, failing the test if it fails.
func (b *Browser) Str(a chromedp.Action[string]) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// Fits checks that the page does not scroll sideways at PageWidth,
// naming what sticks out if it does.
func (b *Browser) Fits(what string) {
	b.t.Helper()
	var w struct {
		Scroll, Client int
		Wide           []string
	}
	b.Eval(&w, `(() => { const d = document.documentElement, c = d.clientWidth;
		const wide = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > c + 0.5)
			.filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= c + 0.5)
			.slice(0, 5).map(e => e.tagName + (e.id ? "#" + e.id : "") + "." + e.className + " " + Math.round(e.getBoundingClientRect().right));
		return {Scroll: d.scrollWidth, Client: c, Wide: wide}; })()`)
	if w.Client == 0 || w.Client > PageWidth {
		b.t.Fatalf("%s: the page is %d px wide; want the browser's %d px less its scroll bar", what, w.Client, PageWidth)
	}
	if w.Scroll > w.Client {
		b.t.Fatalf("%s: the page scrolls sideways at %d px: %d px of content in %d; sticking out: %v", what, PageWidth, w.Scroll, w.Client, w.Wide)
	}
}
