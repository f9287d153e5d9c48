package e2e

import (
	"context"
	"errors"
	"sync"
	"time"

	"openbot/core"
)

// streamScript is what a streaming test agent does in a run: it shows text
// through ts and returns the reply.
type streamScript func(ctx context.Context, ts core.TextStreamer) (string, error)

// streamAgent runs streamScript for every run (core.Agent).
type streamAgent struct{ script streamScript }

func (a *streamAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	ts, ok := job.Env.(core.TextStreamer)
	if !ok {
		return core.Result{}, errors.New("the run env does not stream")
	}
	reply, err := a.script(ctx, ts)
	return core.Result{Reply: reply}, err
}

// stepClock is a core.Clock the test moves on.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock() *stepClock { return &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// until waits for cond. With a clock, it moves the clock on by step between
// checks: a stream edits again only once its interval passed on the clock.
func until(ctx context.Context, clock *stepClock, step time.Duration, what string, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + what)
		case <-t.C:
		}
		if clock != nil {
			clock.advance(step)
		}
	}
	return nil
}
