package core_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// TestOwnAccountAndFallback: a bot's reply goes out through its own account when
// that account is in the conversation; when the platform refuses it (not a member),
// the reply goes through the binding's other account and the refused one is
// remembered, so the next reply takes the other account directly (DESIGN.md §3).
func TestOwnAccountAndFallback(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agent := &scriptAgent{reply: map[string]func(context.Context, *core.Job) (string, error){}}
	eng, err := core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: agent, Bots: team, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	teamApp := &recAdapter{id: "slack/team", bot: "*"}
	engApp := &recAdapter{id: "slack/eng", bot: "engineer"}
	qaApp := &recAdapter{id: "slack/qa", bot: "qa", fail: func(int, core.Delivery) error { return permanent{} }}
	for _, a := range []core.Adapter{teamApp, engApp, qaApp} {
		if err := eng.AddAdapter(a); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	// One human message seen by all three apps (each app's copy is a duplicate),
	// stored before the engine runs so every app is known in the conversation.
	for _, acct := range []core.AccountID{"slack/team", "slack/eng", "slack/qa"} {
		_, err := eng.Ingest(ctx, core.Inbound{Account: acct, Platform: "slack", DedupKey: "slack:T:C:1.0", ThreadKey: "slack:T:C:1.0",
			Conversation: "T:C:1.0", SenderID: "slack:T:U1", SenderName: "Ann", Text: "@engineer and @qa please look", StartThread: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = eng.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	<-eng.Ready()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := eng.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	if got := engApp.texts(); len(got) != 1 || got[0] != "[engineer] ok from engineer" {
		t.Fatalf("engineer's own app delivered %q, want its reply", got)
	}
	if got := teamApp.texts(); len(got) != 1 || got[0] != "[qa] ok from qa" {
		t.Fatalf("team app delivered %q, want only qa's reply, rerouted after qa's own app was refused", got)
	}
	if qaApp.n != 1 {
		t.Fatalf("qa's own app was tried %d times, want 1", qaApp.n)
	}
	// Remembered: qa's next reply in that conversation goes straight to the team app.
	if _, err := eng.Ingest(ctx, core.Inbound{Account: "slack/team", Platform: "slack", DedupKey: "slack:T:C:2.0", ThreadKey: "slack:T:C:1.0",
		Conversation: "T:C:1.0", SenderID: "slack:T:U1", SenderName: "Ann", Text: "@qa again"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	if qaApp.n != 1 || len(teamApp.texts()) != 2 {
		t.Fatalf("after the refusal: qa app tried %d times, team app delivered %q", qaApp.n, teamApp.texts())
	}
}
