package agents

import (
	"cmp"
	"context"
	"encoding/json"

	"openbot/core"
)

// Tool is one tool a bot can call, from any tool source: the built-ins or an MCP
// server (seed §1 "Tool source"). All sources land in one Registry so per-bot
// selection and approvals work the same for every tool.
type Tool interface {
	// Name is unique in the registry; MCP tools are "<server>__<tool>".
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Schema is the JSON Schema of the arguments object.
	Schema() json.RawMessage
	// Call runs the tool. It must honour ctx (timeouts, cancellation) and be safe to
	// call concurrently (parallel tool calls). An error is shown to the model as the
	// tool result text; it does not fail the run.
	Call(ctx context.Context, call ToolCall) (string, error)
}

// ToolCall is one invocation: the raw JSON arguments the model produced and the
// run it belongs to.
type ToolCall struct {
	Args json.RawMessage
	// Env is the run's window onto its thread (history, todo list, posting).
	Env core.RunEnv
	// Bot and Thread identify where the call happens (workspace paths use them).
	Bot    core.BotProfile
	Thread core.ThreadID
	Run    core.RunID
}

// Reacher is implemented by a tool that can say what a call of it can reach. Reach
// returns one sentence describing what a call of this tool can reach ("runs in the
// sandbox with network off"), shown in approval prompts (core.Question.Reach,
// DESIGN.md §5). It must be cheap and safe for concurrent use.
type Reacher interface {
	// Reach describes a call made by the bot with this handle (settings such as
	// the shell's network are per bot).
	Reach(bot string) string
}

// CallReacher is implemented by a tool whose approval prompt depends on the
// call's arguments: CallReach returns what this call can reach (the tool's
// Reach sentence and what these arguments change, such as the shell's timeout)
// and warnings about the arguments (a command that decodes and runs hidden
// content), each warning one sentence; none when there is nothing to warn of.
// pauseFor prefers it to Reacher. It gets the call's raw JSON arguments exactly
// as the model wrote them; it must be cheap, pure and safe for concurrent use,
// and answer with the tool's Reach for arguments it cannot read.
type CallReacher interface {
	CallReach(bot string, args json.RawMessage) (reach string, warnings []string)
}

// CallApprover is implemented by a tool some of whose calls need a person's
// approval although the tool is not in the bot's approval_tools (http_fetch with a
// method that sends data, or under the bot's egress policy, DESIGN.md §5).
// NeedsApproval gets the calling bot's profile as the run sees it and the
// call's raw JSON arguments exactly as the model wrote them; it must be cheap,
// pure and safe for concurrent use, and answer true for arguments it cannot
// read (it fails closed).
type CallApprover interface {
	NeedsApproval(bot core.BotProfile, args json.RawMessage) bool
}

// RepeatSafer is implemented by a tool whose calls may run again when a restart
// interrupted them after they started and before their result was saved
// (DESIGN.md §8): a read, a write of the same content, a todo list replaced
// whole. RepeatSafe gets the call's raw JSON arguments; it must be cheap, pure
// and safe for concurrent use, and answer false for arguments it cannot read.
// A tool that does not implement it, or answers false, is not run again: the
// model is told the call was interrupted and may not have completed, and decides.
type RepeatSafer interface {
	RepeatSafe(args json.RawMessage) bool
}

// repeatSafe asks t whether a call with args may run again after a restart; a
// tool that does not say, or panics, is not safe.
func repeatSafe(t Tool, args string) (yes bool) {
	rs, ok := t.(RepeatSafer)
	if !ok {
		return false
	}
	defer func() {
		if recover() != nil {
			yes = false
		}
	}()
	args = cmp.Or(args, "{}")
	return rs.RepeatSafe(json.RawMessage(args))
}
