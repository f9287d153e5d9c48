package core

import (
	"context"
	"encoding/json"
)

// Agent runs one bot's model/tool loop for one run (seed §6). It is implemented by
// package agents; core calls it from the bot's worker with a slot of the global cap
// held, so at most Limits.MaxConcurrentRuns Execute calls overlap and never two for
// one bot (seed invariant 3).
type Agent interface {
	// Execute unrolls the thread through job.Env, runs the loop and returns the
	// reply to post (empty: post nothing). It blocks until done or ctx is done; an
	// error fails the run and core posts a notice naming the cause in the thread.
	Execute(ctx context.Context, job *Job) (Result, error)
}

// Job is everything an agent needs for one run. The thread is read through Env only;
// a run writes thread state only by posting messages (seed invariant 7).
type Job struct {
	Run    Run
	Bot    BotProfile
	Thread Thread
	// Triggers are the messages whose inbox items woke this run, oldest first;
	// they render as "(new)" in the history (seed §6, G4).
	Triggers []Message
	// Roster is every configured bot, this one included.
	Roster []BotProfile
	// DefaultBot is the thread's default bot handle (thread setting, else global).
	DefaultBot string
	// Scoped is true when this bot is a delegate: not the default bot and not the
	// only bot in the thread (seed §6 scope decision).
	Scoped bool
	// Participants are the thread's actors with their names.
	Participants []Actor
	// Resume is set when this run continues after its question was answered (or
	// expired): the agent restores Run.Checkpoint and feeds the answer to the tool
	// call Resume.CallID. Triggers are then the run's original triggers.
	Resume *Question
	// Restart is set when this run was interrupted by a crash, kill or shutdown
	// and continues from its last step checkpoint (Run.Checkpoint, DESIGN.md §8);
	// Resume is then the run's answered question, if it has one.
	Restart bool
	Env     RunEnv

	// startedBy maps a conversation to the platform id of the newest human message
	// in it, which a hand-off's reply answers when its own trigger has no origin.
	startedBy map[ConversationRef]string
	observer  Observer      // the engine's, for the agent's metrics (Job.Observer)
	channel   channelBudget // where the thread started, and its daily budget
}

// Result is what an agent run produced. With Pause set the run waits for a person
// (seed §7): core stores the question and Checkpoint in one transaction, parks the
// thread for the bot and shows the question on every binding; Reply is ignored.
type Result struct {
	Reply string
	Usage Usage
	Pause *Pause
	// Checkpoint is the transcript to resume from; required with Pause.
	Checkpoint json.RawMessage
	// Step, when not nil, is the run's last step (the model call that gave
	// Reply): core stores its ledger entry and event in the transaction that
	// settles the run, whatever the outcome, so the last call, the reply and the
	// run's end are one commit (DESIGN.md §7); in a transaction of their own
	// when the run is not settled here (shutdown stopped it) or its settle
	// failed, since the call was made and paid for. Its Checkpoint is not stored: a
	// settled run keeps none. An agent whose RunEnv is a StepRecorder may hand
	// its last step here instead of recording it.
	Step *Step
}

// Pause is what a paused run asks: ask_human (Kind QuestionAsk, Text, optional
// Choices) or an approval of one tool call (Kind QuestionApproval, Tool, exact Args).
// CallID is the model's tool call id the answer will resume. Reach is the tool's
// description of what the call can reach, shown in the approval prompt
// (Question.Reach), or "". Warnings are the tool's warnings about this call
// (Question.Warnings).
type Pause struct {
	Kind     QuestionKind
	Text     string
	Choices  []string
	Tool     string
	Args     json.RawMessage
	CallID   string
	Reach    string
	Warnings []string
}

// RunEnv is the run's window onto the store and the thread, provided by core.
// Every method is safe for concurrent use (parallel tool calls) and honours ctx.
type RunEnv interface {
	// Messages returns up to limit messages with IDs > after, oldest first.
	Messages(ctx context.Context, after MessageID, limit int) ([]Message, error)
	// MessagesBefore returns up to limit messages with IDs < before (0 = newest),
	// newest first.
	MessagesBefore(ctx context.Context, before MessageID, limit int) ([]Message, error)
	// Count is the number of messages in the thread.
	Count(ctx context.Context) (int, error)
	// RecordEvent appends a run event (a model call, a tool call, a tool result).
	RecordEvent(ctx context.Context, typ string, payload any) error
	// Checkpoint stores the agent transcript so far on the run.
	Checkpoint(ctx context.Context, transcript json.RawMessage) error
	// Post posts a message into the thread mid-run, routed like a reply.
	Post(ctx context.Context, text string) (MessageID, error)
	// Todo and SetTodo read and replace this bot's todo list for the thread.
	Todo(ctx context.Context) ([]TodoItem, error)
	SetTodo(ctx context.Context, items []TodoItem) error
}

// Noticer is an optional capability of the RunEnv core provides: Notice posts a
// system notice into the run's thread (Kind notice, sender "system"; it wakes no
// bot), shown on every binding. Agents use it for what people must see but is
// not the bot speaking, such as a tool source that is not available (DESIGN.md
// §6). Safe for concurrent use; it honours ctx.
type Noticer interface {
	Notice(ctx context.Context, text string) error
}

// Summarizer is an optional capability of the RunEnv core provides:
// PutSummary stores the run's bot's summary of its thread up to and including
// message covers, as a KindSummary message sent by the bot (never posted,
// never routed) and returns it. Storing the same bot's summary for the same
// covers again returns the first one unchanged, so a run restarted after a
// crash never makes two. It honours ctx.
type Summarizer interface {
	PutSummary(ctx context.Context, text string, covers MessageID) (Message, error)
}

// OutcomeRecorder is an optional capability of the RunEnv core provides:
// RecordOutcome stores on question q what became of the call people approved
// (Question.Outcome: "ran", or "not run: <why>"), as soon as it is known, so the
// approval audit shows an approved call that could not run (DESIGN.md §5).
// Recording again replaces the outcome. It honours ctx.
type OutcomeRecorder interface {
	RecordOutcome(ctx context.Context, q QuestionID, outcome string) error
}

// CheckpointHolder is an optional capability of the RunEnv core provides:
// HoldCheckpoint hands core a new run's first checkpoint, the step boundary
// before its first model call (DESIGN.md §8), without storing it. Core stores it
// only when the run is about to be seen before a step of its own is stored: just
// before its first streamed text is posted (core/stream.go), or when shutdown
// stops the run. A checkpoint a step stores (StepRecorder with a Checkpoint,
// RunEnv.Checkpoint) supersedes it, and it never replaces one; a run that ends
// keeps neither. A run killed while its first checkpoint is only held has
// shown nothing and is started again from the beginning (recover,
// MaxRestartsBeforeFirstStep). It returns at once and keeps transcript as it is:
// the caller must not change it afterwards.
type CheckpointHolder interface {
	HoldCheckpoint(transcript json.RawMessage)
}
