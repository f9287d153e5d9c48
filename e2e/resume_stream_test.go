package e2e

// A run killed while it streams (DESIGN.md §6, §8): the messages it streamed
// are recorded on the run, so the run resumed after the kill edits them into
// its reply instead of leaving them in the chat.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
	"openbot/store/bolt"
)

// jobAgent is a core.Agent running a function.
type jobAgent func(ctx context.Context, job *core.Job) (core.Result, error)

func (f jobAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	return f(ctx, job)
}

// deadAdapter passes a streaming adapter's calls on until the process it
// stands for is killed; from then on nothing reaches the platform, and it
// polls no more.
type deadAdapter struct {
	*telegram.Adapter
	dead   *atomic.Bool
	killed <-chan struct{}
}

func (a *deadAdapter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return a.Adapter.Run(ctx)
}

func (a *deadAdapter) Stream(ctx context.Context, s core.StreamDelivery) ([]string, error) {
	if a.dead.Load() {
		return s.Posted, errKilled
	}
	return a.Adapter.Stream(ctx, s)
}

func (a *deadAdapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	if a.dead.Load() {
		return "", errKilled
	}
	return a.Adapter.Deliver(ctx, d)
}

// TestResumeKilledStreamingRunLeavesNoStrayMessage: the first process streams
// a work line into the Telegram chat and is killed (its store and its platform
// calls stop at once, nothing is cleaned up); the next process resumes the run,
// and the chat ends with exactly one bot message, the reply, in the message the
// killed run had posted.
func TestResumeKilledStreamingRunLeavesNoStrayMessage(t *testing.T) {
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	fake.AddBot(telegramtest.Bot{Token: tgStreamToken, ID: 900, Username: "chief_bot"})
	path := filepath.Join(t.TempDir(), "openbot.db")
	var dead atomic.Bool
	var st *killStore
	var firstRun core.RunID
	recorded := func() bool {
		ok := false
		_ = st.View(context.Background(), func(tx core.ReadTx) error {
			r, err := tx.Run(firstRun)
			ok = err == nil && len(r.Streamed) == 1 && len(r.Streamed[0].IDs) == 1
			return nil
		})
		return ok
	}
	agent := jobAgent(func(ctx context.Context, job *core.Job) (core.Result, error) {
		ts := job.Env.(core.TextStreamer)
		if job.Restart {
			ts.StreamText("resuming the work")
			return core.Result{Reply: "final answer"}, nil
		}
		firstRun = job.Run.ID
		if err := job.Env.Checkpoint(ctx, json.RawMessage(`{"step":1}`)); err != nil {
			return core.Result{}, err
		}
		ts.StreamWorking("shell")
		if err := until(ctx, nil, 0, "the streamed work line and its record", func() bool { return len(fake.Messages(tgStreamToken)) == 1 && recorded() }); err != nil {
			return core.Result{}, err
		}
		dead.Store(true) // SIGKILL: no platform call, no store write from here on
		st.kill()
		<-ctx.Done()
		return core.Result{}, ctx.Err()
	})
	start := func(wrap bool) *proc {
		bst, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st = newKillStore(bst)
		p := openProc(t, "", core.Options{Store: st, Agent: agent})
		ad, err := telegram.New(telegram.Options{Name: "chief", Bot: "chief_of_staff", Token: tgStreamToken,
			APIEndpoint: fake.URL(), DMPolicy: "open", Bots: e2eTeam, Engine: p.eng,
			Cursors: telegram.StoreCursors(st), Streaming: true})
		if err != nil {
			t.Fatal(err)
		}
		if wrap {
			p.run(&deadAdapter{Adapter: ad, dead: &dead, killed: st.killed})
		} else {
			p.run(ad)
		}
		return p
	}

	first := start(true)
	up := `{"update_id":1,"message":{"message_id":11,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"first_name":"Alice","type":"private"},"date":1767225660,"text":"how are things?"}}`
	if _, err := fake.PushUpdate(tgStreamToken, []byte(up)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.killed:
	case <-time.After(20 * time.Second):
		t.Fatalf("never killed; messages %+v", fake.Messages(tgStreamToken))
	}
	first.stop()
	left := fake.Messages(tgStreamToken)
	if len(left) != 1 {
		t.Fatalf("after the kill the chat has %d bot messages, want the work line", len(left))
	}

	second := start(false)
	ctx := second.ctx()
	want := telegram.Format("final answer")
	if err := until(ctx, nil, 0, "the reply", func() bool {
		for _, m := range fake.Messages(tgStreamToken) {
			if m.Text == want {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("%v; messages %+v", err, fake.Messages(tgStreamToken))
	}
	second.idle()
	var got []string
	for _, m := range fake.Messages(tgStreamToken) {
		got = append(got, fmt.Sprintf("%d:%s", m.ID, m.Text))
	}
	if len(got) != 1 || got[0] != fmt.Sprintf("%d:%s", left[0].ID, want) {
		t.Fatalf("bot messages = %q, want only the reply, edited into the streamed message %d", got, left[0].ID)
	}
	err := st.View(ctx, func(tx core.ReadTx) error {
		r, err := tx.Run(firstRun)
		if err == nil && (r.Status != core.RunCompleted || len(r.Streamed) != 0) {
			err = fmt.Errorf("run is %s with streamed %v, want completed with none recorded", r.Status, r.Streamed)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
