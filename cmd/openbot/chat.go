package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"openbot/core"
)

// maxFailuresShown bounds how many failed runs piped chat lists on stderr.
const maxFailuresShown = 10

// runFailures wraps the agent of a piped `openbot chat` and remembers the runs of
// this session that failed, so the command can exit non-zero with their causes
// on stderr (scripts detect a failure by the exit code; the notice in the
// conversation is on stdout as always). Safe for concurrent runs.
type runFailures struct {
	core.Agent
	mu     sync.Mutex
	causes []string
	n      int
}

// Execute runs the wrapped agent and records a failure: an error, or the run's
// context ending (its time limit), as core itself counts it.
func (f *runFailures) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	res, err := f.Agent.Execute(ctx, job)
	cause := err
	if cause == nil {
		cause = ctx.Err()
	}
	if cause != nil {
		f.mu.Lock()
		f.n++
		if len(f.causes) < maxFailuresShown {
			f.causes = append(f.causes, fmt.Sprintf("@%s (run %d, thread #%d): %s", job.Bot.Handle, job.Run.ID, job.Thread.ID, shortCause(cause)))
		}
		f.mu.Unlock()
	}
	return res, err
}

// errRunsFailed is wrapped by runFailures.err.
var errRunsFailed = errors.New("run(s) failed in this chat")

// err returns nil when no run failed, else an error listing the causes.
func (f *runFailures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return nil
	}
	var b strings.Builder
	for _, c := range f.causes {
		b.WriteString("\n  " + c)
	}
	if more := f.n - len(f.causes); more > 0 {
		fmt.Fprintf(&b, "\n  and %d more", more)
	}
	return fmt.Errorf("%d %w:%s", f.n, errRunsFailed, b.String())
}

// shortCause is an error's text on one line, cut to 300 runes.
func shortCause(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s = "the run took longer than its time limit (limits.run_timeout)"
	case errors.Is(err, context.Canceled):
		s = "the run was stopped"
	}
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
