package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"openbot/agents/tools"
	"openbot/config"
)

// toolOptions maps the config onto the built-in tools' options: the workspace,
// http_fetch's allow list, and the shell sandbox (DESIGN.md §9): its mode, the
// bots whose shell may use the network, and openbot's own files (hide: config,
// store, log) to mask should they lie under a directory the sandbox shows.
func toolOptions(cfg *config.Config, log *slog.Logger, hide []string) tools.Options {
	network := map[string]bool{}
	perBot := map[string]tools.ShellLimits{}
	for _, b := range cfg.Bots {
		if b.ShellNetwork {
			network[b.Handle] = true
		}
		perBot[b.Handle] = shellLimits(b.ShellLimits)
	}
	return tools.Options{
		WorkspaceRoot:   cfg.Workspace,
		FetchAllowHosts: cfg.FetchAllowHosts,
		Sandbox:         cfg.Sandbox,
		ShellNetwork:    network,
		ShellLimits:     shellLimits(cfg.ShellLimits),
		BotShellLimits:  perBot,
		SandboxHide:     hide,
		OutboxDir:       filepath.Join(filepath.Dir(cfg.Store.Path), "outbox-files"),
		StateDir:        shellStateDir(cfg),
		Logger:          log,
	}
}

// shellStateDir is where running shell commands are registered (next to the
// store), for tools.KillOrphans at the next start.
func shellStateDir(cfg *config.Config) string {
	return filepath.Join(filepath.Dir(cfg.Store.Path), "shell-running")
}

// shellLimits maps a shell_limits section onto the tool's limits (zero keys
// stay zero: the tool's defaults, or the top-level section's for a bot).
func shellLimits(l config.ShellLimits) tools.ShellLimits {
	timeout, maxTimeout := l.Timeouts()
	return tools.ShellLimits{
		Processes: l.Processes, MemoryBytes: l.MemoryMB << 20, CPUSeconds: l.CPUSeconds,
		TmpBytes: l.TmpMB << 20, WorkspaceBytes: l.WorkspaceMB << 20,
		Timeout: timeout, MaxTimeout: maxTimeout,
	}
}

// ownFiles are the files of this openbot that no shell command may read: the
// config file (when known), the store file, its directory, and the chat log.
func ownFiles(configPath string, cfg *config.Config) []string {
	var out []string
	if configPath != "" {
		out = append(out, configPath)
	}
	dir := filepath.Dir(cfg.Store.Path)
	return append(out, cfg.Store.Path, dir, filepath.Join(dir, "openbot.log"))
}

// usesShell reports whether any bot lists the shell tool.
func usesShell(cfg *config.Config) bool {
	for _, b := range cfg.Bots {
		if slices.Contains(b.Tools, "shell") {
			return true
		}
	}
	return false
}

// reportSandbox says at start how shell commands will run: `sandbox: none` is
// logged at WARN (also on the terminal in chat mode, whose log goes to a
// file); a sandbox that cannot be set up is logged at ERROR with the fix (and
// shown on the terminal in chat mode too), and the shell tool then refuses every command with the same message. Nothing is
// probed when no bot has the shell; serve probes beside its start, not before it.
func (a *app) reportSandbox(ctx context.Context, opts tools.Options) {
	if opts.Sandbox == config.SandboxNone {
		const msg = "shell sandbox is OFF (sandbox: none): shell commands run unconfined and can read openbot's config, store, logs and environment"
		a.log.Warn(msg)
		if a.chat {
			fmt.Fprintln(a.stderr, "openbot: warning: "+msg)
		}
		return
	}
	if !usesShell(a.cfg) {
		return
	}
	if err := tools.CheckSandbox(ctx, opts); err != nil {
		if ctx.Err() != nil {
			return // stopped while probing: nothing was learned
		}
		a.log.Error("shell sandbox unavailable: the shell tool will refuse to run", "err", err)
		if a.chat {
			fmt.Fprintln(a.stderr, "openbot: error: shell sandbox unavailable: the shell tool will refuse to run: "+err.Error())
		}
		return
	}
	a.log.Info("shell sandbox ready", "sandbox", opts.Sandbox)
}
