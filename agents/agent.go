package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"

	"openbot/internal/waitctx"
)

// Agent errors.
var (
	// ErrModelCallLimit is returned by Execute when a run used its model calls
	// (BotProfile.MaxModelCalls, else Limits.MaxModelCallsPerRun) without finishing.
	ErrModelCallLimit = errors.New("model call limit reached")
	// ErrUnknownProvider is returned by Execute when a bot names an LLM provider
	// profile that is not configured, and by New for an unusable profile.
	ErrUnknownProvider = errors.New("unknown llm provider")
)

// Defaults for Options fields left zero; zero core.Limits fields take
// core.Limits.WithDefaults.
const (
	// DefaultRequestTimeout bounds one model call, the whole stream included.
	DefaultRequestTimeout = 5 * time.Minute
	// DefaultIdleTimeout aborts a model request that receives nothing for this
	// long, before the response headers or between two reads of the stream.
	DefaultIdleTimeout        = 30 * time.Second
	DefaultMaxToolResultChars = 16000
	DefaultMaxParallelTools   = 8
	// memoryLimit is how many memories go into the prompt (seed §6 item 4).
	memoryLimit = 8
)

// Provider is one LLM provider profile: an OpenAI-compatible server or
// Anthropic's Messages API (API).
type Provider struct {
	// API is the wire protocol (ModelAPI): APIOpenAI, the default when empty,
	// or APIAnthropic.
	API string
	// BaseURL is the API root. OpenAI-compatible: including the version, e.g.
	// "https://api.openai.com/v1" or "http://localhost:11434/v1"; empty means
	// OpenAI. Anthropic: e.g. "https://api.anthropic.com" (a trailing /v1 is
	// dropped); empty means Anthropic's.
	BaseURL string
	// APIKey is sent as a Bearer token (OpenAI-compatible) or as x-api-key
	// (Anthropic); never logged or put into errors.
	APIKey string
	// Keys, when set, replace APIKey: calls rotate among them, and a key the
	// server refuses (401, 403) or rate-limits (429) is set aside for a while
	// (Cooldowns) and logged by its label. Labels name keys in logs and the
	// usage ledger; values are never logged.
	Keys  []APIKey
	Model string // default model; a bot's Model overrides it
	// Headers are added to every request (OpenRouter's HTTP-Referer, a gateway key).
	Headers map[string]string
	// RequestTimeout bounds one model call including the whole stream; zero takes
	// Options.RequestTimeout.
	RequestTimeout time.Duration
	// IdleTimeout aborts a request that receives no bytes for this long (before
	// the headers or mid-stream); it is retried like a network error, and when the
	// retries run out the run fails with a notice saying the model stopped
	// responding. Zero takes Options.IdleTimeout.
	IdleTimeout time.Duration
	// ContextWindow is the model's context window in tokens (estimated at
	// bytes/4). When set, every request is fitted to it before it is sent
	// (fit.go), and the thread's history gets HistoryShare of it; 0 is read
	// once from the server's model info (window.go), and where it does not
	// say, unknown: history takes core.Limits.HistoryTokenBudget and a request
	// is shortened only after the server says it is too long.
	ContextWindow int
	// HistoryShare is the share of ContextWindow (0 < share <= 1) for the
	// fixed prompt (instructions, tool schemas) and the thread's history
	// together, the history never more than core.Limits.HistoryTokenBudget;
	// when the history passes it, older messages are summarised
	// (compact.go). 0 takes DefaultHistoryShare.
	HistoryShare float64
	// CompactWith names the provider profile whose model summarises threads
	// for bots on this profile (a cheaper one); "" uses the bot's own model.
	CompactWith string
}

// DefaultHistoryShare is Provider.HistoryShare when zero.
const DefaultHistoryShare = 0.5

// MemoryRecaller is the hook for a bot's long-term memory (seed §6 item 4, §9):
// Recall returns up to limit memories of the bot most relevant to query (the
// triggers' text), best first. It is called once per run of a bot with Memory set;
// an error is logged and the run goes on without memories.
type MemoryRecaller interface {
	Recall(ctx context.Context, bot core.BotProfile, query string, limit int) ([]string, error)
}

// Options configures an Agent. Providers is required.
type Options struct {
	// Providers by profile name (BotProfile.LLM). A bot with an empty LLM uses the
	// only profile, else the one named "default".
	Providers map[string]Provider
	// Registry holds the selectable tools; nil means no tools beyond the history tools.
	Registry *Registry
	// Limits: MaxModelCallsPerRun, HistoryTokenBudget, HistoryMaxMessages and
	// RunTimeout are used; zero values take the core defaults.
	Limits core.Limits
	Logger *slog.Logger // nil discards
	// HTTPClient is the base client for model calls; its Transport is wrapped. Nil
	// uses http.DefaultTransport. Leave its Timeout zero: RequestTimeout bounds calls.
	HTTPClient *http.Client
	// RequestTimeout bounds one model call including the whole stream, for
	// providers without their own; default 5m.
	RequestTimeout time.Duration
	// IdleTimeout is the stream idle timeout of providers without their own
	// (Provider.IdleTimeout); default 30s.
	IdleTimeout time.Duration
	// MaxToolResultChars caps one tool result shown to the model; default 16000.
	MaxToolResultChars int
	// MaxParallelTools caps concurrently running tool calls of one model turn; default 8.
	MaxParallelTools int
	// Memory supplies memories for the prompt of bots with Memory on; nil
	// leaves them out. A *Memories also gives those bots manage_memory and
	// search_memory (seed §9).
	Memory MemoryRecaller
	// MessageIndex makes recall_messages semantic (seed §9: cosine over the
	// embedded messages, lexical for the rest); nil ranks lexically.
	MessageIndex *MessageIndex
	// Clock measures step durations; nil is the system clock.
	Clock core.Clock
	// ReadyTimeout bounds how long a run waits, before it starts, for the tool
	// sources its bot selects that are still starting (Registry.Expect, MCP
	// servers); default DefaultReadyTimeout (30s), negative does not wait.
	ReadyTimeout time.Duration
	// FilesDir returns a thread's workspace folder, where people's files are
	// saved (core.FileLimits.Dir); nil sends no images. MaxImageBytes caps one
	// image sent to a vision bot's model (BotProfile.Vision); default
	// DefaultMaxImageBytes. MaxImageSide is the longest side in pixels of such
	// an image; larger or heavier images are scaled down and re-encoded
	// (agents/imagefit.go); default DefaultMaxImageSide (1568).
	FilesDir      func(core.ThreadID) string
	MaxImageBytes int64
	MaxImageSide  int

	// Cooldowns remembers failed profiles and keys across calls; share one
	// among the agents of a process (a reload builds a new agent). Nil: the
	// agent keeps its own.
	Cooldowns *Cooldowns

	// Test hooks: the first retry backoff (default 500ms) and the retry wait.
	retryInitial time.Duration
	sleep        func(ctx context.Context, d time.Duration) error
}

// Agent implements core.Agent. It is safe for concurrent use by many runs.
type Agent struct {
	opts    Options
	log     *slog.Logger
	clients map[string]*providerClient
	history []Tool // read_history, recall_messages, ask_human
}

type providerClient struct {
	name string
	prov Provider // timeouts filled in from Options when zero
	api  ModelAPI
	// client is the go-openai client of an OpenAI-compatible profile, for
	// embeddings; nil for other protocols.
	client *openai.Client
	tr     *transport
	// id names the profile in Cooldowns (its name and base URL); cd is the
	// agent's Cooldowns.
	id string
	cd *Cooldowns
	// label is the label of the profile's only key ("" without one); a
	// profile with several keys reports the one used (streamInfo.keyLabel).
	label string
	// hc is the client model calls go through (tr as its transport), log
	// the agent's logger.
	hc  *http.Client
	log *slog.Logger
	// windowOnce guards served and windowSource, the context window read
	// from the server and where the one in use came from (window.go).
	windowOnce   sync.Once
	served       int
	windowSource string
}

var _ core.Agent = (*Agent)(nil)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// New builds an Agent with one ModelAPI per provider profile. It does no I/O.
// Errors: ErrUnknownProvider for no profiles, an unknown API or a bad base URL.
func New(opts Options) (*Agent, error) {
	if len(opts.Providers) == 0 {
		return nil, fmt.Errorf("%w: no providers configured", ErrUnknownProvider)
	}
	if opts.Registry == nil {
		opts.Registry = NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxToolResultChars <= 0 {
		opts.MaxToolResultChars = DefaultMaxToolResultChars
	}
	if opts.MaxParallelTools <= 0 {
		opts.MaxParallelTools = DefaultMaxParallelTools
	}
	opts.ReadyTimeout = cmp.Or(opts.ReadyTimeout, DefaultReadyTimeout)
	opts.Limits = opts.Limits.WithDefaults()
	base := modelTransport
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
		if hc.Transport != nil {
			base = hc.Transport
		}
	}
	if opts.retryInitial <= 0 {
		opts.retryInitial = defaultRetryInitial
	}
	if opts.sleep == nil {
		opts.sleep = waitctx.Sleep
	}
	if opts.Cooldowns == nil {
		opts.Cooldowns = NewCooldowns(opts.Clock)
	}
	a := &Agent{opts: opts, log: opts.Logger, clients: map[string]*providerClient{}, history: builtinTools(opts.MessageIndex)}
	for name, p := range opts.Providers {
		if p.RequestTimeout <= 0 {
			p.RequestTimeout = opts.RequestTimeout
		}
		if p.IdleTimeout <= 0 {
			p.IdleTimeout = opts.IdleTimeout
		}
		tr := &transport{base: base, headers: p.Headers, log: opts.Logger.With("provider", name),
			retries: DefaultModelRetries, idle: p.IdleTimeout, initial: opts.retryInitial, sleep: opts.sleep}
		label := ""
		switch len(p.Keys) {
		case 0:
		case 1:
			p.APIKey, label = p.Keys[0].Value, p.Keys[0].Label
		default:
			p.APIKey = p.Keys[0].Value // what the SDK sends; the transport replaces it per attempt
			tr.keys = newKeyring(name, p.Keys, opts.Cooldowns)
			tr.authHeader = "Authorization"
			if strings.EqualFold(p.API, APIAnthropic) {
				tr.authHeader = "X-Api-Key"
			}
		}
		c := hc
		c.Transport = tr
		api, client, err := newModelAPI(name, p, &c, tr)
		if err != nil {
			return nil, err
		}
		a.clients[name] = &providerClient{name: name, prov: p, api: api, client: client, tr: tr,
			id: "profile:" + name + "|" + p.BaseURL, cd: opts.Cooldowns, label: label, hc: &c, log: opts.Logger}
	}
	return a, nil
}

// tools returns the tools offered to the model: the bot's selection from the
// registry plus the built-in tools (BuiltinTools), and the selected names that
// matched nothing.
func (a *Agent) tools(bot core.BotProfile) ([]Tool, []string) {
	var names []string
	for _, n := range bot.Tools {
		if !slices.ContainsFunc(a.history, func(t Tool) bool { return t.Name() == n }) {
			names = append(names, n)
		}
	}
	sel, err := a.opts.Registry.Select(names)
	var unavailable []string
	if err != nil {
		a.log.Warn("some tools of the bot are unavailable", "bot", bot.Handle, "err", err)
		for _, n := range names {
			if one, err := a.opts.Registry.Select([]string{n}); err != nil || len(one) == 0 {
				unavailable = append(unavailable, n)
			}
		}
	}
	out := make([]Tool, 0, len(sel)+len(a.history))
	for _, t := range sel {
		if !slices.ContainsFunc(a.history, func(h Tool) bool { return h.Name() == t.Name() }) {
			out = append(out, t)
		}
	}
	out = append(out, a.history...)
	if m, ok := a.opts.Memory.(*Memories); ok && bot.Memory {
		out = append(out, MemoryTools(m)...) // seed §9: bots with memory on only
	}
	return out, unavailable
}

// maxModelCalls is the bot's cap on model calls per run.
func (a *Agent) maxModelCalls(bot core.BotProfile) int {
	if bot.MaxModelCalls > 0 {
		return bot.MaxModelCalls
	}
	return a.opts.Limits.MaxModelCallsPerRun
}

// Execute implements core.Agent: it unrolls the thread, runs the model/tool loop
// and returns the final reply text. The returned Result carries the usage of this
// call (not of earlier segments of a resumed run) even when err is not nil.
//
// A call to ask_human, or to a tool in the bot's ApprovalTools, pauses the run
// (DESIGN.md §5, seed §7): Result.Pause says what to ask and Result.Checkpoint is
// the transcript to resume from. With job.Resume set, Execute restores
// job.Run.Checkpoint, feeds the answer to the paused tool call (running an
// approved tool with exactly the approved arguments) and goes on with the loop.
// With job.Restart set, Execute resumes a run a restart interrupted from its last
// step checkpoint (DESIGN.md §8): no finished step runs again (the call that
// gives the reply is finished only with the run's settle, Result.Step). A new
// run hands its first checkpoint to core before its first model call
// (core.CheckpointHolder: stored only if the run streams before its first step;
// any other Env stores it then, and the run fails when it cannot); core restarts
// a run killed before any checkpoint is stored from the beginning. Each model call's
// ledger entry, run event and checkpoint are one write (core.StepRecorder); the
// call that gives the reply is handed back as Result.Step instead, for core to
// store with the run's settling.
//
// Errors: ErrModelCallLimit, *ModelError for a failed model call (also an empty
// answer, a cut-off or truncated stream), ErrBadCheckpoint for a resume that
// cannot be restored, ErrUnknownProvider, or ctx's error (run timeout,
// cancellation).
func (a *Agent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	if job == nil || job.Env == nil {
		return core.Result{}, errors.New("agents: job has no run environment")
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.Limits.RunTimeout)
	defer cancel()
	links, err := a.chain(job.Bot)
	if err != nil {
		return core.Result{}, err
	}
	down := a.awaitSources(ctx, job)
	tools, unavailable := a.tools(job.Bot)
	r := &run{
		down:  down,
		agent: a,
		job:   job,
		links: links,
		pc:    links[0].pc,
		model: links[0].model,
		tools: tools,
		max:   a.maxModelCalls(job.Bot),
	}
	switch {
	case job.Restart:
		// A run a restart interrupted goes on from its last step (DESIGN.md §8).
		r.in = promptInput{job: job, view: &view{triggers: map[core.MessageID]bool{}}, tools: tools, unavailable: unavailable}
		reply, done, err := r.resumeAfterRestart(ctx)
		if err != nil || done {
			return core.Result{Reply: reply, Usage: r.segmentUsage()}, err
		}
	case job.Resume != nil:
		// The prompt comes from the checkpoint, exactly as the model saw it.
		r.in = promptInput{job: job, view: &view{triggers: map[core.MessageID]bool{}}, tools: tools, unavailable: unavailable}
		if _, err := r.restore(job.Run.Checkpoint, false); err != nil {
			return core.Result{}, err
		}
		if err := r.resume(ctx, job.Resume); err != nil {
			return core.Result{Usage: r.segmentUsage()}, err
		}
	default:
		in := promptInput{job: job, tools: tools, unavailable: unavailable}
		lim := a.opts.Limits
		lim.HistoryTokenBudget = historyBudget(r.pc, lim, estimateTokens(
			[]openai.ChatCompletionMessage{{Content: systemPrompt(in)}}, toolDefs(tools)))
		v, err := unroll(ctx, job, lim)
		if err != nil {
			return core.Result{}, fmt.Errorf("unroll thread: %w", err)
		}
		// Compaction comes before the run's first checkpoint: a run killed
		// during it starts again from the beginning and finds the summary
		// stored, or none (compact.go).
		force := isCompactCommand(job)
		v, said, err := r.maybeCompact(ctx, v, lim, force)
		if force || err != nil {
			return core.Result{Reply: said, Usage: r.segmentUsage()}, err
		}
		in.view = v
		for _, t := range tools {
			if t.Name() == "todo_write" {
				in.hasTodo = true
			}
		}
		if in.hasTodo {
			if in.todo, err = job.Env.Todo(ctx); err != nil {
				a.log.Warn("read todo list", "bot", job.Bot.Handle, "thread", job.Thread.ID, "err", err)
			}
		}
		if a.opts.Memory != nil && job.Bot.Memory {
			if in.memories, err = a.opts.Memory.Recall(ctx, job.Bot, triggerText(job), memoryLimit); err != nil {
				a.log.Warn("recall memories", "bot", job.Bot.Handle, "err", err)
			}
		}
		r.in = in
		// The first step boundary, before the first model call's answer, tool
		// call or streamed text: a run killed before it is stored has done
		// nothing visible and core starts it again from the beginning; from
		// there on a restart resumes it (DESIGN.md §8). Core holds it and
		// stores it only if the run streams before its first step (firstsave.go).
		if err := r.holdFirst(ctx); err != nil {
			return core.Result{}, err
		}
	}
	reply, pause, err := r.loop(ctx)
	res := core.Result{Reply: reply, Usage: r.segmentUsage(), Step: r.last}
	if err == nil && pause != nil {
		cp, err := r.snapshot()
		if err != nil {
			return res, fmt.Errorf("save the checkpoint of the paused run: %w", err)
		}
		res.Reply, res.Pause, res.Checkpoint = "", pause, cp
	}
	return res, err
}
