package core_test

import (
	"context"
	"path/filepath"
	"testing"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// writeCounter counts the read-write transactions (Update and Batch calls) that
// succeed.
type writeCounter struct {
	core.Store
	n int
}

func (s *writeCounter) Update(ctx context.Context, fn func(core.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.n++
	}
	return err
}

func (s *writeCounter) Batch(ctx context.Context, fn func(core.Tx) error) error {
	err := s.Store.Batch(ctx, fn)
	if err == nil {
		s.n++
	}
	return err
}

// TestPickStartsManyRunsInOneCommit: with messages queued in four threads (one of
// them twice), one pick of up to three runs starts three runs in three different
// threads in one write transaction, the thread with two messages coalesced into
// one run; the next pick starts the last thread's run.
func TestPickStartsManyRunsInOneCommit(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ws := &writeCounter{Store: storetest.RerunFromEnv(st)}
	eng, err := core.New(core.Options{Store: ws, Agent: &scriptAgent{}, Bots: team})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, conv := range []int{0, 0, 1, 2, 3} {
		if _, err := eng.Ingest(ctx, batchInbound(conv, i)); err != nil {
			t.Fatal(err)
		}
	}
	before := ws.n
	jobs, err := core.Pick(ctx, eng, "engineer", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := ws.n - before; got != 1 {
		t.Errorf("pick used %d write transactions, want 1", got)
	}
	if len(jobs) != 3 {
		t.Fatalf("pick started %d runs, want 3", len(jobs))
	}
	threads := map[core.ThreadID]bool{}
	for _, j := range jobs {
		if threads[j.Thread.ID] {
			t.Errorf("two runs in thread %d", j.Thread.ID)
		}
		threads[j.Thread.ID] = true
		if j.Run.Status != core.RunRunning {
			t.Errorf("run %d is %s, want running", j.Run.ID, j.Run.Status)
		}
	}
	if n := len(jobs[0].Triggers); n != 2 {
		t.Errorf("first thread's run has %d triggers, want its 2 messages coalesced", n)
	}
	more, err := core.Pick(ctx, eng, "engineer", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(more) != 1 || threads[more[0].Thread.ID] {
		t.Fatalf("second pick started %d runs, want the last thread's one", len(more))
	}
	if rest, err := core.Pick(ctx, eng, "engineer", 3); err != nil || len(rest) != 0 {
		t.Fatalf("third pick: %d runs, %v; want none", len(rest), err)
	}
}
