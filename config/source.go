package config

import (
	"regexp"

	"gopkg.in/yaml.v3"
)

var envRefRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// EnvVars returns the environment variables the value at path was written with in
// the file, before expansion: ("slack", 0, "bot_token") for `bot_token:
// ${SLACK_BOT_TOKEN}` gives ["SLACK_BOT_TOKEN"]. Path elements are mapping keys
// (string) and sequence indexes (int). It returns nil when the value is absent,
// written literally, or the configuration did not come from Load or Parse. cmd uses
// it to name the variable to set when an account is skipped for an empty secret.
func (c *Config) EnvVars(path ...any) []string {
	n := c.source
	for n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		if n == nil {
			return nil
		}
		var next *yaml.Node
		switch k := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		n = next
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil
	}
	var out []string
	for _, m := range envRefRe.FindAllStringSubmatch(n.Value, -1) {
		out = append(out, m[1])
	}
	return out
}
