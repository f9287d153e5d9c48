package web_test

import (
	"openbot/internal/browsertest"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"openbot/agents/openaitest"
	"openbot/core"
)

// TestTryABotInBrowser: the operator starts a thread with @pm on the New chat
// page; the reply shows while it is written (the fake model stalls mid-answer:
// the page and GET /threads/ID/draft show the first piece), then whole. A
// second message goes from the thread page's box with Ctrl+Enter. The store
// has both messages from the console identity in a thread of the dashboard's
// console account, and the replies.
func TestTryABotInBrowser(t *testing.T) {
	tm := startTeam(t)
	stall := make(chan struct{})
	tm.llm.Enqueue(openaitest.Reply{Text: "Drafting the notes now. Two items need a decision.", StallMidStream: stall})

	ctx := browser(t)
	signIn(t, ctx, tm)
	run(t, ctx, "the new chat page",
		chromedp.Navigate(tm.url+"/#/chat"),
		chromedp.WaitVisible(chromedp.CSS(`form.composer select[data-control="bot"]`)),
		chromedp.SetValue(chromedp.CSS(`select[data-control="bot"]`), "pm"),
		chromedp.SendKeys(chromedp.CSS(`form.composer textarea`), "draft the release notes"),
	)
	screens(t, ctx, "chat-new")
	run(t, ctx, "send and see the reply being written",
		browsertest.Click(`button[data-act="send"]`),
		chromedp.WaitVisible(chromedp.CSS(`#draft:not([hidden])`)),
	)
	waitText(t, ctx, "#draft", "@pm is writing…")
	partial := value(t, ctx, "the draft", browsertest.Text(`#draft .text`))
	if partial == "" || strings.Contains(partial, "Two items need a decision.") {
		t.Errorf("the reply while written = %q, want its first piece only", partial)
	}
	hash := value(t, ctx, "where", chromedp.Evaluate[string](`location.hash`))
	id, err := strconv.ParseUint(strings.TrimPrefix(hash, "#/threads/"), 10, 64)
	if err != nil {
		t.Fatalf("after sending, the page is at %q, want the new thread", hash)
	}
	api := value(t, ctx, "the draft API", chromedp.Evaluate[string](`fetch("/api/v1/threads/`+strconv.FormatUint(id, 10)+`/draft").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if !strings.Contains(api, `"bot":"pm"`) || !strings.Contains(api, partial) {
		t.Errorf("GET /threads/%d/draft = %s", id, api)
	}
	screens(t, ctx, "chat-writing")
	close(stall)
	waitText(t, ctx, ".feed", "Two items need a decision.")
	run(t, ctx, "the draft gives way to the reply", chromedp.WaitNotPresent(chromedp.CSS(`#draft`)))

	tm.llm.Enqueue(openaitest.Text("You're welcome."))
	run(t, ctx, "write from the thread page with Ctrl+Enter",
		chromedp.WaitVisible(chromedp.CSS(`form.composer textarea`)),
		chromedp.SendKeys(chromedp.CSS(`form.composer textarea`), "@pm thanks"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	waitText(t, ctx, ".feed", "You're welcome.")

	tm.view(t, func(tx core.ReadTx) error {
		th, err := tx.Thread(core.ThreadID(id))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(th.Key, "console:web:") {
			t.Errorf("thread key %q, want one of the dashboard's console account", th.Key)
		}
		msgs, err := tx.Messages(th.ID, 0, 10)
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Sender)+": "+m.Text)
		}
		want := []string{"console:ops: draft the release notes", "bot:pm: Drafting the notes now. Two items need a decision.",
			"console:ops: @pm thanks", "bot:pm: You're welcome."}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the thread holds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return err
	})
}
