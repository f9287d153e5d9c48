package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/internal/browsertest"
)

// phonePages are the dashboard's pages, by hash ("threads/" gets the first
// thread's id).
var phonePages = []string{"", "threads", "threads/", "chat", "approvals", "activity", "usage", "memory", "people", "config"}

// TestDashboardFitsAPhone opens every page of a real serve's dashboard at
// 390x844, as a phone shows it, with a Slack account that has taken a mention
// and answered it (so the Team page has channels and runs, and a thread has
// messages): no page is wider than the screen, so it never scrolls sideways;
// the menu stays within the screen. A failure names what sticks out.
func TestDashboardFitsAPhone(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Text("The checklist has 3 items left: https://example.com/a/very/long/link/that/does/not/break/at/all/on/a/narrow/screen")
	})
	sl := slacktest.New(slacktest.Options{BotToken: "xoxb-test", AppToken: "xapp-test"})
	defer sl.Close()
	_, addr, logs, stop := serveOnFreePort(t, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": testAdminToken}, func(c *config.Config) {
		c.Slack = []config.Slack{{Name: "acme", Bot: "*", AppToken: "xapp-test", BotToken: "xoxb-test", APIURL: sl.APIURL()}}
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frame, err := os.ReadFile("../../adapters/slack/testdata/fixtures/socket_mode_events_api_app_mention.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.Push(ctx, frame); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.WaitCalls(ctx, "chat.postMessage", 1); err != nil {
		t.Fatalf("no Slack reply: %v\n%s", err, logs.String())
	}

	b := browsertest.Browser(t)
	browsertest.Run(t, b, "the sign-in page on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate("http://"+addr+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)))
	if why := phoneMisfit(t, b); why != "" {
		t.Errorf("the sign-in page %s", why)
	}
	browsertest.Screenshots(t, b, "phone-fit-login")
	browsertest.SignIn(t, b, "http://"+addr, testAdminToken)
	browsertest.Run(t, b, "the thread list",
		chromedp.Navigate("http://"+addr+"/#/threads"),
		chromedp.WaitVisible(chromedp.CSS(`table a[href^="#/threads/"]`)))
	thread := browsertest.Value(t, b, "the first thread", chromedp.Evaluate[string](`document.querySelector('table a[href^="#/threads/"]').getAttribute("href").slice(2)`))
	for _, mobile := range []bool{true, false} {
		for _, page := range phonePages {
			if page == "threads/" {
				page = thread
			}
			vp := chromedp.EmulateViewport(390, 844)
			if mobile {
				vp = chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)
			}
			browsertest.Run(t, b, "open #/"+page,
				vp,
				chromedp.Navigate("http://"+addr+"/#/"+page),
				chromedp.WaitVisible(chromedp.CSS(`main > div`)),
				chromedp.WaitNotPresent(chromedp.CSS(`main > p.muted`)))
			if page == "" {
				browsertest.Run(t, b, "the channels", chromedp.WaitVisible(chromedp.CSS(`tr[data-account="slack/acme"]`)))
			}
			if strings.HasPrefix(page, "threads/") {
				browsertest.WaitText(t, b, ".feed", "checklist has 3 items")
			}
			if why := phoneMisfit(t, b); why != "" {
				t.Errorf("mobile %v: #/%s %s", mobile, page, why)
			}
			browsertest.Screenshots(t, b, "phone-fit-"+strings.ReplaceAll(cmp.Or(page, "team"), "/", "-"))
		}
	}
}

// phoneMisfit says how the page open in b is wider than a 390 px screen, naming
// what sticks out, or "" when it fits: its scrolling width, and every element
// past the screen's right edge that no box of its own scrolls or clips, and a
// menu that scrolls sideways.
func phoneMisfit(t *testing.T, b context.Context) string {
	t.Helper()
	fit := browsertest.Value(t, b, "the widths", chromedp.Evaluate[struct {
		Scroll, Inner int
		Wide          []string
	}](`(() => {
		const w = 390, wide = [];
		const clipped = (e) => { // inside a box that scrolls or clips its own overflow
			for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
				if (getComputedStyle(p).overflowX !== "visible") return true;
			}
			return false;
		};
		for (const e of document.querySelectorAll("body *")) {
			const r = e.getBoundingClientRect();
			if (r.width && r.right > w + 0.5 && !clipped(e)) wide.push(e.tagName.toLowerCase() + (e.className ? "." + String(e.className).replace(/ /g, ".") : "") + " " + Math.round(r.left) + ".." + Math.round(r.right) + " " + JSON.stringify((e.textContent || "").slice(0, 40)));
		}
		const nav = document.querySelector("header nav");
		if (nav && nav.scrollWidth > nav.clientWidth) wide.push("the menu scrolls sideways: " + nav.scrollWidth + " px in " + nav.clientWidth);
		return {Scroll: document.scrollingElement.scrollWidth, Inner: innerWidth, Wide: wide.slice(0, 12)};
	})()`))
	if fit.Inner == 390 && fit.Scroll <= fit.Inner && len(fit.Wide) == 0 {
		return ""
	}
	return fmt.Sprintf("is %d px wide on a %d px screen (want at most 390); sticking out:\n%s", fit.Scroll, fit.Inner, strings.Join(fit.Wide, "\n"))
}
