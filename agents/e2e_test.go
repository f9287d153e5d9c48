package agents_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
)

// recAdapter is a whole-team console account that records deliveries.
type recAdapter struct {
	mu  sync.Mutex
	got []core.Delivery
}

func (r *recAdapter) Account() core.AccountID { return "console/local" }
func (r *recAdapter) Bot() string             { return "*" }
func (r *recAdapter) Deliver(_ context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d)
	return fmt.Sprintf("p%d", len(r.got)), nil
}

func (r *recAdapter) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.got {
		out = append(out, "["+d.Sender.Handle+"] "+d.Text)
	}
	return out
}

// TestEndToEnd runs a delegation through the real engine, bolt store, agent and
// fake model: a person asks the chief, the chief hands off to the engineer, the
// engineer reports back without a mention, which ends the exchange.
func TestEndToEnd(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		sys := r.Body.Messages[0].Content
		switch {
		case strings.Contains(sys, "(@chief_of_staff)"):
			return openaitest.Text("@engineer implement the parser in pkg/parse; done when go test passes; report the commit")
		case strings.Contains(sys, "(@engineer)"):
			// A tool round trip first, then the answer.
			if len(r.Body.Messages) > 0 && r.Body.Messages[len(r.Body.Messages)-1].Role == "tool" {
				return openaitest.Text("parser implemented, commit abc123")
			}
			return openaitest.Calls(openaitest.Call("read_history", `{"limit":5}`))
		}
		return openaitest.Error(500, "unexpected bot")
	})
	bots := []core.BotProfile{
		{Handle: "chief_of_staff", Name: "Chief", Description: "coordinates"},
		{Handle: "engineer", Name: "Engineer", Description: "builds"},
	}
	er, _ := runEngine(t, "", core.Options{Agent: newAgent(t, srv, agents.Options{}), Bots: bots})
	eng, ad, ctx := er.eng, er.ad, context.Background()
	_, err := eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:1",
		ThreadKey: "console:main", Conversation: "main", PlatformID: "in1",
		SenderID: "console:you", SenderName: "you", Text: "@chief_of_staff we need a parser", StartThread: true})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := eng.WaitIdle(wctx); err != nil {
		t.Fatalf("WaitIdle: %v; delivered %q", err, ad.texts())
	}
	// Deliveries are asynchronous lanes; poll for both.
	waitFor(t, "both deliveries", func() bool { return len(ad.texts()) >= 2 })
	got := ad.texts()
	if len(got) != 2 || !strings.HasPrefix(got[0], "[chief_of_staff] @engineer implement") ||
		got[1] != "[engineer] parser implemented, commit abc123" {
		t.Fatalf("deliveries = %q", got)
	}
	// The engineer is a delegate: its view is scoped to the hand-off.
	var engReq *openaitest.Request
	for _, r := range srv.Requests() {
		if strings.Contains(r.Body.Messages[0].Content, "(@engineer)") {
			engReq = &r
			break
		}
	}
	if engReq == nil {
		t.Fatal("engineer never called the model")
	}
	if sys := promptText(*engReq); !strings.Contains(sys, "1 other message exists but is not shown") {
		t.Errorf("engineer prompt not scoped:\n%s", sys)
	}
	if raw := string(engReq.Raw); strings.Contains(raw, "we need a parser") || !strings.Contains(raw, "(new)") {
		t.Errorf("engineer history should hold only the (new) hand-off: %s", raw)
	}
}
