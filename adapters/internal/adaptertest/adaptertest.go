// Package adaptertest holds what the chat adapters' tests share: a recorder of
// what an adapter reports through core.Observer, and the fixtures of a shell
// approval every platform must show whole.
package adaptertest

import (
	"encoding/json"
	"strings"
	"sync"

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
