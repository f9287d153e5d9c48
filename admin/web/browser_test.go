package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
	"openbot/internal/browsertest"
)

// The browser helpers are internal/browsertest's, under this package's short names.
var browser = browsertest.Browser

func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	return browsertest.Value(t, ctx, what, a)
}

// viewport sets the page's size; mobile emulates a phone (touch, mobile
// viewport).
func viewport(w, h int64, mobile bool) chromedp.Action[chromedp.Void] {
	if mobile {
		return chromedp.EmulateViewport(w, h, chromedp.EmulateMobile)
	}
	return chromedp.EmulateViewport(w, h)
}

var run, waitText = browsertest.Run, browsertest.WaitText

// TestDashboardInBrowser drives the dashboard in headless Chromium over a real
// engine: @eng asks to run the "lookup" tool, which needs approval. The
// operator signs in with the admin token, opens the thread from the list,
// expands the run and sees the tool call with its arguments, approves the
// pending question in the thread, and watches the tool's result and the bot's
// reply arrive in the open page through the event stream; a later message is
// shown without any action.
func TestDashboardInBrowser(t *testing.T) {
	tm := startTeam(t)
	tm.llm.Enqueue(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"disk usage"}`}},
			Usage: openaitest.Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 50}},
		openaitest.Text("The disk is 41% full."),
	)
	tm.say(t, "ops", "Dana", "@eng how full is the disk?")

	ctx := browser(t)
	run(t, ctx, "open the sign-in page", chromedp.Navigate(tm.url+"/"))
	run(t, ctx, "sign in",
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-nav="threads"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pending:not([hidden])`)),
	)
	run(t, ctx, "open the thread from the list",
		browsertest.Click(`nav a[data-nav="threads"]`),
		chromedp.WaitVisible(chromedp.CSS(`table a[href^="#/threads/"]`)),
		browsertest.Click(`table a[href^="#/threads/"]`),
		chromedp.WaitVisible(chromedp.CSS(`details.run summary`)),
	)
	text := value(t, ctx, "first message", browsertest.Text(`.feed .msg`))
	if !strings.Contains(text, "how full is the disk?") {
		t.Fatalf("first message = %q", text)
	}
	run(t, ctx, "expand the run",
		browsertest.Click(`details.run summary`),
		chromedp.WaitVisible(chromedp.CSS(`li[data-tool="lookup"] pre.args`)),
	)
	text = value(t, ctx, "arguments", browsertest.Text(`li[data-tool="lookup"] pre.args`))
	if !strings.Contains(text, `"disk usage"`) {
		t.Fatalf("tool call arguments = %q", text)
	}
	results := value(t, ctx, "no result yet", chromedp.Evaluate[[]string](`[...document.querySelectorAll('li[data-tool="lookup"] pre.result')].map(e => e.textContent)`))
	if len(results) != 0 {
		t.Fatalf("a result before the approval: %q", results)
	}
	run(t, ctx, "approve in the thread",
		chromedp.WaitVisible(chromedp.CSS(`.feed [data-question] button[data-answer="approve"]`)),
		browsertest.Click(`.feed [data-question] button[data-answer="approve"]`),
	)
	run(t, ctx, "the tool's result and the reply arrive live",
		chromedp.WaitVisible(chromedp.CSS(`li[data-tool="lookup"] pre.result`)),
	)
	text = value(t, ctx, "result", browsertest.Text(`li[data-tool="lookup"] pre.result`))
	if !strings.Contains(text, `found {"q":"disk usage"}`) {
		t.Fatalf("tool result = %q", text)
	}
	waitText(t, ctx, ".feed", "The disk is 41% full.")
	run(t, ctx, "the question is gone", chromedp.WaitNotPresent(chromedp.CSS(`.feed [data-question]`)))
	// With nothing pending, the approvals count in the menu is not shown (no red "0").
	run(t, ctx, "the pending count hides", chromedp.WaitNotVisible(chromedp.CSS(`#pending`)))

	// A message that arrives while the page is open is shown without a reload.
	tm.llm.Enqueue(openaitest.Text("You're welcome."))
	tm.say(t, "ops", "Dana", "@eng thanks")
	waitText(t, ctx, ".feed", "You're welcome.")

	usageView(t, ctx)
	memoryView(t, ctx, tm)

	if dir := os.Getenv("OPENBOT_SCREENSHOTS"); dir != "" {
		screenshots(t, ctx, tm, dir)
	}
}

// usageView checks the usage view shows the ledger over the chosen range:
// model calls, cached tokens and their share, cost with two decimals and the
// currency (the exact amount on hover), a uPlot chart, @eng's budget bar, the
// series by model from the API and its CSV export.
func usageView(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "open the usage view",
		browsertest.Click(`nav a[data-nav="usage"]`),
		chromedp.WaitVisible(chromedp.CSS(`td[data-label="Cost"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.chart .uplot canvas`)),
	)
	caption := value(t, ctx, "caption", browsertest.Text(`main p.muted`))
	if !strings.Contains(caption, "Model calls recorded in the usage ledger") {
		t.Errorf("usage caption = %q", caption)
	}
	cells := value(t, ctx, "the bot row", chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelector("table.stack tbody tr").querySelectorAll("td")].map(c => [c.dataset.label, c.textContent]))`))
	if cells["Bot"] != "@eng" || cells["Model calls"] != "3" || cells["Cached"] != "400" || cells["Cache hits"] == "" {
		t.Errorf("usage by bot = %v, want @eng with 3 model calls and 400 cached tokens", cells)
	}
	model := value(t, ctx, "the model row", chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll("td[data-label='Profile/model']")[0].parentElement.querySelectorAll("td")].map(c => [c.dataset.label, c.textContent]))`))
	if model["Profile/model"] != "default/gpt-test" || model["Provider"] != "openai" || model["Model calls"] != "3" || model["Fallbacks"] != "0" {
		t.Errorf("usage by model = %v, want default/gpt-test on openai with 3 model calls", model)
	}
	// 600 input at 2.00, 400 cached at 0.50 and 50 output at 8.00 per million
	// tokens are 0.0018; the two other calls add their estimated tokens.
	twoDecimals := regexp.MustCompile(`^(< 0\.01|\d+\.\d\d) USD$`)
	if c := cells["Cost"]; !twoDecimals.MatchString(c) || c == "0.00 USD" {
		t.Errorf("usage cost = %q, want an amount above 0 with two decimals and the currency", c)
	}
	exact := value(t, ctx, "exact cost", chromedp.Evaluate[string](`document.querySelector('td[data-label="Cost"] .money').title`))
	if !strings.HasPrefix(exact, "0.00") || !strings.HasSuffix(exact, " USD") {
		t.Errorf("usage cost on hover = %q, want the exact amount", exact)
	}
	bar := value(t, ctx, "budget", browsertest.Text(`.budget[data-budget="@eng today"]`))
	if !regexp.MustCompile(`^@eng: (< 0\.01|0\.\d\d) USD of 5\.00 USD today$`).MatchString(bar) {
		t.Errorf("budget bar = %q", bar)
	}
	run(t, ctx, "by model, per hour",
		chromedp.SetValue(chromedp.CSS(`select[data-control="by"]`), "model"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('select[data-control="by"]').dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(chromedp.CSS(`th:first-child`)),
	)
	waitText(t, ctx, "table.stack tbody tr", "gpt-test")
	var sp struct {
		Currency string
		Step     string
		Series   []struct {
			Key        string
			CostMicros []int64 `json:"cost_micros"`
		}
	}
	raw := value(t, ctx, "the spend API", chromedp.Evaluate[string](`fetch("/api/v1/spend?by=model&step=hour").then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		t.Fatal(err)
	}
	if len(sp.Series) != 1 || sp.Series[0].Key != "gpt-test" || sp.Step != "hour" || sp.Currency != "USD" {
		t.Fatalf("spend by model per hour = %s", raw)
	}
	var sum int64
	for _, c := range sp.Series[0].CostMicros {
		sum += c
	}
	if sum < 1800 {
		t.Errorf("spend of gpt-test = %d micros, want at least 1800", sum)
	}
	href := value(t, ctx, "csv link", chromedp.Evaluate[string](`document.querySelector('a[data-act="csv"]').getAttribute("href")`))
	csv := value(t, ctx, "the CSV", chromedp.Evaluate[string](`fetch(`+quote(href)+`).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if !strings.HasPrefix(csv, "bucket_start_utc,model,tokens,cost,currency\n") || !strings.Contains(csv, ",gpt-test,") || !strings.Contains(csv, ",USD") {
		t.Errorf("CSV export = %q", csv)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// screenshots saves each page at laptop (1280x800) and phone (390x844) size
// into dir (OPENBOT_SCREENSHOTS=dir; to look at the dashboard, not a check).
func screenshots(t *testing.T, ctx context.Context, tm *team, dir string) {
	t.Helper()
	tm.llm.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c2", Name: "lookup", Arguments: `{"q":"error rate, last hour"}`}}})
	tm.say(t, "ops", "Dana", "@eng and the error rate?")
	tm.llm.Enqueue(openaitest.Text("Draft release notes are in the doc; two items need a decision."))
	tm.say(t, "release", "Sam", "@pm draft the release notes for 2.4")
	time.Sleep(500 * time.Millisecond) // let the live redraws settle before the capture
	for _, size := range []struct {
		name string
		w, h int64
		mob  bool
	}{{"laptop", 1280, 800, false}, {"phone", 390, 844, true}} {
		for _, page := range []string{"", "threads", "threads/1", "chat", "approvals", "activity", "usage", "memory", "people"} {
			name := strings.ReplaceAll(page, "/", "-")
			if name == "" {
				name = "team"
			}
			run(t, ctx, "screenshot "+name,
				viewport(size.w, size.h, size.mob),
				chromedp.Navigate(tm.url+"/#/"+page),
				chromedp.WaitVisible(chromedp.CSS(`main > div`)),
				chromedp.Sleep(300*time.Millisecond),
				chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
					_, err := chromedp.Evaluate[any](`document.querySelectorAll('details.run').forEach(d => d.open = true)`)(ctx, t)
					return err
				}),
				chromedp.Sleep(300*time.Millisecond),
			)
			buf := value(t, ctx, "capture", chromedp.FullScreenshot(100))
			if err := os.WriteFile(filepath.Join(dir, size.name+"-"+name+".png"), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// memoryView checks the memory view lists a bot's memory with the run it came
// from, and edits and deletes it through the API (with the CSRF header).
func memoryView(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	var m core.Memory
	if err := tm.st.Update(context.Background(), func(tx core.Tx) (err error) {
		m, err = tx.PutMemory(core.Memory{Bot: "eng", Text: "Deploys go out on Tuesdays.", Source: core.MemorySourceReflection, Run: 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open the memory view",
		browsertest.Click(`nav a[data-nav="memory"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-memory] .memory-text`)),
	)
	picker := value(t, ctx, "the bot picker", browsertest.Text(`p.bots`))
	if strings.TrimSpace(picker) != "@eng @pm" {
		t.Errorf("memory bot picker = %q, want the handles as links", picker)
	}
	row := value(t, ctx, "the memory row", browsertest.Text(`tr[data-memory]`))
	if !strings.Contains(row, "Deploys go out on Tuesdays.") || !strings.Contains(row, "reflection") || !strings.Contains(row, "run #1") {
		t.Errorf("memory row = %q, want the text, its source and run", row)
	}
	run(t, ctx, "edit the memory",
		browsertest.Click(`tr[data-memory] button[data-act="edit"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-memory] textarea`)),
		chromedp.SetValue(chromedp.CSS(`tr[data-memory] textarea`), "Deploys go out on Wednesdays."),
		browsertest.Click(`tr[data-memory] button[data-act="save"]`),
	)
	waitText(t, ctx, "tr[data-memory] .memory-text", "Deploys go out on Wednesdays.")
	if err := tm.st.View(context.Background(), func(tx core.ReadTx) error {
		got, err := tx.Memory(m.ID)
		if err == nil && got.Text != "Deploys go out on Wednesdays." {
			t.Errorf("stored memory after edit = %q", got.Text)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "delete the memory",
		browsertest.Click(`tr[data-memory] button[data-act="delete"]`),
		browsertest.Click(`tr[data-memory] button[data-act="delete"]`),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-memory]`)),
	)
	if err := tm.st.View(context.Background(), func(tx core.ReadTx) error {
		if _, err := tx.Memory(m.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("memory after delete: %v, want not found", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalShowsCommandInBrowser: the approvals page shows a shell approval
// as the real shell tool asks for it: the warning about its encoded payload, the
// command itself, whole, and the reach with the call's timeout.
func TestApprovalShowsCommandInBrowser(t *testing.T) {
	list, err := tools.Builtins(tools.Options{WorkspaceRoot: t.TempDir(), Sandbox: tools.SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	var shell agents.Tool
	for _, tl := range list {
		if tl.Name() == "shell" {
			shell = tl
		}
	}
	tm := startTeam(t, shell)
	cmd := "echo " + strings.Repeat("ZWNobyBoZWxsbyB3b3JsZAo", 200) + " | base64 -d | sh"
	args, _ := json.Marshal(map[string]any{"command": cmd, "timeout_seconds": 30})
	tm.llm.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "shell", Arguments: string(args)}}})
	tm.say(t, "ops", "Dana", "@eng run the installer")

	ctx := browser(t)
	run(t, ctx, "sign in and open the approvals",
		chromedp.Navigate(tm.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-nav="approvals"]`)),
		browsertest.Click(`nav a[data-nav="approvals"]`),
		chromedp.WaitVisible(chromedp.CSS(`.question pre.command`)),
	)
	if got := value(t, ctx, "command", chromedp.Evaluate[string](`document.querySelector(".question pre.command").textContent`)); got != cmd {
		t.Errorf("the page shows %d characters of the command, want all %d", len(got), len(cmd))
	}
	if got := value(t, ctx, "warning", browsertest.Text(`.question .warning`)); !strings.Contains(got, "⚠ This command decodes hidden content (base64) and runs it") {
		t.Errorf("warning = %q", got)
	}
	if got := value(t, ctx, "reach", browsertest.Text(`.question .reach`)); !strings.Contains(got, "WITHOUT a sandbox") || !strings.Contains(got, "Timeout: 30 s.") {
		t.Errorf("reach = %q", got)
	}
	if dir := os.Getenv("OPENBOT_SCREENSHOTS"); dir != "" {
		buf := value(t, ctx, "capture", chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, "approval-shell.png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOwnerApprovesWithShippedConfig: with config.example.yaml as shipped (no
// approvers, no owners, only admin.token set), a chat person's tool call waits
// for an approval they may not give themselves, and the dashboard's operator,
// an owner by default, approves it in the browser.
func TestOwnerApprovesWithShippedConfig(t *testing.T) {
	cfg, err := config.Load("../../config.example.yaml", func(k string) (string, bool) {
		v, ok := map[string]string{"OPENBOT_ADMIN_TOKEN": token, "OPENAI_API_KEY": "sk-test"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	var owners, approvers []core.ActorID
	for _, id := range cfg.OwnerIDs() {
		owners = append(owners, core.ActorID(id))
	}
	for _, id := range cfg.Approvers {
		approvers = append(approvers, core.ActorID(id))
	}
	tm := startTeamAs(t, people{identity: core.ActorID(cfg.Admin.Identity), name: cfg.Admin.Name, owners: owners, approvers: approvers})
	tm.llm.Enqueue(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"disk"}`}}},
		openaitest.Text("The disk is fine."),
	)
	tm.say(t, "dana", "Dana", "@eng check the disk")
	qs, err := tm.eng.Questions(context.Background(), true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions %+v, %v; want the approval waiting", qs, err)
	}
	if res, err := tm.eng.Answer(context.Background(), core.Answer{Question: qs[0].ID, Choice: core.ChoiceApprove, Actor: "console:Dana"}); err != nil || res.Outcome != core.AnswerForbidden {
		t.Fatalf("the asker's own approval: %+v, %v; want forbidden", res, err)
	}

	ctx := browser(t)
	run(t, ctx, "sign in and open the approvals",
		chromedp.Navigate(tm.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-nav="approvals"]`)),
		browsertest.Click(`nav a[data-nav="approvals"]`),
		chromedp.WaitVisible(chromedp.CSS(`.question button[data-answer="approve"]`)),
		browsertest.Click(`.question button[data-answer="approve"]`),
		chromedp.WaitNotPresent(chromedp.CSS(`.question button[data-answer="approve"]`)),
	)
	var all []core.Question
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if all, _ = tm.eng.Questions(context.Background(), false); len(all) == 1 && all[0].Status != core.QuestionPending {
			break
		}
		time.Sleep(20 * time.Millisecond) // polls the store for the click's answer; not an ordering sleep
	}
	if len(all) != 1 || !all[0].Approved() || all[0].AnsweredBy != core.ActorID(config.DefaultOperator) {
		t.Fatalf("questions %+v, want approved by the operator", all)
	}
}
