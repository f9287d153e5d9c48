package agents

import (
	"context"
	"encoding/json"
)

// FuncTool is a Tool made of plain values and a function, for built-ins and tests.
// Fn must honour ctx and be safe for concurrent use.
type FuncTool struct {
	ToolName string
	Desc     string
	// Params is the JSON Schema of the arguments; nil means an object with no
	// properties.
	Params json.RawMessage
	Fn     func(ctx context.Context, call ToolCall) (string, error)
	// ReachText is what a call can reach, shown in approval prompts (Reacher);
	// "" says nothing.
	ReachText string
	// Repeatable says every call may run again after a restart interrupted it
	// (RepeatSafer, DESIGN.md §8); false for a tool with effects.
	Repeatable bool
}

var (
	_ Tool        = (*FuncTool)(nil)
	_ Reacher     = (*FuncTool)(nil)
	_ RepeatSafer = (*FuncTool)(nil)
)

// Reach implements Reacher: ReachText, whatever the bot.
func (f *FuncTool) Reach(string) string { return f.ReachText }

// RepeatSafe implements RepeatSafer: Repeatable.
func (f *FuncTool) RepeatSafe(json.RawMessage) bool { return f.Repeatable }

// Name implements Tool.
func (f *FuncTool) Name() string { return f.ToolName }

// Description implements Tool.
func (f *FuncTool) Description() string { return f.Desc }

// Schema implements Tool.
func (f *FuncTool) Schema() json.RawMessage {
	if len(f.Params) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return f.Params
}

// Call implements Tool.
func (f *FuncTool) Call(ctx context.Context, call ToolCall) (string, error) {
	return f.Fn(ctx, call)
}
