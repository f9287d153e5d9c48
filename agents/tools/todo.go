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

// todoMax bounds the items of a todo list.
const todoMax = 100

func todoWriteTool() agents.Tool {
	return &tool{
		name: "todo_write",
		reach: func(bot string) string {
			return "replaces only @" + bot + "'s todo list for this thread (shown in its prompt); reaches no file, network or person"
		},
		repeat: always, // a read or a whole replacement
		desc: "Replace your todo list for this thread with the given items. " +
			"Use it to plan multi-step work and keep it current: send the whole list every time, " +
			"each item with status pending, in_progress or done. The list is shown in your prompt.",
		schema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","maxItems":100,"items":{` +
			`"type":"object","properties":{` +
			`"text":{"type":"string","description":"What to do"},` +
			`"status":{"type":"string","enum":["pending","in_progress","done"]}},` +
			`"required":["text","status"],"additionalProperties":false}}},` +
			`"required":["items"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Items []core.TodoItem `json:"items"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if len(a.Items) > todoMax {
				return "", agents.NotRun(fmt.Errorf("%d items; at most %d", len(a.Items), todoMax))
			}
			for i, it := range a.Items {
				if strings.TrimSpace(it.Text) == "" {
					return "", agents.NotRun(fmt.Errorf("items[%d].text is empty", i))
				}
				switch it.Status {
				case "pending", "in_progress", "done":
				default:
					return "", agents.NotRun(fmt.Errorf("items[%d].status is %q; use pending, in_progress or done", i, it.Status))
				}
			}
			if call.Env == nil {
				return "", errors.New("todo_write is not available outside a run")
			}
			if err := call.Env.SetTodo(ctx, a.Items); err != nil {
				return "", fmt.Errorf("store todo list: %v", err)
			}
			if len(a.Items) == 0 {
				return "todo list cleared", nil
			}
			return "todo list updated:\n" + RenderTodo(a.Items), nil
		},
	}
}

// RenderTodo renders a todo list one item a line: "- [ ] pending",
// "- [~] in progress", "- [x] done". The agents loop may use it for the prompt.
func RenderTodo(items []core.TodoItem) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte('\n')
		}
		mark := " "
		switch it.Status {
		case "in_progress":
			mark = "~"
		case "done":
			mark = "x"
		}
		fmt.Fprintf(&b, "- [%s] %s", mark, it.Text)
	}
	return b.String()
}

func postMessageTool() agents.Tool {
	return &tool{
		name: "post_message",
		reach: func(string) string {
			return "posts a message into this thread, shown in every conversation it is bound to; a bot it @mentions is woken"
		},
		desc: "Post a message into the current thread now, before your final reply: a progress note, " +
			"or a hand-off to another bot by @mentioning it. It is routed like a reply. " +
			"Returns the posted message's id.",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"text":{"type":"string","description":"The message text (Markdown)"}},` +
			`"required":["text"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Text string `json:"text"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if strings.TrimSpace(a.Text) == "" {
				return "", agents.NotRun(errors.New("text is empty"))
			}
			if call.Env == nil {
				return "", errors.New("post_message is not available outside a run")
			}
			id, err := call.Env.Post(ctx, a.Text)
			if err != nil {
				return "", fmt.Errorf("post message: %v", err)
			}
			return fmt.Sprintf("posted message %d", id), nil
		},
	}
}
