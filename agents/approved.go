package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// ErrNotRun is returned (wrapped) by a Tool.Call that did not reach the tool at
// all, for example because its MCP server is down: the call had no effect. An
// approved call that fails so is reported as not run (DESIGN.md §5).
var ErrNotRun = errors.New("the tool did not run")

// NotRun returns err marked as a refusal before the tool did anything: its text
// is err's, errors.Is matches both err (and what it wraps) and ErrNotRun. A tool
// returns it for a call it refused without running (no sandbox, arguments it
// cannot read), so an approved call that fails so is reported as not run
// (DESIGN.md §5). NotRun(nil) is nil.
func NotRun(err error) error {
	if err == nil {
		return nil
	}
	return &notRunError{err}
}

// NewNotRun returns a new sentinel error with the given text that matches
// ErrNotRun (errors.Is): the error variable of a refusal before running.
func NewNotRun(text string) error { return &notRunError{errors.New(text)} }

type notRunError struct{ err error }

func (e *notRunError) Error() string   { return e.err.Error() }
func (e *notRunError) Unwrap() []error { return []error{e.err, ErrNotRun} }

// DefaultReadyTimeout is how long a run waits for the tool sources its bot
// selects (MCP servers that are starting) when Options.ReadyTimeout is zero.
const DefaultReadyTimeout = 30 * time.Second

// awaitSources waits, at most Options.ReadyTimeout, for the tool sources the
// bot's tool selection names to be ready (no run starts before the tools it may
// call exist), and posts one notice in the thread per source that is not
// available. It returns why, by source, for the run's later use.
func (a *Agent) awaitSources(ctx context.Context, job *core.Job) map[string]string {
	unready := a.opts.Registry.WaitReady(ctx, job.Bot.Tools, a.opts.ReadyTimeout)
	if len(unready) == 0 || ctx.Err() != nil {
		return nil
	}
	down := make(map[string]string, len(unready))
	for _, u := range unready {
		why := fmt.Sprintf("MCP server %s is not available: ", u.Source)
		if u.Reason != nil {
			why += u.Reason.Error()
		} else {
			why += fmt.Sprintf("it did not finish starting within %s", a.opts.ReadyTimeout)
		}
		down[u.Source] = why
		a.log.Warn("run goes on without a tool source", "bot", job.Bot.Handle, "run", job.Run.ID, "source", u.Source, "why", why)
		notice(ctx, a, job, fmt.Sprintf("%s. @%s goes on without its tools.", why, job.Bot.Handle))
	}
	return down
}

// notice posts text as a system notice in the run's thread (core.Noticer), or
// as the bot's message where the RunEnv has no notices; a failure is logged.
func notice(ctx context.Context, a *Agent, job *core.Job, text string) {
	var err error
	if n, ok := job.Env.(core.Noticer); ok {
		err = n.Notice(ctx, text)
	} else {
		_, err = job.Env.Post(ctx, text)
	}
	switch {
	case err != nil && ctx.Err() != nil: // the run was stopped (run.warnUnlessStopped)
		a.log.Debug("post notice", "run", job.Run.ID, "err", err)
	case err != nil:
		a.log.Warn("post notice", "run", job.Run.ID, "err", err)
	}
}

// runApproved runs the call people approved in q, exactly once, and returns the
// result for the model. When the call cannot run (its tool is not offered now,
// its server is down, the run is stopping) the model is told why, the thread
// gets a notice, and the question's outcome says "not run: <why>"; otherwise
// the outcome is "ran".
func (r *run) runApproved(ctx context.Context, q *core.Question, call openai.ToolCall) string {
	name := call.Function.Name
	idx := -1
	for i, t := range r.tools {
		if t.Name() == name {
			idx = i
		}
	}
	if idx < 0 {
		why := r.whyMissing(name)
		r.event(ctx, "tool_result", map[string]any{"id": call.ID, "name": name, "question": q.ID, "error": true, "not_run": why})
		r.notRun(ctx, q, name, why)
		return fmt.Sprintf("error: the approved call of %s could not run: %s. It was not run. Tell the people in the thread; do not call it again until it is available.", name, why)
	}
	rec := &recordingTool{Tool: r.tools[idx]}
	saved := r.tools
	r.tools = append([]Tool(nil), saved...)
	r.tools[idx] = rec
	res := r.execCalls(ctx, []openai.ToolCall{call}, nil)[0]
	r.tools = saved
	switch {
	case !rec.called:
		r.notRun(ctx, q, name, "the run was stopped before it ran")
	case errors.Is(rec.err, ErrNotRun):
		r.notRun(ctx, q, name, rec.err.Error())
	case rec.err != nil:
		r.outcome(ctx, q, core.OutcomeRan+" (the tool reported an error)")
	default:
		r.outcome(ctx, q, core.OutcomeRan)
	}
	return res
}

// whyMissing says why the tool name is not offered to this run.
func (r *run) whyMissing(name string) string {
	src, _, ok := strings.Cut(name, SourceSeparator)
	if ok {
		if why, down := r.down[src]; down {
			return why
		}
		if declared, ready, reason := r.agent.opts.Registry.SourceStatus(src); declared && !ready {
			if reason != nil {
				return fmt.Sprintf("MCP server %s is not available: %v", src, reason)
			}
			return fmt.Sprintf("MCP server %s is not available: it is still starting", src)
		}
	}
	return fmt.Sprintf("the tool %s is no longer available to @%s", name, r.job.Bot.Handle)
}

// notRun records and shows that the approved call of q did not run.
func (r *run) notRun(ctx context.Context, q *core.Question, tool, why string) {
	r.agent.log.Warn("approved call not run", "run", r.job.Run.ID, "question", q.ID, "tool", tool, "why", why)
	ctx = context.WithoutCancel(ctx) // told even when the run is stopping
	r.outcome(ctx, q, "not run: "+why)
	notice(ctx, r.agent, r.job, fmt.Sprintf("The approved call of %s (question %d) did not run: %s.", tool, q.ID, why))
}

// outcome stores the outcome on q (core.OutcomeRecorder); a failure is logged.
func (r *run) outcome(ctx context.Context, q *core.Question, outcome string) {
	rec, ok := r.job.Env.(core.OutcomeRecorder)
	if !ok {
		return
	}
	if err := rec.RecordOutcome(context.WithoutCancel(ctx), q.ID, outcome); err != nil {
		r.agent.log.Warn("record approval outcome", "run", r.job.Run.ID, "question", q.ID, "err", err)
	}
}

// recordingTool remembers whether its call reached the tool and its error.
// It is used for one call at a time.
type recordingTool struct {
	Tool
	called bool
	err    error
}

func (t *recordingTool) Call(ctx context.Context, c ToolCall) (string, error) {
	t.called = true
	out, err := t.Tool.Call(ctx, c)
	t.err = err
	return out, err
}
