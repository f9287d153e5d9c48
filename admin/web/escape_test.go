package web_test

import (
	"context"
	"openbot/internal/browsertest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"openbot/agents/openaitest"
	"openbot/core"
)

// TestDashboardEscapes: markup in a message, an attachment's file name and a
// memory is shown as text on every page that shows it, never as elements.
func TestDashboardEscapes(t *testing.T) {
	const evil = `<img src=x onerror="document.body.dataset.xss=1">`
	tm := startTeam(t)
	tm.llm.Enqueue(openaitest.Text("noted " + evil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := tm.eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: "x1",
		ThreadKey: "console:x", Conversation: "x", PlatformID: "1", SenderID: "console:" + evil, SenderName: evil,
		Text: "@eng look " + evil, StartThread: true,
		Attachments: []core.Attachment{{Name: evil + ".txt", Kind: "document", Size: 3, Error: "not fetched"}}}); err != nil {
		t.Fatal(err)
	}
	if err := tm.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tm.st.Update(ctx, func(tx core.Tx) error {
		_, err := tx.PutMemory(core.Memory{Bot: "eng", Text: "remember " + evil, Source: core.MemorySourceReflection})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bctx := browser(t)
	signIn(t, bctx, tm)
	for _, page := range []string{"", "threads", "threads/1", "activity", "memory/eng"} {
		run(t, bctx, "open "+page, chromedp.Navigate(tm.url+"/#/"+page), chromedp.WaitVisible(chromedp.CSS(`main > div`)))
		if page == "threads/1" || page == "memory/eng" {
			waitText(t, bctx, "main", `<img src=x`)
		}
		n := value(t, bctx, "count images", chromedp.Evaluate[int](`document.querySelectorAll("main img").length`))
		xss := value(t, bctx, "xss mark", chromedp.Evaluate[string](`document.body.dataset.xss || ""`))
		if n != 0 || xss != "" {
			t.Errorf("page %q: %d img elements, xss mark %q; markup must be shown as text", page, n, xss)
		}
	}
	text := value(t, bctx, "memory page", browsertest.Text(`main`))
	if !strings.Contains(text, "remember "+evil) {
		t.Errorf("the memory is not shown as its text:\n%s", text)
	}
}
