package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"openbot/core"
)

// Names of the memory tools, offered to bots with memory on (seed §9).
const (
	ManageMemoryName = "manage_memory"
	SearchMemoryName = "search_memory"
)

// MemoryTools returns manage_memory and search_memory over m. Both carry the
// scope rule (core.MemoryScopeRule, seed §9 G6 item 3). They act on the calling
// bot's memories only (ToolCall.Bot).
func MemoryTools(m *Memories) []Tool {
	return []Tool{
		&FuncTool{
			ToolName: ManageMemoryName,
			Desc: "Create, update or delete one of your own long-term memories, which you see in every future thread. " +
				core.MemoryScopeRule + " Update or delete a memory by its #id when it is wrong or superseded.",
			Params: json.RawMessage(`{"type":"object","properties":{` +
				`"action":{"type":"string","enum":["create","update","delete"]},` +
				`"id":{"type":"integer","description":"the memory's #id, for update and delete"},` +
				`"text":{"type":"string","description":"the memory, one short self-contained rule, for create and update"}},` +
				`"required":["action"],"additionalProperties":false}`),
			Fn:        m.manageTool,
			ReachText: "changes only this bot's own memories; reaches no file, network or person",
		},
		&FuncTool{
			ToolName: SearchMemoryName,
			Desc: "Search your own long-term memories, best match first, as \"(#id) text\" lines. " +
				"The most relevant ones are already in your instructions; use this to look for others. " + core.MemoryScopeRule,
			Params: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"what you want to remember"},` +
				`"k":{"type":"integer","description":"maximum results, 1 to 20, default 8"}},` +
				`"required":["query"],"additionalProperties":false}`),
			Fn:         m.searchTool,
			ReachText:  "reads only this bot's own memories; reaches no file, network or person",
			Repeatable: true, // a read
		},
	}
}

func (m *Memories) manageTool(ctx context.Context, call ToolCall) (string, error) {
	var args struct {
		Action string        `json:"action"`
		ID     core.MemoryID `json:"id"`
		Text   string        `json:"text"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	op := MemoryOp{Op: args.Action, ID: args.ID, Text: args.Text}
	switch args.Action {
	case "create":
		op.Op = "insert"
	case "update", "delete":
		if args.ID == 0 {
			return "", fmt.Errorf("%s needs the memory's id", args.Action)
		}
	default:
		return "", fmt.Errorf("action must be create, update or delete, not %q", args.Action)
	}
	out, err := m.Apply(ctx, MemoryChange{Bot: call.Bot.Handle, Source: core.MemorySourceTool, Run: call.Run, Thread: call.Thread}, []MemoryOp{op})
	if err != nil {
		if errors.Is(err, ErrMemory) {
			return "", err
		}
		return "", fmt.Errorf("memory not saved: %w", err)
	}
	switch args.Action {
	case "delete":
		return fmt.Sprintf("deleted memory #%d", args.ID), nil
	case "update":
		return fmt.Sprintf("updated memory #%d", out[0].ID), nil
	}
	return fmt.Sprintf("saved as memory #%d", out[0].ID), nil
}

func (m *Memories) searchTool(ctx context.Context, call ToolCall) (string, error) {
	var args struct {
		Query string `json:"query"`
		K     int    `json:"k"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	k := args.K
	if k <= 0 {
		k = memoryLimit
	}
	k = min(k, searchMemoryMax)
	mems, err := m.Search(ctx, call.Bot.Handle, args.Query, k)
	if err != nil {
		return "", fmt.Errorf("search memories: %w", err)
	}
	if len(mems) == 0 {
		return "you have no memories yet", nil
	}
	var b strings.Builder
	for _, mm := range mems {
		fmt.Fprintf(&b, "(#%d) %s\n", mm.ID, mm.Text)
	}
	return b.String(), nil
}
