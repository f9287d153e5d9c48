package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/admin"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/internal/runtest"
)

// sink is an adapter that accepts every delivery.
type sink struct {
	mu  sync.Mutex
	got []core.Delivery
}

func (s *sink) Account() core.AccountID { return "console/local" }
func (s *sink) Bot() string             { return "*" }
func (s *sink) Deliver(_ context.Context, d core.Delivery) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, d)
	return fmt.Sprintf("p%d", len(s.got)), nil
}

// team is a real engine over a bolt store, with the agent on the fake model and
// a "lookup" tool, and the admin API over the same store.
type team struct {
	st   core.Store
	eng  *core.Engine
	api  string
	n    *admin.Notifier
	llm  *openaitest.Server
	seen int
}

func startTeam(t *testing.T, bots []core.BotProfile, identity core.ActorID, approvers []core.ActorID, extra ...agents.Tool) *team {
	t.Helper()
	llm := openaitest.New(t)
	reg := agents.NewRegistry()
	if err := reg.Add(&agents.FuncTool{ToolName: "lookup", Fn: func(_ context.Context, c agents.ToolCall) (string, error) {
		return "found " + string(c.Args), nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range extra {
		if err := reg.Add(tool); err != nil {
			t.Fatal(err)
		}
	}
	ag, err := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: llm.URL(), Model: "m"}}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	n := admin.NewNotifier()
	st := admin.Notify(openStore(t), n)
	eng, err := core.New(core.Options{Store: st, Agent: ag, Bots: bots, ShutdownGrace: 2 * time.Second, Approvers: approvers})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.AddAdapter(&sink{}); err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, eng.Run)
	<-eng.Ready()
	hs := serveAPI(t, admin.Options{Store: st, Answerer: eng, Controller: eng, Identity: identity, IdentityName: "Operator", Notifier: n})
	return &team{st: st, eng: eng, api: hs.URL + "/api/v1", n: n, llm: llm}
}

// say posts a person's message into the console thread and waits until the
// team is idle.
func (tm *team) say(t *testing.T, text string) {
	t.Helper()
	tm.seen++
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tm.eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", tm.seen),
		ThreadKey: "console:main", Conversation: "main", PlatformID: fmt.Sprint(tm.seen),
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}); err != nil {
		t.Fatal(err)
	}
	if err := tm.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRunTimeline: a scripted run (a model call that calls the lookup tool, the
// tool's result, a second model call that answers) is shown by GET /runs/{id}
// as a timeline that matches its stored run events step for step: model calls
// with their tokens and latency, the tool call with its arguments joined to its
// result, and the status changes.
func TestRunTimeline(t *testing.T) {
	tm := startTeam(t, []core.BotProfile{{Handle: "eng", Name: "Eng", Tools: []string{"lookup"}}}, "", nil)
	tm.llm.Enqueue(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"disk"}`}}, Usage: openaitest.Usage{PromptTokens: 11, CompletionTokens: 3}},
		openaitest.Reply{Text: "the disk is fine", Usage: openaitest.Usage{PromptTokens: 20, CompletionTokens: 5}},
	)
	tm.say(t, "@eng check the disk")

	var runs pageOf[admin.RunSummary]
	getJSON(t, tm.api+"/runs", http.StatusOK, &runs)
	if len(runs.Items) != 1 || runs.Items[0].Status != core.RunCompleted {
		t.Fatalf("runs = %+v", runs)
	}
	var d admin.RunDetail
	getJSON(t, fmt.Sprintf("%s/runs/%d", tm.api, runs.Items[0].ID), http.StatusOK, &d)
	events := storetest.Read(t, tm.st, func(tx core.ReadTx) ([]core.RunEvent, error) { return tx.RunEvents(d.ID) })
	// Every event is one step, except a tool result, which joins its call.
	var want []string
	for _, e := range events {
		var p map[string]any
		_ = json.Unmarshal(e.Payload, &p)
		switch e.Type {
		case "model_call":
			want = append(want, fmt.Sprintf("%d model_call %v+%v", e.Seq, p["prompt_tokens"], p["completion_tokens"]))
		case "tool_call":
			want = append(want, fmt.Sprintf("%d tool %v %v", e.Seq, p["name"], p["args"]))
		case "tool_result":
			for i, w := range want {
				if strings.Contains(w, fmt.Sprint(p["name"])) {
					want[i] += fmt.Sprintf(" -> %v", p["result"])
				}
			}
		case "status":
			want = append(want, fmt.Sprintf("%d status %v", e.Seq, p["status"]))
		default:
			want = append(want, fmt.Sprintf("%d %s", e.Seq, e.Type))
		}
	}
	var got []string
	for _, s := range d.Timeline {
		switch s.Kind {
		case "model_call":
			got = append(got, fmt.Sprintf("%d model_call %d+%d", s.Seq, s.PromptTokens, s.CompletionTokens))
		case "tool":
			got = append(got, fmt.Sprintf("%d tool %s %s -> %s", s.Seq, s.Tool, s.Args, s.Result))
		case "status":
			got = append(got, fmt.Sprintf("%d status %s", s.Seq, s.Status))
		default:
			got = append(got, fmt.Sprintf("%d %s", s.Seq, s.Kind))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant (from the run events):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	joined := strings.Join(got, "\n")
	for _, must := range []string{"model_call 11+3", `3 tool lookup {"q":"disk"} -> `, `found {"q":"disk"}`, "model_call 20+5", "status completed"} {
		if !strings.Contains(joined, must) {
			t.Errorf("timeline lacks %q:\n%s", must, joined)
		}
	}
	if d.Usage.PromptTokens != 31 || d.Usage.ModelCalls != 2 {
		t.Errorf("run usage = %+v", d.Usage)
	}
}

// TestAnswerAsAdmin: the console answers as the configured admin identity under
// the approver rules: refused while that identity is not an approver, accepted
// when it is, recorded with the identity in the activity log, and the run goes
// on with the tool run once.
func TestAnswerAsAdmin(t *testing.T) {
	bots := []core.BotProfile{{Handle: "eng", Name: "Eng", Tools: []string{"lookup"}, ApprovalTools: []string{"lookup"}}}
	for _, tc := range []struct {
		name      string
		approvers []core.ActorID
		want      int
	}{
		{"not an approver", []core.ActorID{"slack:T1:BOSS"}, http.StatusForbidden},
		{"approver", []core.ActorID{"slack:T1:OPS"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := startTeam(t, bots, "slack:T1:OPS", tc.approvers)
			tm.llm.Enqueue(openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"x"}`}}},
				openaitest.Text("done"))
			tm.say(t, "@eng look it up")
			var qs pageOf[admin.QuestionView]
			getJSON(t, tm.api+"/questions?status=pending", http.StatusOK, &qs)
			if len(qs.Items) != 1 || qs.Items[0].Tool != "lookup" {
				t.Fatalf("pending = %+v", qs)
			}
			url := fmt.Sprintf("%s/questions/%d/answer", tm.api, qs.Items[0].ID)
			resp, err := http.Post(url, "application/json", strings.NewReader(`{"decision":"approve"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("answer = %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want != http.StatusOK {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tm.eng.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			var acts pageOf[core.Activity]
			getJSON(t, tm.api+"/activity?kind=question.answered", http.StatusOK, &acts)
			if len(acts.Items) != 1 || acts.Items[0].Actor != "slack:T1:OPS" || !strings.Contains(acts.Items[0].Summary, "Approved by Operator via admin/api") {
				t.Errorf("activity = %+v", acts.Items)
			}
			resp, err = http.Post(url, "application/json", strings.NewReader(`{"decision":"reject"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict {
				t.Errorf("second answer = %d, want 409", resp.StatusCode)
			}
			var runs pageOf[admin.RunSummary]
			getJSON(t, tm.api+"/runs", http.StatusOK, &runs)
			if len(runs.Items) != 1 || runs.Items[0].Status != core.RunCompleted {
				t.Errorf("run after approval = %+v", runs.Items)
			}
		})
	}
	// Bad bodies are refused before anything is answered.
	tm := startTeam(t, bots, "slack:T1:OPS", nil)
	for _, body := range []string{`{}`, `{"decision":"maybe"}`, `{"decision":"approve","text":"x"}`, `not json`} {
		resp, err := http.Post(tm.api+"/questions/1/answer", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("answer %s = %d, want 400", body, resp.StatusCode)
		}
	}
}
