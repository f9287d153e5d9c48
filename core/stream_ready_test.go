package core

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// nopStreamer is a Streamer that posts nothing.
type nopStreamer struct{}

func (nopStreamer) StreamInterval() time.Duration { return time.Millisecond }

func (nopStreamer) Stream(context.Context, StreamDelivery) ([]string, error) { return nil, nil }

// TestStreamReadyEndsAtStop: finish does not wait for a first post whose run's
// ingest has not landed (ready blocks until its context ends): ready's context is
// cancelled when the stream is stopped, not left to run into a timeout.
func TestStreamReadyEndsAtStop(t *testing.T) {
	e := &Engine{clock: systemClock{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	entered := make(chan struct{})
	var readyErr error
	s := &stream{e: e, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		targets: []*streamTarget{{ad: nopStreamer{}, every: time.Millisecond}},
		ready: func(ctx context.Context) error {
			close(entered)
			<-ctx.Done() // an ingest that never lands
			readyErr = ctx.Err()
			return readyErr
		}}
	go s.loop(context.Background())
	s.StreamText("Hel")
	<-entered
	s.finish()
	if !errors.Is(readyErr, context.Canceled) {
		t.Fatalf("ready ended with %v, want its context cancelled by the stop", readyErr)
	}
}
