package mcp

import (
	"context"
	"fmt"
	"os"

	"openbot/agents"
)

// ProbeResult is what Probe learned about one server.
type ProbeResult struct {
	// Tools are the names the model would see ("<server>__<tool>"), sorted as listed.
	Tools []string
	// Listed are the tools themselves, with their schemas (for the size of a
	// bot's fixed prompt).
	Listed []agents.Tool
	// Reason says in words why the server could not start (as ServerStatus.Reason);
	// empty on success.
	Reason string
	// Err is the full error, with exit status and stderr tail, for the operator's
	// terminal; nil on success.
	Err error
}

// Probe starts cfg's server once, initializes it, lists its tools and stops it
// again, all within opts.StartTimeout (default DefaultStartTimeout) plus
// opts.ShutdownGrace; it is `openbot doctor`'s check (DESIGN.md §10 "doctor"). It
// never restarts a failing server. ctx cancels it. A scoped server is started
// on an empty directory in place of a thread's workspace.
func Probe(ctx context.Context, cfg ServerConfig, opts Options) ProbeResult {
	opts.Servers = []ServerConfig{cfg}
	m := NewManager(opts)
	if (cfg.Command == "") == (cfg.URL == "") {
		err := fmt.Errorf("mcp: server %q: set exactly one of command and url", cfg.Name)
		return ProbeResult{Reason: "it has neither or both of command and url", Err: err}
	}
	if cfg.Scoped() { // as Run does: list the tools on an empty directory
		dir, err := os.MkdirTemp("", "openbot-mcp-probe-")
		if err != nil {
			return ProbeResult{Reason: "no directory to start it in", Err: err}
		}
		defer os.RemoveAll(dir)
		cfg = cfg.withWorkspace(dir)
	}
	s, err := m.connect(ctx, cfg)
	if err != nil {
		return ProbeResult{Reason: reason(err, m.opts.StartTimeout), Err: err}
	}
	defer s.stop(m.opts.ShutdownGrace)
	out := ProbeResult{}
	for _, t := range s.tools {
		out.Tools = append(out.Tools, t.Name())
		out.Listed = append(out.Listed, t)
	}
	return out
}
