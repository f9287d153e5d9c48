package core_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
)

// A store that runs write transactions concurrently (snapshot isolation) rolls
// a transaction back on a conflict and runs its callback again on a fresh
// snapshot. storetest.Rerun stands for that on bbolt: every callback runs
// twice, the first run's writes discarded.

// TestRerunDiscardsTheFirstRun: the wrapper runs fn twice and keeps the
// second run's writes only; a failing first run is not run again.
func TestRerunDiscardsTheFirstRun(t *testing.T) {
	st := boltStore(t)
	between := 0
	rs := storetest.Rerun(st, func() { between++ })
	ctx := context.Background()
	for i, write := range []func(context.Context, func(core.Tx) error) error{rs.Update, rs.Batch} {
		runs := 0
		err := write(ctx, func(tx core.Tx) error {
			runs++
			_, err := tx.PutThread(core.Thread{Key: "k", Created: time.Now()})
			return err
		})
		if err != nil || runs != 2 {
			t.Fatalf("write: err %v, fn ran %d times, want 2", err, runs)
		}
		var n int
		if err := st.View(ctx, func(tx core.ReadTx) error {
			ts, err := tx.Threads(0)
			n = len(ts)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Errorf("after %d writes %d threads are stored: the first run's write was kept", i+1, n)
		}
	}
	if between != 2 {
		t.Errorf("between ran %d times, want 2", between)
	}
	runs := 0
	boom := errors.New("boom")
	if err := rs.Update(ctx, func(core.Tx) error { runs++; return boom }); !errors.Is(err, boom) || runs != 1 {
		t.Errorf("failing fn: err %v after %d runs, want boom after 1", err, runs)
	}
	runs = 0
	if err := rs.View(ctx, func(core.ReadTx) error { runs++; return nil }); err != nil || runs != 2 {
		t.Errorf("View: err %v, fn ran %d times, want 2", err, runs)
	}
	runs = 0
	if err := rs.View(ctx, func(core.ReadTx) error { runs++; return boom }); !errors.Is(err, boom) || runs != 1 {
		t.Errorf("failing View fn: err %v after %d runs, want boom after 1", err, runs)
	}
	if between != 2 {
		t.Errorf("between ran %d times after the Views, want 2 (writes only)", between)
	}
}

// TestGaugesUnderRerun: a store may run a View callback again (after a lost
// connection, core.Store.View), so Gauges counts each queued item, pending
// question, run and outbox entry once on a store whose reads run twice.
func TestGaugesUnderRerun(t *testing.T) {
	st := boltStore(t)
	ctx := context.Background()
	if err := st.Update(ctx, func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "k", Created: time.Now()})
		if err != nil {
			return err
		}
		for range 2 {
			if _, err := tx.PutItem(core.InboxItem{Actor: "bot:engineer", Thread: th.ID, Kind: core.ItemMessage, Status: core.ItemQueued}); err != nil {
				return err
			}
		}
		run, err := tx.PutRun(core.Run{Bot: "bot:qa", Thread: th.ID, Status: core.RunQueued})
		if err != nil {
			return err
		}
		if _, err := tx.PutQuestion(core.Question{Token: "t1", Kind: core.QuestionAsk, Run: run.ID, Bot: "bot:qa", Thread: th.ID,
			Status: core.QuestionPending, Choice: -1}); err != nil {
			return err
		}
		_, err = tx.PutOutbox(core.OutboxEntry{Account: "console/local", Conversation: "main", Thread: th.ID, Status: core.OutboxPending})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var gauges [2]core.Gauges
	for i, s := range []core.Store{st, storetest.Rerun(st, nil)} {
		eng, err := core.New(core.Options{Store: s, Agent: &scriptAgent{}, Bots: team})
		if err != nil {
			t.Fatal(err)
		}
		if gauges[i], err = eng.Gauges(ctx); err != nil {
			t.Fatal(err)
		}
	}
	once, twice := gauges[0], gauges[1]
	if once.Mailbox["engineer"] != 2 || once.OutboxPending != 1 || len(once.Runs) != 1 || len(once.PendingQuestions) != 1 {
		t.Fatalf("the store's own gauges miss the seeded records: %+v", once)
	}
	if !reflect.DeepEqual(twice, once) {
		t.Errorf("Gauges on reads that run twice = %+v, want %+v", twice, once)
	}
}

// TestEngineUnderRerun runs a representative set of the engine's tests on a
// store whose write callbacks all run twice (OPENBOT_TEST_RERUN runs them all
// so): ingest, pick, settle, hand-offs, questions, cancel, budgets, restart.
func TestEngineUnderRerun(t *testing.T) {
	t.Setenv(storetest.RerunEnv, "1")
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Reply", TestHumanMessageGetsDefaultBotReply},
		{"Coalesce", TestMessagesWhileBusyCoalesceIntoOneRun},
		{"HeldHandoff", TestHeldHandoffDeliveredAfterQueuedMail},
		{"Duplicate", TestDuplicateDeliveryStoredOnce},
		{"IngestBatch", TestIngestBatchOneTransaction},
		{"Approval", TestApprovalApprovedRunsOnceAndResolves},
		{"AnswerByReply", TestAskHumanAnsweredByReply},
		{"QuestionExpiry", TestQuestionExpiryRejects},
		{"CancelWaiting", TestCancelWaitingRun},
		{"BudgetWarning", TestBudgetWarningPostedOnce},
		{"Restart", TestRestartRecovery},
		{"Shared", TestShared},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// TestTakeLeaseRetryDecidesAfresh: when the store runs the lease's
// transaction again after another process dropped the lease, the second run
// takes it, and the caller is told so, not that the other process holds it.
func TestTakeLeaseRetryDecidesAfresh(t *testing.T) {
	st := boltStore(t)
	ctx := context.Background()
	key := core.LeaseKeyIngress("telegram/chief")
	if err := st.Update(ctx, func(tx core.Tx) error {
		return tx.PutLease(core.Lease{Key: key, Owner: "other#1", Until: time.Now().Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	dropped := false
	rs := storetest.Rerun(st, func() {
		if dropped {
			return
		}
		dropped = true // the other process lets go between the two runs
		if err := st.Update(ctx, func(tx core.Tx) error { return tx.DeleteLease(key) }); err != nil {
			t.Error(err)
		}
	})
	eng, err := core.New(core.Options{Store: rs, Agent: &scriptAgent{}, Bots: team, Shared: true, ProcessID: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	until, holder, err := core.TakeLease(ctx, eng, key)
	if err != nil || holder != "" || until.IsZero() {
		t.Fatalf("TakeLease = until %v, holder %q, err %v; want it taken", until, holder, err)
	}
	var l core.Lease
	if err := st.View(ctx, func(tx core.ReadTx) error { l, err = tx.Lease(key); return err }); err != nil {
		t.Fatal(err)
	}
	if l.Owner != eng.ClaimOwner() {
		t.Errorf("stored lease owner %q, want %q", l.Owner, eng.ClaimOwner())
	}
}
