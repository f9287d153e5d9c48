package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/admin"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
)

// post POSTs body to url and returns the status and the body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// threadTexts returns the texts of every message of the console thread.
func (tm *team) threadTexts(t *testing.T) string {
	t.Helper()
	var out []string
	if err := tm.st.View(context.Background(), func(tx core.ReadTx) error {
		id, err := tx.ThreadByKey("console:main")
		if err != nil {
			return err
		}
		ms, err := tx.Messages(id, 0, 0)
		for _, m := range ms {
			out = append(out, m.Text)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

func (tm *team) activityHas(t *testing.T, event, text string) bool {
	t.Helper()
	as := storetest.Read(t, tm.st, func(tx core.ReadTx) ([]core.Activity, error) { return tx.Activities(0, 0) })
	for _, a := range as {
		if a.Event == event && strings.Contains(a.Summary, text) {
			return true
		}
	}
	return false
}

// TestCancelRunInSlowTool: POST /runs/{id}/cancel interrupts a run blocked in a
// slow tool (real engine, fake model): the tool's context ends, the run ends
// cancelled, the thread is told the operator stopped it, the activity log
// names the admin identity; a second cancel answers 409, an unknown run 404.
func TestCancelRunInSlowTool(t *testing.T) {
	entered, ended := make(chan struct{}, 1), make(chan error, 1)
	slow := &agents.FuncTool{ToolName: "slow", Fn: func(ctx context.Context, _ agents.ToolCall) (string, error) {
		entered <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return "", ctx.Err()
	}}
	tm := startTeam(t, []core.BotProfile{{Handle: "eng", Name: "Eng", Tools: []string{"slow"}}}, "slack:T1:OPS", nil, slow)
	tm.llm.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "slow", Arguments: `{}`}}},
		openaitest.Text("should never be asked"))
	if _, err := tm.eng.Ingest(context.Background(), core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:1",
		ThreadKey: "console:main", Conversation: "main", PlatformID: "1", SenderID: "console:you", SenderName: "you",
		Text: "@eng do the slow thing", StartThread: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow tool was never called")
	}
	var runs pageOf[admin.RunSummary]
	getJSON(t, tm.api+"/runs", http.StatusOK, &runs)
	if len(runs.Items) != 1 || runs.Items[0].Status != core.RunRunning {
		t.Fatalf("runs = %+v", runs.Items)
	}
	url := fmt.Sprintf("%s/runs/%d/cancel", tm.api, runs.Items[0].ID)
	if code, body := post(t, url, ""); code != http.StatusOK || !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("cancel = %d %s", code, body)
	}
	if err := <-ended; err == nil {
		t.Fatal("the tool's context did not end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tm.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if texts := tm.threadTexts(t); !strings.Contains(texts, "@eng's work here was stopped by Operator.") || strings.Contains(texts, "should never") {
		t.Fatalf("thread:\n%s", texts)
	}
	if !tm.activityHas(t, "run.cancelled", "cancelled by Operator via admin/api") {
		t.Error("the activity log does not name the admin identity")
	}
	if code, body := post(t, url, ""); code != http.StatusConflict {
		t.Errorf("second cancel = %d %s, want 409", code, body)
	}
	if code, _ := post(t, tm.api+"/runs/999/cancel", ""); code != http.StatusNotFound {
		t.Errorf("unknown run = %d, want 404", code)
	}
}

// TestPauseAndStopViaAPI: a paused bot is shown paused by GET /bots and runs
// nothing; POST /threads/{id}/stop drops its queued items there; after resume
// a new message runs. Bad bodies answer 400, unknown bots 404.
func TestPauseAndStopViaAPI(t *testing.T) {
	tm := startTeam(t, []core.BotProfile{{Handle: "eng", Name: "Eng"}}, "slack:T1:OPS", nil)
	if code, body := post(t, tm.api+"/bots/eng/pause", ""); code != http.StatusOK || !strings.Contains(body, `"paused":true`) {
		t.Fatalf("pause = %d %s", code, body)
	}
	if code, _ := post(t, tm.api+"/bots/nobody/pause", ""); code != http.StatusNotFound {
		t.Errorf("pause unknown = %d", code)
	}
	var bots pageOf[admin.BotView]
	getJSON(t, tm.api+"/bots", http.StatusOK, &bots)
	if len(bots.Items) != 1 || bots.Items[0].Paused == nil || bots.Items[0].Paused.By != "slack:T1:OPS" {
		t.Fatalf("bots = %+v", bots.Items)
	}
	tm.say(t, "@eng one")
	tm.say(t, "@eng two")
	getJSON(t, tm.api+"/bots", http.StatusOK, &bots)
	if bots.Items[0].QueueDepth != 2 || bots.Items[0].RunsToday != 0 {
		t.Fatalf("paused bot: %+v", bots.Items[0])
	}
	var th pageOf[admin.ThreadSummary]
	getJSON(t, tm.api+"/threads", http.StatusOK, &th)
	if len(th.Items) != 1 {
		t.Fatalf("threads = %+v", th.Items)
	}
	stop := fmt.Sprintf("%s/threads/%d/stop", tm.api, th.Items[0].ID)
	if code, _ := post(t, stop, `{}`); code != http.StatusBadRequest {
		t.Errorf("stop without bot = %d", code)
	}
	if code, _ := post(t, stop, `{"bot":"ghost"}`); code != http.StatusNotFound {
		t.Errorf("stop unknown bot = %d", code)
	}
	if code, body := post(t, stop, `{"bot":"eng"}`); code != http.StatusOK || !strings.Contains(body, `"items":2`) {
		t.Fatalf("stop = %d %s", code, body)
	}
	if code, _ := post(t, tm.api+"/bots/eng/resume", ""); code != http.StatusOK {
		t.Fatalf("resume = %d", code)
	}
	tm.llm.Enqueue(openaitest.Text("three done"))
	tm.say(t, "@eng three")
	bots = pageOf[admin.BotView]{}
	getJSON(t, tm.api+"/bots", http.StatusOK, &bots)
	if bots.Items[0].Paused != nil || bots.Items[0].RunsToday != 1 || bots.Items[0].QueueDepth != 0 {
		t.Fatalf("resumed bot: %+v", bots.Items[0])
	}
	if !strings.Contains(tm.threadTexts(t), "three done") {
		t.Fatalf("thread:\n%s", tm.threadTexts(t))
	}
	for _, ev := range []string{"bot.paused", "bot.resumed", "inbox.stopped"} {
		if !tm.activityHas(t, ev, "Operator") {
			t.Errorf("no %s activity naming Operator", ev)
		}
	}
}
