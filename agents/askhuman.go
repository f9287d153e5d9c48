package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"openbot/core"
)

// AskHumanName is the built-in tool that pauses a run to ask the people in the
// thread a question (DESIGN.md §5, seed §7). It is always offered to the model;
// the loop handles its calls itself and never runs the tool's function.
const AskHumanName = "ask_human"

// ask_human limits.
const (
	askMinChoices   = 2
	askMaxChoices   = 10
	askMaxChoiceLen = 80   // characters of one choice
	askMaxQuestion  = 4000 // characters of the question
)

// askHumanTool is the ask_human definition offered to the model.
func askHumanTool() Tool {
	return &FuncTool{
		ToolName: AskHumanName,
		Desc: "Ask the people in this thread a question and wait for the answer. Your run pauses until a person " +
			"answers (with a button when you give choices, else by replying in the thread); the answer comes back as " +
			"this tool's result. Use it when you need a decision or information only a person has. Tools that need " +
			"approval ask for it themselves: do not use ask_human for that.",
		Params: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","description":"the question, self-contained and short"},` +
			`"choices":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":10,` +
			`"description":"optional: 2 to 10 short answers shown as buttons"}},` +
			`"required":["question"],"additionalProperties":false}`),
		Fn: func(context.Context, ToolCall) (string, error) {
			return "", errors.New("ask_human is handled by the agent loop and cannot be called directly")
		},
		ReachText: "asks the people in this thread and waits for their answer; reaches nothing else",
	}
}

// BuiltinTools returns the tools every bot has whatever its selection: the history
// tools (read_history, recall_messages) and ask_human.
func BuiltinTools() []Tool { return builtinTools(nil) }

// builtinTools is BuiltinTools with recall_messages on the message index ix
// (nil: lexical).
func builtinTools(ix *MessageIndex) []Tool {
	return append(historyTools(ix), askHumanTool())
}

// askArgs are ask_human's arguments.
type askArgs struct {
	Question string   `json:"question"`
	Choices  []string `json:"choices"`
}

// parseAsk validates ask_human arguments. The error is shown to the model.
func parseAsk(raw string) (askArgs, error) {
	var a askArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return a, fmt.Errorf("the arguments for ask_human are not a valid JSON object (%v); call it again with {\"question\": \"...\"}", err)
	}
	a.Question = strings.TrimSpace(a.Question)
	if a.Question == "" {
		return a, errors.New("ask_human needs a non-empty \"question\"")
	}
	if len(a.Question) > askMaxQuestion {
		return a, fmt.Errorf("the question is %d characters; keep it under %d", len(a.Question), askMaxQuestion)
	}
	var choices []string
	for _, c := range a.Choices {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if len([]rune(c)) > askMaxChoiceLen {
			return a, fmt.Errorf("choice %q is too long; keep each choice under %d characters", cutString(c, 40)+"...", askMaxChoiceLen)
		}
		if slices.Contains(choices, c) {
			return a, fmt.Errorf("choice %q is listed twice", c)
		}
		choices = append(choices, c)
	}
	if len(choices) > 0 && (len(choices) < askMinChoices || len(choices) > askMaxChoices) {
		return a, fmt.Errorf("give between %d and %d choices, or none for a free-text answer (got %d)", askMinChoices, askMaxChoices, len(choices))
	}
	a.Choices = choices
	return a, nil
}

// needsApproval reports whether a tool name is covered by a bot's approval_tools:
// an exact name, a source name "<server>" (all "<server>__*" tools), or the
// pattern "<server>__*", as Registry.Select resolves tool selections.
func needsApproval(name string, patterns []string) bool {
	for _, p := range patterns {
		if core.ToolMatches(p, name) {
			return true
		}
	}
	return false
}

// approvalText is the human sentence of an approval question: who wants to run
// what. The exact arguments are shown by every adapter from Question.Args (in a
// code block), so they are not repeated here.
func approvalText(bot core.BotProfile, tool, _ string) string {
	return fmt.Sprintf("@%s wants to run %s.", bot.Handle, tool)
}
