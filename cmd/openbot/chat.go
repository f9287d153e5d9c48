package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"openbot/core"
)

// maxFailuresShown bounds how many failed runs piped chat lists on stderr.
const maxFailuresShown = 10

// runFailures finds the runs of a piped `openbot chat` session that failed, so
// the command can exit non-zero with their causes on stderr (scripts detect a
// failure by the exit code; the notice in the conversation is on stdout as
// always). The session's runs are those created after it started: a run refused
// before its agent ran (a spent budget) counts as much as one that failed in it.
type runFailures struct {
	after core.RunID // the newest run before the session
}

// newRunFailures notes where the session's runs start in st.
func newRunFailures(ctx context.Context, st core.Store) (*runFailures, error) {
	f := &runFailures{}
	err := st.View(ctx, func(tx core.ReadTx) error {
		runs, err := tx.RunsBefore(0, 1)
		if len(runs) > 0 {
			f.after = runs[0].ID
		}
		return err
	})
	return f, err
}

// errRunsFailed is wrapped by runFailures.err.
var errRunsFailed = errors.New("run(s) failed in this chat")

// err returns nil when no run of the session failed, else an error listing the
// causes, oldest first.
func (f *runFailures) err(ctx context.Context, st core.Store) error {
	var failed []core.Run
	err := st.View(ctx, func(tx core.ReadTx) error {
		failed = nil // fn may run again (core.Store.View)
		for before := core.RunID(0); ; {
			runs, err := tx.RunsBefore(before, 100)
			if err != nil || len(runs) == 0 {
				return err
			}
			for _, r := range runs {
				if r.ID <= f.after {
					return nil
				}
				if r.Status == core.RunFailed {
					failed = append(failed, r)
				}
			}
			before = runs[len(runs)-1].ID
		}
	})
	if err != nil {
		return fmt.Errorf("read the session's runs: %w", err)
	}
	if len(failed) == 0 {
		return nil
	}
	var b strings.Builder
	for i := len(failed) - 1; i >= 0 && len(failed)-i <= maxFailuresShown; i-- {
		r := failed[i]
		fmt.Fprintf(&b, "\n  @%s (run %d, thread #%d): %s", strings.TrimPrefix(string(r.Bot), "bot:"), r.ID, r.Thread, shortCause(r.Error))
	}
	if more := len(failed) - maxFailuresShown; more > 0 {
		fmt.Fprintf(&b, "\n  and %d more", more)
	}
	return fmt.Errorf("%d %w:%s", len(failed), errRunsFailed, b.String())
}

// shortCause is a run's error on one line, cut to 300 runes.
func shortCause(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		s = "no cause recorded"
	}
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
