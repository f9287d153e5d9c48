package waitctx

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
}

func TestEveryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() { calls <- struct{}{} })
	}()
	<-calls
	<-calls
	cancel()
	<-done
}

func TestClosed(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	open := make(chan struct{})
	if Closed(done, open) {
		t.Error("Closed(done ctx, open channel) = true, want false")
	}
	if !Closed(done, nil) {
		t.Error("Closed(ctx, nil) = false, want true")
	}
	close(open)
	if !Closed(context.Background(), open) {
		t.Error("Closed(ctx, closed channel) = false, want true")
	}
}
