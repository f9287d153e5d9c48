package main

import (
	"context"
	"fmt"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
	"openbot/store/bolt"
)

// oneByOne hides core.Engine.IngestBatch, so the Telegram poller stores each
// update in its own transaction: the comparison figure of pollingRate.
type oneByOne struct{ eng *core.Engine }

func (o oneByOne) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	return o.eng.Ingest(ctx, in)
}

func (o oneByOne) Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error) {
	return o.eng.Answer(ctx, a)
}

// pollingRate queues n private messages over 100 chats at a fake Bot API, runs a
// Telegram poller over a fresh store at path, and returns how many updates per
// second it stored and confirmed (the offset saved past the last). The engine is
// not started, so no run competes for the machine: this is the intake alone.
// batched false stores each update in its own transaction.
func pollingRate(ctx context.Context, path string, n int, batched bool) (float64, error) {
	fake := telegramtest.NewServer(telegramtest.Bot{Token: benchTgToken, ID: 100000, Username: "bench_bot", Name: "Bench"})
	defer fake.Close()
	var last int64
	for i := range n {
		id, err := fake.PushUpdate(benchTgToken, tgBenchUpdate(i, int64(1_000_000+i%100)))
		if err != nil {
			return 0, err
		}
		last = id
	}
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	eng, err := core.New(core.Options{Store: st, Agent: benchAgent{}, Bots: []core.BotProfile{{Handle: "chief_of_staff"}}})
	if err != nil {
		return 0, err
	}
	var engine telegram.Engine = eng
	if !batched {
		engine = oneByOne{eng}
	}
	ad, err := telegram.New(telegram.Options{Name: "bench", Bot: "chief_of_staff", Token: benchTgToken, APIEndpoint: fake.URL(),
		DMPolicy: telegram.DMOpen, Engine: engine, Cursors: telegram.StoreCursors(st), PollTimeout: time.Second})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ad.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer wcancel()
	select {
	case <-ad.IngressReady():
	case err := <-done:
		done <- err
		return 0, fmt.Errorf("telegram poller stopped: %v", err)
	case <-wctx.Done():
		return 0, wctx.Err()
	}
	start := time.Now()
	if err := fake.WaitConfirmed(wctx, benchTgToken, last+1); err != nil {
		return 0, fmt.Errorf("updates not confirmed (at %d of %d): %w", fake.Confirmed(benchTgToken), last+1, err)
	}
	// Confirmed is the offset the next getUpdates sent, after the poller saved it.
	return float64(n) / time.Since(start).Seconds(), nil
}
