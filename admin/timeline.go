package admin

import (
	"encoding/json"
	"time"

	"openbot/core"
)

// Step is one entry of a run's timeline, folded from its run events (DESIGN.md
// §10): a model call (latency, tokens), a tool call joined with its result
// (arguments, result capped at 4000 characters, duration), a status change (with
// the question asked and its decision), or any other event type as recorded.
// Seq is the run event that opened the step.
type Step struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // "model_call", "tool", "status", or the event type

	// model_call
	Model            string `json:"model,omitempty"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	ToolCalls        int    `json:"tool_calls,omitempty"`
	FinishReason     string `json:"finish_reason,omitempty"`
	Retries          int    `json:"retries,omitempty"`
	// CostMicros is the model call's cost from the usage ledger, in micro-units
	// of RunDetail.Currency; absent when the ledger has no entry for it.
	CostMicros *int64 `json:"cost_micros,omitempty"`

	// tool
	Tool        string     `json:"tool,omitempty"`
	CallID      string     `json:"call_id,omitempty"`
	Args        string     `json:"args,omitempty"`
	Result      string     `json:"result,omitempty"`
	ResultBytes int        `json:"result_bytes,omitempty"`
	Done        bool       `json:"done,omitempty"` // a result was recorded
	DoneAt      *time.Time `json:"done_at,omitempty"`
	NotRun      string     `json:"not_run,omitempty"`

	// model_call and tool: latency in milliseconds
	DurationMS int64 `json:"duration_ms,omitempty"`
	// model_call, tool and status: what failed
	Error string `json:"error,omitempty"`

	// status
	Status   string           `json:"status,omitempty"`
	Question *QuestionView    `json:"question,omitempty"`
	Payload  json.RawMessage  `json:"payload,omitempty"` // other event types, capped
	Usage    *core.Usage      `json:"usage,omitempty"`
	Triggers []core.MessageID `json:"triggers,omitempty"`
}

// eventPayload is the union of the payload fields agents and core record
// (agents/loop.go, agents/tools_exec.go, agents/pause.go, core/scheduler.go).
type eventPayload struct {
	Model            string           `json:"model"`
	PromptTokens     int              `json:"prompt_tokens"`
	CompletionTokens int              `json:"completion_tokens"`
	DurationMS       int64            `json:"duration_ms"`
	FinishReason     string           `json:"finish_reason"`
	ToolCalls        int              `json:"tool_calls"`
	Retries          int              `json:"retries"`
	Error            json.RawMessage  `json:"error"` // a string, or a bool on tool results
	ID               string           `json:"id"`
	Name             string           `json:"name"`
	Args             string           `json:"args"`
	Result           string           `json:"result"`
	ResultBytes      int              `json:"result_bytes"`
	NotRun           string           `json:"not_run"`
	Status           string           `json:"status"`
	Question         core.QuestionID  `json:"question"`
	Usage            *core.Usage      `json:"usage"`
	Triggers         []core.MessageID `json:"triggers"`
}

// Fold turns a run's events (in Seq order) into its timeline: each tool result
// is joined to the open tool call with the same call id (also across a pause for
// approval), and a status event naming a question carries that question from qs.
func Fold(events []core.RunEvent, qs map[core.QuestionID]core.Question) []Step {
	out := []Step{}
	open := map[string]int{} // call id -> index in out of a tool step without result
	for _, e := range events {
		var p eventPayload
		_ = json.Unmarshal(e.Payload, &p) // an unreadable payload folds to its bare type
		errText := errString(p.Error)
		switch e.Type {
		case "model_call":
			out = append(out, Step{Seq: e.Seq, At: e.At, Kind: "model_call", Model: p.Model, PromptTokens: p.PromptTokens,
				CompletionTokens: p.CompletionTokens, ToolCalls: p.ToolCalls, FinishReason: p.FinishReason, Retries: p.Retries,
				DurationMS: p.DurationMS, Error: core.Redact(errText)})
		case "tool_call":
			open[p.ID] = len(out)
			out = append(out, Step{Seq: e.Seq, At: e.At, Kind: "tool", Tool: p.Name, CallID: p.ID, Args: p.Args})
		case "tool_result":
			i, ok := open[p.ID]
			if !ok {
				i = len(out)
				out = append(out, Step{Seq: e.Seq, At: e.At, Kind: "tool", Tool: p.Name, CallID: p.ID})
			}
			delete(open, p.ID)
			at := e.At
			s := &out[i]
			s.Done, s.DoneAt, s.Result, s.ResultBytes, s.NotRun = true, &at, capText(p.Result, textCap), p.ResultBytes, p.NotRun
			s.DurationMS = p.DurationMS
			if errText == "true" {
				s.Error = "the tool reported an error"
			} else if errText != "" && errText != "false" {
				s.Error = core.Redact(errText)
			}
			if p.Question != 0 {
				if q, ok := qs[p.Question]; ok {
					v := questionView(q)
					s.Question = &v
				}
			}
		case "status":
			s := Step{Seq: e.Seq, At: e.At, Kind: "status", Status: p.Status, Error: core.Redact(errText), Usage: p.Usage, Triggers: p.Triggers}
			if q, ok := qs[p.Question]; ok && p.Question != 0 {
				v := questionView(q)
				s.Question = &v
			}
			out = append(out, s)
		default:
			out = append(out, Step{Seq: e.Seq, At: e.At, Kind: e.Type, Payload: capPayload(e.Payload)})
		}
	}
	return out
}

// errString reads an "error" field that is a string (model calls, status) or a
// bool (tool results: "true"/"false").
func errString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// capPayload keeps a payload up to textCap bytes; a longer one becomes a JSON
// string saying how long it was.
func capPayload(p json.RawMessage) json.RawMessage {
	if len(p) <= textCap {
		return p
	}
	b, _ := json.Marshal(map[string]int{"omitted_bytes": len(p)})
	return b
}
