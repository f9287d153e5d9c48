// Package core is openbot's runtime model: actors with durable mailboxes, threads,
// messages, routing, the per-bot scheduler, runs, bindings and the outbox with its
// delivery lanes. It implements the seed's sections 3 to 8 and 10 to 11
// (seeds/openbot-architecture.md) as DESIGN.md sections 1 to 4 adapt them.
//
// Core imports no platform SDK, no LLM SDK and no storage engine: it defines the
// Store, Adapter and Agent interfaces it needs and is handed implementations.
package core

import (
	"encoding/json"
	"strings"
	"time"
)

// ActorID names an actor. Bots are "bot:<handle>"; humans carry their platform
// identity ("slack:<team>:<user>", "telegram:<user id>", "feishu:<open_id>",
// "console:you"). The empty ActorID is the system, which wakes nobody.
type ActorID string

// SystemActor is the sender of restart, failure and hop-limit notices (seed §4.1).
const SystemActor ActorID = ""

// BotActorID returns the ActorID of the bot with the given handle.
func BotActorID(handle string) ActorID { return ActorID("bot:" + handle) }

// ActorKind says who drains an actor's mailbox.
type ActorKind string

// Actor kinds.
const (
	ActorHuman ActorKind = "human"
	ActorBot   ActorKind = "bot"
)

// Actor is anyone who can send or receive messages (seed §1). Humans are created on
// first sight with their display name; bots come from configuration.
type Actor struct {
	ID      ActorID   `json:"id"`
	Kind    ActorKind `json:"kind"`
	Name    string    `json:"name"`
	Handle  string    `json:"handle,omitempty"` // bots only, without the @
	Created time.Time `json:"created"`
}

// BotProfile is a configured bot (seed §3 bot_profiles).
type BotProfile struct {
	Handle       string `json:"handle"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Instructions string `json:"instructions"`
	LLM          string `json:"llm"` // provider profile name
	// Fallbacks are the profiles asked, in order, when LLM's fails for a reason
	// another may not share (rate limit, outage, timeout; agents/chain.go).
	Fallbacks     []string `json:"fallbacks,omitempty"`
	Model         string   `json:"model"` // overrides the profile's model when set
	Tools         []string `json:"tools"`
	ApprovalTools []string `json:"approval_tools"`
	Memory        bool     `json:"memory"`
	// MaxModelCalls caps model calls per run; 0 means the global limit.
	MaxModelCalls int `json:"max_model_calls"`
	// MaxTokensPerRun caps input plus output tokens per run; 0 means the global
	// limit (cost control).
	MaxTokensPerRun int `json:"max_tokens_per_run,omitempty"`
	// MaxTokens, Temperature and ReasoningEffort are sent with each model call
	// when set (max_tokens, temperature, reasoning_effort; the last only where
	// the server supports it). Nil Temperature and zero values send nothing.
	MaxTokens       int      `json:"max_tokens,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	// MaxParallelThreads is how many different threads the bot may run at once;
	// 0 or 1 is the seed's one thread at a time (invariant 3). There is never more
	// than one run per (bot, thread), and Limits.MaxConcurrentRuns caps the total
	// across bots (DESIGN.md §6).
	MaxParallelThreads int `json:"max_parallel_threads,omitempty"`
	// Approvers may answer this bot's questions (ActorIDs such as
	// "slack:T1:U1", "telegram:42", "feishu:ou_x", "console:you"); empty means the
	// global approvers, else the person who asked for the work (DESIGN.md §5).
	Approvers []ActorID `json:"approvers,omitempty"`
	// ToolApprovers name who may approve calls of particular tools; for an
	// approval of a tool they match (ToolMatches), the first entry with approvers
	// overrides Approvers (DESIGN.md §5 "the approvers configured for that tool").
	ToolApprovers []ToolApprovers `json:"tool_approvers,omitempty"`
	// SelfApprove lets the person who asked for this bot's work approve its
	// tool calls (Options.SelfApprove for one bot).
	SelfApprove bool `json:"self_approve,omitempty"`
	// Vision sends the images attached to the run's trigger messages to the
	// model as image parts (core/files.go, agents/vision.go).
	Vision bool `json:"vision,omitempty"`
	// Fetch is the bot's http_fetch egress policy (core/egress.go).
	Fetch FetchPolicy `json:"fetch,omitzero"`
}

// Chain is the bot's fallback chain: LLM, then Fallbacks; nil when LLM is
// empty (the agent's default profile).
func (b BotProfile) Chain() []string {
	if b.LLM == "" {
		return nil
	}
	return append([]string{b.LLM}, b.Fallbacks...)
}

// ToolApprovers is one approval_tools entry that names its own approvers: Tool is
// a tool name or pattern as in ApprovalTools ("shell", "gh", "gh__*").
type ToolApprovers struct {
	Tool      string    `json:"tool"`
	Approvers []ActorID `json:"approvers"`
}

// ID returns the bot's ActorID.
func (b BotProfile) ID() ActorID { return BotActorID(b.Handle) }

// parallel is MaxParallelThreads with its default of 1.
func (b BotProfile) parallel() int { return max(1, b.MaxParallelThreads) }

// ThreadID, MessageID, ItemID, RunID and OutboxID are store-assigned, strictly
// increasing sequence numbers (bbolt NextSequence), so ordering by ID is arrival order.
type (
	ThreadID  uint64
	MessageID uint64
	ItemID    uint64
	RunID     uint64
	OutboxID  uint64
)

// AccountID names one platform credential set: "<kind>/<account name>", for example
// "slack/acme" or "console/local" (DESIGN.md §1 Account).
type AccountID string

// ConversationRef is an adapter-built, opaque reference to where messages go on a
// platform (a Slack channel and thread_ts, a Telegram chat and topic). Core never parses it.
type ConversationRef string

// Binding is a platform conversation that a thread mirrors to (DESIGN.md §3).
type Binding struct {
	Platform     string          `json:"platform"` // "slack", "telegram", "feishu", "console"
	Conversation ConversationRef `json:"conversation"`
	// Accounts that are known to be in this conversation, in the order first seen.
	// The first is the one the binding came in through.
	Accounts []AccountID `json:"accounts"`
}

// HeldHandoff is a bot's hand-off that waits until the sender's queue for the thread
// is empty (seed §4.1). Only the latest hold per (From, Target) is kept.
type HeldHandoff struct {
	From    ActorID   `json:"from"`
	Target  ActorID   `json:"target"`
	Message MessageID `json:"message"`
}

// Thread is one task's conversation (seed §1, DESIGN.md §3).
type Thread struct {
	ID    ThreadID `json:"id"`
	Key   string   `json:"key"` // the platform key that created it
	Title string   `json:"title,omitempty"`
	// DefaultBot coordinates the thread and sees it unscoped; falls back to the
	// engine's default bot when empty.
	DefaultBot       ActorID       `json:"default_bot,omitempty"`
	Participants     []ActorID     `json:"participants"`
	Bindings         []Binding     `json:"bindings"`
	HopLimitNotified bool          `json:"hop_limit_notified"`
	Held             []HeldHandoff `json:"held,omitempty"`
	Created          time.Time     `json:"created"`
}

// HasParticipant reports whether id takes part in the thread.
func (t *Thread) HasParticipant(id ActorID) bool {
	for _, p := range t.Participants {
		if p == id {
			return true
		}
	}
	return false
}

// MessageKind marks messages that routing or rendering treat specially.
type MessageKind string

// Message kinds.
const (
	KindChat        MessageKind = ""
	KindNotice      MessageKind = "notice"       // system notice: failures, restarts
	KindHopLimit    MessageKind = "hop_limit"    // seed §4.3
	KindHandoffHeld MessageKind = "handoff_held" // seed §4.1
	// KindSummary is a bot's summary of the older part of a thread
	// (Summarizer): stored, shown in the dashboard and `openbot thread`, never
	// posted to a platform, never routed; only the bot that wrote it reads it
	// as history.
	KindSummary MessageKind = "summary"
)

// Origin is where an inbound human message came from; the outbox never echoes a
// message back to the conversation it came from.
type Origin struct {
	Account      AccountID       `json:"account"`
	Conversation ConversationRef `json:"conversation"`
	PlatformID   string          `json:"platform_id"` // platform message id (ts, message_id)
}

// Message is an immutable post in a thread (seed §1). Mentions are bot handles
// without the @, in order of appearance.
type Message struct {
	ID         MessageID   `json:"id"`
	Thread     ThreadID    `json:"thread"`
	Sender     ActorID     `json:"sender"` // SystemActor for notices
	SenderName string      `json:"sender_name"`
	Text       string      `json:"text"`
	Mentions   []string    `json:"mentions,omitempty"`
	Hop        int         `json:"hop"`
	Run        RunID       `json:"run,omitempty"`
	Kind       MessageKind `json:"kind,omitempty"`
	Origin     *Origin     `json:"origin,omitempty"`
	Created    time.Time   `json:"created"`
	// Attachments are a person's files (saved into the workspace by the
	// download queue) or a bot's file to post (core/files.go).
	Attachments []Attachment `json:"attachments,omitempty"`
	// Covers is, on a KindSummary message, the newest message the summary
	// stands for: it covers the thread up to and including it.
	Covers MessageID `json:"covers,omitempty"`
}

// ItemKind is the kind of an inbox item (seed §1).
type ItemKind string

// Inbox item kinds.
const (
	ItemMessage  ItemKind = "message"
	ItemQuestion ItemKind = "question"
	ItemResume   ItemKind = "resume"
)

// ItemStatus is an inbox item's state: queued -> processing -> done | cancelled | failed.
type ItemStatus string

// Inbox item statuses.
const (
	ItemQueued     ItemStatus = "queued"
	ItemProcessing ItemStatus = "processing"
	ItemDone       ItemStatus = "done"
	ItemCancelled  ItemStatus = "cancelled"
	ItemFailed     ItemStatus = "failed"
)

// InboxItem is one unit of work in an actor's mailbox. It points at a message or a
// run and never carries content (seed invariants 1 and 2).
type InboxItem struct {
	ID      ItemID     `json:"id"`
	Actor   ActorID    `json:"actor"`
	Thread  ThreadID   `json:"thread"`
	Kind    ItemKind   `json:"kind"`
	Message MessageID  `json:"message,omitempty"`
	Run     RunID      `json:"run,omitempty"`
	Status  ItemStatus `json:"status"`
	Created time.Time  `json:"created"`
}

// RunStatus is a run's state: queued -> running -> completed | failed | cancelled |
// waiting_human (seed §5).
type RunStatus string

// Run statuses.
const (
	RunQueued       RunStatus = "queued"
	RunRunning      RunStatus = "running"
	RunCompleted    RunStatus = "completed"
	RunFailed       RunStatus = "failed"
	RunCancelled    RunStatus = "cancelled"
	RunWaitingHuman RunStatus = "waiting_human"
)

// Terminal reports whether no more work happens in a run with this status.
func (s RunStatus) Terminal() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled
}

// Usage counts tokens and model calls of a run.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	ModelCalls       int `json:"model_calls"`
}

// Add returns u plus o.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.ModelCalls + o.ModelCalls}
}

// Run is one execution of one bot's agent loop in one thread (seed §1, invariant 4).
type Run struct {
	ID       RunID       `json:"id"`
	Bot      ActorID     `json:"bot"`
	Thread   ThreadID    `json:"thread"`
	Status   RunStatus   `json:"status"`
	Items    []ItemID    `json:"items"`
	Triggers []MessageID `json:"triggers"`
	Error    string      `json:"error,omitempty"`
	Usage    Usage       `json:"usage"`
	// Checkpoint is the agent's transcript, opaque to core, saved after every step
	// and kept while the run waits for a person, so the run resumes from it.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// Question is the pending question of a waiting_human run.
	Question QuestionID `json:"question,omitempty"`
	Created  time.Time  `json:"created"`
	Started  time.Time  `json:"started,omitempty"`
	Ended    time.Time  `json:"ended,omitempty"`
	// Restarts counts the starts of this run from the beginning after a process
	// died before its first step checkpoint (recover, DESIGN.md §8); at
	// MaxRestartsBeforeFirstStep the next such death fails it with a notice.
	Restarts int `json:"restarts,omitempty"`
	// Streamed are the platform messages the run's reply is being streamed into,
	// recorded when a stream posts or grows (core/stream.go) and cleared when the
	// run settles or pauses, so a run resumed after a kill edits them into its
	// reply or removes them instead of leaving them in the chat (DESIGN.md §6, §8).
	Streamed []StreamedMessages `json:"streamed,omitempty"`
	// Owner is the process that runs or last ran the run (Engine.ClaimOwner:
	// its process id and a per-start part) and LeaseUntil when its claim lapses
	// unless renewed (core/lease.go, shared stores only): both set by the pick
	// that starts, resumes or restarts it; LeaseUntil cleared when it settles or
	// pauses, both when recovery queues it to restart. A running run whose claim
	// lapsed is recovered by another process as a restart would.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitempty"`
}

// StreamedMessages are the platform ids, oldest first, of the messages a run's
// reply was streamed into in one conversation through one account.
type StreamedMessages struct {
	Account      AccountID       `json:"account"`
	Conversation ConversationRef `json:"conversation"`
	IDs          []string        `json:"ids"`
}

// RunEvent is one step inside a run, appended in order (seed §1; open-bot run_events).
// Types: "model_call", "tool_call", "tool_result", "text", "error", "message", "status".
type RunEvent struct {
	Run     RunID           `json:"run"`
	Seq     uint64          `json:"seq"` // assigned by the store, 1-based per run
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	At      time.Time       `json:"at"`
}

// OutboxStatus is the delivery state of an outbox entry.
type OutboxStatus string

// Outbox statuses.
const (
	OutboxPending   OutboxStatus = "pending"
	OutboxDelivered OutboxStatus = "delivered"
	OutboxFailed    OutboxStatus = "failed" // permanent error, not retried
)

// OutboxOp is the kind of delivery an outbox entry asks for.
type OutboxOp string

// Outbox operations.
const (
	OpMessage  OutboxOp = ""
	OpQuestion OutboxOp = "question"
	OpResolve  OutboxOp = "resolve"
	OpFile     OutboxOp = "file" // post the message's file (FileUploader)
)

// OutboxEntry is one message to deliver to one binding (DESIGN.md §4).
type OutboxEntry struct {
	ID           OutboxID        `json:"id"`
	Account      AccountID       `json:"account"`
	Conversation ConversationRef `json:"conversation"`
	Thread       ThreadID        `json:"thread"`
	Message      MessageID       `json:"message"`
	// ReplyTo is the platform id of the message this one answers, if known.
	ReplyTo string `json:"reply_to,omitempty"`
	// Op is what to do: post the message (""), post a question with its buttons
	// (OpQuestion), or replace a posted question's buttons with its decision
	// (OpResolve). Question names the question for the last two.
	Op         OutboxOp     `json:"op,omitempty"`
	Question   QuestionID   `json:"question,omitempty"`
	Status     OutboxStatus `json:"status"`
	Attempts   int          `json:"attempts"`
	PlatformID string       `json:"platform_id,omitempty"` // recorded on delivery
	Error      string       `json:"error,omitempty"`
	Created    time.Time    `json:"created"`
	// Streamed are the platform ids of the messages a bot's reply was streamed
	// into through this account in this conversation (Delivery.Streamed): the
	// delivery edits them instead of posting anew (DESIGN.md §6).
	Streamed []string `json:"streamed,omitempty"`
	// Opens marks the first message of a thread started from outside its
	// conversation (Inbound.Announce): once delivered, the thread's binding
	// moves into the platform thread under it (ThreadOpener).
	Opens bool `json:"opens,omitempty"`
}

// Activity is one line of the diagnostic timeline (seed §3 activity_log). Its IDs are
// plain values, not references, so it outlives what it describes.
type Activity struct {
	Seq     uint64    `json:"seq"` // assigned by the store
	Event   string    `json:"event"`
	Level   string    `json:"level"` // "info", "warn", "error"
	Summary string    `json:"summary"`
	Thread  ThreadID  `json:"thread,omitempty"`
	Actor   ActorID   `json:"actor,omitempty"`
	Run     RunID     `json:"run,omitempty"`
	Item    ItemID    `json:"item,omitempty"`
	Message MessageID `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// TodoItem is one entry of a bot's todo list for a thread (seed §6 item 5).
type TodoItem struct {
	Text   string `json:"text"`
	Status string `json:"status"` // "pending", "in_progress", "done"
}

// QuestionID is a store-assigned sequence number.
type QuestionID uint64

// QuestionKind says what a paused run asks (seed §7, DESIGN.md §5).
type QuestionKind string

// Question kinds.
const (
	QuestionAsk      QuestionKind = "ask"      // ask_human: free text, or one of Choices
	QuestionApproval QuestionKind = "approval" // a tool in the bot's approval_tools
)

// QuestionStatus is a question's state: pending -> answered | expired.
type QuestionStatus string

// Question statuses.
const (
	QuestionPending  QuestionStatus = "pending"
	QuestionAnswered QuestionStatus = "answered"
	QuestionExpired  QuestionStatus = "expired" // an expired approval is a rejection
)

// Approval choices: the indexes of Question.Options for an approval.
const (
	ChoiceApprove = 0
	ChoiceReject  = 1
)

// QuestionPost is where a question is shown: one per binding of its thread, with
// the platform message id once delivered, so the decision can replace the buttons.
type QuestionPost struct {
	Account      AccountID       `json:"account"`
	Conversation ConversationRef `json:"conversation"`
	PlatformID   string          `json:"platform_id,omitempty"`
}

// Question is a paused run's ask (seed §7, DESIGN.md §5). It is also the audit
// record of the decision: who, when, through which account, what was approved and
// the hash of its exact arguments.
type Question struct {
	ID QuestionID `json:"id"`
	// Token is a short opaque identifier (at most 16 ASCII characters) for button
	// payloads such as Telegram callback_data (64 bytes), unique in the store.
	Token  string       `json:"token"`
	Kind   QuestionKind `json:"kind"`
	Run    RunID        `json:"run"`
	Bot    ActorID      `json:"bot"`
	Thread ThreadID     `json:"thread"`
	// Text is what people are asked, in the bot's words.
	Text string `json:"text"`
	// Choices are ask_human's options (empty: free text). Approvals have none; their
	// options are Approve and Reject (see Options).
	Choices []string `json:"choices,omitempty"`
	// Tool, Args and ArgsHash describe an approval: the tool, its exact JSON
	// arguments, and the hex SHA-256 of Args. An approved tool runs with Args.
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	ArgsHash string          `json:"args_hash,omitempty"`
	// Reach says what the paused tool call can reach ("runs in the sandbox with
	// network off"), and what this call's arguments change ("Timeout: 60 s."),
	// shown in approval prompts; "" when the tool does not say.
	Reach string `json:"reach,omitempty"`
	// Warnings are the tool's warnings about this call (a shell command that
	// decodes and runs hidden content), each one sentence, shown above the
	// command in approval prompts; none when the tool has none.
	Warnings []string `json:"warnings,omitempty"`
	// Askers are the people who asked for the work the question belongs to: the
	// human senders of the run's trigger messages, found through a hand-off chain
	// back to the human message that started it. With no approvers configured,
	// only they may approve (DESIGN.md §5); empty fails closed.
	Askers []ActorID `json:"askers,omitempty"`
	// CallID is the model's tool call id the answer resumes.
	CallID string         `json:"call_id,omitempty"`
	Status QuestionStatus `json:"status"`
	// Answer is the chosen option's text or the free-text reply.
	Answer string `json:"answer,omitempty"`
	// Choice is the index into Options of the answer, -1 for free text.
	Choice         int            `json:"choice"`
	AnsweredBy     ActorID        `json:"answered_by,omitempty"`
	AnsweredByName string         `json:"answered_by_name,omitempty"`
	AnsweredVia    AccountID      `json:"answered_via,omitempty"`
	AnsweredAt     time.Time      `json:"answered_at,omitempty"`
	Expires        time.Time      `json:"expires"`
	Created        time.Time      `json:"created"`
	Posts          []QuestionPost `json:"posts,omitempty"`

	// Outcome is what became of an approved call: "ran" once it ran, or "not
	// run: <why>" when it could not (its tool source down, the run failed
	// first); "" while not known or for other questions (DESIGN.md §5: an
	// approved call runs exactly once or the thread is told why it did not).
	Outcome string `json:"outcome,omitempty"`
}

// Options are the buttons to show: Approve and Reject for an approval, Choices for
// an ask_human with choices, none for a free-text ask_human.
func (q Question) Options() []string {
	if q.Kind == QuestionApproval {
		return []string{"Approve", "Reject"}
	}
	return q.Choices
}

// Approved reports whether an approval was approved (expired means rejected).
func (q Question) Approved() bool {
	return q.Kind == QuestionApproval && q.Status == QuestionAnswered && q.Choice == ChoiceApprove
}

// Decision is a short human-readable outcome, "Approved by Alice", "Rejected by
// Bob", "Expired: rejected", "Answered by Alice: yes", or "" while pending.
func (q Question) Decision() string {
	switch {
	case q.Status == QuestionExpired && strings.HasPrefix(q.Answer, cancelledAnswer):
		return "Cancelled by " + strings.TrimPrefix(q.Answer, cancelledAnswer) // its run was cancelled (core/control.go)
	case q.Status == QuestionExpired:
		return "Expired without an answer: rejected"
	case q.Status != QuestionAnswered:
		return ""
	case q.Kind == QuestionApproval && q.Choice == ChoiceApprove:
		return "Approved by " + q.AnsweredByName
	case q.Kind == QuestionApproval:
		return "Rejected by " + q.AnsweredByName
	}
	return "Answered by " + q.AnsweredByName + ": " + q.Answer
}
