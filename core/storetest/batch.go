package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"openbot/core"
)

// testBatchRerun runs concurrent Batch calls, every fourth of which fails. A store
// may run a function more than once (a failing neighbour in its group makes the
// group roll back and run again), and only the last run's writes land: what a
// function captures must be reset at its start, as core's Ingest does. The suite
// checks that each successful caller's captured IDs name what was stored, that each
// failing caller got its own error with nothing written, and that the others were
// not taken down with it.
func testBatchRerun(t *testing.T, s core.Store) {
	const n = 48
	type result struct {
		thread core.ThreadID
		msg    core.MessageID
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i)
			var r result
			r.err = s.Batch(context.Background(), func(tx core.Tx) error {
				r = result{} // this run may not be the last
				th, err := tx.PutThread(core.Thread{Key: key})
				if err != nil {
					return err
				}
				m, err := tx.PutMessage(core.Message{Thread: th.ID, Text: key})
				if err != nil {
					return err
				}
				if err := tx.MarkSeen(key, m.ID); err != nil {
					return err
				}
				if i%4 == 3 {
					return fmt.Errorf("call %d: %w", i, errBoom)
				}
				r.thread, r.msg = th.ID, m.ID
				return nil
			})
			results[i] = r
		}()
	}
	wg.Wait()
	view(t, s, func(tx core.ReadTx) error {
		threads := 0
		for i, r := range results {
			key := fmt.Sprintf("k%d", i)
			if i%4 == 3 {
				if !errors.Is(r.err, errBoom) || r.err.Error() != fmt.Sprintf("call %d: boom", i) {
					t.Errorf("failing call %d returned %v, want its own error", i, r.err)
				}
				_, err := tx.Seen(key)
				wantNotFound(t, "Seen of failed "+key, err)
				continue
			}
			threads++
			if r.err != nil {
				t.Errorf("call %d failed with %v; a neighbour's failure must not fail it", i, r.err)
				continue
			}
			wantEqual(t, "Seen("+key+") vs captured message", get(tx.Seen(key)).must(t), r.msg)
			m := get(tx.Message(r.msg)).must(t)
			wantEqual(t, "captured message's text", m.Text, key)
			wantEqual(t, "captured message's thread", m.Thread, r.thread)
			wantEqual(t, "captured thread's key", get(tx.Thread(r.thread)).must(t).Key, key)
		}
		wantEqual(t, "threads stored", len(get(tx.Threads(0)).must(t)), threads)
		return nil
	})
}
