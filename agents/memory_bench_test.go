package agents_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/bolt"
)

// BenchmarkRecall is the prompt-building cost of memory: ranking 10 or 10,000
// memories of one bot for a run's triggers, lexically and by embeddings (the
// vectors already stored). Reported, not asserted.
func BenchmarkRecall(b *testing.B) {
	srv := openaitest.New(b)
	for _, n := range []int{10, 10000} {
		for _, emb := range []bool{false, true} {
			b.Run(fmt.Sprintf("memories=%d/embeddings=%v", n, emb), func(b *testing.B) {
				st, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), bolt.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				agent, _ := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: srv.URL(), Model: "m"}}})
				mo := agents.MemoryOptions{Store: st}
				if emb {
					mo.Embedder, _ = agent.Embedder("default", "e")
				}
				mem, _ := agents.NewMemories(mo)
				ops := make([]agents.MemoryOp, n)
				for i := range ops {
					ops[i] = agents.MemoryOp{Op: "insert", Text: fmt.Sprintf("note %d about topic %d and convention %d", i, i%97, i%13)}
				}
				if _, err := mem.Apply(context.Background(), agents.MemoryChange{Bot: "eng", Source: core.MemorySourceOperator}, ops); err != nil {
					b.Fatal(err)
				}
				bot := core.BotProfile{Handle: "eng"}
				b.ResetTimer()
				for range b.N {
					if _, err := mem.Recall(context.Background(), bot, "what is the convention for topic 42", 8); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReflection is the cost of reflecting one run (model call on the
// fake, ranking of related memories, one transaction). Reported, not asserted.
func BenchmarkReflection(b *testing.B) {
	srv := openaitest.New(b)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		return openaitest.Text(`{"operations": [{"op": "insert", "text": "a lesson"}]}`)
	})
	st, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	agent, _ := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: srv.URL(), Model: "m"}}})
	mem, _ := agents.NewMemories(agents.MemoryOptions{Store: st})
	clock := &memClock{}
	refl, _ := agents.NewReflector(agents.ReflectorOptions{Store: st, Agent: agent, Memories: mem, Clock: clock})
	ctx := context.Background()
	if err := st.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutBot(core.BotProfile{Handle: "eng", Memory: true}); err != nil {
			return err
		}
		_, err := tx.PutThread(core.Thread{Key: "t"})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := st.Update(ctx, func(tx core.Tx) error {
			_, err := tx.PutPendingReflection(core.PendingReflection{Bot: "eng", Thread: 1, Run: core.RunID(i + 1), Reply: "done the task"})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := refl.ReflectDue(ctx, true); err != nil {
			b.Fatal(err)
		}
	}
}
