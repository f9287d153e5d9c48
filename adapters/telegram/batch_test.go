package telegram

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"openbot/core"
)

// batchFake is a fakeEngine with IngestBatch; it records the size of each batch.
type batchFake struct {
	*fakeEngine
	mu    sync.Mutex
	sizes []int
	// failText, when set, fails the first ingest of the message with that text.
	failText string
}

func (b *batchFake) IngestBatch(ctx context.Context, ins []core.Inbound) []core.IngestOutcome {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(ins))
	b.mu.Unlock()
	out := make([]core.IngestOutcome, len(ins))
	for i, in := range ins {
		b.mu.Lock()
		fail := b.failText != "" && in.Text == b.failText
		if fail {
			b.failText = ""
		}
		b.mu.Unlock()
		if fail {
			out[i].Err = errors.New("disk full")
			continue
		}
		out[i].Result, out[i].Err = b.Ingest(ctx, in)
	}
	return out
}

func privateMsg(id int64, text string) []byte {
	return fmt.Appendf(nil, `{"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":%d,"type":"private"},"date":1767225600,"text":%q}}`,
		id, aliceID, aliceID, text)
}

// TestBatchOfUpdatesOneOffsetSave: 100 updates fetched by one getUpdates are
// stored in one IngestBatch call, in update order, and the offset is saved once,
// past the last of them.
func TestBatchOfUpdatesOneOffsetSave(t *testing.T) {
	e := newEnv(t)
	var last int64
	for i := range 100 {
		last = e.push(t, privateMsg(int64(i+1), fmt.Sprintf("message %d", i+1)))
	}
	be := &batchFake{fakeEngine: e.eng}
	opts := e.options()
	opts.Engine = be
	a := e.adapter(t, opts)
	run(t, a)
	got := e.eng.ins.Wait(t, 100)
	e.waitConfirmed(t, last+1)
	for i, in := range got {
		if want := fmt.Sprintf("message %d", i+1); in.Text != want {
			t.Fatalf("inbound %d is %q, want %q", i, in.Text, want)
		}
	}
	be.mu.Lock()
	sizes := append([]int(nil), be.sizes...)
	be.mu.Unlock()
	if len(sizes) != 1 || sizes[0] != 100 {
		t.Errorf("IngestBatch calls of sizes %v, want one of 100", sizes)
	}
	e.cursors.mu.Lock()
	sets := e.cursors.sets
	e.cursors.mu.Unlock()
	if sets != 1 {
		t.Errorf("offset saved %d times, want once", sets)
	}
	if v := e.cursors.get("telegram/main/offset"); v != fmt.Sprint(last+1) {
		t.Errorf("offset %q, want %d", v, last+1)
	}
}

// TestBatchKeepsOrderAroundCommands: a /new between plain messages is handled on
// its own, after the messages before it were stored, and the message after it
// starts the new conversation.
func TestBatchKeepsOrderAroundCommands(t *testing.T) {
	e := newEnv(t)
	e.push(t, privateMsg(1, "before"))
	e.push(t, []byte(`{"message":{"message_id":2,"from":{"id":100000001,"is_bot":false,"first_name":"Alice","username":"alice_example"},"chat":{"id":100000001,"type":"private"},"date":1,"text":"/new","entities":[{"offset":0,"length":4,"type":"bot_command"}]}}`))
	e.push(t, privateMsg(3, "after"))
	last := e.push(t, privateMsg(4, "later"))
	be := &batchFake{fakeEngine: e.eng}
	opts := e.options()
	opts.Engine = be
	run(t, e.adapter(t, opts))
	got := e.eng.ins.Wait(t, 3)
	e.waitConfirmed(t, last+1)
	if got[0].Text != "before" || got[0].NewThread || got[1].Text != "after" || !got[1].NewThread || got[2].Text != "later" || got[2].NewThread {
		t.Errorf("inbounds %+v", got)
	}
}

// TestBatchFailedUpdateKeepsEarlierOnes: when one update of an answer is not
// stored, the offset is saved past the updates before it (they are durable) and
// the answer is polled again from the failed one; the updates after it that were
// stored come again and are recognised as duplicates.
func TestBatchFailedUpdateKeepsEarlierOnes(t *testing.T) {
	e := newEnv(t)
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.push(t, privateMsg(int64(i+1), fmt.Sprintf("message %d", i+1))))
	}
	be := &batchFake{fakeEngine: e.eng, failText: "message 3"}
	opts := e.options()
	opts.Engine = be
	cursors := &recordingCursors{fakeCursors: e.cursors}
	opts.Cursors = cursors
	run(t, e.adapter(t, opts))
	e.waitConfirmed(t, ids[4]+1)
	offsets := cursors.offsets()
	want := []string{fmt.Sprint(ids[2]), fmt.Sprint(ids[4] + 1)}
	if !slices.Equal(offsets, want) {
		t.Errorf("offsets saved %v, want %v (past the two stored updates, then past all)", offsets, want)
	}
	var texts []string
	for _, in := range e.eng.ins.All() {
		texts = append(texts, in.Text)
	}
	if want := []string{"message 1", "message 2", "message 4", "message 5", "message 3", "message 4", "message 5"}; !slices.Equal(texts, want) {
		t.Errorf("ingested %v, want %v", texts, want)
	}
}

// recordingCursors records every offset saved.
type recordingCursors struct {
	*fakeCursors
	mu  sync.Mutex
	got []string
}

func (c *recordingCursors) SetCursor(ctx context.Context, name, value string) error {
	if name == "telegram/main/offset" {
		c.mu.Lock()
		c.got = append(c.got, value)
		c.mu.Unlock()
	}
	return c.fakeCursors.SetCursor(ctx, name, value)
}

func (c *recordingCursors) offsets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}
