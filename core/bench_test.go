package core_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"openbot/core"
	"openbot/store/bolt"
)

// BenchmarkIngestParallel measures concurrent Engine.Ingest throughput (one
// Store.Batch transaction per message: dedup key, actor, thread, message, inbox
// item, outbox) on a synced bbolt file. Compare its ns/op with store/bolt's
// BenchmarkRawBatch in the same `go test -bench` run: the ratio raw/ingest ns/op is
// the figure (aim: at least 0.7 at par=64) at the same par (goroutines per core).
func BenchmarkIngestParallel(b *testing.B) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) { benchIngest(b, par) })
	}
}

// BenchmarkIngestLone is the latency of one Ingest with nobody else writing (one
// goroutine, fsync on): with group commit it is one commit, not a batch timer plus
// a commit. Its ns/op is the durable part of the event -> model request overhead.
func BenchmarkIngestLone(b *testing.B) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "lone.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	eng, err := core.New(core.Options{Store: st, Agent: &scriptAgent{}, Bots: team})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		_, err := eng.Ingest(ctx, core.Inbound{
			Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("k%d", n),
			ThreadKey: fmt.Sprintf("t%d", n%1000), Conversation: "main", SenderID: "console:you",
			SenderName: "you", Text: "@engineer please look", StartThread: true,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchIngest(b *testing.B, par int) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	eng, err := core.New(core.Options{Store: st, Agent: &scriptAgent{}, Bots: team})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	ctx := context.Background()
	b.SetParallelism(par) // concurrent platform events share commits
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			_, err := eng.Ingest(ctx, core.Inbound{
				Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("k%d", n),
				ThreadKey: fmt.Sprintf("t%d", n%1000), Conversation: "main", SenderID: "console:you",
				SenderName: "you", Text: "@engineer please look", StartThread: true,
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkModelCallMeter is what cost control adds to one model call of a
// run, on a synced bbolt file: BeforeModelCall then RecordModelCall, with no
// budget (the ledger entry's commit only) and with a daily token budget (a
// hold written before the call in its own commit, settled by the entry's).
// The difference of the two ns/op is the reservation's price per call.
func BenchmarkModelCallMeter(b *testing.B) {
	for _, budget := range []bool{false, true} {
		b.Run(fmt.Sprintf("budget=%v", budget), func(b *testing.B) {
			st, err := bolt.Open(filepath.Join(b.TempDir(), "meter.db"), bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			cost := &core.Cost{}
			if budget {
				cost.Bots = map[string]core.BotBudget{"*": {Daily: core.Limit{Tokens: 1 << 50}}}
			}
			agent := &scriptAgent{reply: map[string]func(context.Context, *core.Job) (string, error){}}
			done := make(chan error, 1)
			agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
				m := job.Env.(core.Meter)
				call := 0
				b.ResetTimer()
				for b.Loop() {
					call++
					c := core.ModelCall{Call: call, Model: "m", InputTokens: 1000, OutputTokens: 100}
					if err := m.BeforeModelCall(ctx, c); err != nil {
						done <- err
						return "", err
					}
					if err := m.RecordModelCall(ctx, c); err != nil {
						done <- err
						return "", err
					}
				}
				done <- nil
				return "done", nil
			}
			eng, err := core.New(core.Options{Store: st, Agent: agent, Bots: team, Cost: cost})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = eng.Run(ctx) }()
			if _, err := eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: "k",
				ThreadKey: "t", Conversation: "main", SenderID: "console:you", SenderName: "you", Text: "go", StartThread: true}); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
