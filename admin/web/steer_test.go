package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/browsertest"
)

// signIn opens the dashboard and signs in with the admin token.
func signIn(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	browsertest.SignIn(t, ctx, tm.url, token)
}

// view reads the store.
func (tm *team) view(t *testing.T, f func(tx core.ReadTx) error) {
	t.Helper()
	if err := tm.st.View(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardSteers: the operator pauses a bot, stops its queued work in a
// thread and cancels a waiting run from the pages where each is seen, each
// after a confirming second click, and the store shows the effect: the paused
// bot took no run, its queue in the thread is empty, the run is cancelled.
func TestDashboardSteers(t *testing.T) {
	tm := startTeam(t)
	tm.llm.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"disk"}`}}})
	tm.say(t, "ops", "Dana", "@eng how full is the disk?") // waits for approval

	ctx := browser(t)
	signIn(t, ctx, tm)
	pmRow := `tr[data-bot="pm"]`
	// The pages redraw live (the team page every few seconds), so a button is
	// clicked in one step by script, not found and then clicked.
	run(t, ctx, "pause @pm from the team page",
		browsertest.Click(`nav a[data-nav="team"]`),
		chromedp.WaitVisible(chromedp.CSS(pmRow+` button[data-act="pause"]`)),
		browsertest.Click(pmRow+` button[data-act="pause"]`),
		chromedp.WaitVisible(chromedp.CSS(pmRow+` button.danger[data-act="pause"]`)), // "Really pause @pm?"
		browsertest.Click(pmRow+` button[data-act="pause"]`),
		chromedp.WaitVisible(chromedp.CSS(pmRow+` button[data-act="resume"]`)),
	)
	waitText(t, ctx, "#flash", "@pm paused")
	if dir := os.Getenv("OPENBOT_SCREENSHOTS"); dir != "" {
		buf := value(t, ctx, "capture", chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, "steer-paused.png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tm.view(t, func(tx core.ReadTx) error {
		if _, paused, err := core.PausedTx(tx, "pm"); err != nil || !paused {
			t.Errorf("@pm paused in the store = %v (%v), want true", paused, err)
		}
		return nil
	})

	tm.post(t, "release", "Sam", "@pm draft the release notes")
	tm.llm.Enqueue(openaitest.Text("done"))
	tm.say(t, "other", "Sam", "@eng anything else?") // the others go on
	var release core.ThreadID
	tm.view(t, func(tx core.ReadTx) error {
		var err error
		if release, err = tx.ThreadByKey("console:release"); err != nil {
			return err
		}
		items, err := tx.QueuedInThread(core.BotActorID("pm"), release)
		if len(items) != 1 {
			t.Errorf("@pm's queue in the thread = %d items, want the message waiting (paused: no run)", len(items))
		}
		return err
	})
	run(t, ctx, "stop @pm in the thread",
		chromedp.Navigate(tm.url+"/#/threads/"+itoa(release)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-act="stop"]`)),
		browsertest.Click(`button[data-act="stop"]`),
		chromedp.WaitVisible(chromedp.CSS(`button.danger[data-act="stop"]`)),
		browsertest.Click(`button[data-act="stop"]`),
	)
	waitText(t, ctx, "#flash", "1 queued item(s) dropped")
	tm.view(t, func(tx core.ReadTx) error {
		items, err := tx.QueuedInThread(core.BotActorID("pm"), release)
		if len(items) != 0 {
			t.Errorf("@pm's queue in the thread after stop = %d items, want none", len(items))
		}
		return err
	})

	var ops core.ThreadID
	tm.view(t, func(tx core.ReadTx) (err error) { ops, err = tx.ThreadByKey("console:ops"); return err })
	run(t, ctx, "cancel the waiting run",
		chromedp.Navigate(tm.url+"/#/threads/"+itoa(ops)),
		chromedp.WaitVisible(chromedp.CSS(`details.run button[data-act="cancel"]`)),
		browsertest.Click(`details.run button[data-act="cancel"]`),
		chromedp.WaitVisible(chromedp.CSS(`details.run button.danger[data-act="cancel"]`)),
		browsertest.Click(`details.run button[data-act="cancel"]`),
		chromedp.WaitNotPresent(chromedp.CSS(`details.run button[data-act="cancel"]`)),
	)
	tm.view(t, func(tx core.ReadTx) error {
		runs, err := tx.RunsBefore(0, 10)
		for _, r := range runs {
			if r.Thread == ops && r.Status != core.RunCancelled {
				t.Errorf("run %d in the ops thread is %s, want cancelled", r.ID, r.Status)
			}
		}
		return err
	})
}

func itoa(id core.ThreadID) string { return strconv.FormatUint(uint64(id), 10) }
