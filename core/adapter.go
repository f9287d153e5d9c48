package core

import (
	"context"
	"net/http"
	"time"
)

// Adapter is one platform account's outbound side (DESIGN.md §2). Adapters turn
// platform events into Inbound values for Engine.Ingest and deliver outbox entries.
// Optional capabilities are separate interfaces found by type assertion.
type Adapter interface {
	// Account is this adapter's AccountID ("slack/acme"); constant for its lifetime.
	Account() AccountID
	// Bot is the handle this account speaks as, or "*" for a whole-team account.
	Bot() string
	// Deliver posts one message to a conversation and returns the platform message
	// id. It blocks until the platform answered or ctx is done and is called by one
	// delivery lane per (account, conversation), so calls for one conversation never
	// overlap. Errors implementing DeliveryError steer retries; others are retried
	// with backoff.
	Deliver(ctx context.Context, d Delivery) (platformID string, err error)
}

// Runner is implemented by adapters with a long-lived ingress (Socket Mode, long
// polling). Run blocks until ctx is done or the adapter fails for good.
type Runner interface {
	Run(ctx context.Context) error
}

// WebhookMounter is implemented by adapters that receive platform requests (Events
// API, webhooks, card callbacks) on the shared HTTP listener (config http.listen).
// MountHTTP registers handlers under "/<platform>/<account name>/..." and is called
// once before the listener starts.
type WebhookMounter interface {
	MountHTTP(mux *http.ServeMux)
}

// WorkIndicator is implemented by adapters that show when a bot is working in a
// conversation (a Slack reaction on the trigger, Telegram's typing action). Core
// calls Working with Started true when a run begins or resumes and false when it
// ends or pauses for a person, for every binding of the run's thread, through the
// account that would post the bot's reply. Calls are bounded by a short timeout,
// their errors only logged, and they never delay delivery of the reply.
type WorkIndicator interface {
	Working(ctx context.Context, w Work)
}

// Work is one start or end of a bot's work in a conversation.
type Work struct {
	Conversation ConversationRef
	// ReplyTo is the platform id of the message the run answers, when known.
	ReplyTo string
	Bot     Sender
	Thread  ThreadID
	Run     RunID
	Started bool
}

// MessageKeyer is implemented by adapters whose people reply to a specific
// message (Telegram): MessageKey returns the platform identity, in the format of
// Inbound.DedupKey, of a message Deliver posted, so a later reply to it
// (Inbound.ReplyToKey) finds its thread.
type MessageKeyer interface {
	MessageKey(conv ConversationRef, platformID string) string
}

// QuestionAdapter is implemented by adapters that show questions with buttons
// (DESIGN.md §5): Slack Block Kit, Telegram inline keyboards, Feishu cards, the
// terminal. Both methods are called from the delivery lane of the conversation, so
// they are ordered with the thread's messages. Errors are DeliveryErrors as for
// Deliver. An adapter without it gets the question as a plain Deliver text.
type QuestionAdapter interface {
	// PostQuestion shows d.Question with one button per Question.Options() (none
	// for a free-text ask) whose payload carries Question.Token and the option's
	// index, and returns the platform message id.
	PostQuestion(ctx context.Context, d QuestionDelivery) (platformID string, err error)
	// ResolveQuestion replaces the buttons of the message d.PlatformID with
	// d.Question.Decision(). Idempotent.
	ResolveQuestion(ctx context.Context, d QuestionDelivery) error
}

// QuestionDelivery is a question to show or resolve in one conversation.
type QuestionDelivery struct {
	Outbox       OutboxID
	Conversation ConversationRef
	// ReplyTo is the platform id of the message the run answers, when known.
	ReplyTo string
	// Sender is the asking bot.
	Sender   Sender
	Question Question
	// PlatformID is the id PostQuestion returned (resolve only).
	PlatformID string
}

// Sender says who a delivered message is from, so a "*" account can show the bot's
// name (DESIGN.md §1 Account).
type Sender struct {
	Actor  ActorID
	Handle string // bot handle; empty for humans and the system
	Name   string // display name; "system" for notices
}

// System reports whether the message is a system notice.
func (s Sender) System() bool { return s.Actor == SystemActor }

// Delivery is one outbox entry ready for an adapter.
type Delivery struct {
	Outbox       OutboxID
	Thread       ThreadID
	Message      MessageID
	Conversation ConversationRef
	// ReplyTo is the platform id of the message this answers, when known.
	ReplyTo string
	Sender  Sender
	Kind    MessageKind
	// Text is Markdown as the model wrote it; the adapter formats and splits it.
	Text string
	// Streamed are the platform ids, oldest first, of the messages this reply was
	// streamed into in this conversation through this account (Streamer). An
	// adapter implementing Streamer edits them into the final reply instead of
	// posting anew: further parts are posted after them, surplus ones removed; it
	// returns Streamed[0]. Empty for every other delivery (DESIGN.md §6).
	Streamed []string
}

// Streamer is implemented by adapters that show a bot's reply while it is written
// (DESIGN.md §6 streaming replies): core posts the first text and then edits it in place,
// at most once per StreamInterval per conversation. The final reply is still one
// stored message delivered by the outbox; its Delivery.Streamed names the streamed
// messages, which the adapter's Deliver edits into the final, fully formatted text.
// Stream calls for one conversation never overlap.
type Streamer interface {
	// StreamInterval is the least time between two Stream calls for one
	// conversation (the platform's edit rate limit); 0 means streaming is off for
	// this account. Constant for the adapter's lifetime.
	StreamInterval() time.Duration
	// Stream shows s.Text, the whole reply so far, in the messages s.Posted (the
	// ids returned by the previous call, oldest first): it edits parts that
	// changed, posts further parts after them when the text outgrew them, and
	// removes surplus ones. Empty s.Text removes every message in s.Posted (a run
	// that ended without a reply). It returns the ids of the stream's messages as
	// far as known, also together with an error (then at least s.Posted plus any
	// part it posted). Errors are DeliveryErrors as for Deliver; core skips a
	// rate-limited update and tries again after RetryAfter.
	Stream(ctx context.Context, s StreamDelivery) (posted []string, err error)
}

// StreamDelivery is one update of a streamed reply in one conversation.
type StreamDelivery struct {
	Conversation ConversationRef
	// ReplyTo is the platform id of the message the run answers, when known.
	ReplyTo string
	Sender  Sender
	// Text is Markdown: the reply so far, or a short status ("_working: shell_").
	Text string
	// Posted are the stream's messages so far, oldest first (none at the start).
	Posted []string
	// Shown is the Text of the last successful call, so an adapter can leave
	// parts that did not change alone; "" at the start.
	Shown string
}

// DeliveryError is an error from Deliver that tells the lane what to do next.
// Adapters map their platform errors onto it (Slack "ratelimited", Telegram 429
// retry_after, Feishu rate-limit codes).
type DeliveryError interface {
	error
	// Permanent errors (channel_not_found, invalid_auth) are recorded on the outbox
	// entry and never retried.
	Permanent() bool
	// RetryAfter is how long the platform asked us to wait; 0 means use backoff.
	RetryAfter() time.Duration
}

// Inbound is one human message from a platform, normalized by its adapter.
type Inbound struct {
	// Account is the account that received it.
	Account AccountID
	// Platform is the binding's platform name ("slack", "telegram", "feishu", "console").
	Platform string
	// DedupKey is the platform message identity (DESIGN.md §3), for example
	// "slack:T1:C1:1700000000.000100"; ingestion is exactly-once per key.
	DedupKey string
	// ThreadKey is the platform thread key (DESIGN.md §3 table).
	ThreadKey string
	// Conversation is where replies for this thread go on this platform.
	Conversation ConversationRef
	// PlatformID is the platform's id for this message (Slack ts, Telegram message_id).
	PlatformID string
	// SenderID and SenderName identify the human; SenderID is the full ActorID.
	SenderID   ActorID
	SenderName string
	// Text is the message with mentions normalized to @handle.
	Text string
	// Mentions are bot handles the adapter resolved from native mentions (a mention
	// of the account's own platform user); "*" means the thread's default bot.
	// Text @handles are found by core and need not be listed.
	Mentions []string
	// MentionsHumans is true when the message mentions other people. With no bot
	// mentioned it then wakes no bot in a known thread (the seed's routing rules,
	// DESIGN.md §4); and such a message is never the answer to a free-text question
	// unless it replies to the question's message (DESIGN.md §5).
	MentionsHumans bool
	// StartThread allows creating a thread when ThreadKey is unknown. A message
	// that mentions no bot outside a known thread has it false and is dropped.
	StartThread bool
	// NewThread starts a fresh thread for ThreadKey even when one exists (/new).
	NewThread bool
	// Thread, when non-zero, targets an existing thread directly (a terminal
	// /switch) and rebinds ThreadKey to it.
	Thread ThreadID
	// ReplyToKey is the platform identity (DedupKey format) of the message this one
	// replies to. When openbot stored or delivered that message, this one joins its
	// thread (a Telegram reply chain), whatever ThreadKey says.
	ReplyToKey string
	// DefaultBot is the bot a new thread defaults to (an account's own bot), or "".
	DefaultBot string
	// Received is when the platform says the message was sent.
	Received time.Time
	// Attachments are the files on the message, with Ref set for FileFetcher
	// (or Data for content that came with the message); they are downloaded
	// after the message is stored (core/files.go).
	Attachments []Attachment
	// Announce marks a message that did not come from its conversation (an
	// inbound webhook's event, posted into Conversation): it has no platform
	// origin, so it is delivered to every binding of its thread, Conversation
	// included; it binds Conversation only when it starts the thread, and that
	// first delivery opens a platform thread where the adapter can (ThreadOpener).
	Announce bool
	// WakeNobody stores and delivers the message but wakes no bot (an event
	// over its trigger's rate limit).
	WakeNobody bool
}

// ThreadOpener is implemented by adapters whose conversations hold threads
// under a message (Slack): when the first message of a thread started by an
// Announce inbound was posted at the top level of conv with platform id root,
// OpenThread returns the conversation of the platform thread under it and its
// platform thread key (Inbound.ThreadKey format), and core moves the binding
// there, so the rest of the thread is posted under that message and people's
// replies in it join the thread. ok is false when conv is a thread already or
// the platform has none. It does no I/O.
type ThreadOpener interface {
	OpenThread(conv ConversationRef, root string) (thread ConversationRef, threadKey string, ok bool)
}

// Answer is a person's answer to a question: a button click (Choice is the index
// into Question.Options(), with Token from the button payload) or a free-text reply
// (Choice -1, Text). Actor must identify the person; an Answer without one fails
// closed.
type Answer struct {
	Token    string     // from a button payload; or
	Question QuestionID // from a terminal /approve N
	Choice   int
	Text     string
	Actor    ActorID
	Name     string
	Account  AccountID
}

// AnswerOutcome says what Engine.Answer did.
type AnswerOutcome string

// Answer outcomes. Only AnswerAccepted changed anything.
const (
	AnswerAccepted  AnswerOutcome = "accepted"
	AnswerDecided   AnswerOutcome = "already_decided" // someone answered first, or it expired
	AnswerForbidden AnswerOutcome = "forbidden"       // not an approver of this question
	AnswerUnknown   AnswerOutcome = "unknown"         // no such question, or a bad choice
)

// AnswerResult is Engine.Answer's outcome and the question as it now stands (with
// the earlier decision for AnswerDecided), so adapters can word private notices.
type AnswerResult struct {
	Outcome  AnswerOutcome
	Question Question
}

// IngestResult says what Ingest did with an Inbound.
type IngestResult struct {
	Thread    ThreadID
	Message   MessageID
	Duplicate bool     // the dedup key was seen before; nothing changed
	Dropped   bool     // not for openbot (no mention, unknown thread)
	Woken     []string // handles of the bots that got an inbox item
}
