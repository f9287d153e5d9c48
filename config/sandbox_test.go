package config

import (
	"strings"
	"testing"
)

func TestSandboxConfig(t *testing.T) {
	cfg := parseOK(t, minimal, nil)
	if cfg.Sandbox != SandboxBwrap || cfg.Bots[0].ShellNetwork {
		t.Errorf("defaults: sandbox = %q, shell_network = %v; want bwrap, false", cfg.Sandbox, cfg.Bots[0].ShellNetwork)
	}
	cfg = parseOK(t, minimal+"    shell_network: true\nsandbox: none\n", nil)
	if cfg.Sandbox != SandboxNone || !cfg.Bots[0].ShellNetwork {
		t.Errorf("sandbox = %q, shell_network = %v; want none, true", cfg.Sandbox, cfg.Bots[0].ShellNetwork)
	}
	es := parseErrs(t, minimal+"sandbox: docker\n")
	if len(es) != 1 || es[0].Path != "sandbox" || !strings.Contains(es[0].Msg, "bwrap") {
		t.Errorf("errors = %v, want one at sandbox naming the allowed values", es)
	}
	es = parseErrs(t, minimal+"    shell_network: maybe\n")
	if !strings.Contains(es.Error(), "shell_network") {
		t.Errorf("errors = %v, want one naming shell_network", es)
	}
}
