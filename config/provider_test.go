package config

import (
	"errors"
	"strings"
	"testing"
)

const twoProviders = `
llm:
  default:
    base_url: http://127.0.0.1:11434/v1
    model: llama3.1
  claude:
    provider: anthropic
    api_key: "${ANTHROPIC_API_KEY}"
    model: claude-test
bots:
  - handle: engineer
  - handle: reviewer
    llm: claude
`

// TestProviderField: provider says a profile's API; anthropic defaults its
// base_url to Anthropic's; openai is the default and may be written.
func TestProviderField(t *testing.T) {
	cfg := parseOK(t, twoProviders, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-1"})
	c := cfg.LLM["claude"]
	if c.Provider != ProviderAnthropic || c.BaseURL != AnthropicBaseURL || c.APIKey != "sk-ant-1" || c.OpenAICompatible() {
		t.Errorf("llm.claude = %+v", c)
	}
	if d := cfg.LLM["default"]; d.Provider != "" || !d.OpenAICompatible() {
		t.Errorf("llm.default = %+v", d)
	}
	parseOK(t, strings.Replace(minimal, "    model: llama3.1", "    provider: openai\n    model: llama3.1", 1), nil)
	// A proxy may hold the key itself.
	parseOK(t, strings.Replace(twoProviders, `    api_key: "${ANTHROPIC_API_KEY}"`, "    base_url: http://127.0.0.1:4000", 1), nil)
}

// TestProviderErrors: each mistake is a problem at its field.
func TestProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, path, msg string
	}{
		{"unknown provider", "provider: anthropic", "provider: gemini", "llm.claude.provider", `"gemini" is not one of ["openai" "anthropic"]`},
		{"no key", "", "", "llm.claude.api_key", "must be set for provider anthropic (written as ${ANTHROPIC_API_KEY}, which is not set)"},
		{"no key, /v1 written", "    model: claude-test", "    model: claude-test\n    base_url: https://api.anthropic.com/v1/", "llm.claude.api_key", "must be set for provider anthropic"},
		{"temperature", "    llm: claude", "    llm: claude\n    temperature: 1.5", "bots[1].temperature", "must be between 0 and 1 for provider anthropic (llm.claude), got 1.5"},
		{"embeddings", "bots:", "embeddings:\n  llm: claude\n  model: voyage-3\nbots:", "embeddings.llm", `"claude" is a provider anthropic profile, which has no embeddings API`},
		{"transcription", "bots:", "files:\n  transcription:\n    llm: claude\n    model: whisper-1\nbots:", "files.transcription.llm", `"claude" is a provider anthropic profile, which has no transcription API`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(twoProviders, tc.from, tc.to, 1)
			found := false
			for _, e := range parseErrs(t, text) {
				if e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					found = true
				}
			}
			if !found {
				_, err := Parse([]byte(text), nil)
				var es Errors
				errors.As(err, &es)
				t.Errorf("want %s: %s; got %v", tc.path, tc.msg, es)
			}
		})
	}
}

// TestExampleAnthropicProfile: the example's commented Anthropic profile,
// uncommented, is valid.
func TestExampleAnthropicProfile(t *testing.T) {
	var out []string
	in := false
	for _, l := range strings.Split(readExample(t), "\n") {
		if strings.HasPrefix(l, "  # claude:") {
			in = true
		}
		if in && !strings.HasPrefix(l, "  #") {
			in = false
		}
		if in {
			l = "  " + strings.TrimPrefix(l, "  # ")
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				l = ""
			}
		}
		out = append(out, l)
	}
	cfg := parseOK(t, strings.Join(out, "\n"), map[string]string{"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-ant-x"})
	c, ok := cfg.LLM["claude"]
	if !ok || c.Provider != ProviderAnthropic || c.APIKey != "sk-ant-x" || c.BaseURL != AnthropicBaseURL || c.Model == "" {
		t.Errorf("llm.claude = %+v (found %v)", c, ok)
	}
}
