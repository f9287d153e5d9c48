package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"openbot/agents"
)

// ErrServerDown is returned (wrapped) by an MCP tool whose server session has
// ended (crashed, restarting or shut down). A session is marked ended before
// its tools are withdrawn, so every call on a tool value made after OnTools
// reported the withdrawal returns it. A call already under way when the server
// died may instead return the transport's error, if it fails before the
// Manager notices.
//
// A call refused so never reached the server: the error also wraps
// agents.ErrNotRun.
var ErrServerDown = errors.New("mcp server is not running")

// Tool is one MCP server tool as an agents.Tool named "<server>__<tool>".
// Characters outside [A-Za-z0-9_-] in the server's tool name become "_" (the
// names OpenAI-compatible APIs accept); the call uses the original name.
type Tool struct {
	name    string
	remote  string
	desc    string
	schema  json.RawMessage
	sess    *session
	m       *Manager
	timeout time.Duration
	cap     int
}

var (
	_ agents.Tool        = (*Tool)(nil)
	_ agents.Reacher     = (*Tool)(nil)
	_ agents.RepeatSafer = (*Tool)(nil)
)

// Reach says what a call can reach, for approval prompts (agents.Reacher,
// DESIGN.md §5): "calls the MCP server <name> (<command> or <host>) — what it
// can reach is up to that server". It names the command's base name or the
// URL's host only, never arguments, paths, query or credentials.
func (t *Tool) Reach(string) string {
	w := ""
	if t.sess.where != "" {
		w = " (" + t.sess.where + ")"
	}
	if _, ok := t.m.scopedCfg[t.sess.server]; ok {
		return "calls the MCP server " + t.sess.server + w + ", started for this thread's workspace — what else it can reach is up to that server"
	}
	return "calls the MCP server " + t.sess.server + w + " — what it can reach is up to that server"
}

// where names cfg's server for Reach: "command <base name>" for stdio, the
// URL's host (with port, without user info) for HTTP, "" when unreadable.
func where(cfg ServerConfig) string {
	if cfg.Command != "" {
		return "command " + filepath.Base(cfg.Command)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

func newTool(m *Manager, s *session, t mcp.Tool) *Tool {
	desc := t.Description
	if desc == "" && t.Title != "" {
		desc = t.Title
	}
	desc = cmp.Or(desc, t.Name)
	return &Tool{
		name:    s.server + "__" + sanitize(t.Name),
		remote:  t.Name,
		desc:    fmt.Sprintf("%s (MCP server %s)", desc, s.server),
		schema:  inputSchema(t),
		sess:    s,
		m:       m,
		timeout: m.opts.CallTimeout,
		cap:     m.opts.ResultCap,
	}
}

// Name is "<server>__<tool>".
func (t *Tool) Name() string { return t.name }

// RepeatSafe implements agents.RepeatSafer: only a server configured
// idempotent (ServerConfig.Idempotent) has tools that may run again after a
// restart interrupted a call (DESIGN.md §8).
func (t *Tool) RepeatSafe(json.RawMessage) bool { return t.sess.idempotent }

// Description is the server's description of the tool, naming the server.
func (t *Tool) Description() string { return t.desc }

// Schema is the tool's inputSchema as the server sent it.
func (t *Tool) Schema() json.RawMessage { return t.schema }

// Call runs the tool on its server within the call timeout. A timeout, a lost
// server or a result flagged isError come back as an error whose text the
// model can read; result text is capped at Options.ResultCap bytes, the note
// of the real size included. When an HTTP server answers 404 for the session
// (it restarted or dropped it, so the call did not run), the session is
// re-initialized at once and the call is sent once more on the new one.
func (t *Tool) Call(ctx context.Context, call agents.ToolCall) (string, error) {
	sess := t.sess
	cfg, scoped := t.m.scopedCfg[sess.server]
	if scoped {
		// A scoped server: the call goes to the process of its workspace.
		dir, err := t.m.opts.Workspace(call)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t.name, agents.NotRun(err))
		}
		s, release, err := t.m.scoped.acquire(ctx, cfg, dir)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t.name, agents.NotRun(err))
		}
		defer release()
		sess = s
	} else if sess.closed.Load() {
		// The server was restarted since this tool was listed: use its new
		// session if there is one.
		if sess = t.m.liveSession(sess.server); sess == nil {
			return "", fmt.Errorf("%s: %w: %w (it may be restarting; try again later)", t.name, ErrServerDown, agents.ErrNotRun)
		}
	}
	var args map[string]any
	if len(bytes.TrimSpace(call.Args)) > 0 && string(call.Args) != "null" {
		dec := json.NewDecoder(bytes.NewReader(call.Args))
		dec.UseNumber() // keep large integers exact
		if err := dec.Decode(&args); err != nil {
			return "", fmt.Errorf("arguments must be a JSON object: %v", err)
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = t.remote
	req.Params.Arguments = args
	res, err := sess.client.CallTool(ctx, req)
	if err != nil && errors.Is(err, transport.ErrSessionTerminated) && ctx.Err() == nil && !scoped {
		sess.expire()
		t.m.log.Info("mcp session expired during a call; retrying on a new session", "mcp_server", sess.server, "tool", t.remote)
		if sess = t.m.nextSession(ctx, sess.server, sess); sess != nil {
			res, err = sess.client.CallTool(ctx, req)
		}
	}
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return "", fmt.Errorf("%s did not answer within %s; the call was abandoned", t.name, t.timeout)
		case errors.Is(err, transport.ErrSessionTerminated):
			return "", fmt.Errorf("%s: %w: the server dropped the session twice: %w", t.name, ErrServerDown, agents.ErrNotRun)
		case sess != nil && sess.closed.Load():
			return "", fmt.Errorf("%s: %w", t.name, ErrServerDown)
		}
		return "", fmt.Errorf("%s: %v", t.name, err)
	}
	text := capText(renderResult(res), t.cap)
	if res.IsError {
		return "", fmt.Errorf("%s failed: %s", t.name, text)
	}
	return text, nil
}

// capText returns s when it is at most limit bytes, else its head with a note
// of the real size, at most limit bytes in all, cut at a UTF-8 boundary.
func capText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	digits := len(strconv.Itoa(len(s)))
	note := func(shown int) string {
		return fmt.Sprintf("\n[result truncated: showing the first %d of %d bytes; ask for a narrower result if you need the rest]", shown, len(s))
	}
	room := limit - len(note(0)) - digits
	if room < 0 {
		room = 0
	}
	head := s[:room]
	for i := 0; i < utf8.UTFMax && len(head) > 0; i++ { // drop a cut rune's bytes
		if r, size := utf8.DecodeLastRuneInString(head); r != utf8.RuneError || size > 1 {
			break
		}
		head = head[:len(head)-1]
	}
	return head + note(len(head))
}

// renderResult turns a tool result's content blocks into text for the model.
func renderResult(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, renderContent(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 {
		return "(no output)"
	}
	return strings.Join(parts, "\n")
}

func renderContent(c mcp.Content) string {
	switch v := c.(type) {
	case mcp.TextContent:
		return v.Text
	case *mcp.TextContent:
		return v.Text
	case mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes base64]", v.MIMEType, len(v.Data))
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes base64]", v.MIMEType, len(v.Data))
	case mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes base64]", v.MIMEType, len(v.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes base64]", v.MIMEType, len(v.Data))
	case mcp.ResourceLink:
		return fmt.Sprintf("[resource %s: %s]", v.Name, v.URI)
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource %s: %s]", v.Name, v.URI)
	case mcp.EmbeddedResource:
		return renderResource(v.Resource)
	case *mcp.EmbeddedResource:
		return renderResource(v.Resource)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("%v", c)
	}
	return string(b)
}

func renderResource(r mcp.ResourceContents) string {
	switch v := r.(type) {
	case mcp.TextResourceContents:
		return v.Text
	case *mcp.TextResourceContents:
		return v.Text
	case mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s %s, %d bytes base64]", v.URI, v.MIMEType, len(v.Blob))
	case *mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s %s, %d bytes base64]", v.URI, v.MIMEType, len(v.Blob))
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// inputSchema extracts the tool's inputSchema exactly as the server sent it;
// a missing or non-object schema becomes {"type":"object"}.
func inputSchema(t mcp.Tool) json.RawMessage {
	if len(t.RawInputSchema) > 0 && json.Valid(t.RawInputSchema) {
		return t.RawInputSchema
	}
	b, err := json.Marshal(t)
	if err == nil {
		var wire struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(b, &wire) == nil && len(wire.InputSchema) > 0 && wire.InputSchema[0] == '{' {
			return wire.InputSchema
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}

// sanitize maps a tool name onto [A-Za-z0-9_-].
func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
