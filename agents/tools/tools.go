// Package tools is openbot's built-in toolbox (DESIGN.md §6): the
// workspace-jailed file tools (workspace_read, workspace_write, workspace_list,
// workspace_search), shell, http_fetch, todo_write, post_message, schedule, send_file and notify. Each is an
// agents.Tool; Builtins returns them all for the agents Registry.
//
// Every tool is safe for concurrent use (parallel tool calls) and honours the
// call's ctx. Errors a tool returns are written for the model to read and act on.
package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"openbot/agents"
)

// Defaults applied by Builtins to zero Options fields.
const (
	DefaultWorkspaceRoot = "./data/workspace"
	// DefaultReadCap is the bytes workspace_read returns in one call: a page
	// and its "call again with offset N" note fit in what the model is shown
	// of one tool result (agents.DefaultMaxToolResultChars), so the cut there
	// never drops the note.
	DefaultReadCap          = agents.DefaultMaxToolResultChars - 256
	DefaultWriteCap         = 1 << 20  // bytes accepted by workspace_write
	DefaultOutputCap        = 64 << 10 // bytes of shell output / tool result text
	DefaultFetchTimeout     = 30 * time.Second
	DefaultFetchMaxBytes    = 1 << 20 // response body bytes read by http_fetch
	DefaultSearchMaxResults = 100
	DefaultShellPath        = "/usr/local/bin:/usr/bin:/bin"
	DefaultShellKillDelay   = 2 * time.Second
)

// Options configures the built-in tools. Zero fields take the Default* values.
type Options struct {
	// WorkspaceRoot is the directory holding bot workspaces (config `workspace`).
	WorkspaceRoot string
	// BotWorkspaces overrides WorkspaceRoot per bot handle.
	BotWorkspaces map[string]string
	// SharedWorkspace makes all threads of a bot share the root itself instead of
	// the default per-thread subfolder "<root>/thread-<id>".
	SharedWorkspace bool

	// ReadCap is the most bytes workspace_read returns (a note says when the
	// file was longer); WriteCap the largest content workspace_write accepts.
	ReadCap  int64
	WriteCap int64
	// SearchMaxResults bounds workspace_search matches and workspace_list entries.
	SearchMaxResults int

	// ShellLimits bound every shell command (zero fields: the Default*
	// values); BotShellLimits override them per bot handle, field by field.
	ShellLimits    ShellLimits
	BotShellLimits map[string]ShellLimits
	// HelperPath is the executable run as the sandbox helper (any binary that
	// links this package is one); default openbot's own executable.
	HelperPath string
	// StateDir, when set, is a directory (created on first use) where each
	// running shell command is registered, so that KillOrphans at the next
	// start can end commands a killed openbot left behind.
	StateDir string
	// ShellPath is the PATH given to commands; ShellEnv extra variables set
	// explicitly by the operator. Nothing else of openbot's environment is passed.
	ShellPath string
	ShellEnv  map[string]string
	// Sandbox confines shell commands (DESIGN.md §9): SandboxBwrap (default,
	// "") or SandboxNone. With SandboxBwrap and no working bubblewrap the shell
	// refuses every command with ErrNoSandbox.
	Sandbox string
	// BwrapPath is the bubblewrap binary, a path or a name looked up in PATH;
	// default DefaultBwrapPath.
	BwrapPath string
	// ShellNetwork lists the bot handles whose shell commands may use the
	// network: their sandbox's own network namespace still has only a loopback
	// interface, plus a proxy port that leads to the egress guard (public
	// internet hosts and FetchAllowHosts only, as for http_fetch). Every other
	// bot's commands have no way out (network off).
	ShellNetwork map[string]bool
	// SandboxHide are files or directories (openbot's config, store and log)
	// that are masked inside the sandbox when they lie under a directory it
	// shows (the system directories or the workspace). Files elsewhere are not
	// mounted at all.
	SandboxHide []string
	// ShellKillDelay bounds how long shell waits for output pipes after the
	// process group was killed (exec.Cmd.WaitDelay).
	ShellKillDelay time.Duration

	// OutputCap bounds the text of a shell result (head and tail kept) and of
	// any tool result passed through Cap.
	OutputCap int

	// FetchTimeout bounds a whole http_fetch (connect, redirects, body);
	// FetchMaxBytes the body bytes read.
	FetchTimeout  time.Duration
	FetchMaxBytes int64
	// FetchAllowHosts are hosts ("example.internal") or host:port pairs
	// ("127.0.0.1:8080") that http_fetch may reach even when they resolve to a
	// loopback, private, link-local, CGNAT or metadata address.
	FetchAllowHosts []string

	// OutboxDir is where send_file stages the files it posts until the outbox
	// delivered them; it must lie outside every workspace. Default
	// "outbox-files" next to WorkspaceRoot.
	OutboxDir string

	// Logger receives debug lines; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.WorkspaceRoot = cmp.Or(o.WorkspaceRoot, DefaultWorkspaceRoot)
	if o.ReadCap <= 0 {
		o.ReadCap = DefaultReadCap
	}
	if o.WriteCap <= 0 {
		o.WriteCap = DefaultWriteCap
	}
	if o.SearchMaxResults <= 0 {
		o.SearchMaxResults = DefaultSearchMaxResults
	}
	o.ShellLimits = o.ShellLimits.or(defaultShellLimits)
	o.ShellPath = cmp.Or(o.ShellPath, DefaultShellPath)
	o.Sandbox = cmp.Or(o.Sandbox, SandboxBwrap)
	o.BwrapPath = cmp.Or(o.BwrapPath, DefaultBwrapPath)
	if o.ShellKillDelay <= 0 {
		o.ShellKillDelay = DefaultShellKillDelay
	}
	if o.OutputCap <= 0 {
		o.OutputCap = DefaultOutputCap
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Builtins returns every built-in tool configured by opts. It does no I/O:
// workspace directories are created on first use. It returns an error only for
// invalid options (an allow-list entry that is not a host or host:port, an
// unknown Sandbox mode).
func Builtins(opts Options) ([]agents.Tool, error) {
	opts = opts.withDefaults()
	if opts.Sandbox != SandboxBwrap && opts.Sandbox != SandboxNone {
		return nil, fmt.Errorf("tools: sandbox %q: want %q or %q", opts.Sandbox, SandboxBwrap, SandboxNone)
	}
	ws := &workspace{opts: opts}
	fetch, err := newFetcher(opts)
	if err != nil {
		return nil, err
	}
	return []agents.Tool{
		workspaceReadTool(ws),
		workspaceWriteTool(ws),
		workspaceListTool(ws),
		workspaceSearchTool(ws),
		shellTool(ws, fetch),
		fetch.tool(),
		todoWriteTool(),
		postMessageTool(),
		scheduleTool(),
		sendFileTool(ws),
		notifyTool(),
	}, nil
}

// tool is a built-in agents.Tool made of a name, a description, a JSON Schema
// and a function.
type tool struct {
	name   string
	desc   string
	schema json.RawMessage
	fn     func(ctx context.Context, call agents.ToolCall) (string, error)
	// reach is the tool's agents.Reacher sentence for a bot's call.
	reach func(bot string) string
	// repeat says whether a call may run again after a restart interrupted it
	// (agents.RepeatSafer, DESIGN.md §8); nil means never.
	repeat func(args json.RawMessage) bool
}

var _ agents.Reacher = (*tool)(nil)

// Reach says in one sentence what a call of this tool by the bot with this
// handle can reach, for the approval prompt (agents.Reacher, DESIGN.md §5).
// shell and http_fetch have their own.
func (t *tool) Reach(bot string) string {
	if t.reach == nil {
		return ""
	}
	return t.reach(bot)
}

var (
	_ agents.Tool        = (*tool)(nil)
	_ agents.RepeatSafer = (*tool)(nil)
)

// RepeatSafe implements agents.RepeatSafer.
func (t *tool) RepeatSafe(args json.RawMessage) bool { return t.repeat != nil && t.repeat(args) }

// always is the repeat rule of a read or a whole replacement: every call is safe.
func always(json.RawMessage) bool { return true }

func (t *tool) Name() string            { return t.name }
func (t *tool) Description() string     { return t.desc }
func (t *tool) Schema() json.RawMessage { return t.schema }
func (t *tool) Call(ctx context.Context, call agents.ToolCall) (string, error) {
	return t.fn(ctx, call)
}

// decodeArgs unmarshals the model's arguments strictly enough to give the model
// a useful error: unknown fields are refused so typos are noticed. Its errors
// are agents.NotRun: a call with arguments it cannot read did nothing.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return agents.NotRun(fmt.Errorf("arguments are not valid JSON: %v", err))
		}
		return agents.NotRun(fmt.Errorf("invalid arguments: %v", err))
	}
	return nil
}
