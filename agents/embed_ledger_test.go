package agents_test

import (
	"context"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
)

// ledger returns every usage-ledger entry of st.
func ledger(t *testing.T, st core.Store) []core.UsageEntry {
	t.Helper()
	return storetest.Read(t, st, func(tx core.ReadTx) ([]core.UsageEntry, error) { return tx.UsageEntries(0, 1000) })
}

// Every embeddings call is one usage-ledger entry (cost control): a memory
// write and a recall for the bot, an index batch for no bot, each with the
// response's input tokens, priced, and a repeated request counted once.
func TestEmbeddingCallsInLedger(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	st := openStore(t, "")
	base, err := newAgent(t, srv, agents.Options{}).Embedder("default", "e")
	if err != nil {
		t.Fatal(err)
	}
	emb := base.WithLedger(storetest.RerunFromEnv(st), map[string]core.Price{"e": {Input: 2_000_000}}, &memClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, nil)
	mem, err := agents.NewMemories(agents.MemoryOptions{Store: storetest.RerunFromEnv(st), Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	text := "ann drinks green tea every morning with lemon"
	if _, err := mem.Apply(ctx, agents.MemoryChange{Bot: "ann", Source: core.MemorySourceTool}, []agents.MemoryOp{{Op: "insert", Text: text}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Search(ctx, "ann", "what does ann drink", 5); err != nil {
		t.Fatal(err)
	}
	var th core.Thread
	if err := st.Update(ctx, func(tx core.Tx) (err error) {
		if th, err = tx.PutThread(core.Thread{Key: "t"}); err != nil {
			return err
		}
		_, err = tx.PutMessage(core.Message{Thread: th.ID, Sender: "u:alice", SenderName: "Alice", Text: "the release shipped today"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := mem.MessageIndex().IndexPending(ctx); err != nil || n != 1 {
		t.Fatalf("IndexPending = %d, %v", n, err)
	}
	// The same request again (a retry) is not counted twice.
	if _, err := emb.EmbedFor(ctx, "ann", []string{text}); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.EmbeddingRequests()); got != 4 {
		t.Fatalf("%d embeddings requests, want 4", got)
	}
	es := ledger(t, st)
	if len(es) != 3 {
		t.Fatalf("%d ledger entries, want 3 (write, recall, index): %+v", len(es), es)
	}
	wantBots := []string{"ann", "ann", ""}
	for i, e := range es {
		if e.Bot != wantBots[i] || e.Profile != "default" || e.Model != "e" || e.InputTokens <= 0 || e.OutputTokens != 0 {
			t.Errorf("entry %d = %+v, want bot %q, default/e, input tokens", i, e, wantBots[i])
		}
		if e.CostMicros != 2*e.InputTokens {
			t.Errorf("entry %d costs %d, want %d", i, e.CostMicros, 2*e.InputTokens)
		}
	}
	if e := es[0]; e.InputTokens != int64(len(text)/4) {
		t.Errorf("write entry has %d input tokens, want the response's %d", e.InputTokens, len(text)/4)
	}
	var botDay, all core.UsageTotal
	if err := st.View(ctx, func(tx core.ReadTx) (err error) {
		if botDay, err = tx.UsageTotal(core.BotDayScope("ann", es[0].At)); err != nil {
			return err
		}
		all, err = tx.UsageTotal(core.GlobalDayScope(es[0].At))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if botDay.Calls != 2 || all.Calls != 3 {
		t.Errorf("totals: bot day %d calls, global day %d, want 2 and 3", botDay.Calls, all.Calls)
	}
}
