package agents

import (
	"context"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// ResumeNoticeAfter is how long after its last saved step a run interrupted by
// a restart must resume for the thread to get a notice ("resumed after a
// restart"); a quicker resume is not worth a person's attention (DESIGN.md §8).
const ResumeNoticeAfter = 30 * time.Second

// restartError is why a run interrupted by a restart cannot resume (its
// checkpoint is missing, unreadable or of an older format): the run fails with
// the notice people got before runs resumed (core.PeopleError).
type restartError struct{ err error }

var _ core.PeopleError = (*restartError)(nil)

func (e *restartError) Error() string { return "resume after a restart: " + e.err.Error() }
func (e *restartError) Unwrap() error { return e.err }

// Notice implements core.PeopleError.
func (e *restartError) Notice() string {
	return "its work here was interrupted because openbot restarted, and it could not be resumed. Send a message to start again."
}

// interruptedResult is the tool result the model gets for a call a restart
// interrupted that is not safe to repeat.
func interruptedResult(name string) string {
	return fmt.Sprintf("error: this call of %s was interrupted by a restart of openbot after it started; it may or may not have completed. "+
		"Check its effects before you call it again.", name)
}

// resumeAfterRestart restores the run's last step checkpoint (core.Job.Restart,
// DESIGN.md §8) and settles the tool calls the restart interrupted: a call that
// started and did not finish runs again only when its tool is repeat-safe
// (RepeatSafer); otherwise the model is told it was interrupted. An answered
// question whose call had not started (core.Job.Resume) is fed to its call, so
// an approved tool runs exactly once. done is true, with the reply, when the
// checkpoint already holds the model's final answer. The thread gets a notice
// when the run resumes ResumeNoticeAfter or more after its last step.
func (r *run) resumeAfterRestart(ctx context.Context) (reply string, done bool, err error) {
	at, err := r.restore(r.job.Run.Checkpoint, true)
	if err != nil {
		return "", false, &restartError{err}
	}
	// The run's stored usage lacks the interrupted segment; the checkpoint has it.
	if b := r.job.Run.Usage; b.ModelCalls <= r.usage.ModelCalls {
		r.base = b
	}
	waited := r.agent.opts.Clock.Now().Sub(at)
	r.event(ctx, "resumed", map[string]any{"after_restart": true, "waited_ms": waited.Milliseconds()})
	if !at.IsZero() && waited >= ResumeNoticeAfter {
		notice(ctx, r.agent, r.job, fmt.Sprintf("@%s resumed after a restart.", r.job.Bot.Handle))
	}
	if p := r.pending; p != nil {
		for i := range p.Calls {
			pc := &p.Calls[i]
			if pc.Done || !pc.Started || pc.Call.ID == p.Waiting {
				continue
			}
			if r.canRepeat(pc.Call.Function.Name, pc.Call.Function.Arguments) {
				pc.Started = false
				continue
			}
			pc.Done, pc.Result = true, interruptedResult(pc.Call.Function.Name)
			r.event(ctx, "tool_result", map[string]any{"id": pc.Call.ID, "name": pc.Call.Function.Name, "error": true, "interrupted": true})
		}
		if p.Waiting != "" {
			if err := r.resumeWaiting(ctx); err != nil {
				return "", false, err
			}
		}
		_ = r.checkpoint(ctx)
		return "", false, nil
	}
	if n := len(r.transcript); n > 0 {
		if last := r.transcript[n-1]; last.Role == openai.ChatMessageRoleAssistant && len(last.ToolCalls) == 0 {
			return strings.TrimSpace(last.Content), true, nil
		}
	}
	return "", false, nil
}

// resumeWaiting handles the call the run had paused for when the restart came:
// its answer (core.Job.Resume) is fed to it unless an approved call had already
// started and may not run twice; then the model and the question's outcome say
// it was interrupted.
func (r *run) resumeWaiting(ctx context.Context) error {
	p, q := r.pending, r.job.Resume
	at := -1
	for i, pc := range p.Calls {
		if pc.Call.ID == p.Waiting {
			at = i
		}
	}
	if at < 0 || q == nil || q.CallID != p.Waiting {
		return &restartError{fmt.Errorf("%w %d: the answer to tool call %q is missing", ErrBadCheckpoint, r.job.Run.ID, p.Waiting)}
	}
	pc := &p.Calls[at]
	args := pc.Call.Function.Arguments
	if len(q.Args) > 0 {
		args = string(q.Args)
	}
	if pc.Started && !r.canRepeat(pc.Call.Function.Name, args) {
		pc.Done, pc.Result, p.Waiting = true, interruptedResult(pc.Call.Function.Name), ""
		r.event(ctx, "tool_result", map[string]any{"id": pc.Call.ID, "name": pc.Call.Function.Name, "question": q.ID, "error": true, "interrupted": true})
		r.outcome(ctx, q, core.OutcomeInterrupted)
		return nil
	}
	pc.Started = false
	return r.resume(ctx, q)
}

// canRepeat reports whether the offered tool name may run again with args.
func (r *run) canRepeat(name, args string) bool {
	for _, t := range r.tools {
		if t.Name() == name {
			return repeatSafe(t, args)
		}
	}
	return false
}
