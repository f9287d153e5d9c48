package core_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
	"openbot/store/bolt"
)

// nopAdapter delivers instantly and counts.
type nopAdapter struct{ n atomic.Int64 }

func (*nopAdapter) Account() core.AccountID { return "bench/nop" }
func (*nopAdapter) Bot() string             { return "*" }
func (a *nopAdapter) Deliver(context.Context, core.Delivery) (string, error) {
	return fmt.Sprint("p", a.n.Add(1)), nil
}

// BenchmarkOutboxBurstHeap sends one message to each of 5,000 conversations
// through the outbox and a no-op adapter, then reports the live heap and goroutine
// stack the delivery lanes keep per conversation while they are still within
// their idle period (DESIGN.md §4 delivery lanes; aim: heap under 2 KB per
// conversation active in the last 30 s). With OPENBOT_HEAP_PROFILE set, it writes
// a heap profile of that moment to the named file.
func BenchmarkOutboxBurstHeap(b *testing.B) {
	const convs = 5000
	for range b.N {
		b.StopTimer()
		st, err := bolt.Open(filepath.Join(b.TempDir(), "burst.db"), bolt.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		err = st.Update(context.Background(), func(tx core.Tx) error {
			th, err := tx.PutThread(core.Thread{Key: "burst"})
			if err != nil {
				return err
			}
			for i := range convs {
				m, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: core.SystemActor, Kind: core.KindNotice, Text: fmt.Sprint("hello ", i)})
				if err != nil {
					return err
				}
				o := core.OutboxEntry{Account: "bench/nop", Conversation: core.ConversationRef(fmt.Sprint("conv", i)), Thread: th.ID, Message: m.ID, Status: core.OutboxPending}
				if _, err := tx.PutOutbox(o); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		ad := &nopAdapter{}
		eng, err := core.New(core.Options{Store: st, Agent: &scriptAgent{}, Bots: team})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.AddAdapter(ad); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		before := memNow()
		b.StartTimer()
		go func() { done <- eng.Run(ctx) }()
		if err := eng.WaitIdle(ctx); err != nil { // every entry settled: none is pending
			b.Fatal(err)
		}
		if n := ad.n.Load(); n != convs {
			b.Fatalf("%d deliveries, want %d", n, convs)
		}
		for {
			if _, running, _ := core.LaneStats(eng); running == 0 {
				break
			}
			// Needed: a lane's goroutine returns just after its last entry
			// settled and the lanes signal nothing then; the stacks measured
			// below are those left once they have. A millisecond's poll keeps
			// the CPUs for them (a spin would not).
			time.Sleep(time.Millisecond) // a poll of the lane count, as the comment above says
		}
		b.StopTimer()
		after := memNow()
		if path := os.Getenv("OPENBOT_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/convs, "heapB/conv")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/convs, "stackB/conv")
		b.ReportMetric(float64(after.HeapSys+after.StackSys)/(1<<20), "heap+stackMiB")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		_ = st.Close()
	}
}

func memNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
