package config

import (
	"regexp"
	"sort"
)

// minSecretLen is the shortest value Secrets reports: shorter values (a "1" in an
// MCP server's env) are too common to scrub from log text without mangling it.
const minSecretLen = 8

// secretName matches an environment variable name that holds a credential.
var secretName = regexp.MustCompile(`(?i)(key|token|secret|passw|pwd|auth|credential)`)

// Secrets returns every credential value in the configuration, after ${ENV}
// expansion: LLM api keys, Slack, Telegram and Feishu tokens and secrets, the
// admin token, MCP server header values and the env values whose names say
// they hold a credential (GITHUB_TOKEN, API_KEY...). Values shorter than 8
// characters are left out. The log handler scrubs these literally from every
// line (DESIGN.md §9: secrets never appear in logs), as a second guard behind
// pattern-based redaction. Longest first, so a secret that contains another is
// replaced whole.
func (c *Config) Secrets() []string {
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if len(v) >= minSecretLen {
				out = append(out, v)
			}
		}
	}
	for _, p := range c.LLM {
		add(p.APIKey)
		for _, k := range p.APIKeys {
			add(k)
		}
	}
	for _, s := range c.Slack {
		add(s.AppToken, s.BotToken, s.SigningSecret)
	}
	for _, t := range c.Telegram {
		add(t.Token, t.SecretToken)
	}
	for _, t := range c.Triggers {
		add(t.Secret)
	}
	for _, f := range c.Feishu {
		add(f.AppSecret, f.VerificationToken, f.EncryptKey)
	}
	add(c.Admin.Token)
	for _, m := range c.MCPServers {
		for k, v := range m.Env {
			if secretName.MatchString(k) {
				add(v)
			}
		}
		for _, v := range m.Headers {
			add(v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
