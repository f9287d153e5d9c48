package agents

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Tool source readiness: no run starts before the tools it may call exist.
// A tool source whose tools arrive later (an MCP server that is starting) is
// declared with Registry.Expect; runs whose bot selects it wait for it with
// WaitReady, bounded, before the model is offered any tool (DESIGN.md §6).

// sourcePhase is where a declared tool source stands.
type sourcePhase int

const (
	sourceStarting sourcePhase = iota // its tools are on their way
	sourceReady                       // its tools are registered (SetSource)
	sourceFailed                      // it could not start; reason says why
)

type sourceState struct {
	phase  sourcePhase
	reason error
}

// Unready is a tool source a run needs that was not ready when WaitReady
// returned.
type Unready struct {
	Source string
	// Reason says in words why the source failed (SourceFailed); nil when it
	// was still starting when the wait ended.
	Reason error
}

// Error is "tool source X is not available: <reason>" or "... did not become
// ready in time".
func (u Unready) Error() string {
	if u.Reason != nil {
		return fmt.Sprintf("%s is not available: %v", u.Source, u.Reason)
	}
	return fmt.Sprintf("%s is still starting", u.Source)
}

// Expect declares sources whose tools will arrive later through SetSource and
// marks each as starting. Call it before any run can start (the MCP manager does
// so in its constructor). It is idempotent and safe for concurrent use.
func (r *Registry) Expect(sources ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sources {
		r.setStateLocked(s, sourceStarting, nil)
	}
}

// SourceFailed records that source could not start or stopped: its tools are
// removed and runs waiting for it stop waiting and are told reason, which must
// be words a person can read in a chat thread (no secrets). The source stays
// declared; a later SetSource with tools makes it ready again.
func (r *Registry) SourceFailed(source string, reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.sources[source] {
		delete(r.tools, name)
	}
	delete(r.sources, source)
	if reason == nil {
		reason = fmt.Errorf("it stopped")
	}
	r.setStateLocked(source, sourceFailed, reason)
}

// SourceStatus reports whether source was declared with Expect, whether it is
// ready now, and the reason of its last failure when it is failed.
func (r *Registry) SourceStatus(source string) (declared, ready bool, reason error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st, ok := r.states[source]
	if !ok {
		return false, false, nil
	}
	return true, st.phase == sourceReady, st.reason
}

// Waiting is how many WaitReady calls are blocked now, waiting for a source to
// start (for status pages and tests).
func (r *Registry) Waiting() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.waiting
}

// SourcesOf returns the declared sources that a bot's tool selection names:
// "<source>", "<source>__*" and "<source>__<tool>" all name <source>. Sorted,
// without duplicates.
func (r *Registry) SourcesOf(names []string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sourcesOfLocked(names)
}

func (r *Registry) sourcesOfLocked(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		src := n
		if _, ok := r.states[src]; !ok {
			src, _, _ = strings.Cut(n, SourceSeparator)
		}
		if _, ok := r.states[src]; ok && !seen[src] {
			seen[src] = true
			out = append(out, src)
		}
	}
	sort.Strings(out)
	return out
}

// WaitReady blocks until every declared source named by names (see SourcesOf)
// is ready or failed, at most timeout (<= 0: do not wait) and never past ctx.
// It returns the sources that are not ready then, sorted: failed ones with
// their reason, still starting ones with a nil Reason. Undeclared sources
// (built-ins) are never waited for.
func (r *Registry) WaitReady(ctx context.Context, names []string, timeout time.Duration) []Unready {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	counted := false
	defer func() {
		if counted {
			r.mu.Lock()
			r.setWaitingLocked(r.waiting - 1)
			r.mu.Unlock()
		}
	}()
	for {
		r.mu.Lock()
		var out []Unready
		starting := false
		for _, src := range r.sourcesOfLocked(names) {
			st := r.states[src]
			switch st.phase {
			case sourceStarting:
				starting = true
				out = append(out, Unready{Source: src})
			case sourceFailed:
				out = append(out, Unready{Source: src, Reason: st.reason})
			}
		}
		changed := r.changed
		if starting && !counted && timer != nil {
			counted = true
			r.setWaitingLocked(r.waiting + 1)
		}
		r.mu.Unlock()
		if !starting || timer == nil {
			return out
		}
		select {
		case <-changed:
		case <-timer:
			return out
		case <-ctx.Done():
			return out
		}
	}
}

// WaitWaiting blocks until exactly n WaitReady calls are blocked, or ctx is
// done (its error). For status pages and tests that must know a run waits.
func (r *Registry) WaitWaiting(ctx context.Context, n int) error {
	for {
		r.mu.RLock()
		waiting, changed := r.waiting, r.waitingChanged
		r.mu.RUnlock()
		if waiting == n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setWaitingLocked sets waiting and wakes every WaitWaiting call. r.mu must be
// held for writing.
func (r *Registry) setWaitingLocked(n int) {
	r.waiting = n
	close(r.waitingChanged)
	r.waitingChanged = make(chan struct{})
}

// setStateLocked changes a source's state and wakes every WaitReady call.
// r.mu must be held for writing.
func (r *Registry) setStateLocked(source string, phase sourcePhase, reason error) {
	r.states[source] = &sourceState{phase: phase, reason: reason}
	close(r.changed)
	r.changed = make(chan struct{})
}

// Forget removes a tool source altogether: its tools and its declaration, so runs
// no longer wait for it or are told it failed (a server removed from the
// configuration at a reload). Runs that already selected its tools keep the Tool
// values; their calls fail once the source has stopped. Safe for concurrent use.
func (r *Registry) Forget(source string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.sources[source] {
		delete(r.tools, name)
	}
	delete(r.sources, source)
	if _, ok := r.states[source]; ok {
		delete(r.states, source)
		close(r.changed)
		r.changed = make(chan struct{})
	}
}
