package config

import (
	"slices"
	"strings"
	"testing"
)

const chainConfig = `
llm:
  primary:
    base_url: http://127.0.0.1:11434/v1
    model: llama3.1
  backup:
    provider: anthropic
    api_keys:
      team_a: sk-ant-a-0001
      team_b: sk-ant-b-0002
    model: claude-test
bots:
  - handle: engineer
    llm: [primary, backup]
    model: llama3.2
  - handle: reviewer
    llm: backup
`

// TestChain: llm is one name or a list; api_keys are labelled and sorted.
func TestChain(t *testing.T) {
	cfg := parseOK(t, chainConfig, nil)
	if got := cfg.Bots[0].LLM; !slices.Equal(got, Chain{"primary", "backup"}) {
		t.Errorf("bots[0].llm = %v", got)
	}
	if got := cfg.Bots[1].LLM; !slices.Equal(got, Chain{"backup"}) {
		t.Errorf("bots[1].llm = %v", got)
	}
	keys := cfg.LLM["backup"].Keys()
	if len(keys) != 2 || keys[0] != (LabelledKey{"team_a", "sk-ant-a-0001"}) || keys[1].Label != "team_b" {
		t.Errorf("keys = %+v", keys)
	}
	if s := strings.Join(cfg.Secrets(), ","); !strings.Contains(s, "sk-ant-a-0001") || !strings.Contains(s, "sk-ant-b-0002") {
		t.Errorf("secrets = %q", s)
	}
}

// TestChainErrors: each mistake is a problem at its field.
func TestChainErrors(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, path, msg string
	}{
		{"unknown provider kind", "provider: anthropic", "provider: bedrock", "llm.backup.provider", `"bedrock" is not one of`},
		{"empty chain", "llm: [primary, backup]", "llm: []", "bots[0].llm", "must name at least one profile under llm"},
		{"unknown profile", "llm: [primary, backup]", "llm: [primary, spare]", "bots[0].llm[1]", `"spare" is not a profile in llm`},
		{"profile twice", "llm: [primary, backup]", "llm: [primary, primary]", "bots[0].llm[1]", `"primary" is named twice`},
		{"backup without model", "    model: claude-test", "", "bots[0].llm[1]", `backup profile "backup" has no model`},
		{"key with whitespace", "team_b: sk-ant-b-0002", `team_b: "sk-ant-b-0002\n"`, "llm.backup.api_keys.team_b", "contains whitespace"},
		{"api_key with whitespace", "    base_url: http://127.0.0.1:11434/v1", "    base_url: http://127.0.0.1:11434/v1\n    api_key: \"sk-one two\"", "llm.primary.api_key", "contains whitespace"},
		{"both key forms", "    api_keys:", "    api_key: sk-x-12345678\n    api_keys:", "llm.backup.api_keys", "set api_key or api_keys, not both"},
		{"bad label", "team_a:", "Team A:", "llm.backup.api_keys.Team A", "label must match"},
		{"empty transcription chain", "bots:", "files:\n  transcription: {llm: [], model: whisper-1}\nbots:", "files.transcription.llm", "must name at least one profile"},
		{"unknown transcription profile", "bots:", "files:\n  transcription: {llm: [primary, spare], model: whisper-1}\nbots:", "files.transcription.llm[1]", `"spare" is not a profile in llm`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(chainConfig, tc.from, tc.to, 1)
			var got []string
			for _, e := range parseErrs(t, text) {
				if e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
				got = append(got, e.Error())
			}
			t.Errorf("want %s: %s; got %q", tc.path, tc.msg, got)
		})
	}
}
