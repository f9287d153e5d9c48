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
