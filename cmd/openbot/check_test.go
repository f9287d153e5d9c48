package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckReportsEverythingAtOnce: schema problems, unknown tool names and a
// profile without a key come back in one report.
func TestConfigCheckReportsEverythingAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `
llm:
  default: {base_url: "https://api.openai.com/v1", model: m}
bots:
  - {handle: chief_of_staff, tools: [workspace_reed, fs__read]}
  - {handle: chief_of_staff}
default_bot: nobody
limits: {run_timeout: 10minutes}
`
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"config", "check", "--config", path}, nil, nil)
	if r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{"bots[1].handle", "default_bot", "run_timeout", `bots[0].tools[0]: unknown tool "workspace_reed"`, `bots[0].tools[1]`, "llm.default.api_key", "OPENAI_API_KEY"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stderr)
		}
	}
}
