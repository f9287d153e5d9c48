package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"openbot/agents"
	"openbot/core"
)

// notifyTool is the notify built-in: a bot posts into a configured
// conversation outside the thread it works in (a daily summary into #ops), as
// the first message of a new thread there, delivered through that
// conversation's lane like any reply. A person approves its calls by default
// (config.DefaultApprovalTools). A repeated call with the same text to the same
// target in one run posts nothing more, so it is safe to repeat.
func notifyTool() agents.Tool {
	return &tool{
		name: "notify",
		reach: func(bot string) string {
			return "posts a message as @" + bot + " into another conversation (a configured notify target), where people see it and can answer"
		},
		repeat: func(json.RawMessage) bool { return true },
		desc: "Post a message into a configured conversation outside this thread, such as a summary into an ops channel. " +
			"It starts a new thread there. Targets are configured by the operator; call with an unknown target to list them. " +
			"Returns the new thread's id.",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"target":{"type":"string","description":"The notify target's name"},` +
			`"text":{"type":"string","description":"The message text (Markdown)"}},` +
			`"required":["target","text"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Target string `json:"target"`
				Text   string `json:"text"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			n, ok := call.Env.(core.Notifier)
			if !ok {
				return "", agents.NotRun(errors.New("notify is not available outside a run"))
			}
			if strings.TrimSpace(a.Text) == "" {
				return "", agents.NotRun(errors.New("text is empty"))
			}
			id, err := n.Notify(ctx, a.Target, a.Text)
			if errors.Is(err, core.ErrUnknownTarget) {
				names := n.NotifyTargets()
				if len(names) == 0 {
					return "", agents.NotRun(errors.New("no notify target is configured for you"))
				}
				return "", agents.NotRun(fmt.Errorf("unknown target %q; targets: %s", a.Target, strings.Join(names, ", ")))
			}
			if errors.Is(err, core.ErrChannelDisabled) {
				return "", agents.NotRun(err)
			}
			if err != nil {
				return "", fmt.Errorf("notify: %v", err)
			}
			return fmt.Sprintf("posted into %s as the start of thread %d", a.Target, id), nil
		},
	}
}
