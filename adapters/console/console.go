// Package console is the terminal channel (DESIGN.md §2
// "adapters/console"): a person at a terminal is the human actor "console:you" and
// talks to the whole bot team with no chat platform. Lines typed are ingested as
// messages; bot replies print as blocks "[handle] text" as they are delivered.
//
// Like every adapter it imports only core and the standard library (never agents,
// store or config) and reaches the engine through the small Engine interface.
package console

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"openbot/core"
)

// Engine is the part of *core.Engine the console uses.
type Engine interface {
	// Ingest stores one inbound human message and routes it (core.Engine.Ingest).
	Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error)
	// Threads lists threads, newest first, at most limit (core.Engine.Threads).
	Threads(ctx context.Context, limit int) ([]core.Thread, error)
	// Answer records an answer to a question (core.Engine.Answer).
	Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error)
	// Questions lists questions, pending only when asked (core.Engine.Questions).
	Questions(ctx context.Context, pendingOnly bool) ([]core.Question, error)
	// ThreadByKey is the thread a thread key is bound to now, 0 for none
	// (core.Engine.ThreadByKey).
	ThreadByKey(ctx context.Context, key string) (core.ThreadID, error)
}

// Platform is the binding platform name of console threads.
const Platform = "console"

// Conversation is the console's only conversation reference.
const Conversation core.ConversationRef = "main"

// Human is the ActorID of the person at the terminal.
const Human core.ActorID = "console:you"

// Options configures an Adapter.
type Options struct {
	// Name is the account name; the account is "console/<Name>". Default "local".
	Name string
	// Engine receives typed messages. Required.
	Engine Engine
	// In is read line by line by Run; Out receives replies and notices. Required.
	In  io.Reader
	Out io.Writer
	// Interactive prints a greeting with the commands; set it when In is a terminal.
	Interactive bool
	// LogPath, when set, is where openbot's log goes; the greeting names it, so
	// a notice that says "the log has the details" can be followed.
	LogPath string
	Logger  *slog.Logger
	// Now is the clock for Inbound.Received; default time.Now.
	Now func() time.Time
	// Settle, when set, is called before each line after the first and must
	// return once the team is done with the previous one (core.Engine.WaitIdle).
	// Scripted input sets it, so "/approve" lines follow the question they answer.
	Settle func(ctx context.Context) error
	// Cursors, when set, keeps a bare /new across restarts (cursor
	// "console/<Name>/new", DESIGN.md §8), as the platform adapters do; nil keeps
	// it in memory only.
	Cursors core.Cursors
}

// Adapter is the terminal channel. It implements core.Adapter (Deliver prints) and
// core.Runner (Run reads the terminal). Deliver and Run may be called concurrently.
type Adapter struct {
	name        string
	account     core.AccountID
	engine      Engine
	in          io.Reader
	out         io.Writer
	interactive bool
	logPath     string
	log         *slog.Logger
	now         func() time.Time
	settle      func(ctx context.Context) error
	cursors     core.Cursors

	mu      sync.Mutex // guards out, seq, current, target, fresh
	seq     uint64     // platform ids handed out by Deliver
	current core.ThreadID
	target  core.ThreadID // set by /switch for following messages
	fresh   bool          // /new: the next message starts a new thread
}

var (
	_ core.Adapter = (*Adapter)(nil)
	_ core.Runner  = (*Adapter)(nil)
)

// New returns an Adapter; it does no I/O.
func New(opts Options) (*Adapter, error) {
	if opts.Engine == nil || opts.In == nil || opts.Out == nil {
		return nil, fmt.Errorf("console: Engine, In and Out are required")
	}
	opts.Name = cmp.Or(opts.Name, "local")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Adapter{
		name:        opts.Name,
		account:     core.AccountID("console/" + opts.Name),
		engine:      opts.Engine,
		in:          opts.In,
		out:         opts.Out,
		interactive: opts.Interactive,
		logPath:     opts.LogPath,
		log:         opts.Logger,
		now:         opts.Now,
		settle:      opts.Settle,
		cursors:     opts.Cursors,
	}, nil
}

// Account returns "console/<name>".
func (a *Adapter) Account() core.AccountID { return a.account }

// Bot returns "*": the console speaks for the whole team.
func (a *Adapter) Bot() string { return "*" }

// ThreadKey is the platform thread key of this console's current thread.
func (a *Adapter) ThreadKey() string { return "console:" + a.name }

// Deliver prints one message as a block "[handle] text" ("[system] text" for
// notices, "[name] text" for other humans). A message for a thread other than the
// current one is prefixed with "#<thread id> ". Output is serialised so blocks never
// interleave. It returns a platform id "console-<n>" and fails only when the writer does.
func (a *Adapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	who := d.Sender.Handle
	switch {
	case d.Sender.System():
		who = "system"
	case who == "":
		who = d.Sender.Name
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	if a.current != 0 && d.Thread != a.current {
		fmt.Fprintf(&b, "#%d ", d.Thread)
	}
	fmt.Fprintf(&b, "[%s] %s\n", who, strings.TrimRight(d.Text, "\n"))
	if _, err := io.WriteString(a.out, b.String()); err != nil {
		return "", fmt.Errorf("console: write: %w", err)
	}
	a.seq++
	return fmt.Sprintf("console-%d", a.seq), nil
}

// Notice prints "[system] text" to the terminal: a line from openbot itself, not
// stored in any thread, for what the person at the terminal must see although
// no thread is about it (an MCP server that failed to start). Safe for
// concurrent use with Deliver; lines never interleave.
func (a *Adapter) Notice(text string) {
	a.notice("%s", strings.TrimRight(text, "\n"))
}

// notice prints a local line from the console itself (not stored in any thread).
func (a *Adapter) notice(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.out, "[system] "+format+"\n", args...)
}
