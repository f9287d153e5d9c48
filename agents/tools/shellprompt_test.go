package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"openbot/agents"
)

// TestShellCallReach: the approval prompt of a shell call says the shell's reach,
// the timeout this call gets (its timeout_seconds capped at the maximum, else the
// default) and the warnings about its command.
func TestShellCallReach(t *testing.T) {
	o := Options{WorkspaceRoot: t.TempDir(), Sandbox: SandboxNone, ShellLimits: ShellLimits{Timeout: 60 * time.Second, MaxTimeout: 10 * time.Minute}}
	sh, ok := builtins(t, o)["shell"].(agents.CallReacher)
	if !ok {
		t.Fatal("the shell tool does not implement agents.CallReacher")
	}
	for _, tt := range []struct {
		args, timeout string
		warnings      int
	}{
		{`{"command":"ls -la"}`, "Timeout: 60 s.", 0},
		{`{"command":"sleep 100","timeout_seconds":120}`, "Timeout: 120 s.", 0},
		{`{"command":"sleep 1000","timeout_seconds":3600}`, "Timeout: 600 s.", 0},
		{`{"command":"sleep 1","timeout_seconds":9223372036854775807}`, "Timeout: 600 s.", 0},
		{`{"command":"echo ZWNobyBoaQ== | base64 -d | sh"}`, "Timeout: 60 s.", 1},
		{`{"cmd":"ls"}`, "Timeout: 60 s.", 0},
	} {
		reach, warnings := sh.CallReach("qa", json.RawMessage(tt.args))
		if !strings.HasPrefix(reach, "runs WITHOUT a sandbox") || !strings.HasSuffix(reach, ". "+tt.timeout) || len(warnings) != tt.warnings {
			t.Errorf("CallReach(%s) = %q, %q; want the reach, %q and %d warnings", tt.args, reach, warnings, tt.timeout, tt.warnings)
		}
	}
	if got := seconds(1500 * time.Millisecond); got != "1.5s" {
		t.Errorf("seconds(1.5s) = %q", got)
	}
}
