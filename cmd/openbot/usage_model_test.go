package main

import (
	"bytes"
	"strings"
	"testing"

	"openbot/admin"
)

// TestPrintUsageByModel: the model view shows the provider, the models that
// answered, the key labels and the fallback calls of each profile/model.
func TestPrintUsageByModel(t *testing.T) {
	var out bytes.Buffer
	printUsage(&out, "model", []admin.UsageRow{
		{Key: "main/gpt-4o", Provider: "openai", Keys: []string{"team_a", "team_b"}, Runs: 2, ModelCalls: 3, PromptTokens: 100, CompletionTokens: 10, CostMicros: 500},
		{Key: "spare/claude-sonnet-4-5", Provider: "anthropic", Served: []string{"claude-sonnet-4-5-20250929"}, Fallbacks: 1, Runs: 1, ModelCalls: 1, PromptTokens: 50, CompletionTokens: 5},
	}, "USD")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "PROFILE/MODEL") || !strings.Contains(lines[0], "FALLBACKS") ||
		strings.Join(strings.Fields(lines[1]), " ") != "main/gpt-4o openai - team_a,team_b 0 2 3 100 0 (0%) 10 0.0005 USD" ||
		strings.Join(strings.Fields(lines[2]), " ") != "spare/claude-sonnet-4-5 anthropic claude-sonnet-4-5-20250929 - 1 1 1 50 0 (0%) 5 0.00 USD" ||
		!strings.HasPrefix(lines[3], "total") || !strings.HasSuffix(lines[3], "0.0005 USD") {
		t.Errorf("output:\n%s", out.String())
	}
}
