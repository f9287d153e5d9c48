package web_test

import (
	"context"
	"encoding/json"
	"openbot/internal/browsertest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"openbot/core"
)

// TestPeoplePageSetsAChannelPolicy: the operator (an owner) sets a channel's
// policy from the form on the People page (what is typed survives a live
// redraw, focus included); the table and the API show it and
// the activity log has it. Edit fills the form from the row; a bad value (a
// bot that is not configured) shows the API's refusal under the form and
// changes nothing; a good change is stored; Remove, after a confirming second
// click, deletes it, also in the activity log.
func TestPeoplePageSetsAChannelPolicy(t *testing.T) {
	const ops core.ActorID = "console:ops"
	tm := startTeamAs(t, people{identity: ops, name: "Operator", owners: []core.ActorID{ops}})
	ctx := context.Background()
	bctx := browser(t)
	signIn(t, bctx, tm)

	const where = "slack/acme T1:C1"
	row := `tr[data-policy="` + where + `"]`
	in := func(name string) string { return `#policy [name="` + name + `"]` }
	// set sets a field in one script step, as click clicks: a live redraw moves
	// the form, which would lose a node the browser had found a step before.
	set := func(name, v string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](`(e => { e.value = `+quote(v)+`; e.dispatchEvent(new Event("input", {bubbles: true})) })(document.querySelector(`+quote(in(name))+`))`)(ctx, t)
			return err
		})
	}
	run(t, bctx, "start filling in the policy form",
		browsertest.Click(`nav a[data-nav="people"]`),
		chromedp.WaitVisible(chromedp.CSS(`#policy`)),
		chromedp.SendKeys(chromedp.CSS(in("account")), "slack/acme"),
		chromedp.SendKeys(chromedp.CSS(in("channel")), "T1:"),
	)
	// A live redraw (an unknown DM asks to be let in) keeps what is typed and
	// where.
	if _, err := tm.eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:777", Name: "Mia"}); err != nil {
		t.Fatal(err)
	}
	run(t, bctx, "the page redraws", chromedp.WaitVisible(chromedp.CSS(`tr[data-code]`)))
	if got := value(t, bctx, "the form after a redraw", chromedp.Evaluate[string](
		`document.querySelector('#policy [name="account"]').value + " " + document.activeElement.name`)); got != "slack/acme channel" {
		t.Errorf("after a live redraw the form has account and focus %q, want %q", got, "slack/acme channel")
	}
	run(t, bctx, "fill in the rest",
		set("channel", "T1:C1"),
		set("mode", "open"),
		set("members", "listed"),
		set("listed", "telegram:777, slack:T1:U9"),
		set("default_bot", "@pm"),
		set("tools_removed", "shell"),
		set("approvers", "console:ops"),
		set("budget_tokens", "50000"),
		set("budget_cost", "2.5"),
		set("unlisted", "ask"),
		set("instructions", "Keep it short."),
		browsertest.Click(`#policy button[data-act="save-policy"]`),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	waitText(t, bctx, "#flash", "The policy of "+where+" is saved")
	want := core.ChannelPolicy{Mode: "open", Members: "listed", Listed: []core.ActorID{"telegram:777", "slack:T1:U9"}, DefaultBot: "pm",
		ToolsRemoved: []string{"shell"}, Approvers: []core.ActorID{ops}, Instructions: "Keep it short.",
		Fetch: &core.FetchPolicy{Unlisted: "ask"}, Budget: core.Limit{Tokens: 50000, CostMicros: 2_500_000}}
	stored := func() core.ChannelPolicy {
		t.Helper()
		raw := value(t, bctx, "the policies API", chromedp.Evaluate[string](`fetch("/api/v1/policies").then(r => r.text())`, chromedp.EvalAwaitPromise))
		var pols map[string]core.ChannelPolicy
		if err := json.Unmarshal([]byte(raw), &pols); err != nil || len(pols) != 1 {
			t.Fatalf("GET /api/v1/policies = %s (%v), want one policy", raw, err)
		}
		p := pols[where]
		if p.SetBy != ops || p.Set.IsZero() {
			t.Errorf("the policy was set by %q at %v, want %s and a time", p.SetBy, p.Set, ops)
		}
		p.SetBy, p.Set = "", time.Time{}
		return p
	}
	if got := stored(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored through the page:\n got %+v\nwant %+v", got, want)
	}
	text := value(t, bctx, "the policy row", browsertest.Text(row))
	for _, s := range []string{"mode open", "telegram:777", "default bot @pm", "without shell", "approvers console:ops", "50,000 tokens", "2.50", "unlisted ask", "Keep it short.", "by console:ops"} {
		if !strings.Contains(text, s) {
			t.Errorf("the policy row = %q, want %q in it", text, s)
		}
	}
	activity := func(event string) string {
		t.Helper()
		var line string
		tm.view(t, func(tx core.ReadTx) error {
			as, err := tx.Activities(0, 0)
			for _, a := range as {
				if a.Event == event {
					line = a.Summary
				}
			}
			return err
		})
		return line
	}
	if line := activity("policy.set"); !strings.Contains(line, where) || !strings.Contains(line, "Operator") || !strings.Contains(line, "default_bot=pm") {
		t.Errorf("the activity line = %q, want the channel, the operator and the policy", line)
	}

	// Edit fills the form from the row; a bot that is not configured is refused
	// by the API, shown under the form, and nothing changes.
	run(t, bctx, "edit with a bad default bot",
		browsertest.Click(row+` button[data-act="edit-policy"]`),
		set("default_bot", "nobody"),
		browsertest.Click(`#policy button[data-act="save-policy"]`),
	)
	waitText(t, bctx, `#policy [role="status"]`, `default_bot "nobody" is not a configured bot`)
	screens(t, bctx, "people-policy-refused")
	if v := value(t, bctx, "the form's listed", browsertest.FieldValue(in("listed"))); v != "telegram:777, slack:T1:U9" {
		t.Errorf("Edit filled listed with %q", v)
	}
	if got := stored(); !reflect.DeepEqual(got.Listed, want.Listed) || got.DefaultBot != "pm" {
		t.Fatalf("a refused policy changed the stored one: %+v", got)
	}

	// A good change replaces the policy as a whole.
	run(t, bctx, "change it",
		set("default_bot", "eng"),
		set("mode", "disabled"),
		browsertest.Click(`#policy button[data-act="save-policy"]`),
	)
	waitText(t, bctx, row, "mode disabled")
	if v := value(t, bctx, "the form's status", browsertest.Text(`#policy [role="status"]`)); v != "" {
		t.Errorf("after a good save the form still says %q", v)
	}
	if p, err := tm.eng.Policy(ctx, "slack/acme", "T1:C1"); err != nil || p.Mode != core.ModeDisabled || p.DefaultBot != "eng" || p.Budget.Tokens != 50000 {
		t.Fatalf("the changed policy = %+v (%v)", p, err)
	}
	screens(t, bctx, "people-policy")
	run(t, bctx, "the page on a phone", viewport(390, 844, true), chromedp.WaitVisible(chromedp.CSS(row)))
	if w := value(t, bctx, "the page's width", chromedp.Evaluate[int](`document.scrollingElement.scrollWidth`)); w > 390 {
		t.Errorf("on a phone the People page with a policy and its form is %d px wide, want at most 390", w)
	}
	run(t, bctx, "back to a laptop", viewport(1280, 800, false))

	run(t, bctx, "remove it",
		browsertest.Click(row+` button[data-act="unpolicy"]`),
		chromedp.WaitVisible(chromedp.CSS(row+` button.danger[data-act="unpolicy"]`)),
		browsertest.Click(row+` button[data-act="unpolicy"]`),
		chromedp.WaitNotPresent(chromedp.CSS(row)),
	)
	waitText(t, bctx, "#flash", "The policy of "+where+" is removed")
	if pols, err := tm.eng.Policies(ctx); err != nil || len(pols) != 0 {
		t.Fatalf("policies after removal = %+v (%v)", pols, err)
	}
	if line := activity("policy.removed"); !strings.Contains(line, where) || !strings.Contains(line, "Operator") {
		t.Errorf("the removal's activity line = %q", line)
	}
}
