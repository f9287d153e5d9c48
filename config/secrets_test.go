package config

import (
	"slices"
	"testing"
)

func TestSecrets(t *testing.T) {
	c := &Config{
		LLM:        map[string]LLMProfile{"default": {APIKey: "sk-aaaaaaaa"}},
		Slack:      []Slack{{BotToken: "xoxb-bbbbbbbb", SigningSecret: "short"}},
		Telegram:   []Telegram{{Token: "123:cccccccccc"}},
		Feishu:     []Feishu{{AppSecret: "dddddddddd"}},
		Admin:      Admin{Token: "eeeeeeeeeeeeeeee"},
		MCPServers: []MCPServer{{Env: map[string]string{"GITHUB_TOKEN": "ghp_ffffffff", "PATH": "/usr/local/bin:/usr/bin"}, Headers: map[string]string{"Authorization": "Bearer gggggggg"}}},
	}
	got := c.Secrets()
	for _, want := range []string{"sk-aaaaaaaa", "xoxb-bbbbbbbb", "123:cccccccccc", "dddddddddd", "eeeeeeeeeeeeeeee", "ghp_ffffffff", "Bearer gggggggg"} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets() lacks %q: %q", want, got)
		}
	}
	for _, not := range []string{"short", "/usr/local/bin:/usr/bin"} {
		if slices.Contains(got, not) {
			t.Errorf("Secrets() has %q", not)
		}
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("not longest first: %q", got)
		}
	}
}
