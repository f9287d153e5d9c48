// Package adaptertest holds what the chat adapters' tests share: a recorder of
// what an adapter reports through core.Observer, a log of what a fake engine
// was handed, and the fixtures of a shell approval every platform must show
// whole.
package adaptertest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// Inbound records Observer.Inbound calls as "platform/outcome". Safe for
// concurrent use.
type Inbound struct {
	core.NopObserver
	mu  sync.Mutex
	got []string
}

// Inbound implements core.Observer.
func (r *Inbound) Inbound(platform, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, platform+"/"+outcome)
}

// All returns the calls so far, oldest first.
func (r *Inbound) All() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// Log records what a fake receives (inbound messages, answers) for a test to
// read and wait for. The zero value is ready to use; it is safe for concurrent
// use.
type Log[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{} // closed on the next Add; nil when nobody waits
}

// Add records v and returns how many values are recorded with it.
func (l *Log[T]) Add(v T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return len(l.items)
}

// All returns a copy of what was recorded, oldest first.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// Wait returns what was recorded once at least n values are, failing t after
// 10 s.
func (l *Log[T]) Wait(t testing.TB, n int) []T {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		got := append([]T(nil), l.items...)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-timeout:
			t.Fatalf("have %d, want %d: %+v", len(got), n, got)
		case <-ch:
		}
	}
}

// LongCommand is a shell command of n runes repeating unit (which has no line
// break), so a platform's escaping and splitting are tested at once.
func LongCommand(unit string, n int) string {
	r := []rune(strings.Repeat(unit, n/len([]rune(unit))+1))
	return string(r[:n])
}

// ShellApproval is q made a request to run cmd in the shell with a timeout,
// carrying the reach and the warning the agent adds to such a request.
func ShellApproval(q core.Question, cmd string, timeout int) core.Question {
	q.Text = "@engineer wants to run shell."
	q.Args, _ = json.Marshal(map[string]any{"command": cmd, "timeout_seconds": timeout})
	q.Reach = "runs in a sandbox: sees only this thread's workspace, network off. Timeout: 60 s."
	q.Warnings = []string{"This command decodes hidden content (base64) and runs it: what it runs is not what you read here."}
	return q
}
