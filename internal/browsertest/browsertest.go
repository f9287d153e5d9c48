// Package browsertest drives the web dashboard in a real headless Chromium
// (chromedp) for the tests of packages that run a whole serve. Every step is
// bounded; a failed step fails the test with the page's text. Screenshots go to
// the directory OPENBOT_SCREENSHOTS names, when set (to look at, not a check).
package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium with a fresh profile, 1280x800, ended at
// cleanup; every use of the context is bounded by 3 minutes. Without Chromium
// the test fails when CI=true and is skipped otherwise.
func Browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI must have it (apt-get install -y chromium)")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser for the whole test
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Run runs actions within 20 s, failing the test with the page's text.
func Run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		page, err2 := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		if err2 != nil {
			page = err2.Error()
		}
		t.Fatalf("%s: %v; the page:\n%s", what, err, page)
	}
}

// Value runs one action and returns its value.
func Value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// WaitText waits up to 20 s until the text of the element sel holds want.
func WaitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := `(document.querySelector('` + strings.ReplaceAll(sel, "'", `\'`) + `')||{}).textContent||""`
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			break
		}
		if got = v; strings.Contains(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling the page, not ordering events
	}
	t.Fatalf("%s never showed %q; last text:\n%s", sel, want, got)
}

// SignIn opens the dashboard at base and signs in with the admin token.
func SignIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	Run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-nav="threads"]`)),
	)
}

// Screenshots saves the current page at laptop (1280x800) and phone (390x844,
// mobile) width as laptop-NAME.png and phone-NAME.png in $OPENBOT_SCREENSHOTS;
// it does nothing when that is unset. The laptop size is restored.
func Screenshots(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("OPENBOT_SCREENSHOTS")
	if dir == "" {
		return
	}
	for _, s := range []struct {
		size string
		w, h int64
		mob  bool
	}{{"phone", 390, 844, true}, {"laptop", 1280, 800, false}} {
		vp := chromedp.EmulateViewport(s.w, s.h)
		if s.mob {
			vp = chromedp.EmulateViewport(s.w, s.h, chromedp.EmulateMobile)
		}
		Run(t, ctx, "resize for "+name, vp, chromedp.Sleep(300*time.Millisecond))
		buf := Value(t, ctx, "capture "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, s.size+"-"+name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Click clicks the element sel (CSS) selects, found and clicked in one script
// step: the dashboard redraws live, so a node found in one step may be gone in
// the next ("Could not find node with given id"). Between two renders the
// element may be missing for a moment; the script polls every 25 ms until it is
// there, bounded by the caller's context (Run's 20 s).
func Click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := onElement[any](sel, `el.click(); return true`)(ctx, t)
		return err
	})
}

// Text is the rendered text (innerText) of the element sel selects, read in
// one script step as Click finds its element.
func Text(sel string) chromedp.Action[string] { return onElement[string](sel, `return el.innerText`) }

// FieldValue is the value of the form field sel selects, read in one script
// step as Click finds its element.
func FieldValue(sel string) chromedp.Action[string] { return onElement[string](sel, `return el.value`) }

// onElement runs body (JavaScript with the element as el) on the element sel
// selects as soon as it is there, polling every 25 ms, and returns its value.
func onElement[T any](sel, body string) chromedp.Action[T] {
	q, _ := json.Marshal(sel)
	return chromedp.Evaluate[T](`new Promise(done => {
		const go = () => { const el = document.querySelector(`+string(q)+`); if (el) done((el => { `+body+` })(el)); else setTimeout(go, 25) };
		go();
	})`, chromedp.EvalAwaitPromise)
}
