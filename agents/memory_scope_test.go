package agents_test

import (
	"context"
	"strings"
	"testing"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
)

// TestInvariant10MemoryScope pins the seed's invariant 10 as far as it holds
// (bot-scoped, thread facts excluded by instruction): one bot's memory never
// reaches another bot's prompt, and the scope rule is given word for word to
// manage_memory, search_memory and every reflection call.
func TestInvariant10MemoryScope(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			return openaitest.Text(`{"operations": []}`)
		}
		return openaitest.Text("ok")
	})
	qa := core.BotProfile{Handle: "qa", Name: "QA", Memory: true}
	r := newMemRig(t, srv, "", false, memBot, qa)
	if _, err := r.mem.Apply(context.Background(), agents.MemoryChange{Bot: "engineer", Source: core.MemorySourceOperator},
		[]agents.MemoryOp{{Op: "insert", Text: "Engineer-only note about flaky tests."}}); err != nil {
		t.Fatal(err)
	}
	r.say("console:a", "@qa the flaky tests again")
	r.reflect()
	var qaReq *openaitest.Request
	for _, q := range srv.Requests() {
		if !isReflection(q) && strings.Contains(q.Body.Messages[0].Content, "(@qa)") {
			qaReq = &q
		}
	}
	if qaReq == nil {
		t.Fatal("no run of @qa")
	}
	if strings.Contains(promptText(*qaReq), "Engineer-only note") {
		t.Error("@engineer's memory reached @qa's prompt")
	}
	for _, tool := range qaReq.Body.Tools {
		if n := tool.Function.Name; (n == agents.ManageMemoryName || n == agents.SearchMemoryName) && !strings.Contains(tool.Function.Description, core.MemoryScopeRule) {
			t.Errorf("%s lacks the scope rule: %s", n, tool.Function.Description)
		}
	}
	refl := reflections(srv)
	if len(refl) != 1 {
		t.Fatalf("reflections = %d, want 1", len(refl))
	}
	sys := refl[0].Body.Messages[0].Content
	if !strings.Contains(sys, core.MemoryScopeRule) || strings.Contains(sys, "Engineer-only note") {
		t.Errorf("reflection of @qa: scope rule present %v, engineer's note present %v", strings.Contains(sys, core.MemoryScopeRule), strings.Contains(sys, "Engineer-only note"))
	}
}
