package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"openbot/admin"
	"openbot/admin/web"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
	"openbot/store/bolt"
)

const token = "dash-test-admin-token"

// sink is an adapter that accepts every delivery.
type sink struct {
	mu sync.Mutex
	n  int
}

func (s *sink) Account() core.AccountID { return "console/local" }
func (s *sink) Bot() string             { return "*" }
func (s *sink) Deliver(context.Context, core.Delivery) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("p%d", s.n), nil
}

// team is a real engine over a bolt store with the agent on the fake model and
// a "lookup" tool (and any more given to startTeam) that needs approval, served as cmd/openbot serves it: the
// dashboard at / and the console API under /api/v1/ behind the dashboard's
// Guard (the bearer side refuses: the browser has only its cookie).
type team struct {
	eng  *core.Engine
	st   core.Store
	llm  *openaitest.Server
	url  string
	seen int
}

func startTeam(t *testing.T, more ...agents.Tool) *team {
	t.Helper()
	const ops core.ActorID = "console:ops"
	return startTeamAs(t, people{identity: ops, name: "Operator", approvers: []core.ActorID{ops}}, more...)
}

// people are who the rig's engine and console API take as owners, approvers
// and the console's identity.
type people struct {
	identity          core.ActorID
	name              string
	owners, approvers []core.ActorID
}

func startTeamAs(t *testing.T, pp people, more ...agents.Tool) *team {
	t.Helper()
	llm := openaitest.New(t)
	reg := agents.NewRegistry()
	tools := []string{"lookup"}
	for _, tl := range append([]agents.Tool{&agents.FuncTool{ToolName: "lookup", Fn: func(_ context.Context, c agents.ToolCall) (string, error) {
		return "found " + string(c.Args), nil
	}}}, more...) {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
		if tl.Name() != "lookup" {
			tools = append(tools, tl.Name())
		}
	}
	ag, err := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: llm.URL(), Model: "gpt-test"}}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	n := admin.NewNotifier()
	st := admin.Notify(raw, n)
	bots := []core.BotProfile{
		{Handle: "eng", Name: "Engineer", Model: "gpt-test", Tools: tools, ApprovalTools: tools},
		{Handle: "pm", Name: "Product", Model: "gpt-test"},
	}
	prices := &core.Cost{Prices: map[string]core.Price{"gpt-test": {Input: 2_000_000, Cached: 500_000, Output: 8_000_000}},
		Currency: "USD", Bots: map[string]core.BotBudget{"eng": {Daily: core.Limit{CostMicros: 5_000_000}}}}
	eng, err := core.New(core.Options{Store: st, Agent: ag, Bots: bots, ShutdownGrace: 2 * time.Second,
		Owners: pp.owners, Approvers: pp.approvers, Cost: prices})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.AddAdapter(&sink{}); err != nil {
		t.Fatal(err)
	}
	chat := admin.NewChat(eng)
	if err := eng.AddAdapter(chat); err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, eng.Run)
	<-eng.Ready()
	api, err := admin.New(admin.Options{Store: st, Answerer: eng, Controller: eng, Bots: eng.Bots(), Identity: pp.identity, IdentityName: pp.name, Notifier: n, Tick: 200 * time.Millisecond,
		Cost: func() core.Cost { return *prices }, Chat: chat})
	if err != nil {
		t.Fatal(err)
	}
	d := web.New(web.Options{Token: token})
	mux := http.NewServeMux()
	d.Mount(mux)
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "unauthorized", http.StatusUnauthorized) })
	mux.Handle("/api/v1/", d.Guard(refuse, api))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.RegisterOnShutdown(api.Shutdown)
	hs.Start()
	t.Cleanup(func() { api.Shutdown(); hs.Close() })
	return &team{eng: eng, st: st, llm: llm, url: hs.URL}
}

// say posts a person's message into thread key and waits until the team is
// idle (a run waiting for an answer counts as idle).
func (tm *team) say(t *testing.T, key, who, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tm.post(t, key, who, text)
	if err := tm.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// post posts a person's message into thread key and returns once it is stored.
func (tm *team) post(t *testing.T, key, who, text string) {
	t.Helper()
	tm.seen++
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tm.eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", tm.seen),
		ThreadKey: "console:" + key, Conversation: core.ConversationRef(key), PlatformID: fmt.Sprint(tm.seen),
		SenderID: core.ActorID("console:" + who), SenderName: who, Text: text, StartThread: true}); err != nil {
		t.Fatal(err)
	}
}
