package core_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"openbot/core"
)

// countingStore counts read-write transactions (Update and Batch calls) that
// store a message under a dedup key, that is, ingest transactions.
type countingStore struct {
	core.Store
	writes atomic.Int64
}

// seenTx notes a MarkSeen.
type seenTx struct {
	core.Tx
	marked *bool
}

func (t seenTx) MarkSeen(key string, m core.MessageID) error {
	*t.marked = true
	return t.Tx.MarkSeen(key, m)
}

// count runs a write through write with fn seeing a seenTx, and counts it
// when it committed after a MarkSeen: one per call, however many times the
// store ran fn (a store that retries a transaction runs it again).
func (s *countingStore) count(write func(func(core.Tx) error) error, fn func(core.Tx) error) error {
	marked := false
	err := write(func(tx core.Tx) error { return fn(seenTx{tx, &marked}) })
	if marked && err == nil {
		s.writes.Add(1)
	}
	return err
}

func (s *countingStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	return s.count(func(fn func(core.Tx) error) error { return s.Store.Update(ctx, fn) }, fn)
}

func (s *countingStore) Batch(ctx context.Context, fn func(core.Tx) error) error {
	return s.count(func(fn func(core.Tx) error) error { return s.Store.Batch(ctx, fn) }, fn)
}

func batchInbound(conv, n int) core.Inbound {
	return core.Inbound{Account: "console/local", Platform: "console",
		DedupKey: fmt.Sprintf("console:%d:%d", conv, n), ThreadKey: fmt.Sprintf("console:c%d", conv),
		Conversation: core.ConversationRef(fmt.Sprintf("c%d", conv)), PlatformID: fmt.Sprintf("in%d", n),
		SenderID: "console:you", SenderName: "you", Text: fmt.Sprintf("@engineer message %d", n), StartThread: true}
}

// TestIngestBatchOneTransaction: 100 messages in 10 conversations are stored in
// one read-write transaction, each once, in order within its thread; a message
// repeated inside the batch is a duplicate, and every conversation's bot runs.
func TestIngestBatchOneTransaction(t *testing.T) {
	h := newHarness(t, core.Limits{})
	cs := &countingStore{}
	h.opts = func(o *core.Options) { cs.Store = o.Store; o.Store = cs }
	h.start()
	var ins []core.Inbound
	for n := range 100 {
		ins = append(ins, batchInbound(n%10, n))
	}
	ins = append(ins, ins[3]) // redelivered within the batch
	before := cs.writes.Load()
	out := h.eng.IngestBatch(context.Background(), ins)
	if got := cs.writes.Load() - before; got != 1 {
		t.Errorf("IngestBatch used %d write transactions, want 1", got)
	}
	if len(out) != len(ins) {
		t.Fatalf("got %d outcomes for %d inbounds", len(out), len(ins))
	}
	threads := map[core.ThreadID]bool{}
	for i, o := range out[:100] {
		if o.Err != nil || o.Result.Message == 0 || o.Result.Duplicate {
			t.Fatalf("outcome %d = %+v", i, o)
		}
		threads[o.Result.Thread] = true
	}
	if last := out[100]; last.Err != nil || !last.Result.Duplicate || last.Result.Message != out[3].Result.Message {
		t.Errorf("the repeated message: %+v, want a duplicate of %+v", last, out[3])
	}
	if len(threads) != 10 {
		t.Fatalf("%d threads, want 10", len(threads))
	}
	for id := range threads {
		var prev int
		humans := 0
		for _, m := range h.messages(id) {
			if m.Sender != "console:you" {
				continue
			}
			humans++
			var n int
			fmt.Sscanf(m.Text, "@engineer message %d", &n)
			if humans > 1 && n <= prev {
				t.Errorf("thread %d: message %d after %d", id, n, prev)
			}
			prev = n
		}
		if humans != 10 {
			t.Errorf("thread %d has %d human messages, want 10", id, humans)
		}
	}
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n < 10 {
		t.Errorf("engineer ran %d times, want at least one run per conversation (10)", n)
	}
}

// TestIngestBatchFailingItemKeepsOthers: an invalid message and one whose store
// work fails (it targets a thread that does not exist) get their own errors; the
// messages around them are stored.
func TestIngestBatchFailingItemKeepsOthers(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	invalid := batchInbound(1, 2)
	invalid.SenderID = ""
	broken := batchInbound(1, 3)
	broken.Thread = 9999
	ins := []core.Inbound{batchInbound(1, 1), invalid, broken, batchInbound(1, 4)}
	out := h.eng.IngestBatch(context.Background(), ins)
	if out[1].Err == nil || out[2].Err == nil {
		t.Errorf("bad messages were accepted: %+v, %+v", out[1], out[2])
	}
	for _, i := range []int{0, 3} {
		if out[i].Err != nil || out[i].Result.Message == 0 {
			t.Fatalf("message %d lost: %+v", i, out[i])
		}
	}
	ms := h.messages(out[0].Result.Thread)
	humans := 0
	for _, m := range ms {
		if m.Sender == "console:you" {
			humans++
		}
	}
	if humans != 2 {
		t.Errorf("%d human messages stored, want 2", humans)
	}
}

// inboundCounter records Observer.Inbound outcomes.
type inboundCounter struct {
	core.NopObserver
	mu sync.Mutex
	n  map[string]int
}

func (c *inboundCounter) Inbound(_, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[outcome]++
}

// TestIngestBatchIsObserved: messages stored by IngestBatch are counted like
// those of Ingest (metrics: inbound by outcome).
func TestIngestBatchIsObserved(t *testing.T) {
	h := newHarness(t, core.Limits{})
	obs := &inboundCounter{n: map[string]int{}}
	h.opts = func(o *core.Options) { o.Observer = obs }
	h.start()
	ins := []core.Inbound{batchInbound(0, 0), batchInbound(0, 1), batchInbound(1, 2)}
	ins = append(ins, ins[0])
	h.eng.IngestBatch(context.Background(), ins)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.n[core.InboundIngested] != 3 || obs.n[core.InboundDuplicate] != 1 {
		t.Errorf("observed %v, want 3 ingested and 1 duplicate", obs.n)
	}
}
