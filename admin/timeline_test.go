package admin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"openbot/admin"
	"openbot/core"
)

// TestFold: a tool result joins its call across a pause for approval and
// carries the decided question; tool errors (a bool) and model errors (a string,
// with a credential in it) read as text without the credential; unknown event
// types keep their payload, capped.
func TestFold(t *testing.T) {
	ev := func(seq uint64, typ, payload string) core.RunEvent {
		return core.RunEvent{Run: 1, Seq: seq, Type: typ, Payload: json.RawMessage(payload), At: t0}
	}
	big := `{"x":"` + strings.Repeat("a", 5000) + `"}`
	events := []core.RunEvent{
		ev(1, "status", `{"status":"running","triggers":[4]}`),
		ev(2, "model_call", `{"model":"m","prompt_tokens":5,"completion_tokens":1,"duration_ms":30,"tool_calls":1}`),
		ev(3, "tool_call", `{"id":"c1","name":"shell","args":"{\"command\":\"ls\"}"}`),
		ev(4, "status", `{"status":"waiting_human","question":7}`),
		ev(5, "status", `{"status":"running","resumed_by":7}`),
		ev(6, "tool_result", `{"id":"c1","name":"shell","question":7,"status":"answered","result":"a.txt","error":true,"duration_ms":4}`),
		ev(7, "model_call", `{"model":"m","error":"post https://u:hunter2@h/v1: refused"}`),
		ev(8, "text", big),
	}
	qs := map[core.QuestionID]core.Question{7: {ID: 7, Token: "secret", Kind: core.QuestionApproval, Tool: "shell", Status: core.QuestionAnswered,
		Choice: core.ChoiceApprove, AnsweredBy: "slack:T1:U1", AnsweredByName: "Alice"}}
	got := admin.Fold(events, qs)
	if len(got) != 7 {
		t.Fatalf("%d steps, want 7: %+v", len(got), got)
	}
	tool := got[2]
	if tool.Kind != "tool" || tool.Seq != 3 || tool.Args != `{"command":"ls"}` || !tool.Done || tool.Result != "a.txt" ||
		tool.DurationMS != 4 || tool.Error == "" || tool.Question == nil || tool.Question.Decision != "Approved by Alice" {
		t.Errorf("tool step = %+v", tool)
	}
	if got[3].Status != "waiting_human" || got[3].Question == nil || got[3].Question.Token != "" {
		t.Errorf("pause step = %+v", got[3])
	}
	if got[5].Kind != "model_call" || strings.Contains(got[5].Error, "hunter2") || got[5].Error == "" {
		t.Errorf("failed model call = %+v", got[5])
	}
	if got[6].Kind != "text" || !strings.Contains(string(got[6].Payload), "omitted_bytes") {
		t.Errorf("big payload = %.100s", got[6].Payload)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "secret") {
		t.Errorf("the timeline shows a button token: %s", b)
	}
}
