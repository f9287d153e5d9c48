package config

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Chain is an ordered list of llm profile names, the fallback chain of a bot
// or of transcription: a call goes to the first profile and moves on to the
// next when one is rate-limited, down, too slow or lacks the model. In YAML it
// is one name (llm: default) or a list (llm: [primary, backup]).
type Chain []string

// UnmarshalYAML implements yaml.Unmarshaler: a scalar is a one-profile chain.
func (c *Chain) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*c = Chain{s}
		if s == "" && n.Tag == "!!null" {
			*c = nil
		}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	if l == nil {
		l = []string{} // written as [] : an empty chain, reported by validation
	}
	*c = l
	return nil
}

// First is the chain's first profile, "" for an empty chain.
func (c Chain) First() string {
	if len(c) == 0 {
		return ""
	}
	return c[0]
}

// String is the chain for people: "primary -> backup".
func (c Chain) String() string { return strings.Join(c, " -> ") }

// validateChain reports an empty chain, a name that is not a profile, a
// profile named twice and a backup profile without a model (a bot's own
// model applies to its first profile only).
func (c *Config) validateChain(p *problems, path string, ch Chain, needModel bool) {
	if ch != nil && len(ch) == 0 {
		p.add(path, "must name at least one profile under llm")
		return
	}
	seen := map[string]bool{}
	for i, name := range ch {
		at := path
		if len(ch) > 1 {
			at = fmt.Sprintf("%s[%d]", path, i)
		}
		prof, ok := c.LLM[name]
		switch {
		case !ok:
			p.add(at, "%q is not a profile in llm", name)
		case seen[name]:
			p.add(at, "%q is named twice", name)
		case needModel && i > 0 && prof.Model == "":
			p.add(at, "backup profile %q has no model: set llm.%s.model", name, name)
		}
		seen[name] = true
	}
}

// Keys are the profile's API keys by label: api_keys, else api_key under
// the label "" (none when empty), sorted by label.
func (p LLMProfile) Keys() []LabelledKey {
	if len(p.APIKeys) == 0 {
		if p.APIKey == "" {
			return nil
		}
		return []LabelledKey{{Value: p.APIKey}}
	}
	labels := make([]string, 0, len(p.APIKeys))
	for l := range p.APIKeys {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	out := make([]LabelledKey, 0, len(labels))
	for _, l := range labels {
		out = append(out, LabelledKey{Label: l, Value: p.APIKeys[l]})
	}
	return out
}

// LabelledKey is one API key of a profile and its label.
type LabelledKey struct{ Label, Value string }

// HasKey reports whether the profile has an API key.
func (p LLMProfile) HasKey() bool { return p.APIKey != "" || len(p.APIKeys) > 0 }

// validateKeys: api_key and api_keys are not both set, labels are names, and
// no key holds whitespace (a pasted line break or space is a mistake).
func validateKeys(p *problems, path string, prof LLMProfile) {
	if prof.APIKey != "" && len(prof.APIKeys) > 0 {
		p.add(path+".api_keys", "set api_key or api_keys, not both")
	}
	if strings.IndexFunc(prof.APIKey, unicode.IsSpace) >= 0 {
		p.add(path+".api_key", "contains whitespace (a pasted line break or space?)")
	}
	for _, k := range prof.Keys() {
		if k.Label == "" {
			continue
		}
		if !nameRe.MatchString(k.Label) {
			p.add(path+".api_keys."+k.Label, "label must match [a-z0-9_-]+")
		}
		switch {
		case k.Value == "":
			p.add(path+".api_keys."+k.Label, "is empty")
		case strings.IndexFunc(k.Value, unicode.IsSpace) >= 0:
			p.add(path+".api_keys."+k.Label, "contains whitespace (a pasted line break or space?)")
		}
	}
}
