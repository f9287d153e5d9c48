package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// ErrBadCheckpoint is returned by Execute when a run is resumed (core.Job.Resume)
// but its checkpoint is missing, corrupt, of an unknown version, or does not wait
// for the answered tool call. The run cannot go on and fails.
var ErrBadCheckpoint = errors.New("cannot resume the run")

// checkpointVersion is the version of checkpointData written now. Version 2
// (pause checkpoints without Started marks) is still read to resume a paused run;
// a run interrupted by a restart resumes only from version 3.
const checkpointVersion = 3

// maxCheckpointBytes bounds a step checkpoint (RunEnv.Checkpoint). A larger
// state is stored as a checkpoint that says it cannot be resumed, so a restart
// fails the run with a notice instead of running anything twice.
const maxCheckpointBytes = 8 << 20

// checkpointData is the run's state, saved on the run before and after every
// step (RunEnv.Checkpoint: when the run starts, after each model answer, before
// and after each tool call) and returned in Result.Checkpoint when the run pauses
// (DESIGN.md §5, §8).
//
// Prompt is the system prompt and the unrolled history exactly as sent to the
// model, so a resumed run continues the same conversation even though the thread
// has moved on. Transcript is this run's assistant and tool messages, ending with
// the assistant tool-call message while Pending is set. Pending is the tool calls
// of that last message: the results of the calls already executed or answered,
// the calls started and not finished (Started), and the calls still waiting for
// a person. Usage (with ModelCalls) is cumulative over all segments of the run,
// so limits hold across pause, restart and resume. At is when it was written
// (Options.Clock). Unresumable, when set, says why the state was not kept.
type checkpointData struct {
	Version     int                            `json:"version"`
	Model       string                         `json:"model"`
	History     []core.MessageID               `json:"history,omitempty"` // thread messages shown
	Prompt      []openai.ChatCompletionMessage `json:"prompt,omitempty"`
	Transcript  []openai.ChatCompletionMessage `json:"transcript"`
	Pending     *pendingTurn                   `json:"pending,omitempty"`
	Usage       core.Usage                     `json:"usage"`
	ModelCalls  int                            `json:"model_calls"`
	Ceiling     int                            `json:"ceiling,omitempty"` // run.ceiling
	At          time.Time                      `json:"at,omitzero"`
	Unresumable string                         `json:"unresumable,omitempty"`
}

// pendingTurn is a model turn whose tool calls are not all resolved yet.
type pendingTurn struct {
	Calls []pendingCall `json:"calls"`
	// Waiting is the id of the call the run paused for; "" while none.
	Waiting string `json:"waiting,omitempty"`
}

// pendingCall is one tool call of a pending turn. Kind is "" for a call that runs
// at once, QuestionAsk for ask_human and QuestionApproval for a tool that needs
// approval. Started calls were handed to their tool; Done calls have their
// Result, the text the model will get.
type pendingCall struct {
	Call    openai.ToolCall   `json:"call"`
	Kind    core.QuestionKind `json:"kind,omitempty"`
	Started bool              `json:"started,omitempty"`
	Done    bool              `json:"done,omitempty"`
	Result  string            `json:"result,omitempty"`
}

// snapshot marshals the run's state with the prompt as sent. The caller holds
// r.mu while tool calls run.
func (r *run) snapshot() (json.RawMessage, error) {
	var ids []core.MessageID
	if r.in.view != nil {
		ids = make([]core.MessageID, len(r.in.view.shown))
		for i, m := range r.in.view.shown {
			ids[i] = m.ID
		}
	}
	cp := checkpointData{Version: checkpointVersion, Model: r.model, History: ids, Prompt: r.promptMessages(),
		Transcript: r.transcript, Pending: r.pending, Usage: r.usage, ModelCalls: r.usage.ModelCalls,
		Ceiling: r.ceiling, At: r.agent.opts.Clock.Now()}
	return json.Marshal(cp)
}

// checkpoint stores the run's state durably through RunEnv (a step boundary,
// DESIGN.md §8). A state larger than maxCheckpointBytes is stored as
// unresumable. The error is logged and returned; callers that must not go on
// without it (a tool call about to start) check it.
func (r *run) checkpoint(ctx context.Context) error {
	raw, err := r.checkpointRaw()
	if err == nil {
		err = r.job.Env.Checkpoint(ctx, raw)
	}
	if err != nil {
		r.warnUnlessStopped(ctx, "checkpoint run", "run", r.job.Run.ID, "err", err)
	}
	return err
}

// warnUnlessStopped logs a failed write of the run at WARN, or at DEBUG once
// the run's context has ended: core stopped the run (shutdown, CancelRun, a
// lapsed claim), the refusal is expected and core reports the stop itself.
func (r *run) warnUnlessStopped(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		r.agent.log.Debug(msg, args...)
		return
	}
	r.agent.log.Warn(msg, args...)
}

// checkpointRaw is the checkpoint of the run's state now: its snapshot, or a
// record that it cannot be resumed when that is larger than maxCheckpointBytes.
func (r *run) checkpointRaw() (json.RawMessage, error) {
	raw, err := r.snapshot()
	if err == nil && len(raw) > maxCheckpointBytes {
		r.agent.log.Warn("run state too large to checkpoint; a restart will not resume it", "run", r.job.Run.ID, "bytes", len(raw))
		raw, err = json.Marshal(checkpointData{Version: checkpointVersion, Model: r.model, Usage: r.usage, ModelCalls: r.usage.ModelCalls,
			At: r.agent.opts.Clock.Now(), Unresumable: fmt.Sprintf("its saved state grew past %d MiB", maxCheckpointBytes>>20)})
	}
	return raw, err
}

// restore loads a checkpoint into r: a pause checkpoint (version 2 or 3, with
// the paused tool call) to resume after an answer, or with restart any version-3
// step checkpoint to resume after a restart. It returns the checkpoint's time.
func (r *run) restore(raw json.RawMessage, restart bool) (time.Time, error) {
	id := r.job.Run.ID
	if len(raw) == 0 {
		return time.Time{}, fmt.Errorf("%w %d: it has no saved checkpoint", ErrBadCheckpoint, id)
	}
	var cp checkpointData
	if err := json.Unmarshal(raw, &cp); err != nil {
		return time.Time{}, fmt.Errorf("%w %d: its checkpoint is corrupt (%v)", ErrBadCheckpoint, id, err)
	}
	if cp.Version != checkpointVersion && (restart || cp.Version != 2) {
		return time.Time{}, fmt.Errorf("%w %d: checkpoint version %d is not supported (want %d)", ErrBadCheckpoint, id, cp.Version, checkpointVersion)
	}
	if cp.Unresumable != "" {
		return time.Time{}, fmt.Errorf("%w %d: %s", ErrBadCheckpoint, id, cp.Unresumable)
	}
	if len(cp.Prompt) == 0 || cp.Prompt[0].Role != openai.ChatMessageRoleSystem {
		return time.Time{}, fmt.Errorf("%w %d: its checkpoint has no prompt", ErrBadCheckpoint, id)
	}
	if !restart && (cp.Pending == nil || len(cp.Transcript) == 0) {
		return time.Time{}, fmt.Errorf("%w %d: its checkpoint has no paused tool call", ErrBadCheckpoint, id)
	}
	cp.Usage.ModelCalls = max(cp.Usage.ModelCalls, cp.ModelCalls)
	r.prompt = cp.Prompt
	r.transcript = cp.Transcript
	r.pending = cp.Pending
	r.usage = cp.Usage
	r.base = cp.Usage
	r.ceiling = cp.Ceiling
	return cp.At, nil
}

// segmentUsage is the usage of this Execute call; core adds it to the run's.
func (r *run) segmentUsage() core.Usage {
	return core.Usage{
		PromptTokens:     r.usage.PromptTokens - r.base.PromptTokens,
		CompletionTokens: r.usage.CompletionTokens - r.base.CompletionTokens,
		ModelCalls:       r.usage.ModelCalls - r.base.ModelCalls,
	}
}

// classify turns a model turn's calls into a pending turn: ask_human calls and
// calls of offered tools that need approval wait for a person; invalid ones of
// those get their error result at once; the rest run at once.
func (r *run) classify(calls []openai.ToolCall) *pendingTurn {
	offered := make(map[string]Tool, len(r.tools))
	for _, t := range r.tools {
		offered[t.Name()] = t
	}
	p := &pendingTurn{Calls: make([]pendingCall, len(calls))}
	for i, c := range calls {
		pc := pendingCall{Call: c}
		name, args := c.Function.Name, strings.TrimSpace(c.Function.Arguments)
		switch {
		case name == AskHumanName:
			if _, err := parseAsk(args); err != nil {
				pc.Done, pc.Result = true, "error: "+err.Error()
			} else {
				pc.Kind = core.QuestionAsk
			}
		case offered[name] != nil && (needsApproval(name, r.job.Bot.ApprovalTools) || callNeedsApproval(offered[name], r.job.Bot, args)):
			if !json.Valid([]byte(args)) {
				pc.Done, pc.Result = true, fmt.Sprintf("error: the arguments for %s are not valid JSON. Call it again with a JSON object matching its schema.", name)
			} else {
				pc.Kind = core.QuestionApproval
			}
		}
		p.Calls[i] = pc
	}
	return p
}

// advance works on the pending turn: it runs the calls that need nobody
// (concurrently, each exactly once), then returns the pause for the first call
// that waits for a person; when none is left it appends every result to the
// transcript in call order and clears the pending turn.
func (r *run) advance(ctx context.Context) (*core.Pause, error) {
	p := r.pending
	var idx []int
	var calls []openai.ToolCall
	for i, pc := range p.Calls {
		if !pc.Done && pc.Kind == "" {
			idx = append(idx, i)
			calls = append(calls, pc.Call)
		}
	}
	if len(calls) > 0 {
		// Each call is marked started durably before it reaches its tool and
		// done with its result after (DESIGN.md §8). A call that returns while
		// the run is stopping stays started: a resume decides about it.
		hooks := &callHooks{
			start: func(j int) error {
				r.mu.Lock()
				defer r.mu.Unlock()
				p.Calls[idx[j]].Started = true
				if err := r.checkpoint(ctx); err != nil {
					p.Calls[idx[j]].Started = false
					return fmt.Errorf("its start could not be saved (%v)", err)
				}
				return nil
			},
			done: func(j int, text string) {
				if ctx.Err() != nil {
					return
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				p.Calls[idx[j]].Done, p.Calls[idx[j]].Result = true, text
				_ = r.checkpoint(ctx)
			},
		}
		results := r.execCalls(ctx, calls, hooks)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run stopped: %w", context.Cause(ctx))
		}
		for j, i := range idx {
			p.Calls[i].Done, p.Calls[i].Result = true, results[j]
		}
	}
	for _, pc := range p.Calls {
		if pc.Done {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run stopped: %w", context.Cause(ctx))
		}
		p.Waiting = pc.Call.ID
		return r.pauseFor(pc), nil
	}
	for _, pc := range p.Calls {
		r.transcript = append(r.transcript, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool,
			ToolCallID: pc.Call.ID, Name: pc.Call.Function.Name, Content: pc.Result})
	}
	// Every result is already saved (each call's own step), so no checkpoint here.
	r.pending = nil
	return nil, nil
}

// pauseFor is the question for a waiting call.
func (r *run) pauseFor(pc pendingCall) *core.Pause {
	args := strings.TrimSpace(pc.Call.Function.Arguments)
	if pc.Kind == core.QuestionAsk {
		a, _ := parseAsk(args) // validated by classify
		return &core.Pause{Kind: core.QuestionAsk, Text: a.Question, Choices: a.Choices, CallID: pc.Call.ID}
	}
	name := pc.Call.Function.Name
	var reach string
	var warnings []string
	for _, t := range r.tools {
		if t.Name() == name {
			reach, warnings = callReach(t, r.job.Bot.Handle, args)
		}
	}
	return &core.Pause{Kind: core.QuestionApproval, Tool: name, Args: json.RawMessage(pc.Call.Function.Arguments),
		CallID: pc.Call.ID, Text: approvalText(r.job.Bot, name, args), Reach: reach, Warnings: warnings}
}

// callReach is what the approval prompt of a call of t says it can reach and
// warns of: a CallReacher's answer for these arguments, else a Reacher's
// sentence. A panicking CallReach falls back to Reach, and warns that the
// arguments could not be checked.
func callReach(t Tool, bot, args string) (reach string, warnings []string) {
	rt, _ := t.(Reacher)
	cr, ok := t.(CallReacher)
	if !ok {
		if rt != nil {
			reach = rt.Reach(bot)
		}
		return reach, nil
	}
	defer func() {
		if recover() != nil {
			reach, warnings = "", []string{"The tool could not check these arguments: read them with care."}
			if rt != nil {
				reach = rt.Reach(bot)
			}
		}
	}()
	args = cmp.Or(args, "{}")
	return cr.CallReach(bot, json.RawMessage(args))
}

// callNeedsApproval asks a CallApprover tool whether this call needs a person's
// approval; a panicking check counts as yes.
func callNeedsApproval(t Tool, bot core.BotProfile, args string) (yes bool) {
	ca, ok := t.(CallApprover)
	if !ok {
		return false
	}
	defer func() {
		if recover() != nil {
			yes = true
		}
	}()
	args = cmp.Or(args, "{}")
	return ca.NeedsApproval(bot, json.RawMessage(args))
}

// resume feeds the answer q to the call the run paused for: an approved tool runs
// now with q.Args (the arguments people approved), exactly once; a rejection,
// an expiry or an ask_human answer becomes the call's result.
func (r *run) resume(ctx context.Context, q *core.Question) error {
	id := r.job.Run.ID
	p := r.pending
	at := -1
	for i, pc := range p.Calls {
		if pc.Call.ID == q.CallID && !pc.Done && pc.Kind != "" {
			at = i
		}
	}
	if q.CallID == "" || p.Waiting != q.CallID || at < 0 {
		return fmt.Errorf("%w %d: its checkpoint does not wait for tool call %q", ErrBadCheckpoint, id, q.CallID)
	}
	pc := &p.Calls[at]
	name := pc.Call.Function.Name
	if pc.Kind != q.Kind || (q.Kind == core.QuestionApproval && q.Tool != "" && q.Tool != name) {
		return fmt.Errorf("%w %d: the answer (%s %s) does not match the paused call (%s %s)", ErrBadCheckpoint, id, q.Kind, q.Tool, pc.Kind, name)
	}
	if q.Status != core.QuestionAnswered && q.Status != core.QuestionExpired {
		return fmt.Errorf("%w %d: question %d is %s, not answered", ErrBadCheckpoint, id, q.ID, q.Status)
	}
	who := q.AnsweredByName
	if who == "" {
		who = string(q.AnsweredBy)
	}
	who = cmp.Or(who, "a person")
	ev := map[string]any{"id": pc.Call.ID, "name": name, "question": q.ID, "status": q.Status, "answered_by": q.AnsweredBy}
	switch {
	case q.Kind == core.QuestionApproval && q.Approved():
		call := pc.Call
		if len(q.Args) > 0 {
			call.Function.Arguments = string(q.Args)
		}
		pc.Started = true
		if err := r.checkpoint(ctx); err != nil {
			return fmt.Errorf("save the run before the approved call: %w", err)
		}
		pc.Result = r.runApproved(ctx, q, call)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("run stopped during the approved call: %w", context.Cause(ctx))
		}
	case q.Kind == core.QuestionApproval && q.Status == core.QuestionExpired:
		pc.Result = "expired without an answer after the approval timeout; treat it as rejected. The tool was not run."
		r.event(ctx, "tool_result", ev)
	case q.Kind == core.QuestionApproval:
		pc.Result = "rejected by " + who + ". The tool was not run; do not try it again unless someone asks you to."
		r.event(ctx, "tool_result", ev)
	case q.Status == core.QuestionExpired:
		pc.Result = "the question expired without an answer after the approval timeout; go on without it."
		r.event(ctx, "tool_result", ev)
	default:
		pc.Result = who + " answered: " + untrusted(string(q.AnsweredBy), q.Answer)
		r.event(ctx, "tool_result", ev)
	}
	pc.Done = true
	p.Waiting = ""
	_ = r.checkpoint(ctx)
	return nil
}
